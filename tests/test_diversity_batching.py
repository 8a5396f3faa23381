"""GEM's embedding diversity with every prompt's samples encoded in one batched call equals
the per-prompt computation (the shipped all-MiniLM-L6-v2 encoder, on the CPU)."""

from __future__ import annotations

from itertools import combinations

import pytest

from reprolm.score.diversity import embedding_diversities, offline_encoder


def per_prompt_diversity(samples: list[str], encoder, prompt: str) -> float:
    """The computation as it was: one encode call per prompt, pairwise dot products."""
    texts = [f"{prompt} {sample}" for sample in samples]
    embeddings = encoder.encode(texts, convert_to_tensor=True, normalize_embeddings=True)
    pairs = list(combinations(range(len(texts)), 2))
    return 100.0 * (1.0 - sum(float(embeddings[i] @ embeddings[j]) for i, j in pairs) / len(pairs))


def test_batched_encoding_of_many_prompts_equals_the_per_prompt_result():
    encoder = offline_encoder()
    prompts = ["Write a poem about the sea.", "Write a poem about a city at night.", "A story about a fox."]
    groups = [
        ["Waves fold into the grey shore.", "The tide hums its salt song.", "Blue water, blue sky, and gulls."],
        ["Neon puddles shake with every passing car", "Streetlights", "The city sleeps with one eye open."],
        ["The fox ran.", "A clever red fox outwitted the hounds at dawn, slipping through the barley.", "Fox."],
    ]
    batched = embedding_diversities([[f"{p} {s}" for s in group] for p, group in zip(prompts, groups)], encoder)
    expected = [per_prompt_diversity(samples, encoder, prompt) for samples, prompt in zip(groups, prompts)]
    # Cosine similarities agree to 1e-7 (float32 sums over padded batches), scores x 100 to 1e-5.
    assert batched == pytest.approx(expected, abs=1e-5)
    assert len({round(score, 3) for score in batched}) == 3


def test_a_prompt_with_a_single_sample_is_refused():
    with pytest.raises(ValueError, match="at least two samples"):
        embedding_diversities([["a", "b"], ["only one"]], offline_encoder())
