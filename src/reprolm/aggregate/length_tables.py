"""Length-control (Ruler) tables and plots in the seed's layouts."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from reprolm.aggregate.tables import Score
from reprolm.io import write_table
from reprolm.length import TargetSet
from reprolm.score.length import length_ttest

LEVEL_COLUMNS = ["model", "level", "PM_in", "PM_out", "PM", "FM_in", "FM_out", "FM"]


def _by_metric(scores: list[Score], metric: str) -> list[Score]:
    return [s for s in scores if s.metric == metric]


def tlg_levels(scores: list[Score]) -> pd.DataFrame:
    rows = [{"model": s.model, **row} for s in _by_metric(scores, "length_levels") for row in s.data["levels"]]
    return pd.DataFrame(rows, columns=LEVEL_COLUMNS)


def tlg_targets(scores: list[Score]) -> pd.DataFrame:
    rows = [{"model": s.model, **row} for s in _by_metric(scores, "length_levels") for row in s.data["targets"]]
    return pd.DataFrame(rows, columns=["model", "level", "target", *LEVEL_COLUMNS[2:]])


def length_error_table(scores: list[Score]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"model": s.model, "exact_match": s.data["errors"]["exact_match"],
          "rmse": s.data["errors"]["rmse"], "n": s.data["errors"]["n"]}
         for s in _by_metric(scores, "length_levels")],
        columns=["model", "exact_match", "rmse", "n"],
    )


def multi_mlt_table(scores: list[Score], targets: TargetSet) -> pd.DataFrame:
    rows = []
    for s in _by_metric(scores, "length_multi_mlt"):
        rows.append({"model": s.model, **{n: s.data["per_target_FM"].get(n) for n in targets.names},
                     "Avg FM": s.data["avg_FM"]})
    return pd.DataFrame(rows, columns=["model", *targets.names, "Avg FM"])


def self_mlt_table(scores: list[Score], targets: TargetSet) -> pd.DataFrame:
    rows = [{"model": s.model, **s.data["emitted"], "no MLT": s.data["no_mlt"], "FM": s.data["FM"],
             "Avg": round(s.data["avg_words"])} for s in _by_metric(scores, "length_self_mlt")]
    return pd.DataFrame(rows, columns=["model", *targets.names, "no MLT", "FM", "Avg"])


def ttest_table(scores: list[Score], mlt_recipe: str, plain_recipe: str, compat: str) -> pd.DataFrame:
    """Lengths of the MLT-trained model against the plain-SFT model of the same base."""
    levels = {(s.base, s.recipe): s.data for s in _by_metric(scores, "length_levels")}
    rows = []
    for (base, recipe), data in sorted(levels.items()):
        other = levels.get((base, plain_recipe))
        if recipe != mlt_recipe or other is None:
            continue
        if data["ids"] != other["ids"]:
            raise ValueError(f"{base}: {mlt_recipe} and {plain_recipe} generations cover different prompts")
        rows.append({"base": base, "compared": f"{mlt_recipe} vs {plain_recipe}",
                     **length_ttest(data["word_counts"], other["word_counts"], compat)})
    return pd.DataFrame(rows, columns=["base", "compared", "t", "p", "compat"])


def general_table(scores: list[Score]) -> pd.DataFrame:
    rows = []
    for s in _by_metric(scores, "lm_eval"):
        row = {"model": s.model}
        row.update({task: 100.0 * s.data["tasks"][task]["value"] for task in s.data["task_order"]})
        rows.append(row)
    return pd.DataFrame(rows)


def plot_targets(frame: pd.DataFrame, output: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(frame["model"]))
    fig, axes = plt.subplots(len(models), 1, figsize=(8, 2.6 * len(models)), squeeze=False, sharey=True)
    for axis, model in zip(axes[:, 0], models):
        rows = frame[frame["model"] == model]
        positions = range(len(rows))
        axis.bar([p - 0.2 for p in positions], rows["PM"], width=0.4, label="PM")
        axis.bar([p + 0.2 for p in positions], rows["FM"], width=0.4, label="FM")
        axis.set_xticks(list(positions), rows["target"])
        axis.set_ylim(0, 100)
        axis.set_title(model)
        axis.set_ylabel("% in window")
    axes[0, 0].legend(loc="upper right")
    axes[-1, 0].set_xlabel("target length (words)")
    fig.tight_layout()
    fig.savefig(output, dpi=100)
    plt.close(fig)


def write_ruler_tables(scores: list[Score], study: Mapping, config: Mapping, tables: Path, plots: Path) -> None:
    targets = TargetSet.from_config(config["length_targets"])
    write_table(tlg_levels(scores), tables, "tlg_levels")
    per_target = tlg_targets(scores)
    write_table(per_target, tables, "tlg_targets")
    write_table(length_error_table(scores), tables, "length_errors")
    write_table(multi_mlt_table(scores, targets), tables, "multi_mlt")
    write_table(self_mlt_table(scores, targets), tables, "self_mlt")
    recipes = study["recipes"]
    if len(recipes) >= 2:
        write_table(ttest_table(scores, recipes[0], recipes[1], study.get("compat", "paper")), tables, "ttest", None)
    general = general_table(scores)
    if not general.empty:
        write_table(general, tables, "general")
    plots.mkdir(parents=True, exist_ok=True)
    plot_targets(per_target, plots / "tlg_targets.png")
