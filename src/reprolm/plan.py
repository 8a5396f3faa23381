"""What a run will cost before it starts: ``reprolm plan``.

The jobs come from Snakemake's own DAG of the config (:mod:`reprolm.dag_jobs`: the whole DAG,
as from scratch; the ExPO alpha search adds its evaluations only once it has run). Each job is
estimated by the cost model of its stage (:mod:`reprolm.need`: FLOPs of its tokens and
parameters, bytes streamed, its request, or the rehearsal's measurement). A GPU job's
GPU-seconds are its time x its GPUs. ``N``, a model's parameters, is read from the
checkpoint's safetensors headers when it is on disk, else from the config (a base model's
``parameters``, or a built model's shape), else from a size tag in the hub name
(``Qwen2.5-1.5B``: 1.5e9); a model none of these give is ``unknown`` and its jobs fall back to
the requested bound.

Calibration: where earlier runs of this config left provenance records of a planned job's
outputs (``execution.usage.wall_seconds``) on the job's class of hardware (a GPU job's on
GPUs, a CPU job's on CPUs), each rule's estimates are scaled by the ratio of the recorded wall
time to the estimate over the recorded jobs of that rule.

Only this config's files count, for a dataset's rows as for calibration: a file the workflow
recorded whose job Snakemake would not run again for this config (:func:`made_here`). A file of the same name
made by another config in the same folder (the embedded default's tiny datasets where
``config/paper.yaml`` is planned) is not, so a plan gives the same figures in a run folder as
in a fresh clone until this config's own jobs have run there.
"""

from __future__ import annotations

import heapq
import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from reprolm.config import overlays
from reprolm.dag_jobs import SNAKEFILE, JobState, dag_states
from reprolm.models.parameters import model_parameters
from reprolm.need import DEVICES, PlannedJob, apply_measurements, estimate_job, job_model
from reprolm.provenance.hashing import provenance_path
from reprolm.stages import stage_of


def planned_jobs(states: Mapping[str, JobState]) -> list[PlannedJob]:
    """The DAG's jobs (:func:`reprolm.dag_jobs.dag_states`) as the plan prices them: each
    with its stage and the jobs it reads from."""
    jobs = [
        PlannedJob(
            state.rule,
            dict(state.wildcards),
            list(state.inputs),
            list(state.outputs),
            gpus=state.gpus,
            runtime_min=float(state.runtime_min),
            stage=stage_of(state.rule),
        )
        for state in states.values()
    ]
    made_by = {output: index for index, job in enumerate(jobs) for output in job.outputs}
    for job in jobs:
        job.after = sorted({made_by[path] for path in job.inputs if path in made_by})
    return jobs


def dag_jobs(root: Path, configfile: str | None, pending: bool = False) -> list[PlannedJob]:
    """Every job of the config, as from scratch; ``pending``: only those Snakemake would run
    here now (:func:`reprolm.dag_jobs.dag_states`)."""
    return planned_jobs(dag_states(root, root / configfile if configfile else None, pending=pending).states)


def made_here(jobs: list[PlannedJob], root: Path, configfile: str | None) -> set[str]:
    """The planned jobs' outputs this config made here: on disk with the provenance record the
    workflow writes (a file put there by hand has none, and Snakemake would take it as made),
    and their job not pending (read only when there are such files)."""
    existing = [
        job
        for job in jobs
        if job.outputs
        and all((root / path).exists() for path in job.outputs)
        and provenance_path(root / job.outputs[0]).is_file()
    ]
    if not existing:
        return set()
    pending = {path for job in dag_jobs(root, configfile, pending=True) for path in job.outputs}
    return {path for job in existing if pending.isdisjoint(job.outputs) for path in job.outputs}


def built_rows(root: Path, made: set[str]) -> dict[str, int]:
    """Rows of each dataset this config built (:func:`made_here`): the most of its splits."""
    import pyarrow.parquet as pq

    rows: dict[str, int] = {}
    for path in sorted(made):
        parts = Path(path).parts
        if parts[:2] == ("results", "datasets") and len(parts) == 4 and path.endswith(".parquet"):
            rows[parts[2]] = max(rows.get(parts[2], 0), pq.ParquetFile(root / path).metadata.num_rows)
    return rows


def calibrate(jobs: list[PlannedJob], root: Path, made: set[str]) -> dict[str, tuple[float, int]]:
    """Per rule: (recorded / estimated wall time, records used), from the records of the
    planned jobs' outputs this config made (:func:`made_here`) on the job's class of hardware
    (GPUs for a job that asks for them, else CPUs); the rule's estimates are scaled by it."""
    recorded: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for job in jobs:
        if not job.outputs or job.outputs[0] not in made or job.seconds <= 0:
            continue
        record_path = provenance_path(root / job.outputs[0])
        if not record_path.is_file():
            continue
        usage = (json.loads(record_path.read_text()).get("execution") or {}).get("usage") or {}
        if usage.get("wall_seconds") and bool(usage.get("gpus")) == bool(job.gpus):
            recorded[job.rule].append((usage["wall_seconds"], job.seconds))
    ratios = {
        rule: (sum(a for a, _ in pairs) / sum(e for _, e in pairs), len(pairs)) for rule, pairs in recorded.items()
    }
    for job in jobs:
        if job.rule in ratios:
            job.seconds *= ratios[job.rule][0]
            job.basis += ", calibrated"
    return ratios


def makespan(jobs: list[PlannedJob], width: int) -> float:
    """Seconds to run the jobs on ``width`` GPUs: a job starts once the jobs it needs have
    finished and its GPUs are free (CPU jobs never wait for GPUs; a job asking for more
    than ``width`` takes all of them), in the order of their outputs among the ready ones."""
    finish: dict[int, float] = {}
    running: list[tuple[float, int]] = []  # (end, GPUs held)
    # Ready jobs start in the order of their outputs, not the DAG's (which varies from run to
    # run): every plan of a config gives the same wall time.
    waiting = sorted(range(len(jobs)), key=lambda index: jobs[index].outputs)
    clock, free = 0.0, width
    while waiting or running:
        for index in list(waiting):
            job = jobs[index]
            need = min(job.gpus, width)
            if need <= free and all(d in finish and finish[d] <= clock for d in job.after):
                finish[index] = clock + job.seconds
                heapq.heappush(running, (finish[index], need))
                free -= need
                waiting.remove(index)
        if not running:
            raise ValueError("some jobs wait on jobs that are not in the plan")
        clock, held = heapq.heappop(running)
        free += held
    return max(finish.values(), default=0.0)


def study_jobs(jobs: list[PlannedJob]) -> dict[str, set[int]]:
    """Each study's jobs: its tables' job and everything before it (shared jobs in each)."""
    studies = {}
    for index, job in enumerate(jobs):
        if job.rule == "study_tables":
            seen, stack = set(), [index]
            while stack:
                current = stack.pop()
                if current not in seen:
                    seen.add(current)
                    stack.extend(jobs[current].after)
            studies[job.wildcards["study"]] = seen
    return studies


@dataclass
class Plan:
    jobs: list[PlannedJob]
    sizes: dict[str, tuple[int | None, str]]
    calibration: dict[str, tuple[float, int]]
    width: int
    device: str
    measured: int = 0

    def table(self) -> pd.DataFrame:
        """Per study (its tables and everything behind them) and stage, then the whole run."""
        rows = []
        for study, members in sorted(study_jobs(self.jobs).items()):
            by_stage: dict[str, list[PlannedJob]] = defaultdict(list)
            for index in members:
                by_stage[self.jobs[index].stage].append(self.jobs[index])
            rows += [self._row(study, stage, by_stage[stage]) for stage in sorted(by_stage)]
        by_stage = defaultdict(list)
        for job in self.jobs:
            by_stage[job.stage].append(job)
        rows += [self._row("all", stage, by_stage[stage]) for stage in sorted(by_stage)]
        rows.append(self._row("all", "total", self.jobs))
        return pd.DataFrame(rows)

    @staticmethod
    def _row(study: str, stage: str, members: list[PlannedJob]) -> dict:
        return {
            "study": study,
            "stage": stage,
            "jobs": len(members),
            "GPU hours": sum(j.gpu_seconds for j in members) / 3600,
            "CPU hours": sum(j.seconds for j in members if not j.gpus) / 3600,
            "largest job GPU GB": max((j.peak_gpu_gb for j in members), default=0.0),
            "checkpoint GB": sum(j.checkpoint_gb for j in members),
            "jobs bounded by their request": sum(j.basis.startswith("requested") for j in members),
        }

    def summary(self) -> str:
        total = self.table().iloc[-1]
        unknown = sorted(base for base, (size, _) in self.sizes.items() if size is None)
        text = (
            f"{int(total['jobs'])} jobs: {total['GPU hours']:.4g} GPU-hours on {self.device}, "
            f"{total['CPU hours']:.4g} CPU-hours; about {makespan(self.jobs, self.width) / 3600:.3g} h "
            f"of wall time on {self.width} GPUs"
        )
        if self.measured:
            text += f"; {self.measured} jobs measured by the rehearsal"
        if self.calibration:
            text += f"; calibrated on {sum(n for _, n in self.calibration.values())} recorded jobs"
        if unknown:
            text += f"; models of unknown size (their jobs bounded by their request): {', '.join(unknown)}"
        return text + "."


def plan(
    root: str | Path = ".",
    configfile: str | None = None,
    width: int = 8,
    device: str = "h100",
    jobs: list[PlannedJob] | None = None,
    calibrated: bool = True,
) -> Plan:
    """The plan of a config, from the workflow's folder ``root`` (``jobs``: the config's
    jobs, already read). Raises FileNotFoundError, naming it, where ``root`` is not the
    workflow's folder or holds no such config file."""
    root = Path(root)
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; known: {sorted(DEVICES)}")
    if jobs is None and not (root / SNAKEFILE).is_file():
        raise FileNotFoundError(
            f"{root.resolve()} is not the workflow's folder (no {SNAKEFILE} there): "
            "run reprolm plan in the repository, or give --root"
        )
    config_name = configfile or "config/config.yaml"
    config_path = root / config_name
    if not config_path.is_file():
        raise FileNotFoundError(f"no config file {config_name} in {root.resolve()}")
    config = overlays.load(config_path, root)
    jobs = dag_jobs(root, configfile) if jobs is None else jobs
    made = made_here(jobs, root, configfile)
    sizes, measured, calibration = estimate(jobs, config, root, device, made, calibrated)
    return Plan(jobs, sizes, calibration, width, device, measured)


def estimate(
    jobs: list[PlannedJob], config: Mapping, root: Path, device: str, made: set[str], calibrated: bool = True
) -> tuple[dict, int, dict]:
    """Fill each job's estimate (:func:`_estimate`, then the rehearsal's measurements and the
    calibration on the records of ``made``, the config's outputs made here); the model sizes,
    how many jobs were measured, and the calibration."""
    built = built_rows(root, made)
    sizes = {base: model_parameters(config, base, root) for base in config.get("base_models", {})}
    for job in jobs:
        model = job_model(config, job.wildcards)
        estimate_job(job, config, DEVICES[device], sizes[model][0] if model else None, built, root)
    measured = apply_measurements(jobs, root)
    return sizes, measured, calibrate(jobs, root, made) if calibrated else {}
