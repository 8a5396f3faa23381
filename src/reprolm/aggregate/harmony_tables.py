"""Train-before-test (LM-Harmony) tables and plots from the per model x task score files."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from reprolm.aggregate.harmony import leaderboard, pc1_scores, plot_consistency, plot_tau_heatmap, ranking_consistency
from reprolm.aggregate.tables import Score
from reprolm.io import write_table

KINDS = {"direct": "direct_eval", "train_before_test": "train_before_test"}


def score_matrices(scores: list[Score], task_order: list[str]) -> dict[str, pd.DataFrame]:
    """Models x tasks, one matrix per evaluation kind, tasks in the configured order."""
    rows = [s for s in scores if s.metric == "train_before_test"]
    matrices = {}
    for kind, key in KINDS.items():
        frame = pd.DataFrame([{"model": s.model, "task": s.name, "score": s.data[key]} for s in rows])
        matrix = frame.pivot(index="model", columns="task", values="score")
        matrices[kind] = matrix[[t for t in task_order if t in matrix.columns]]
    return matrices


def informative_tasks(matrix: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """PCA cannot standardise a task on which every model scores the same; such tasks are
    left out of PC1 (and listed), as tiny models often all score 0 on generative tasks."""
    complete = matrix.dropna(axis=0, how="any")
    constant = [task for task in complete.columns if complete[task].nunique() <= 1]
    return complete.drop(columns=constant), constant


def write_harmony_tables(scores: list[Score], study: Mapping, config: Mapping, tables: Path, plots: Path) -> None:
    task_order = [task["name"] for task in study["tasks"]]
    min_models = study.get("min_models", 5)
    matrices = score_matrices(scores, task_order)
    summary, per_task = [], {}
    for kind, matrix in matrices.items():
        write_table((100 * matrix).reset_index(), tables, f"{kind}_scores")
        usable, constant = informative_tasks(matrix)
        consistency = ranking_consistency(matrix, min_models=min_models)
        per_task[kind] = consistency.per_task
        # Fewer than two models (or no task that tells them apart) have no PC1. Its column is
        # written anyway, empty, as the tau is with too few models: the table's columns do not
        # depend on the run's size, and the paper comparison (which refuses an absent column as
        # a misnamed figure) leaves the figure empty.
        row = {"evaluation": kind, "mean_kendall_tau": consistency.mean, "models": len(matrix),
               "pc1_tasks": len(usable.columns), "excluded_from_pc1": " ".join(constant),
               "pc1_explained_variance": math.nan}
        if len(usable.columns) >= 1 and len(usable) >= 2:
            pc1 = pc1_scores(usable)
            row["pc1_explained_variance"] = float(pc1.explained_variance_ratio[0])
            board = leaderboard(matrix.loc[usable.index], pc1_tasks=list(usable.columns))
            write_table(board.reset_index(), tables, f"leaderboard_{kind}")
        summary.append(row)
        plot_tau_heatmap(consistency.tau, plots / f"tau_{kind}.png", title=f"Kendall tau-b, {kind.replace('_', ' ')}")
    write_table(pd.DataFrame(summary), tables, "consistency_summary", decimals=3)
    write_table(pd.DataFrame(per_task).rename_axis("task").reset_index(), tables, "consistency_per_task", decimals=3)
    plot_consistency(per_task["direct"], per_task["train_before_test"], plots / "consistency.png")
