"""Train-before-test (LM-Harmony) tables and plots from the per model x task score files."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from reprolm.aggregate.tables import Score
from reprolm.aggregate.uncertainty import Estimate
from reprolm.io import write_table
from reprolm.paths import PRETRAINED
from reprolm.studies.harmony.rankings import (
    binary_standard_error,
    consistency_estimates,
    informative_tasks,
    leaderboard,
    load_harmony_results,
    pc1_score_estimates,
    pc1_share_estimate,
    plot_consistency,
    plot_tau_heatmap,
    reference_comparison,
)

KINDS = {"direct": "direct_eval", "train_before_test": "train_before_test"}


def _harmony_scores(scores: list[Score]) -> list[Score]:
    return [s for s in scores if s.metric == "train_before_test"]


def score_matrices(scores: list[Score], task_order: list[str]) -> dict[str, pd.DataFrame]:
    """Models x tasks, one matrix per evaluation kind, tasks in the configured order."""
    return _matrices(scores, task_order, lambda s, key: s.data[key])


def standard_error_matrices(scores: list[Score], task_order: list[str]) -> dict[str, pd.DataFrame]:
    """Each score's standard error over its test documents (:func:`binary_standard_error`),
    laid out as :func:`score_matrices`."""
    return _matrices(
        scores, task_order, lambda s, key: binary_standard_error(s.data[key], s.data["sizes"]["test"], s.data["metric"])
    )


def _matrices(scores: list[Score], task_order: list[str], cell) -> dict[str, pd.DataFrame]:
    rows = _harmony_scores(scores)
    matrices = {}
    for kind, key in KINDS.items():
        frame = pd.DataFrame([{"model": s.model, "task": s.name, "value": cell(s, key)} for s in rows])
        matrix = frame.pivot(index="model", columns="task", values="value")
        matrices[kind] = matrix[[t for t in task_order if t in matrix.columns]]
    return matrices


def scores_with_intervals(matrix: pd.DataFrame, errors: pd.DataFrame) -> pd.DataFrame:
    """Scores x100 as estimates with the normal interval of the score's standard error
    (write_table gives each task its ``{task} lo`` and ``{task} hi``; empty where a score has
    no standard error)."""
    table = pd.DataFrame(index=matrix.index)
    for task in matrix.columns:
        table[task] = [
            Estimate(100 * value, standard_error=100 * error) for value, error in zip(matrix[task], errors[task])
        ]
    return table.reset_index()


def run_scores(scores: list[Score], study: Mapping, hub_ids: Mapping[str, str]) -> pd.DataFrame:
    """The run's scores of the base models as they are (the paper evaluates hub checkpoints),
    one row per model, task and evaluation, named as :func:`reference_comparison` reads them."""
    tasks = {task["name"]: task["task"] for task in study["tasks"]}
    rows = []
    for score in _harmony_scores(scores):
        if score.recipe != PRETRAINED or score.base not in hub_ids:
            continue
        for key in KINDS.values():
            rows.append(
                {
                    "model": score.model,
                    "hub id": hub_ids[score.base],
                    "task": tasks[score.name],
                    "metric": score.data["metric"],
                    "evaluation": key,
                    "this run": score.data[key],
                    "this run stderr": binary_standard_error(
                        score.data[key], score.data["sizes"]["test"], score.data["metric"]
                    ),
                }
            )
    return pd.DataFrame(
        rows, columns=["model", "hub id", "task", "metric", "evaluation", "this run", "this run stderr"]
    )


def write_harmony_tables(scores: list[Score], study: Mapping, settings: Mapping, tables: Path, plots: Path) -> None:
    task_order = [task["name"] for task in study["tasks"]]
    min_models = study.get("min_models", 5)
    matrices = score_matrices(scores, task_order)
    errors = standard_error_matrices(scores, task_order)
    summary, per_task = [], {}
    for kind, matrix in matrices.items():
        write_table(scores_with_intervals(matrix, errors[kind]), tables, f"{kind}_scores")
        usable, constant = informative_tasks(matrix)
        estimates = consistency_estimates(matrix, min_models=min_models)
        per_task[kind] = pd.Series(estimates.per_task)
        # Fewer than two models (or no task that tells them apart) have no PC1. Its column is
        # written anyway, empty, as the tau is with too few models: the table's columns do not
        # depend on the run's size, and the paper comparison (which refuses an absent column as
        # a misnamed figure) leaves the figure empty.
        row = {
            "evaluation": kind,
            "mean_kendall_tau": estimates.mean,
            "models": len(matrix),
            "pc1_tasks": len(usable.columns),
            "excluded_from_pc1": " ".join(constant),
            "pc1_explained_variance": math.nan,
        }
        if len(usable.columns) >= 1 and len(usable) >= 2:
            row["pc1_explained_variance"] = pc1_share_estimate(matrix)
            board = leaderboard(matrix.loc[usable.index], pc1_tasks=list(usable.columns))
            pc1_estimates = pc1_score_estimates(usable)
            board["PC1"] = [pc1_estimates[model] for model in board.index]
            write_table(board.reset_index(), tables, f"leaderboard_{kind}")
        summary.append(row)
        plot_tau_heatmap(
            estimates.consistency.tau, plots / f"tau_{kind}.png", title=f"Kendall tau-b, {kind.replace('_', ' ')}"
        )
    write_table(pd.DataFrame(summary), tables, "consistency_summary", decimals=3)
    write_table(pd.DataFrame(per_task).rename_axis("task").reset_index(), tables, "consistency_per_task", decimals=3)
    plot_consistency(per_task["direct"], per_task["train_before_test"], plots / "consistency.png")
    if settings.get("reference_results"):
        reference = load_harmony_results(settings["reference_results"])
        comparison = reference_comparison(run_scores(scores, study, settings.get("hub_ids", {})), reference)
        write_table(comparison, tables, "reference_comparison")
