"""Where and with what a job ran: the code version, package versions, host, GPU and the
SLURM job, node and granted GPUs."""

from __future__ import annotations

import os
import platform
import re
import resource
import subprocess
import sys
from collections.abc import Mapping
from functools import cache
from importlib import metadata
from pathlib import Path

TRACKED_PACKAGES = (
    "reprolm",
    "torch",
    "transformers",
    "tokenizers",
    "datasets",
    "trl",
    "peft",
    "deepspeed",
    "lm_eval",
    "vllm",
    "snakemake",
    "pandas",
    "pyarrow",
    "numpy",
    "scipy",
)


PROJECT_ROOT = Path(__file__).resolve().parents[3]


@cache
def code_version() -> dict:
    def git(*args):
        return subprocess.run(["git", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, check=False)

    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        return {"commit": None, "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}


@cache
def package_versions() -> dict:
    versions = {"python": platform.python_version()}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = metadata.version(name.replace("_", "-"))
        except metadata.PackageNotFoundError:
            continue
    return versions


def _gpu_model() -> str | None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return None


def _first(env: Mapping, *names: str) -> str | None:
    return next((env[name] for name in names if env.get(name)), None)


def execution_host() -> dict:
    """Where this ran: host, GPU, and the SLURM job when there is one.

    Under the Snakemake SLURM executor a rule runs in a job step: the batch script's SLURM
    variables are removed before its ``srun -n1``, and srun sets the step's own, among them
    SLURM_JOB_ID, SLURMD_NODENAME and, for a GPU request, SLURM_STEP_GPUS (the node's
    indices of the granted GPUs; SLURM_GPUS_ON_NODE is only their count) and
    CUDA_VISIBLE_DEVICES (the indices as the process sees them, which device cgroups
    renumber from 0). SLURM_JOB_GPUS and the node lists cover a workflow run as a whole
    inside an allocation's batch script, where no step variables are set.
    """
    env = os.environ
    return {
        "host": platform.node(),
        "gpu": _gpu_model(),
        "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES"),
        "slurm_job_id": env.get("SLURM_JOB_ID"),
        "slurm_node": _first(env, "SLURMD_NODENAME", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"),
        "slurm_gpus": _first(env, "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"),
        # Whether the job could reach the hubs (cluster jobs never may: common.smk).
        "hub_offline": env.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE"),
    }


def granted_gpus(env: Mapping | None = None, asked: int | None = None) -> int:
    """GPUs this job holds: SLURM's grant for the step when there is one (its indices, else
    its count); else, run locally, the GPUs its rule asked for (``asked``, Snakemake's ``gpu``
    resource) as far as CUDA shows them, since every local job sees all of the machine's GPUs
    and a CPU rule's job holds none; with nothing asked known, the CUDA devices it may see."""
    env = os.environ if env is None else env
    indices = _first(env, "SLURM_STEP_GPUS", "SLURM_JOB_GPUS")
    if indices:
        return len([i for i in indices.split(",") if i.strip()])
    if env.get("SLURM_GPUS_ON_NODE", "").isdigit():
        return int(env["SLURM_GPUS_ON_NODE"])
    if asked == 0:
        return 0
    torch = sys.modules.get("torch")
    visible = torch.cuda.device_count() if torch is not None and torch.cuda.is_available() else 0
    return visible if asked is None else min(asked, visible)


def slurm_gpu_type(job_id: str) -> str | None:
    """The GRES type of the job's GPUs as SLURM allocated them (``gres/gpu:h100=2`` gives
    h100), or None when the job asked for untyped GPUs or SLURM cannot be asked."""
    try:
        shown = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    allocated = re.search(r"\bAllocTRES=(\S+)", shown.stdout) or re.search(r"\bTRES=(\S+)", shown.stdout)
    types = re.findall(r"gres/gpu:([^=,]+)=", allocated.group(1)) if allocated else []
    return types[0] if types else None


def job_usage(wall_seconds: float, cpus: int, asked_gpus: int | None = None) -> dict:
    """What this job (attempt) used: wall seconds, GPUs granted and GPU-seconds (GPUs x wall),
    the GPU model, the CPUs it was given, and the CPU seconds (its own and its finished
    subprocesses', e.g. torchrun ranks) and peak resident memory the kernel counted. Under
    SLURM GPUs, their type and the CPUs come from the allocation (``source: slurm``); run
    locally, the GPUs are those the rule asked for (``asked_gpus``, :func:`granted_gpus`)."""
    env = os.environ
    # GPU-seconds from the rounded wall time, so that the record's figures agree exactly.
    wall = round(wall_seconds, 2)
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    gpus = granted_gpus(env, asked_gpus)
    on_slurm = bool(env.get("SLURM_JOB_ID"))
    gpu_model = None
    if gpus:
        gpu_model = _gpu_model() or (slurm_gpu_type(env["SLURM_JOB_ID"]) if on_slurm else None)
    if on_slurm and _first(env, "SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE"):
        cpus = int(_first(env, "SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE"))
    return {
        "source": "slurm" if on_slurm else "local",
        "wall_seconds": wall,
        "gpus": gpus,
        "gpu_model": gpu_model,
        "gpu_seconds": round(gpus * wall, 2),
        "cpus": cpus,
        "cpu_seconds": round(cpu, 2),
        "max_rss_mb": round(max(own.ru_maxrss, children.ru_maxrss) / 1024, 1),
    }
