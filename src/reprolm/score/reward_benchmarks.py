"""Evaluating a judge as a reward model: agreement with human ratings. (Pairwise accuracy is
:func:`judging.pair_accuracy`; ranking models as an arena's ELO table does is FLR's:
:mod:`reprolm.studies.flr.ranking`.)"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scipy import stats

from reprolm.io import write_json
from reprolm.score.judges import request_counts

CORRELATIONS = {"pearson": stats.pearsonr, "spearman": stats.spearmanr, "kendall": stats.kendalltau}


def correlations(predicted: Sequence[float], truth: Sequence[float]) -> dict:
    """Pearson, Spearman and Kendall (tau-b) correlations with their p-values."""
    if len(predicted) < 3:
        raise ValueError(f"correlations need at least 3 items, got {len(predicted)}")
    result = {}
    for name, function in CORRELATIONS.items():
        statistic, p_value = function(predicted, truth)
        result[name], result[f"{name}_p"] = float(statistic), float(p_value)
    return result


def rating_agreement(judge, rows: Sequence[Mapping]) -> dict:
    """How well the judge's scores of rated responses follow the ground-truth ``score``. Each
    item's id, score and rating are kept: the tables refit the correlations on bootstrap draws."""
    scores = judge.score([list(row["conversation"]) for row in rows])
    truth = [float(row["score"]) for row in rows]
    return {
        **correlations(scores, truth),
        "n": len(rows),
        "scores": scores,
        "ratings": truth,
        "ids": [row["id"] for row in rows],
    }


def write_correlations(smk, judge, result: Mapping, log) -> None:
    """A correlation benchmark's result (a rating benchmark's, a model ranking's), logged and
    written with the job's metric, judge, dataset and split and the judge's request counts."""
    metric = smk.params.metric
    log.info(
        "%s: pearson %.3f, spearman %.3f, kendall %.3f",
        metric,
        result["pearson"],
        result["spearman"],
        result["kendall"],
    )
    record = {
        "metric": metric,
        "judge": smk.wildcards.judge,
        "dataset": smk.wildcards.dataset,
        "split": smk.wildcards.split,
    }
    write_json({**record, **result, **request_counts(judge)}, smk.output[0])
