"""Metrics over generations, registered by name; each returns a JSON-ready dict."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from reprolm.score import length

MetricFunction = Callable[[list[Mapping], Mapping], dict]
METRICS: dict[str, MetricFunction] = {}


def metric(name: str):
    def register(function: MetricFunction) -> MetricFunction:
        METRICS[name] = function
        return function

    return register


def _targets(context) -> length.TargetSet:
    return length.TargetSet.from_config(context["length_targets"])


@metric("length_levels")
def length_levels(rows, context) -> dict:
    """PM/FM per level and per target, exact-length rate and RMSE, and the raw counts."""
    targets = _targets(context)
    words = [length.count_words(r["text"]) for r in rows]
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


@metric("length_multi_mlt")
def length_multi_mlt(rows, context) -> dict:
    targets = _targets(context)
    words = [length.count_words(r["text"]) for r in rows]
    return length.multi_mlt_scores(words, [str(r["TargetLength"]) for r in rows], targets)


@metric("length_self_mlt")
def length_self_mlt(rows, context) -> dict:
    return length.self_generated_scores([r["text"] for r in rows], _targets(context))


def compute(name: str, rows: list[Mapping], context: Mapping) -> dict:
    try:
        function = METRICS[name]
    except KeyError:
        raise ValueError(f"unknown metric {name!r}; known: {sorted(METRICS)}") from None
    if not rows:
        raise ValueError(f"metric {name!r}: no generations to score")
    return {"metric": name, **function(rows, context)}


def write_json(result: Mapping, output: str) -> None:
    """Scores as stable, sorted JSON, written atomically."""
    import json

    from reprolm.provenance import atomic_path

    with atomic_path(output) as tmp:
        tmp.write_text(json.dumps(result, indent=2, sort_keys=True, allow_nan=True) + "\n")
