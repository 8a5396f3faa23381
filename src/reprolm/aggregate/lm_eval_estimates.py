"""Intervals of lm-eval scores: a bootstrap over the evaluated documents.

The lm_eval rule writes lm-eval's per-document log beside each score
(``{suite}.samples.jsonl.gz``, see :func:`reprolm.score.lm_eval_bridge.sample_records`):
one line per document and filter with each metric's per-document value. Each reported
metric is recomputed from those values the way lm-eval aggregates it, over documents drawn
with replacement (units = document ids, so two models evaluated on the same documents are
resampled alike). The figure is lm-eval's own reported value, after checking that the
per-document log reproduces it.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from reprolm.aggregate.tables import Score
from reprolm.aggregate.uncertainty import Estimate, each_draw, mean_of, ratio_of_sums
from reprolm.paths import LM_EVAL_SAMPLES_SUFFIX, lm_eval_samples_path

# Metrics lm-eval computes over the whole corpus from per-document (gold, prediction) pairs.
CORPUS_METRICS = {"mcc": "matthews_corrcoef", "f1": "f1_score"}


class SampleLogError(ValueError):
    """The per-document log is missing, incomplete or disagrees with the reported score."""


def samples_file(score: Score) -> Path:
    """The per-document log written beside an lm-eval score file."""
    if score.path is None:
        raise ValueError(
            f"lm-eval score {score.model}/{score.name} was not read from a file "
            "(load it with reprolm.aggregate.tables.load_scores), so its per-document log cannot be found"
        )
    return Path(lm_eval_samples_path(score.path))


def read_samples(path: Path) -> list[dict]:
    if not path.is_file():
        raise SampleLogError(
            f"{path}: lm-eval's per-document log is missing; the lm_eval rule writes it beside "
            f"the score {path.name.removesuffix(LM_EVAL_SAMPLES_SUFFIX)}.json (rerun that job)"
        )
    with gzip.open(path, "rt") as stream:
        return [json.loads(line) for line in stream]


def lm_eval_estimates(
    score: Score, metrics: Mapping[str, Sequence[str]] | None = None
) -> dict[str, dict[str, Estimate]]:
    """Per spec, per lm-eval metric key (``"acc_norm,none"``): its reported value with a
    bootstrap over documents. ``metrics``: the keys wanted per spec (default: each spec's
    reported ``metric``). Raises :class:`SampleLogError` naming the log where it is missing,
    lacks a document or gives another value than lm-eval reported."""
    tasks = score.data["tasks"]
    wanted = metrics if metrics is not None else {spec: [summary["metric"]] for spec, summary in tasks.items()}
    path = samples_file(score)
    records = read_samples(path)
    estimates: dict[str, dict[str, Estimate]] = {}
    for spec, keys in wanted.items():
        mine = [record for record in records if record["spec"] == spec]
        estimates[spec] = {key: _metric_estimate(path, spec, key, tasks[spec], mine) for key in keys}
    return estimates


def _metric_estimate(path: Path, spec: str, key: str, summary: Mapping, records: list[dict]) -> Estimate:
    metric, _, filter_name = key.partition(",")
    documents = [record for record in records if record.get("filter") == filter_name and metric in record["values"]]
    where = f"{path}: spec {spec!r}, metric {key!r}"
    # A group's member tasks number their documents each from 0: a document is its task's.
    ids = [f"{record.get('task')}/{record['doc_id']}" for record in documents]
    if len(set(ids)) != len(ids):
        raise SampleLogError(f"{where}: document ids repeat, so documents cannot be told apart for the bootstrap")
    if len(ids) != summary["n_docs"]:
        raise SampleLogError(f"{where}: {len(ids)} documents logged, but lm-eval scored {summary['n_docs']}")
    values = [record["values"][metric] for record in documents]
    estimate = document_estimate(metric, values, ids)
    reported = summary["metrics"].get(key)
    reported = math.nan if reported is None else reported
    agree = (math.isnan(reported) and math.isnan(estimate.value)) or math.isclose(
        estimate.value, reported, rel_tol=1e-9, abs_tol=1e-12
    )
    if not agree:
        raise SampleLogError(
            f"{where}: the per-document values give {estimate.value!r}, but lm-eval reported {reported!r}"
        )
    # lm-eval's own figure, which the per-document values reproduce up to summation order.
    return dataclasses.replace(estimate, value=reported)


def document_estimate(metric: str, values: Sequence, doc_ids: Sequence) -> Estimate:
    """One metric over documents, aggregated as lm-eval aggregates it: IFEval's
    instruction-level accuracies pool every instruction of the drawn documents; mcc and f1
    are recomputed on each draw's (gold, prediction) pairs; any other metric is the mean of
    its per-document values."""
    if metric.startswith("inst_level_"):
        return ratio_of_sums(
            [sum(_number(metric, check) for check in checks) for checks in values],
            [len(checks) for checks in values],
            doc_ids,
        )
    if metric in CORPUS_METRICS:
        import sklearn.metrics

        corpus_metric = getattr(sklearn.metrics, CORPUS_METRICS[metric])
        golds = np.array([_number(metric, pair[0]) for pair in values])
        predictions = np.array([_number(metric, pair[1]) for pair in values])

        def on_draw(draw: np.ndarray) -> float:
            # A draw with one class only is scored 0 by sklearn, with a warning per draw.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return float(np.max(corpus_metric(golds[draw], predictions[draw])))

        return each_draw(doc_ids, on_draw)
    return mean_of([_number(metric, value) for value in values], doc_ids)


def _number(metric: str, value) -> float:
    """A logged value as a number. The log is written with ``default=str``, so numpy's
    integers and booleans (mcc's argmax prediction) arrive as their text."""
    if isinstance(value, (bool, int, float)):
        return float(value)
    if isinstance(value, str):
        text = {"True": "1", "False": "0"}.get(value, value)
        try:
            return float(text)
        except ValueError:
            pass
    raise SampleLogError(
        f"lm-eval metric {metric!r} has a per-document value that is not a number ({value!r}): "
        "no per-document bootstrap is defined for it here"
    )
