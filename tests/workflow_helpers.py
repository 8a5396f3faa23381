"""Running real snakemake in a scratch copy of the workflow, and reading its dry-run jobs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
COPIED = ("workflow", "config", "profiles")


def scratch_copy(target: Path) -> Path:
    """The workflow, its configs and profiles, without any results."""
    for name in COPIED:
        shutil.copytree(REPO / name, target / name)
    return target


def snakemake_env(work: Path) -> dict:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=str(work / "resources" / "hf_home"),
               TOKENIZERS_PARALLELISM="false")
    return env


def snakemake(work: Path, *args: str, check: bool = True, timeout: int = 1800,
              env: dict | None = None) -> subprocess.CompletedProcess:
    """``env``: variables added to the run's environment (e.g. PYTHONPATH to an edited library)."""
    result = subprocess.run([SNAKEMAKE, "--cores", "2", *args], cwd=work, env={**snakemake_env(work), **(env or {})},
                            capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return result


JOB_HEADER = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):$")
WILDCARDS = re.compile(r"^\s+wildcards: (.*)$")


def dry_run_jobs(work: Path, *args: str, env: dict | None = None) -> list[tuple[str, dict]]:
    """Every job a dry run would execute: (rule, wildcards)."""
    result = snakemake(work, "-n", *args, env=env)
    jobs: list[tuple[str, dict]] = []
    for line in (result.stdout + result.stderr).splitlines():
        header = JOB_HEADER.match(line)
        if header:
            jobs.append((header.group(1), {}))
            continue
        wildcards = WILDCARDS.match(line)
        if wildcards and jobs:
            jobs[-1][1].update(dict(pair.split("=", 1) for pair in wildcards.group(1).split(", ")))
    return jobs


def job_counts(jobs) -> Counter:
    return Counter(rule for rule, _ in jobs)
