"""FLR's tables: every configured judge side by side as a reward model (pairwise accuracy,
agreement with ratings, model ranking against the arena's ELO), and the policies aligned
with FLR rewards against the policy they started from."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from reprolm.aggregate.judged import (
    Units,
    as_scored,
    grade_estimate,
    pair_accuracy_estimate,
    source_of,
    win_rate_estimates,
)
from reprolm.aggregate.tables import Score
from reprolm.aggregate.uncertainty import Estimate, each_draw
from reprolm.io import write_table
from reprolm.score.reward_benchmarks import CORRELATIONS


def _of(scores: list[Score], metric: str) -> list[Score]:
    return [s for s in scores if s.metric == metric]


def correlation_estimates(
    predicted: Sequence[float], truth: Sequence[float], units: Sequence, data: Mapping, what: str
) -> dict[str, Estimate]:
    """Pearson, Spearman and Kendall correlations of ``predicted`` with ``truth``, refitted on
    each bootstrap draw of the ``units`` (one per pair of values); ``data`` holds the score
    file's figures."""
    predicted, truth = np.asarray(predicted, dtype=float), np.asarray(truth, dtype=float)
    estimates = {}
    with warnings.catch_warnings():
        # A draw of few units can repeat one value throughout: its correlation is nan (left
        # out of the interval), with a warning on every such draw.
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        for name, function in CORRELATIONS.items():
            estimate = each_draw(
                units, lambda draw, function=function: float(function(predicted[draw], truth[draw])[0])
            )
            estimates[name] = as_scored(estimate, data[name], f"{what} {name}")
    return estimates


def reward_model_table(scores: list[Score], judges: list[str]) -> pd.DataFrame:
    """One row per judge: accuracy on each pairwise benchmark (interval over the pairs), the
    three correlations on each rating benchmark (interval over the rated items) and on the
    model ranking (interval over the models)."""
    rows = {judge: {"judge": judge} for judge in judges}
    for s in _of(scores, "pair_accuracy"):
        rows[s.data["judge"]][f"{s.data['dataset']} accuracy"] = pair_accuracy_estimate(s.data, source_of(s))
    for s in _of(scores, "rating_agreement"):
        estimates = correlation_estimates(s.data["scores"], s.data["ratings"], s.data["ids"], s.data, source_of(s))
        for name, estimate in estimates.items():
            rows[s.data["judge"]][f"{s.data['dataset']} {name}"] = estimate
    for s in _of(scores, "model_ranking"):
        models = list(s.data["elo"])
        estimates = correlation_estimates(
            [s.data["mean_score"][m] for m in models], list(s.data["elo"].values()), models, s.data, source_of(s)
        )
        for name, estimate in estimates.items():
            rows[s.data["judge"]][f"{s.data['dataset']} {name}"] = estimate
    return pd.DataFrame(list(rows.values()))


def mean_scores(data: Mapping, what: str) -> dict[str, Estimate]:
    """A model-ranking score's mean judge score of each rated model, with its interval over
    that model's answers (unscored ones left out, as the score leaves them out)."""
    answers_of: dict[str, list[int]] = {}
    for row, model in enumerate(data["answer_models"]):
        answers_of.setdefault(model, []).append(row)
    means = {}
    for model in data["elo"]:
        rows = answers_of[model]
        answers = Units([data["ids"][row] for row in rows])
        means[model] = as_scored(
            answers.mean([data["scores"][row] for row in rows]), data["mean_score"][model], f"{what} {model}"
        )
    return means


def ranking_table(scores: list[Score]) -> pd.DataFrame:
    """Mean score per model under each judge (interval over its answers), beside its ELO rating."""
    frame = None
    for s in _of(scores, "model_ranking"):
        means = mean_scores(s.data, source_of(s))
        column = pd.DataFrame(
            {
                "model": list(s.data["elo"]),
                "elo": list(s.data["elo"].values()),
                s.data["judge"]: [means[m] for m in s.data["elo"]],
            }
        )
        frame = column if frame is None else frame.merge(column, on=["model", "elo"])
    return pd.DataFrame() if frame is None else frame.sort_values("elo", ascending=False)


def alignment_table(scores: list[Score], alignment: Mapping) -> pd.DataFrame:
    """The starting policy and each policy aligned with FLR rewards: win rate against the
    starting policy under the alignment judge, and each grader's mean grade, with intervals
    over the prompts (the same prompts for every policy: paired)."""
    promptset = alignment["promptset"]
    rows = []
    for base in alignment["bases"]:
        for recipe in [alignment["start"]] + alignment["recipes"]:
            row = {"model": f"{base}/{recipe}"}
            for s in scores:
                if (s.base, s.recipe, s.name) != (base, recipe, promptset):
                    continue
                if s.metric.startswith("win_rate_"):
                    estimates = win_rate_estimates(s.data, source_of(s))
                    row["win rate vs start"] = estimates["win_rate"]
                    row["LC win rate vs start"] = estimates["lc_win_rate"]
                elif s.metric.startswith("grade_"):
                    grade = grade_estimate(s.data["ids"], s.data["grades"], s.data["mean"], source_of(s))
                    row[f"{s.metric.removeprefix('grade_')} grade"] = grade
            rows.append(row)
    return pd.DataFrame(rows)


def write_flr_tables(scores: list[Score], study: Mapping, config: Mapping, tables: Path, plots: Path) -> None:
    write_table(reward_model_table(scores, study["judges"]), tables, "reward_models", decimals=3)
    if study.get("ranking"):
        ranking = ranking_table(scores)
        write_table(ranking, tables, "model_ranking", decimals=3)
        plot_ranking(ranking, study["judges"], plots / "model_ranking.png")
    if study.get("alignment"):
        write_table(alignment_table(scores, study["alignment"]), tables, "alignment", decimals=3)


def plot_ranking(frame: pd.DataFrame, judges: list[str], output: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(judges), figsize=(3.2 * len(judges), 3), squeeze=False)
    for axis, judge in zip(axes[0], judges):
        means = frame[judge].map(lambda e: e.value)
        # Error bars: each model's 95% interval over its answers.
        spread = [means - frame[judge].map(lambda e: e.low), frame[judge].map(lambda e: e.high) - means]
        axis.errorbar(frame["elo"], means, yerr=spread, fmt="o", capsize=3)
        axis.set_title(judge, fontsize=9)
        axis.set_xlabel("LMSYS ELO")
    axes[0][0].set_ylabel("mean judge score (95% CI)")
    figure.tight_layout()
    figure.savefig(output, dpi=120)
    plt.close(figure)
