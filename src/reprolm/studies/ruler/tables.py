"""Length-control (Ruler) tables and plots in the seed's layouts."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from reprolm.aggregate.lm_eval_estimates import lm_eval_estimates
from reprolm.aggregate.report_pages import AT_LIMIT
from reprolm.aggregate.tables import Score
from reprolm.aggregate.uncertainty import RESAMPLES, Estimate, mean_of_estimates, ratio_of_sums
from reprolm.io import split_estimates, write_table
from reprolm.length import TargetSet
from reprolm.paths import split_expo, split_seed
from reprolm.score.length import length_ttest, self_mlt_inside

LEVEL_COLUMNS = ["model", "level", "PM_in", "PM_out", "PM", "FM_in", "FM_out", "FM"]
# The last column of every length table: the definition its row was made by.
DEFINITION = "definition"


class Definitions:
    """What a row's ``definition`` says: ``template=`` the chat template its model was
    trained and asked with (``ruler_custom``: the original's for every base; ``own``: the
    base's, as the instruct baselines are asked in the original too), and for TLG rows
    ``single_turn=`` how the prompts were picked (``two_turns``: the original's). A row's
    ``model`` is marked ``[prompt_bos=...]`` where its prompt set tokenised the prompts
    another way than the default one BOS (``tokenizer``: the original's doubled BOS)."""

    def __init__(self, settings: Mapping | None = None):
        settings = settings or {}
        self.templates = settings.get("chat_templates", {})
        self.single_turn = settings.get("single_turn", {})
        self.prompt_bos = settings.get("prompt_bos", {})

    def model(self, score: Score) -> str:
        bos = self.prompt_bos.get(split_seed(score.name)[0], "one")
        return score.model if bos == "one" else f"{score.model} [prompt_bos={bos}]"

    def template(self, recipe: str) -> str:
        return self.templates.get(split_seed(split_expo(recipe)[0])[0], "own")

    def __call__(self, score: Score, prompts: bool = False) -> str:
        parts = [f"template={self.template(score.recipe)}"]
        if prompts:
            parts.append(f"single_turn={self.single_turn.get(split_seed(score.name)[0], 'two_turns')}")
        return ", ".join(parts)


def _by_metric(scores: list[Score], metric: str) -> list[Score]:
    return [s for s in scores if s.metric == metric]


def pooled_by_prompt(
    ids: Sequence, inside: Sequence[float], counted: Sequence[float], scale: float = 100.0
) -> Estimate:
    """sum(inside) / sum(counted) x ``scale`` over the outputs, with prompts as the bootstrap
    units: a prompt's outputs (one per target, or several samples) are drawn together."""
    units = list(dict.fromkeys(ids))
    index = {unit: i for i, unit in enumerate(units)}
    position = [index[i] for i in ids]
    top, bottom = np.zeros(len(units)), np.zeros(len(units))
    np.add.at(top, position, np.asarray(inside, dtype=float))
    np.add.at(bottom, position, np.asarray(counted, dtype=float))
    return ratio_of_sums(top, bottom, units, scale)


def _check_figure(score: Score, what: str, estimate: Estimate, reported: float) -> Estimate:
    """The score file's figure must be the one its per-output data give (they differ when the
    length targets changed after scoring)."""
    same = (math.isnan(reported) and math.isnan(estimate.value)) or math.isclose(estimate.value, reported)
    if not same:
        raise ValueError(
            f"{score.metric} score of {score.model} on {score.name}: {what} is {reported} in the "
            f"score file, but its per-output word counts give {estimate.value} with the configured "
            "length targets (rescore it)"
        )
    return estimate


def at_limit(score: Score, counted: Sequence[bool] | None = None) -> Estimate:
    """The percentage of the score's outputs (those ``counted``, else all) that ran to
    ``max_new_tokens``, by prompt; unknown (no figure, no interval, and so in a pool of
    replicate seeds) where its generations or score predate the per-output flag."""
    data = score.data
    ran_on = data.get("hit_max_new_tokens")
    if ran_on is None or any(flag is None for flag in ran_on):
        return Estimate(math.nan, np.full(RESAMPLES, math.nan))
    counted = [True] * len(ran_on) if counted is None else counted
    return pooled_by_prompt(
        data["ids"], [flag and member for flag, member in zip(ran_on, counted, strict=True)], counted
    )


def _window_estimates(score: Score, targets: TargetSet, row: Mapping, members: set[str]) -> dict[str, Estimate]:
    """PM and FM of a level or target ``row`` of the score, pooled over the outputs whose
    target is one of ``members``."""
    data = score.data
    counted = [name in members for name in data["target_names"]]
    label = row.get("target", row["level"])
    estimates = {}
    for kind in ("PM", "FM"):
        inside = [
            member and getattr(targets[name], kind.lower()).contains(words)
            for words, name, member in zip(data["word_counts"], data["target_names"], counted, strict=True)
        ]
        estimates[kind] = _check_figure(
            score, f"{kind} of {label}", pooled_by_prompt(data["ids"], inside, counted), row[kind]
        )
    return estimates


def tlg_levels(scores: list[Score], targets: TargetSet, definitions: Definitions | None = None) -> pd.DataFrame:
    """Per model and level (and ``All``): the pooled in/out counts, PM and FM, and the
    percentage of the level's outputs that ran to ``max_new_tokens``, with their bootstrap
    over prompts."""
    definitions = definitions or Definitions()
    rows = []
    for s in _by_metric(scores, "length_levels"):
        for row in s.data["levels"]:
            members = (
                set(targets.names)
                if row["level"] == "All"
                else {t.name for t in targets if f"Level:{t.level}" == row["level"]}
            )
            rows.append(
                {
                    "model": definitions.model(s),
                    **row,
                    **_window_estimates(s, targets, row, members),
                    AT_LIMIT: at_limit(s, [name in members for name in s.data["target_names"]]),
                    DEFINITION: definitions(s, prompts=True),
                }
            )
    return pd.DataFrame(rows, columns=[*LEVEL_COLUMNS, AT_LIMIT, DEFINITION])


def tlg_targets(scores: list[Score], targets: TargetSet, definitions: Definitions | None = None) -> pd.DataFrame:
    definitions = definitions or Definitions()
    rows = [
        {
            "model": definitions.model(s),
            **row,
            **_window_estimates(s, targets, row, {row["target"]}),
            DEFINITION: definitions(s, prompts=True),
        }
        for s in _by_metric(scores, "length_levels")
        for row in s.data["targets"]
    ]
    return pd.DataFrame(rows, columns=["model", "level", "target", *LEVEL_COLUMNS[2:], DEFINITION])


def length_error_table(scores: list[Score], targets: TargetSet, definitions: Definitions | None = None) -> pd.DataFrame:
    """Exact-length rate and RMSE over outputs with a numeric target, and the percentage of
    all outputs that ran to ``max_new_tokens``, by prompt."""
    definitions = definitions or Definitions()
    rows = []
    for s in _by_metric(scores, "length_levels"):
        data = s.data
        values = [targets[name].value for name in data["target_names"]]
        numeric = [value is not None for value in values]
        exact = pooled_by_prompt(
            data["ids"],
            [value is not None and words == value for words, value in zip(data["word_counts"], values, strict=True)],
            numeric,
        )
        squared = pooled_by_prompt(
            data["ids"],
            [
                0 if value is None else (words - value) ** 2
                for words, value in zip(data["word_counts"], values, strict=True)
            ],
            numeric,
            scale=1.0,
        )
        rmse = Estimate(math.sqrt(squared.value), np.sqrt(squared.replicates), units=squared.units)
        rows.append(
            {
                "model": definitions.model(s),
                "exact_match": _check_figure(s, "exact_match", exact, data["errors"]["exact_match"]),
                "rmse": _check_figure(s, "rmse", rmse, data["errors"]["rmse"]),
                "n": data["errors"]["n"],
                AT_LIMIT: at_limit(s),
                DEFINITION: definitions(s, prompts=True),
            }
        )
    return pd.DataFrame(rows, columns=["model", "exact_match", "rmse", "n", AT_LIMIT, DEFINITION])


def multi_mlt_table(scores: list[Score], targets: TargetSet, definitions: Definitions | None = None) -> pd.DataFrame:
    """FM per target over the prompts (each asked at every target), their plain mean and the
    percentage of outputs that ran to ``max_new_tokens``."""
    definitions = definitions or Definitions()
    rows = []
    for s in _by_metric(scores, "length_multi_mlt"):
        data = s.data
        per_target = {}
        for name, reported in data["per_target_FM"].items():
            asked = [target == name for target in data["target_names"]]
            inside = [
                member and targets[name].fm.contains(words)
                for words, member in zip(data["word_counts"], asked, strict=True)
            ]
            per_target[name] = _check_figure(s, f"FM of {name}", pooled_by_prompt(data["ids"], inside, asked), reported)
        rows.append(
            {
                "model": definitions.model(s),
                **{n: per_target.get(n) for n in targets.names},
                "Avg FM": _check_figure(s, "Avg FM", mean_of_estimates(list(per_target.values())), data["avg_FM"]),
                AT_LIMIT: at_limit(s),
                DEFINITION: definitions(s),
            }
        )
    return pd.DataFrame(rows, columns=["model", *targets.names, "Avg FM", AT_LIMIT, DEFINITION])


def self_mlt_table(scores: list[Score], targets: TargetSet, definitions: Definitions | None = None) -> pd.DataFrame:
    """How often each MLT was chosen (counts), FM against the chosen MLT's window, the mean
    word count and the percentage of outputs that ran to ``max_new_tokens``, by prompt."""
    definitions = definitions or Definitions()
    rows = []
    for s in _by_metric(scores, "length_self_mlt"):
        data = s.data
        every = [1] * len(data["ids"])
        inside = self_mlt_inside(data["word_counts"], data["mlt_names"], targets)
        rows.append(
            {
                "model": definitions.model(s),
                **data["emitted"],
                "no MLT": data["no_mlt"],
                "FM": _check_figure(s, "FM", pooled_by_prompt(data["ids"], inside, every), data["FM"]),
                "Avg": _check_figure(
                    s, "Avg", pooled_by_prompt(data["ids"], data["word_counts"], every, 1.0), data["avg_words"]
                ),
                AT_LIMIT: at_limit(s),
                DEFINITION: definitions(s),
            }
        )
    return pd.DataFrame(rows, columns=["model", *targets.names, "no MLT", "FM", "Avg", AT_LIMIT, DEFINITION])


def ttest_table(
    scores: list[Score], mlt_recipe: str, plain_recipe: str, compat: str, definitions: Definitions | None = None
) -> pd.DataFrame:
    """Lengths of the MLT-trained model against the plain-SFT model of the same base."""
    definitions = definitions or Definitions()
    levels = {(s.base, s.recipe): s for s in _by_metric(scores, "length_levels")}
    rows = []
    for (base, recipe), score in sorted(levels.items()):
        other = levels.get((base, plain_recipe))
        if recipe != mlt_recipe or other is None:
            continue
        if score.data["ids"] != other.data["ids"]:
            raise ValueError(f"{base}: {mlt_recipe} and {plain_recipe} generations cover different prompts")
        mine, theirs = definitions(score, prompts=True), definitions(other, prompts=True)
        rows.append(
            {
                "base": base,
                "compared": f"{mlt_recipe} vs {plain_recipe}",
                **length_ttest(score.data["word_counts"], other.data["word_counts"], compat),
                DEFINITION: mine if mine == theirs else f"{mlt_recipe}: {mine}; {plain_recipe}: {theirs}",
            }
        )
    return pd.DataFrame(rows, columns=["base", "compared", "t", "p", "compat", DEFINITION])


def general_column(task: str, metric: str) -> str:
    """A general table column: the suite entry and the lm-eval metric it reports
    (``arc (acc)``, ``gsm8k (exact_match,strict-match)``)."""
    name, _, filter_name = metric.partition(",")
    return f"{task} ({name if filter_name == 'none' else metric})"


def general_table(scores: list[Score], metrics: Mapping[str, Sequence[str]] | None = None) -> pd.DataFrame:
    """Each lm-eval suite entry x 100 with its bootstrap over documents, in a column per
    metric: those ``metrics`` names for the entry (``ruler.lm_eval_metrics``), else the
    suite's own. All come from one lm-eval run, which logs every metric of a task."""
    rows = []
    for s in _by_metric(scores, "lm_eval"):
        wanted = {
            task: list((metrics or {}).get(task) or [s.data["tasks"][task]["metric"]]) for task in s.data["task_order"]
        }
        estimates = lm_eval_estimates(s, wanted)
        row = {"model": s.model}
        for task, keys in wanted.items():
            row.update({general_column(task, key): estimates[task][key].scaled(100.0) for key in keys})
        rows.append(row)
    return pd.DataFrame(rows)


def plot_targets(frame: pd.DataFrame, output: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame, _ = split_estimates(frame)
    models = list(dict.fromkeys(frame["model"]))
    fig, axes = plt.subplots(len(models), 1, figsize=(8, 2.6 * len(models)), squeeze=False, sharey=True)
    for axis, model in zip(axes[:, 0], models):
        rows = frame[frame["model"] == model]
        positions = range(len(rows))
        for kind, offset in (("PM", -0.2), ("FM", 0.2)):
            axis.bar(
                [p + offset for p in positions],
                rows[kind],
                width=0.4,
                label=kind,
                yerr=_error_bars(rows, kind),
                capsize=2,
                error_kw={"elinewidth": 0.8},
            )
        axis.set_xticks(list(positions), rows["target"])
        axis.set_ylim(0, 100)
        axis.set_title(model)
        axis.set_ylabel("% in window")
    axes[0, 0].legend(loc="upper right")
    axes[-1, 0].set_xlabel("target length (words)")
    fig.tight_layout()
    fig.savefig(output, dpi=100)
    plt.close(fig)


def _error_bars(rows: pd.DataFrame, column: str) -> np.ndarray:
    """matplotlib's (2, n) distances below and above each bar, from the interval columns
    (none where a target had no outputs)."""
    value = rows[column].to_numpy(dtype=float, na_value=np.nan)
    low = rows[f"{column} lo"].to_numpy(dtype=float, na_value=np.nan)
    high = rows[f"{column} hi"].to_numpy(dtype=float, na_value=np.nan)
    return np.nan_to_num(np.stack([value - low, high - value]))


def write_ruler_tables(scores: list[Score], study: Mapping, config: Mapping, tables: Path, plots: Path) -> None:
    targets = TargetSet.from_config(config["length_targets"])
    definitions = Definitions(config)
    write_table(tlg_levels(scores, targets, definitions), tables, "tlg_levels")
    per_target = tlg_targets(scores, targets, definitions)
    write_table(per_target, tables, "tlg_targets")
    write_table(length_error_table(scores, targets, definitions), tables, "length_errors")
    write_table(multi_mlt_table(scores, targets, definitions), tables, "multi_mlt")
    write_table(self_mlt_table(scores, targets, definitions), tables, "self_mlt")
    recipes = study["recipes"]
    if len(recipes) >= 2:
        ttest = ttest_table(scores, recipes[0], recipes[1], study.get("compat", "paper"), definitions)
        write_table(ttest, tables, "ttest", None)
    general = general_table(scores, config.get("lm_eval_metrics"))
    if not general.empty:
        write_table(general, tables, "general")
    plots.mkdir(parents=True, exist_ok=True)
    plot_targets(per_target, plots / "tlg_targets.png")
