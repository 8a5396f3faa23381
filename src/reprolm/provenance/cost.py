"""What a result cost: the GPU-hours, CPU-hours and wall hours of every job in its lineage,
from the usage each provenance record carries (``execution.usage``: GPUs granted x wall
time, as SLURM allocated them on a cluster) plus the attempts SLURM stopped before the job
finished (``execution.stopped_attempts``). A job shared by several results (the base model
behind every finetune) is counted once."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from reprolm.provenance.query import lineage
from reprolm.stages import stage_of

HOUR = 3600.0


@dataclass
class JobCost:
    rule: str
    stage: str
    gpu_seconds: float = 0.0
    cpu_seconds: float = 0.0
    wall_seconds: float = 0.0
    gpu_models: set[str] = field(default_factory=set)
    stopped_attempts: int = 0
    stopped_gpu_seconds: float = 0.0
    measured: bool = True


def _add(cost: JobCost, usage: dict) -> None:
    cost.gpu_seconds += usage.get("gpu_seconds") or 0.0
    cost.cpu_seconds += usage.get("cpu_seconds") or 0.0
    cost.wall_seconds += usage.get("wall_seconds") or 0.0
    if usage.get("gpus") and usage.get("gpu_model"):
        cost.gpu_models.add(usage["gpu_model"])


def job_cost(entry: dict) -> JobCost:
    """The cost of the job behind one lineage entry (or record), stopped attempts included."""
    execution = entry.get("execution") or {}
    usage = execution.get("usage") or {}
    cost = JobCost(rule=entry["rule"], stage=stage_of(entry["rule"]), measured="wall_seconds" in usage)
    _add(cost, usage)
    for attempt in execution.get("stopped_attempts", []):
        before = cost.gpu_seconds
        _add(cost, attempt.get("usage") or {})
        cost.stopped_attempts += 1
        cost.stopped_gpu_seconds += cost.gpu_seconds - before
    return cost


def _job_key(entry: dict) -> tuple:
    """One job writes all its outputs' records at once: same rule, wildcards and times."""
    wildcards = tuple(sorted((entry.get("wildcards") or {}).items()))
    return entry["rule"], wildcards, entry.get("started"), entry.get("finished")


def lineage_jobs(paths: Iterable[str | Path], root: str | Path = ".") -> list[JobCost]:
    """Every job behind ``paths``, each once."""
    jobs: dict[tuple, JobCost] = {}
    for path in paths:
        for entry in lineage(path, root)["artifacts"].values():
            if entry["rule"] is not None:
                jobs.setdefault(_job_key(entry), job_cost(entry))
    return list(jobs.values())


COLUMNS = [
    "stage",
    "jobs",
    "GPU hours",
    "CPU hours",
    "wall hours",
    "GPU models",
    "stopped attempts",
    "GPU hours in stopped attempts",
    "jobs without usage",
]


def cost_table(jobs: list[JobCost]) -> pd.DataFrame:
    """Per stage, then a ``total`` row."""
    groups: dict[str, list[JobCost]] = defaultdict(list)
    for job in jobs:
        groups[job.stage].append(job)

    def row(stage: str, members: list[JobCost]) -> dict:
        return {
            "stage": stage,
            "jobs": len(members),
            "GPU hours": sum(j.gpu_seconds for j in members) / HOUR,
            "CPU hours": sum(j.cpu_seconds for j in members) / HOUR,
            "wall hours": sum(j.wall_seconds for j in members) / HOUR,
            "GPU models": " ".join(sorted(set().union(*(j.gpu_models for j in members)))),
            "stopped attempts": sum(j.stopped_attempts for j in members),
            "GPU hours in stopped attempts": sum(j.stopped_gpu_seconds for j in members) / HOUR,
            "jobs without usage": sum(not j.measured for j in members),
        }

    rows = [row(stage, groups[stage]) for stage in sorted(groups)] + [row("total", jobs)]
    return pd.DataFrame(rows, columns=COLUMNS)


def summary(table: pd.DataFrame, what: str) -> str:
    """One sentence: the total and where most of it went."""
    total = table[table["stage"] == "total"].iloc[0]
    stages = table[(table["stage"] != "total") & (table["GPU hours"] > 0)].sort_values("GPU hours", ascending=False)
    shares = ", ".join(f"{r['stage']} {r['GPU hours']:.4g}" for _, r in stages.iterrows())
    sentence = (
        f"{what} cost {total['GPU hours']:.4g} GPU-hours"
        + (f", of which {shares}" if shares else "")
        + f"; {total['CPU hours']:.4g} CPU-hours over {int(total['jobs'])} jobs"
    )
    if total["stopped attempts"]:
        sentence += (
            f"; {int(total['stopped attempts'])} stopped attempts spent "
            f"{total['GPU hours in stopped attempts']:.4g} GPU-hours"
        )
    if total["jobs without usage"]:
        sentence += f"; {int(total['jobs without usage'])} jobs have no recorded usage (not counted)"
    return sentence + "."
