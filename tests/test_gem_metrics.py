"""GEM's evaluation scores on hand-checked examples: diversity (and where the original
code's quirks change it), GSM8K answers, majority voting and pass@k, best-of-n."""

from __future__ import annotations

import pytest
from sacrebleu.metrics import BLEU

from reprolm.score.diversity import distinct_n, embedding_diversity, offline_encoder, self_bleu_diversity
from reprolm.score.sampling import (
    best_and_mean_of_n,
    extract_answer,
    majority_and_pass_at_k,
    samples_by_prompt,
)

SAMPLES = ["the cat sat", "the cat ran", "a dog ran"]


def test_distinct_n_by_hand_and_with_the_prompt_included():
    # unigrams: the, cat, sat, the, cat, ran, a, dog, ran -> 6 unique of 9
    assert distinct_n(SAMPLES, 1) == pytest.approx(100 * 6 / 9)
    # bigrams: (the cat) x2, (cat sat), (cat ran), (a dog), (dog ran) -> 5 of 6
    assert distinct_n(SAMPLES, 2) == pytest.approx(100 * 5 / 6)
    # The original prepends the prompt to every sample: its words repeat, diversity drops.
    assert distinct_n(SAMPLES, 1, prompt="write a poem", compat="original") == pytest.approx(100 * 8 / 18)
    assert distinct_n(SAMPLES, 3) == pytest.approx(100.0)


def test_self_bleu_uses_every_other_sample_unless_original():
    bleu = BLEU(effective_order=True)
    paper = 100 - sum(bleu.sentence_score(s, [o for o in SAMPLES if o != s]).score for s in SAMPLES) / 3
    assert self_bleu_diversity(SAMPLES) == pytest.approx(paper)
    # Original: one reference stream, so each sample is compared with the first other only.
    first_other = [SAMPLES[1], SAMPLES[0], SAMPLES[0]]
    original = 100 - sum(bleu.sentence_score(f"p {s}", [f"p {o}"]).score for s, o in zip(SAMPLES, first_other)) / 3
    assert self_bleu_diversity(SAMPLES, prompt="p", compat="original") == pytest.approx(original)
    # "a dog ran" matches "the cat ran" (a paper reference) better than "the cat sat" (the
    # original's only one): the variants differ.
    assert self_bleu_diversity(SAMPLES) != pytest.approx(self_bleu_diversity(SAMPLES, compat="original"))
    with pytest.raises(ValueError, match="at least two samples"):
        self_bleu_diversity(SAMPLES[:1])


def test_embedding_diversity_with_the_packaged_encoder():
    encoder = offline_encoder()
    same = embedding_diversity(["A cat sat on the mat."] * 3, encoder)
    varied = embedding_diversity(["A cat sat on the mat.", "Stock prices fell sharply.", "Bake the bread for an hour."],
                                 encoder)
    assert same == pytest.approx(0.0, abs=1e-3) and varied > 50


def test_gsm8k_answers_follow_the_last_the_answer_is():
    assert extract_answer("First 3 + 4 = 7. The answer is: 7") == "7"
    assert extract_answer("The answer is 5. Wait, no. The answer is $1,250.00.") == "1250"
    assert extract_answer("The answer is -2.5") == "-2.5"
    assert extract_answer("no final answer here") is None


def test_majority_and_pass_at_k_by_hand():
    answers = [["3", "4", "4", "5"], ["1", None, "2", "2"]]
    references = ["4", "1"]
    scores = majority_and_pass_at_k(answers, references, [1, 2, 4])
    assert scores[1] == {"maj": 50.0, "pass": 50.0}  # only the second prompt's first is right
    # @2: votes 3/4 (tie, earliest wins: 3) and 1 (None ignored) -> maj 50; pass: both found
    assert scores[2] == {"maj": 50.0, "pass": 100.0}
    # @4: votes 4 (two of four) and 2 (two of three) -> maj 50
    assert scores[4] == {"maj": 50.0, "pass": 100.0}
    with pytest.raises(ValueError, match="@8 needs 8 samples"):
        majority_and_pass_at_k(answers, references, [8])


def test_best_and_mean_of_n_and_grouping_by_prompt():
    rows = [{"id": 1, "sample": 1, "r": 0.0}, {"id": 0, "sample": 0, "r": 1.0}, {"id": 1, "sample": 0, "r": 3.0},
            {"id": 0, "sample": 1, "r": 2.0}]
    rewards = list(samples_by_prompt(rows, lambda row: row["r"]).values())
    assert rewards == [[1.0, 2.0], [3.0, 0.0]]
    scores = best_and_mean_of_n(rewards, [1, 2])
    assert scores[1] == {"best": 2.0, "mean": 2.0}
    assert scores[2] == {"best": 2.5, "mean": 1.5}
