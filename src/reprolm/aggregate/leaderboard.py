"""One leaderboard of every finetuned model of every study, ranked by one judge's mean
grade with its 95% bootstrap interval over the prompts, each row saying how its checkpoint
was made (from the checkpoint's own record)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from reprolm.aggregate.judged import grade_estimate
from reprolm.io import write_table
from reprolm.provenance.query import read_record
from reprolm.train.objectives import DEFAULT_OBJECTIVE


def _made_how(model_dir: str) -> dict:
    """Recipe settings that tell models apart, from the checkpoint's provenance record."""
    record = read_record(model_dir) or {}
    params = record.get("params", {})
    recipe = params.get("recipe") or {}
    loss = recipe.get("loss") or {}
    starts = [item["path"] for item in record.get("inputs", {}).get("base", [])]
    return {
        "made by": record.get("rule"),
        "objective": recipe.get("objective", DEFAULT_OBJECTIVE) if recipe else None,
        "loss": f"{loss.get('kind')} ({', '.join(f'{k}={v}' for k, v in sorted(loss.items()) if k != 'kind')})"
        if loss
        else None,
        "dataset": recipe.get("dataset"),
        "started from": starts[0] if starts else None,
        "checkpoint sha256": next((o["sha256"] for o in record.get("outputs", [])), None),
        "code": (record.get("code") or {}).get("commit"),
    }


def leaderboard(
    models: Sequence[Sequence[str]],
    grade_files: Sequence[str],
    model_dirs: Sequence[str],
    studies: Mapping[str, Sequence[Sequence[str]]],
) -> pd.DataFrame:
    """One row per model, best mean grade first. A model's mean grade carries its interval
    over the prompts (each prompt's turns drawn together); every model answered the same
    prompts, drawn alike, so the replicates kept beside the table pair across models."""
    rows = []
    for (base, recipe), grade_file, model_dir in zip(models, grade_files, model_dirs, strict=True):
        grades = json.loads(Path(grade_file).read_text())
        used_by = [study for study, pairs in studies.items() if [base, recipe] in [list(p) for p in pairs]]
        rows.append(
            {
                "model": f"{base}/{recipe}",
                "studies": ", ".join(used_by),
                "mean grade": grade_estimate(grades["ids"], grades["grades"], grades["mean"], grade_file),
                "judge": grades["judge"],
                **_made_how(model_dir),
                "lineage": f"reprolm lineage {model_dir}",
            }
        )
    frame = (
        pd.DataFrame(rows)
        .sort_values(
            "mean grade", key=lambda grades: grades.map(lambda grade: grade.value), ascending=False, kind="stable"
        )
        .reset_index(drop=True)
    )
    frame.insert(0, "rank", range(1, len(frame) + 1))
    return frame


def write_leaderboard(models, grade_files, model_dirs, studies, output: str) -> None:
    """``output`` (a CSV), and the mean grades' bootstrap replicates beside it
    (``{stem}.replicates.parquet``)."""
    write_table(
        leaderboard(models, grade_files, model_dirs, studies),
        Path(output).parent,
        Path(output).stem,
        decimals=4,
        markdown=False,
    )
