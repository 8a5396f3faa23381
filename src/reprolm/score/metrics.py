"""Metrics over generations, registered by name; each returns a JSON-ready dict."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from reprolm.length import TargetSet, count_words, reads_length_targets
from reprolm.registry import Registry
from reprolm.score import length
from reprolm.score.definitions import chosen_definitions
from reprolm.score.diversity import (
    distinct_n,
    embedding_diversities,
    offline_encoder,
    original_texts,
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
METRICS: Registry[MetricFunction] = Registry("metric", per_job=True)
# The config stage whose settings (resources, GPUs, placement) a metric's score jobs take:
# the metrics that count and parse run on a CPU, under ``default``'s; :func:`scored_on`
# declares another.
CPU_STAGE = "default"


def scored_on(stage: str) -> Callable[[MetricFunction], MetricFunction]:
    """Declares the config stage whose settings a metric's score jobs take (``score`` for one
    that runs a model: on the job's GPU where that stage has GPUs)."""

    def declare(entry: MetricFunction) -> MetricFunction:
        entry.stage = stage
        return entry

    return declare


def metric_stage(metric: str) -> str:
    """The config stage whose settings ``metric``'s score jobs take (:func:`scored_on`)."""
    return getattr(METRICS.get(metric, "metrics"), "stage", CPU_STAGE)


def _targets(context) -> TargetSet:
    return TargetSet.from_config(context["length_targets"])


def _ran_to_limit(rows) -> list[bool | None]:
    """Per output whether it ran to ``max_new_tokens``; None for a generation file written
    before its records said so."""
    return [r.get("hit_max_new_tokens") for r in rows]


@METRICS.register("length_levels")
@reads_length_targets("level", "pm", "fm")
def length_levels(rows, context) -> dict:
    """PM/FM per level and per target, exact-length rate and RMSE, and the raw counts; per
    output its word count, target, prompt id and whether it ran to ``max_new_tokens``."""
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
        "hit_max_new_tokens": _ran_to_limit(rows),
    }


@METRICS.register("length_multi_mlt")
@reads_length_targets("pm", "fm")
def length_multi_mlt(rows, context) -> dict:
    """FM per target and their mean; per output its word count, target, prompt id (each
    prompt is asked at every target), which the tables resample by prompt, and whether it
    ran to ``max_new_tokens``."""
    targets = _targets(context)
    words = [count_words(r["text"]) for r in rows]
    names = [str(r["TargetLength"]) for r in rows]
    return {
        **length.multi_mlt_scores(words, names, targets),
        "word_counts": words,
        "target_names": names,
        "ids": [r["id"] for r in rows],
        "hit_max_new_tokens": _ran_to_limit(rows),
    }


@METRICS.register("length_self_mlt")
@reads_length_targets("fm")
def length_self_mlt(rows, context) -> dict:
    """The MLTs a model chose, FM against their windows and mean words; per output its word
    count, leading MLT, prompt id and whether it ran to ``max_new_tokens``."""
    return {
        **length.self_generated_scores([r["text"] for r in rows], _targets(context)),
        "ids": [r["id"] for r in rows],
        "hit_max_new_tokens": _ran_to_limit(rows),
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


def register_by_definitions(metric: str):
    """Registers the metric scored by the headline definition its settings choose
    (``compat``), and by each of their ``variants`` beside it, stored under ``variants`` in
    the result (:mod:`reprolm.score.definitions`)."""

    def decorate(function: MetricFunction) -> MetricFunction:
        def scored(rows, context) -> dict:
            headline, *variants = chosen_definitions(metric, context)
            result = function(rows, {**context, "compat": headline.name})
            result["variants"] = {v.name: function(rows, {**context, "compat": v.name}) for v in variants}
            return result

        scored.__doc__ = function.__doc__
        return METRICS.register(metric, scored)

    return decorate


@register_by_definitions("answer_accuracy")
def answer_accuracy(rows, context) -> dict:
    """Accuracy (x 100) of each prompt's first sample's answer: greedy decoding's accuracy.
    Settings: ``compat`` (paper / original): how answers are read (``extract_answer``);
    ``variants``: the other definitions scored beside it."""
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


@register_by_definitions("answer_voting")
def answer_voting(rows, context) -> dict:
    """Majority voting @k and pass@k (x 100) over each prompt's samples, for every k of the
    metric's ``ks`` setting (default: powers of two up to the samples per prompt). Settings:
    ``compat`` (paper / original): how answers are read and whether unparsed ones vote;
    ``variants``: the other definitions scored beside it."""
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


def _diversity_scores(texts: Mapping, compat: str, encoder) -> dict:
    """One definition's scores of each prompt's texts, and their means over prompts."""
    per_prompt = {name: [] for name in ("distinct_1", "distinct_2", "distinct_3", "self_bleu")}
    for group in texts.values():
        for n in (1, 2, 3):
            per_prompt[f"distinct_{n}"].append(distinct_n(group, n, compat))
        per_prompt["self_bleu"].append(self_bleu_diversity(group, compat))
    # One encode call over every prompt's texts: batched, on the job's GPU where it has one.
    per_prompt["embedding"] = embedding_diversities(list(texts.values()), encoder)
    means = {name: float(np.mean(values)) for name, values in per_prompt.items()}
    means["distinct"] = float(np.mean([means[f"distinct_{n}"] for n in (1, 2, 3)]))
    # Each prompt's scores, in prompt order, which the tables resample.
    return {**means, "per_prompt": per_prompt}


@METRICS.register("diversity")
@scored_on("score")  # its embedding diversity runs a sentence encoder, whatever ``encoder`` names
def diversity(rows, context) -> dict:
    """Diversity of each prompt's samples, averaged over prompts: distinct-1/2/3 (and their
    mean, the study's n-gram distinct ratio), self-BLEU and sentence-embedding diversity.
    Settings: ``compat`` (paper / original, ``reprolm.score.diversity``) and ``variants``
    (definitions scored beside it, under ``variants``); ``encoder`` (``packaged``: the
    sentence encoder installed with the project; else a sentence-transformers model's
    folder, or its hub name, which the workflow downloads beforehand and hands over as
    ``encoder_dir``). ``original`` renders through the chat template of the model that
    generated (its folder: ``tokenizer_dir``) and reads NLTK data from ``nltk_data``."""
    chosen = chosen_definitions("diversity", context)
    encoder_name = context.get("encoder", "packaged")
    if encoder_name == "packaged":
        encoder = offline_encoder()
    else:
        encoder = sentence_encoder(context.get("encoder_dir") or encoder_name)
    samples = samples_by_prompt(rows, lambda row: row["text"])
    # A definition that reads the model scores the samples in its chat template's rendering.
    rendered = _original_texts(rows, samples, context) if any(d.reads_model for d in chosen) else None
    scores = {d.name: _diversity_scores(rendered if d.reads_model else samples, d.name, encoder) for d in chosen}
    headline, *variants = chosen
    return {
        **scores[headline.name],
        "compat": headline.name,
        "variants": {d.name: scores[d.name] for d in variants},
        "encoder": encoder_name,
        "prompts": len(samples),
        "samples_per_prompt": min(map(len, samples.values())),
        "ids": list(samples),
    }


def _original_texts(rows, samples: Mapping, context: Mapping) -> dict:
    """Each prompt's samples as the original evaluation's text (``original_texts``), from the
    generation's rendered ``prompt`` and the generating model's tokenizer."""
    from reprolm.models.loading import load_tokenizer
    from reprolm.score.lm_eval_bridge import use_nltk_data

    if not context.get("tokenizer_dir"):
        raise ValueError(
            "diversity compat 'original' renders samples through the generating model's chat "
            "template: the score job needs the model's folder (tokenizer_dir)"
        )
    use_nltk_data(context.get("nltk_data", []))
    tokenizer = load_tokenizer(context["tokenizer_dir"])
    prompts = {}
    for index, row in enumerate(rows):
        if not row.get("prompt"):
            raise KeyError(
                f"generation row {index} (prompt id {row.get('id')!r}) has no rendered 'prompt', "
                "which diversity compat 'original' decodes as the original evaluation does"
            )
        prompts.setdefault(row["id"], row["prompt"])
    return {prompt_id: original_texts(group, prompts[prompt_id], tokenizer) for prompt_id, group in samples.items()}


def compute(name: str, rows: list[Mapping], context: Mapping) -> dict:
    function = METRICS.get(name)
    if not rows:
        raise ValueError(f"metric {name!r}: no generations to score")
    return {"metric": name, **function(rows, context)}
