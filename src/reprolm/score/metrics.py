"""Metrics over generations, registered by name; each returns a JSON-ready dict."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from reprolm.length import TargetSet, count_words, reads_length_targets
from reprolm.registry import Registry
from reprolm.score import length
from reprolm.score.diversity import (
    distinct_n,
    embedding_diversities,
    offline_encoder,
    self_bleu_diversity,
    sentence_encoder,
)
from reprolm.score.sampling import (
    extract_answer,
    normalise_number,
    original_answer,
    samples_by_prompt,
    voting_outcomes,
    voting_percentages,
)

MetricFunction = Callable[[list[Mapping], Mapping], dict]
METRICS: Registry[MetricFunction] = Registry("metric")


def _targets(context) -> TargetSet:
    return TargetSet.from_config(context["length_targets"])


@METRICS.register("length_levels")
@reads_length_targets
def length_levels(rows, context) -> dict:
    """PM/FM per level and per target, exact-length rate and RMSE, and the raw counts."""
    targets = _targets(context)
    words = [count_words(r["text"]) for r in rows]
    names = [str(r["TargetLength"]) for r in rows]
    counts = length.in_out_counts(words, names, targets)
    return {
        "levels": length.level_scores(counts, targets),
        "targets": length.target_scores(counts, targets),
        "errors": length.length_errors(words, names, targets),
        "word_counts": words,
        "target_names": names,
        "ids": [r["id"] for r in rows],
    }


@METRICS.register("length_multi_mlt")
@reads_length_targets
def length_multi_mlt(rows, context) -> dict:
    """FM per target and their mean; per output its word count, target and prompt id (each
    prompt is asked at every target), which the tables resample by prompt."""
    targets = _targets(context)
    words = [count_words(r["text"]) for r in rows]
    names = [str(r["TargetLength"]) for r in rows]
    return {
        **length.multi_mlt_scores(words, names, targets),
        "word_counts": words,
        "target_names": names,
        "ids": [r["id"] for r in rows],
    }


@METRICS.register("length_self_mlt")
@reads_length_targets
def length_self_mlt(rows, context) -> dict:
    """The MLTs a model chose, FM against their windows and mean words; per output its word
    count, leading MLT and prompt id."""
    return {
        **length.self_generated_scores([r["text"] for r in rows], _targets(context)),
        "ids": [r["id"] for r in rows],
    }


def _references(rows, compat: str) -> dict:
    """Each prompt's reference answer (the ``answer`` of a GSM8K-schema prompt set), read
    with the same rules as the model's answers."""
    references = {}
    for index, row in enumerate(rows):
        if row.get("answer") is None:
            raise KeyError(
                f"generation row {index} (prompt id {row.get('id')!r}) has no reference 'answer'; "
                "answer metrics need a prompt set built from a GSM8K-schema source"
            )
        answer = str(row["answer"])
        references[row["id"]] = (
            original_answer(f"The answer is: {answer}") if compat == "original" else normalise_number(answer)
        )
    return references


@METRICS.register("answer_accuracy")
def answer_accuracy(rows, context) -> dict:
    """Accuracy (x 100) of each prompt's first sample's answer: greedy decoding's accuracy.
    Setting ``compat`` (paper / original): how answers are read (``extract_answer``)."""
    compat = context.get("compat", "paper")
    references = _references(rows, compat)
    first = {row["id"]: extract_answer(row["text"], compat) for row in rows if row["sample"] == 0}
    ids = sorted(first)
    correct = [first[i] is not None and first[i] == references[i] for i in ids]
    return {
        "accuracy": 100.0 * sum(correct) / len(correct),
        "unparsed": sum(first[i] is None for i in ids),
        "correct": correct,
        "ids": ids,
        "compat": compat,
    }


@METRICS.register("answer_voting")
def answer_voting(rows, context) -> dict:
    """Majority voting @k and pass@k (x 100) over each prompt's samples, for every k of the
    metric's ``ks`` setting (default: powers of two up to the samples per prompt). Setting
    ``compat`` (paper / original): how answers are read and whether unparsed ones vote."""
    compat = context.get("compat", "paper")
    references = _references(rows, compat)
    answers = samples_by_prompt(rows, lambda row: extract_answer(row["text"], compat))
    ids = sorted(answers)
    samples = min(len(a) for a in answers.values())
    ks = context.get("ks") or [2**p for p in range(samples.bit_length()) if 2**p <= samples]
    outcomes = voting_outcomes([answers[i] for i in ids], [references[i] for i in ids], ks, compat)
    scores = voting_percentages(outcomes)
    return {
        "ks": list(ks),
        "maj": [scores[k]["maj"] for k in ks],
        "pass": [scores[k]["pass"] for k in ks],
        "samples_per_prompt": samples,
        "unparsed": sum(a is None for i in ids for a in answers[i]),
        "compat": compat,
        "ids": ids,
        # Per k, per prompt (in ``ids`` order): voting right, reference among the first k.
        "maj_correct": [outcomes[k]["maj"] for k in ks],
        "pass_correct": [outcomes[k]["pass"] for k in ks],
    }


@METRICS.register("diversity")
def diversity(rows, context) -> dict:
    """Diversity of each prompt's samples, averaged over prompts: distinct-1/2/3 (and their
    mean, the study's n-gram distinct ratio), self-BLEU and sentence-embedding diversity.
    Settings: ``compat`` (paper / original) and ``encoder`` (``packaged``: the sentence
    encoder installed with the project; else a sentence-transformers model's folder, or its
    hub name, which the workflow downloads beforehand and hands over as ``encoder_dir``)."""
    compat, encoder_name = context.get("compat", "paper"), context.get("encoder", "packaged")
    if encoder_name == "packaged":
        encoder = offline_encoder()
    else:
        encoder = sentence_encoder(context.get("encoder_dir") or encoder_name)
    texts = samples_by_prompt(rows, lambda row: row["text"])
    prompts = {row["id"]: row["instruction"] for row in rows}
    per_prompt = {name: [] for name in ("distinct_1", "distinct_2", "distinct_3", "self_bleu", "embedding")}
    for prompt_id, samples in texts.items():
        prompt = prompts[prompt_id]
        for n in (1, 2, 3):
            per_prompt[f"distinct_{n}"].append(distinct_n(samples, n, prompt, compat))
        per_prompt["self_bleu"].append(self_bleu_diversity(samples, prompt, compat))
    # One encode call over every prompt's samples: batched, on the job's GPU where it has one.
    per_prompt["embedding"] = embedding_diversities(list(texts.values()), encoder, [prompts[i] for i in texts], compat)
    means = {name: float(np.mean(values)) for name, values in per_prompt.items()}
    means["distinct"] = float(np.mean([means[f"distinct_{n}"] for n in (1, 2, 3)]))
    return {
        **means,
        "compat": compat,
        "encoder": encoder_name,
        "prompts": len(texts),
        "samples_per_prompt": min(map(len, texts.values())),
        # Each prompt's scores, in ``ids`` order, which the tables resample.
        "ids": list(texts),
        "per_prompt": per_prompt,
    }


def compute(name: str, rows: list[Mapping], context: Mapping) -> dict:
    function = METRICS.get(name)
    if not rows:
        raise ValueError(f"metric {name!r}: no generations to score")
    return {"metric": name, **function(rows, context)}
