"""ExPO's tables in the seed's layout (Original vs + ExPO per aligned model)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from reprolm.aggregate.judged import grade_estimate, pair_accuracy_estimate, source_of, win_rate_estimates
from reprolm.aggregate.tables import Score
from reprolm.io import write_table
from reprolm.paths import split_expo


def _by_prefix(scores: list[Score], prefix: str) -> list[Score]:
    return [s for s in scores if s.metric == prefix or s.metric.startswith(prefix + "_")]


def _pairs(scores: list[Score], prefix: str) -> dict[tuple[str, str], dict[str, Score]]:
    """Scores of one kind by (base, aligned recipe), then 'original' / 'expo'."""
    pairs: dict[tuple[str, str], dict[str, Score]] = {}
    for score in _by_prefix(scores, prefix):
        recipe, alpha = split_expo(score.recipe)
        pairs.setdefault((score.base, recipe), {})["original" if alpha is None else "expo"] = score
    return pairs


def alpha_table(scores: list[Score]) -> pd.DataFrame:
    """Each alpha's mean grade on the search prompts, with its interval over them (every alpha
    of a model graded on the same prompts: paired)."""
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


def lm_eval_table(scores: list[Score]) -> pd.DataFrame:
    """Each lm-eval task's reported metric x 100 before and after extrapolation, each with its
    bootstrap over documents (the same documents: the two are resampled alike, paired)."""
    from reprolm.aggregate.lm_eval_estimates import lm_eval_estimates

    rows = []
    for (base, recipe), pair in _pairs(scores, "lm_eval").items():
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


# The Open LLM Leaderboard v1 as ExPO's Figure 4 averages it: each task's metric in lm-eval
# 0.3's result files (ARC 25-shot, HellaSwag 10-shot, TruthfulQA 0-shot, Winogrande and
# GSM8K 5-shot), MMLU (5-shot) as the unweighted mean of its subjects' accuracies.
OPEN_LLM_LEADERBOARD_V1 = {
    "arc_challenge": "acc_norm",
    "hellaswag": "acc_norm",
    "truthfulqa_mc": "mc2",
    "winogrande": "acc",
    "gsm8k": "acc",
}
MMLU_V1_SUBJECT_PREFIX = "hendrycksTest-"


def open_llm_leaderboard_v1(results: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Each Open LLM Leaderboard v1 task's score x 100 and their ``average`` from lm-eval 0.3's
    ``results`` (task -> metric -> value, merged over a model's result files). MMLU is the
    plain mean over its subjects, as that leaderboard reported it; lm-eval 0.4's ``mmlu``
    group weights subjects by their number of questions, a different figure."""
    missing = [task for task in OPEN_LLM_LEADERBOARD_V1 if task not in results]
    subjects = [metrics["acc"] for task, metrics in results.items() if task.startswith(MMLU_V1_SUBJECT_PREFIX)]
    if missing or not subjects:
        raise ValueError(f"Open LLM Leaderboard v1: results lack {missing + ([] if subjects else ['MMLU subjects'])}")
    scores = {task: 100.0 * results[task][metric] for task, metric in OPEN_LLM_LEADERBOARD_V1.items()}
    scores["mmlu"] = 100.0 * sum(subjects) / len(subjects)
    scores["average"] = sum(scores.values()) / len(scores)
    return scores


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
    alphas = alpha_table(scores)
    write_table(alphas, tables, "alpha_search", decimals=4)
    plot_alpha_curves(alphas, plots / "alpha_search.png")
    write_table(with_alpha_source(win_rate_table(scores), study), tables, "alpaca_eval")
    write_table(
        with_alpha_source(single_grade_table(scores, study["single_grade"]), study), tables, "mt_bench", decimals=3
    )
    if study.get("lm_eval_suite"):
        write_table(with_alpha_source(lm_eval_table(scores), study), tables, "lm_eval")
    if study.get("judge_validation"):
        write_table(judge_table(scores), tables, "judge")
