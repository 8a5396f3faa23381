"""FLR's tables: every configured judge side by side as a reward model (pairwise accuracy,
agreement with ratings, model ranking against the arena's ELO), and the policies aligned
with FLR rewards against the policy they started from."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from reprolm.aggregate.tables import Score
from reprolm.io import write_table


def _of(scores: list[Score], metric: str) -> list[Score]:
    return [s for s in scores if s.metric == metric]


def reward_model_table(scores: list[Score], judges: list[str]) -> pd.DataFrame:
    """One row per judge: accuracy on each pairwise benchmark (with its interval), the three
    correlations on each rating benchmark and on the model ranking."""
    rows = {judge: {"judge": judge} for judge in judges}
    for s in _of(scores, "pair_accuracy"):
        row = rows[s.data["judge"]]
        row[f"{s.data['dataset']} accuracy"] = s.data["accuracy"]
        row[f"{s.data['dataset']} 95% CI"] = f"[{s.data['ci_low']:.1f}, {s.data['ci_high']:.1f}]"
    for metric in ("rating_agreement", "model_ranking"):
        for s in _of(scores, metric):
            for name in ("pearson", "spearman", "kendall"):
                rows[s.data["judge"]][f"{s.data['dataset']} {name}"] = s.data[name]
    return pd.DataFrame(list(rows.values()))


def ranking_table(scores: list[Score]) -> pd.DataFrame:
    """Mean score per model under each judge, beside its ELO rating."""
    frame = None
    for s in _of(scores, "model_ranking"):
        column = pd.DataFrame({"model": list(s.data["elo"]), "elo": list(s.data["elo"].values()),
                               s.data["judge"]: [s.data["mean_score"][m] for m in s.data["elo"]]})
        frame = column if frame is None else frame.merge(column, on=["model", "elo"])
    return pd.DataFrame() if frame is None else frame.sort_values("elo", ascending=False)


def alignment_table(scores: list[Score], alignment: Mapping) -> pd.DataFrame:
    """The starting policy and each policy aligned with FLR rewards: win rate against the
    starting policy under the alignment judge, and each grader's mean grade."""
    promptset = alignment["promptset"]
    rows = []
    for base in alignment["bases"]:
        for recipe in [alignment["start"]] + alignment["recipes"]:
            row = {"model": f"{base}/{recipe}"}
            for s in scores:
                if (s.base, s.recipe, s.name) != (base, recipe, promptset):
                    continue
                if s.metric.startswith("win_rate_"):
                    row["win rate vs start"], row["LC win rate vs start"] = s.data["win_rate"], s.data["lc_win_rate"]
                elif s.metric.startswith("grade_"):
                    row[f"{s.metric.removeprefix('grade_')} grade"] = s.data["mean"]
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
        axis.scatter(frame["elo"], frame[judge])
        axis.set_title(judge, fontsize=9)
        axis.set_xlabel("LMSYS ELO")
    axes[0][0].set_ylabel("mean judge score")
    figure.tight_layout()
    figure.savefig(output, dpi=120)
    plt.close(figure)
