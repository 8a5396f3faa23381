"""ExPO's tables in the seed's layout (Original vs + ExPO per aligned model)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from reprolm.aggregate.judged import grade_estimate, pair_accuracy_estimate, source_of, win_rate_estimates
from reprolm.aggregate.lm_eval_estimates import document_estimate, lm_eval_estimates, read_samples, samples_file
from reprolm.aggregate.tables import Score
from reprolm.aggregate.uncertainty import Estimate, mean_of_estimates
from reprolm.io import write_table
from reprolm.paths import split_expo
from reprolm.studies.expo import LEADERBOARD_V2


def _by_prefix(scores: list[Score], prefix: str) -> list[Score]:
    return [s for s in scores if s.metric == prefix or s.metric.startswith(prefix + "_")]


def _pairs(scores: list[Score], prefix: str) -> dict[tuple[str, str], dict[str, Score]]:
    """Scores of one kind by (base, aligned recipe), then 'original' / 'expo'."""
    pairs: dict[tuple[str, str], dict[str, Score]] = {}
    for score in _by_prefix(scores, prefix):
        recipe, alpha = split_expo(score.recipe)
        pairs.setdefault((score.base, recipe), {})["original" if alpha is None else "expo"] = score
    return pairs


def alpha_table(scores: list[Score], card_alphas: Mapping[str, float]) -> pd.DataFrame:
    """Each alpha's mean grade on the search prompts, with its interval over them (every alpha
    of a model graded on the same prompts: paired); ``chosen`` marks the search's pick,
    ``model card`` the alpha of the pair's published model (``card_alphas``)."""
    rows = []
    for search in _by_prefix(scores, "alpha_search"):
        for point in search.data["curve"]:
            mean_grade = grade_estimate(
                point["ids"], point["grades"], point["mean_grade"], f"{source_of(search)} alpha {point['alpha']:g}"
            )
            rows.append(
                {
                    "model": search.model,
                    "alpha": point["alpha"],
                    "mean_grade": mean_grade,
                    "chosen": point["alpha"] == search.data["best_alpha"],
                    "model card": card_alphas.get(search.model) == point["alpha"],
                }
            )
    return pd.DataFrame(rows)


def win_rate_table(scores: list[Score]) -> pd.DataFrame:
    """Win rates, length-controlled win rates and mean answer lengths of each model and its
    extrapolation, with intervals over the prompts (the same prompts: paired)."""
    rows = []
    for (base, recipe), pair in _pairs(scores, "win_rate").items():
        original = win_rate_estimates(pair["original"].data, source_of(pair["original"]))
        expo = win_rate_estimates(pair["expo"].data, source_of(pair["expo"]))
        data = pair["original"].data
        rows.append(
            {
                "model": f"{base}/{recipe}",
                "alpha": split_expo(pair["expo"].recipe)[1],
                "Win Rate (Ori)": original["win_rate"],
                "LC Win Rate (Ori)": original["lc_win_rate"],
                "Win Rate (+ ExPO)": expo["win_rate"],
                "LC Win Rate (+ ExPO)": expo["lc_win_rate"],
                "Length (Ori)": original["mean_length"],
                "Length (+ ExPO)": expo["mean_length"],
                "judge": data["judge"],
                "protocol": data["protocol"],
                "LC method": data["lc_method"],
            }
        )
    return pd.DataFrame(rows)


def single_grade_table(scores: list[Score], promptset: str) -> pd.DataFrame:
    """The mean single-answer grade of each model and its extrapolation, with intervals over
    the prompts (a prompt's turns drawn together; the same prompts: paired)."""
    rows = []
    for (base, recipe), pair in _pairs([s for s in scores if s.name == promptset], "grade").items():
        original, expo = (
            grade_estimate(s.data["ids"], s.data["grades"], s.data["mean"], source_of(s))
            for s in (pair["original"], pair["expo"])
        )
        rows.append(
            {
                "model": f"{base}/{recipe}",
                "alpha": split_expo(pair["expo"].recipe)[1],
                "Original": original,
                "+ ExPO": expo,
                "scale": pair["original"].data["judge_scale"],
                "judge": pair["original"].data["judge"],
                "protocol": pair["original"].data["protocol"],
            }
        )
    return pd.DataFrame(rows)


def lm_eval_table(scores: list[Score], suite: str) -> pd.DataFrame:
    """Each lm-eval task's reported metric x 100 before and after extrapolation, each with its
    bootstrap over documents (the same documents: the two are resampled alike, paired)."""
    rows = []
    for (base, recipe), pair in _pairs([s for s in scores if s.name == suite], "lm_eval").items():
        original, expo = pair["original"], pair["expo"]
        before, after = lm_eval_estimates(original), lm_eval_estimates(expo)
        for task in original.data["task_order"]:
            metric = original.data["tasks"][task]["metric"]
            rows.append(
                {
                    "model": f"{base}/{recipe}",
                    "alpha": split_expo(expo.recipe)[1],
                    "task": task,
                    "Original": before[task][metric].scaled(100.0),
                    "+ ExPO": after[task][metric].scaled(100.0),
                }
            )
    return pd.DataFrame(rows)


# The Open LLM Leaderboard v1 as ExPO's Figure 4 averages it (its results_lmeval files, lm-eval
# 0.3): each column's lm-eval task, metric and shots in lm-eval 0.4's names. GSM8K's is the
# strict "#### answer" match, the old harness's only one; MMLU is the plain mean of its
# subjects' accuracies, as that leaderboard reported it (lm-eval 0.4's ``mmlu`` group pools
# its questions, a different figure).
LEADERBOARD_V1 = {
    "ARC": ("arc_challenge", "acc_norm,none", 25),
    "HellaSwag": ("hellaswag", "acc_norm,none", 10),
    "MMLU": ("mmlu", "acc,none", 5),
    "TruthfulQA": ("truthfulqa_mc2", "acc,none", 0),
    "Winogrande": ("winogrande", "acc,none", 5),
    "GSM8K": ("gsm8k", "exact_match,strict-match", 5),
}
MMLU_SUBJECTS = (
    "abstract_algebra",
    "anatomy",
    "astronomy",
    "business_ethics",
    "clinical_knowledge",
    "college_biology",
    "college_chemistry",
    "college_computer_science",
    "college_mathematics",
    "college_medicine",
    "college_physics",
    "computer_security",
    "conceptual_physics",
    "econometrics",
    "electrical_engineering",
    "elementary_mathematics",
    "formal_logic",
    "global_facts",
    "high_school_biology",
    "high_school_chemistry",
    "high_school_computer_science",
    "high_school_european_history",
    "high_school_geography",
    "high_school_government_and_politics",
    "high_school_macroeconomics",
    "high_school_mathematics",
    "high_school_microeconomics",
    "high_school_physics",
    "high_school_psychology",
    "high_school_statistics",
    "high_school_us_history",
    "high_school_world_history",
    "human_aging",
    "human_sexuality",
    "international_law",
    "jurisprudence",
    "logical_fallacies",
    "machine_learning",
    "management",
    "marketing",
    "medical_genetics",
    "miscellaneous",
    "moral_disputes",
    "moral_scenarios",
    "nutrition",
    "philosophy",
    "prehistory",
    "professional_accounting",
    "professional_law",
    "professional_medicine",
    "professional_psychology",
    "public_relations",
    "security_studies",
    "sociology",
    "us_foreign_policy",
    "virology",
    "world_religions",
)
MMLU_TASKS = {"mmlu", *(f"mmlu_{subject}" for subject in MMLU_SUBJECTS)}


def open_llm_leaderboard_v1(tasks: Mapping[str, Estimate], mmlu_subjects: Sequence[Estimate]) -> dict[str, Estimate]:
    """The leaderboard's columns x 100 and their plain ``Average``: ``tasks`` holds the
    fractions of every column of :data:`LEADERBOARD_V1` but MMLU, which is the plain mean of
    ``mmlu_subjects`` (each subject's accuracy). Each task's documents are drawn on their
    own, so a replicate of a mean is the mean of the replicates."""
    missing = [column for column in LEADERBOARD_V1 if column != "MMLU" and column not in tasks]
    if missing or not mmlu_subjects:
        raise ValueError(f"Open LLM Leaderboard v1: no figure for {missing + ([] if mmlu_subjects else ['MMLU'])}")
    figures = {column: tasks[column].scaled(100.0) for column in LEADERBOARD_V1 if column != "MMLU"}
    figures["MMLU"] = mean_of_estimates(mmlu_subjects).scaled(100.0)
    figures = {column: figures[column] for column in LEADERBOARD_V1}
    return {**figures, "Average": mean_of_estimates(list(figures.values()))}


def _specs_by_task(score: Score) -> dict[str, str]:
    """A suite's spec names by the lm-eval task each runs."""
    return {summary["task"]: spec for spec, summary in score.data["tasks"].items()}


def _subtask_estimates(score: Score, spec: str, metric: str) -> dict[str, tuple[Estimate, list[dict]]]:
    """A group's member tasks' ``metric`` (``"acc,none"``) from the per-document log, each
    over its own documents, with the records behind it."""
    metric_name, _, filter_name = metric.partition(",")
    records = [
        record
        for record in read_samples(samples_file(score))
        if record["spec"] == spec and record.get("filter") == filter_name and metric_name in record["values"]
    ]
    by_task: dict[str, list[dict]] = {}
    for record in records:
        by_task.setdefault(record["task"], []).append(record)
    return {
        task: (
            document_estimate(
                metric_name,
                [record["values"][metric_name] for record in mine],
                [f"{task}/{record['doc_id']}" for record in mine],
            ),
            mine,
        )
        for task, mine in sorted(by_task.items())
    }


def leaderboard_v1_figures(score: Score) -> dict[str, Estimate] | None:
    """The Open LLM Leaderboard v1 columns and average of one lm-eval score, None when its
    suite lacks one of the leaderboard's tasks at the leaderboard's shots (MMLU: the
    ``mmlu`` group or one subject's task)."""
    specs = _specs_by_task(score)
    mmlu = [task for task in specs if task in MMLU_TASKS]
    chosen = {column: specs.get(task) for column, (task, _, _) in LEADERBOARD_V1.items() if column != "MMLU"}
    chosen["MMLU"] = specs[mmlu[0]] if len(mmlu) == 1 else None
    tasks = score.data["tasks"]
    if any(spec is None or tasks[spec]["num_fewshot"] != LEADERBOARD_V1[column][2] for column, spec in chosen.items()):
        return None
    # Every figure checked against lm-eval's own before it is used.
    estimates = lm_eval_estimates(
        score, {chosen[column]: [metric] for column, (_, metric, _) in LEADERBOARD_V1.items()}
    )
    subjects = _subtask_estimates(score, chosen["MMLU"], LEADERBOARD_V1["MMLU"][1])
    return open_llm_leaderboard_v1(
        {column: estimates[chosen[column]][LEADERBOARD_V1[column][1]] for column in LEADERBOARD_V1 if column != "MMLU"},
        [estimate for estimate, _ in subjects.values()],
    )


def normalised(estimate: Estimate, baseline: float) -> Estimate:
    """The leaderboard's normalisation: (score - baseline) / (1 - baseline) x 100, and 0 below
    the baseline (of the figure and of each replicate)."""

    def rescale(value):
        return np.maximum(0.0, (np.asarray(value, dtype=float) - baseline) / (1.0 - baseline)) * 100.0

    return dataclasses.replace(
        estimate, value=float(rescale(estimate.value)), replicates=rescale(estimate.replicates), standard_error=math.nan
    )


def leaderboard_v2_figures(score: Score) -> dict[str, Estimate]:
    """The Open LLM Leaderboard v2 columns (normalised as it normalises them) and their plain
    ``Average`` from one lm-eval score of the ``leaderboard`` tasks. IFEval: the mean of its
    instruction- and prompt-level strict accuracies; BBH and MuSR: the mean over member tasks
    of each one's normalised accuracy; MATH Lvl 5, GPQA, MMLU-PRO: the whole task's figure
    (pooled over its members)."""
    specs = _specs_by_task(score)
    missing = sorted(task for task, _, _ in LEADERBOARD_V2.values() if task not in specs)
    if missing:
        raise ValueError(
            f"{source_of(score)}: the Open LLM Leaderboard v2 needs lm-eval's tasks {missing}; the suite runs {sorted(specs)}"
        )
    estimates = lm_eval_estimates(score, {specs[task]: list(metrics) for task, metrics, _ in LEADERBOARD_V2.values()})
    figures = {}
    for column, (task, metrics, baseline) in LEADERBOARD_V2.items():
        whole = [estimates[specs[task]][metric] for metric in metrics]
        if baseline is None:
            figures[column] = mean_of_estimates(whole).scaled(100.0)
        elif isinstance(baseline, float):
            figures[column] = normalised(whole[0], baseline)
        else:
            members = _subtask_estimates(score, specs[task], metrics[0])
            figures[column] = mean_of_estimates(
                [
                    normalised(estimate, _member_baseline(score, member, records, baseline))
                    for member, (estimate, records) in members.items()
                ]
            )
    return {**figures, "Average": mean_of_estimates(list(figures.values()))}


def _member_baseline(score: Score, member: str, records: list[dict], baseline) -> float:
    if baseline != "choices":
        if member not in baseline:
            raise ValueError(f"{source_of(score)}: no Open LLM Leaderboard v2 baseline for lm-eval task {member!r}")
        return baseline[member]
    choices = {len(record["arguments"]) for record in records}
    if len(choices) != 1:
        raise ValueError(
            f"{source_of(score)}: {member}'s documents have {sorted(choices)} choices; the leaderboard's "
            "random baseline is one over a task's single number of choices"
        )
    return 1.0 / choices.pop()


def leaderboard_table(scores: list[Score], suite: str, figures) -> pd.DataFrame:
    """One leaderboard's columns and average (``figures`` of a score, None where the suite
    does not make them) for each model and its extrapolation."""
    rows = []
    for (base, recipe), pair in _pairs([s for s in scores if s.name == suite], "lm_eval").items():
        before, after = figures(pair["original"]), figures(pair["expo"])
        if before is None or after is None:
            continue
        rows += [
            {
                "model": f"{base}/{recipe}",
                "alpha": split_expo(pair["expo"].recipe)[1],
                "benchmark": column,
                "Original": before[column],
                "+ ExPO": after[column],
            }
            for column in before
        ]
    return pd.DataFrame(rows)


def judge_table(scores: list[Score]) -> pd.DataFrame:
    """The judge's accuracy on held-out preference pairs, with its interval over the pairs."""
    return pd.DataFrame(
        [
            {
                "judge": s.data["judge"],
                "dataset": s.data["dataset"],
                "split": s.data["split"],
                "pairs": s.data["n"],
                "accuracy": pair_accuracy_estimate(s.data, source_of(s)),
            }
            for s in _by_prefix(scores, "pair_accuracy")
        ]
    )


def plot_alpha_curves(frame: pd.DataFrame, output: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(5, 3.5))
    for model, curve in frame.groupby("model"):
        grades = curve["mean_grade"]
        means = grades.map(lambda e: e.value)
        # Error bars: each point's 95% interval over the search prompts.
        spread = [means - grades.map(lambda e: e.low), grades.map(lambda e: e.high) - means]
        axes.errorbar(curve["alpha"], means, yerr=spread, marker="o", capsize=3, label=model)
        chosen = curve["chosen"]
        axes.scatter(curve["alpha"][chosen], means[chosen], s=120, facecolors="none", edgecolors="black")
    axes.set_xlabel("alpha")
    # Two lines: on one, the label is taller than the plot and loses both ends.
    axes.set_ylabel("mean judge grade\n(search prompts, 95% CI)")
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(output, dpi=120, bbox_inches="tight")
    plt.close(figure)


def with_alpha_source(frame: pd.DataFrame, study: Mapping) -> pd.DataFrame:
    """Say of each row whether its "+ ExPO" alpha is its model card's or its search's."""
    if frame.empty:
        return frame
    cards = study.get("card_alphas", {})
    return frame.assign(
        **{
            "alpha from": [
                "model card" if cards.get(model) == alpha else "search"
                for model, alpha in zip(frame["model"], frame["alpha"], strict=True)
            ]
        }
    )


def write_expo_tables(scores: list[Score], study: Mapping, config: Mapping, tables: Path, plots: Path) -> None:
    alphas = alpha_table(scores, study.get("card_alphas", {}))
    write_table(alphas, tables, "alpha_search", decimals=4)
    plot_alpha_curves(alphas, plots / "alpha_search.png")
    write_table(with_alpha_source(win_rate_table(scores), study), tables, "alpaca_eval")
    write_table(
        with_alpha_source(single_grade_table(scores, study["single_grade"]), study), tables, "mt_bench", decimals=3
    )
    if study.get("lm_eval_suite"):
        suite = study["lm_eval_suite"]
        write_table(with_alpha_source(lm_eval_table(scores, suite), study), tables, "lm_eval")
        write_table(
            with_alpha_source(leaderboard_table(scores, suite, leaderboard_v1_figures), study),
            tables,
            "open_llm_leaderboard_v1",
        )
    if study.get("leaderboard_v2_suite"):
        write_table(
            with_alpha_source(leaderboard_table(scores, study["leaderboard_v2_suite"], leaderboard_v2_figures), study),
            tables,
            "open_llm_leaderboard_v2",
        )
    if study.get("judge_validation"):
        write_table(judge_table(scores), tables, "judge")
