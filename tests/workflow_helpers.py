"""Running real snakemake in a scratch copy of the workflow, and reading its dry-run jobs."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from reprolm.checks import LM_EVAL_TASK_CACHE, preflight
from reprolm.config import overlays

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
COPIED = ("workflow", "config", "profiles")
# What a finished run holds besides the workflow: outputs, Snakemake's metadata (without it a
# copy is not "Nothing to be done"), logs and benchmarks.
RUN_OUTPUTS = ("results", "resources", ".snakemake", "logs", "benchmarks")
# Large and only ever read or replaced by new files (Snakemake removes an output before a job
# makes it again): hard links are safe. The hub cache is left out: libraries rewrite its lock
# files in place.
LINKED = ("results", "resources")


@functools.cache
def lm_eval_task_cache() -> Path:
    """What lm-eval's task index says of every task of the default and paper configs, asked
    once per test process by the workflow's own pre-flight checks. A workflow in a fresh folder
    asks it at its first parse (about 10 s of CPU); each scratch copy starts with this instead,
    as a user's second run would."""
    cache = Path(tempfile.mkdtemp(prefix="reprolm-test-lm-eval-tasks-")) / Path(LM_EVAL_TASK_CACHE).name
    for name in ("config.yaml", "paper.yaml"):
        preflight(overlays.load(REPO / "config" / name, root=REPO), str(cache))
    return cache


def scratch_copy(target: Path) -> Path:
    """The workflow, its configs and profiles, without any results but lm-eval's task answers
    (:func:`lm_eval_task_cache`)."""
    for name in COPIED:
        shutil.copytree(REPO / name, target / name)
    (target / LM_EVAL_TASK_CACHE).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(lm_eval_task_cache(), target / LM_EVAL_TASK_CACHE)
    return target


def copy_run(run: Path, target: Path, writable: Iterable[str] = ()) -> Path:
    """A copy of the finished run ``run`` that a test may run Snakemake in and change.

    Timestamps are kept (Snakemake dates outputs by them). ``results`` and ``resources`` are
    hard links to ``run``'s files, so nothing is copied byte by byte and nothing may be
    rewritten in place there, except under the paths in ``writable`` (relative to the run),
    which are real copies; the hub cache, the workflow, configs, Snakemake's metadata, logs
    and benchmarks are real copies too.
    """
    target.mkdir(parents=True, exist_ok=True)
    for name in (*COPIED, *RUN_OUTPUTS):
        source = run / name
        if not source.exists():
            continue
        link = ["-l"] if name in LINKED else []
        subprocess.run(["cp", "-a", *link, str(source), str(target / name)], check=True)
    for relative in ("resources/hf_home", *writable):
        copied = target / relative
        if not (run / relative).exists():
            continue
        if copied.is_dir():
            shutil.rmtree(copied)
        else:
            copied.unlink()
        subprocess.run(["cp", "-a", str(run / relative), str(copied)], check=True)
    return target


def snakemake_env(work: Path) -> dict:
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_HOME=str(work / "resources" / "hf_home"),
        TOKENIZERS_PARALLELISM="false",
    )
    return env


def snakemake(
    work: Path, *args: str, check: bool = True, timeout: int = 1800, env: dict | None = None
) -> subprocess.CompletedProcess:
    """``env``: variables added to the run's environment (e.g. PYTHONPATH to an edited library)."""
    result = subprocess.run(
        [SNAKEMAKE, "--cores", "2", *args],
        cwd=work,
        env={**snakemake_env(work), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return result


# A packed job is listed indented, under its group job (every dry run shows groups).
JOB_HEADER = re.compile(r"^\s*(?:local)?(?:rule|checkpoint) (\w+):$")
WILDCARDS = re.compile(r"^\s+wildcards: (.*)$")
FILES = re.compile(r"^\s+(input|output): (.*)$")
RESOURCES = re.compile(r"^\s+resources: (.*)$")


class DryRunJob(NamedTuple):
    rule: str
    wildcards: dict
    inputs: list[str]
    outputs: list[str]
    resources: dict[str, str]


def dry_run_details(work: Path, *args: str, env: dict | None = None) -> list[DryRunJob]:
    """Every job a dry run would execute, with its wildcards, inputs, outputs and resources
    (as printed: ``<TBD>`` where they depend on inputs not yet made)."""
    result = snakemake(work, "-n", *args, env=env)
    jobs: list[DryRunJob] = []
    for line in (result.stdout + result.stderr).splitlines():
        header = JOB_HEADER.match(line)
        if header:
            jobs.append(DryRunJob(header.group(1), {}, [], [], {}))
            continue
        wildcards, files, resources = WILDCARDS.match(line), FILES.match(line), RESOURCES.match(line)
        if resources and jobs:
            jobs[-1].resources.update(dict(pair.split("=", 1) for pair in resources.group(1).split(", ")))
        elif wildcards and jobs:
            jobs[-1].wildcards.update(dict(pair.split("=", 1) for pair in wildcards.group(1).split(", ")))
        elif files and jobs:
            (jobs[-1].inputs if files.group(1) == "input" else jobs[-1].outputs).extend(files.group(2).split(", "))
    return jobs


def dry_run_jobs(work: Path, *args: str, env: dict | None = None) -> list[tuple[str, dict]]:
    """Every job a dry run would execute: (rule, wildcards)."""
    return [(job.rule, job.wildcards) for job in dry_run_details(work, *args, env=env)]


def local_rules(*configfiles: Path) -> set[str]:
    """The workflow's local rules (run on the submitting host), from Snakemake's own parse."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings, StorageSettings

    with SnakemakeApi(OutputSettings()) as api:
        workflow = api.workflow(
            resource_settings=ResourceSettings(cores=1),
            storage_settings=StorageSettings(),
            config_settings=ConfigSettings(configfiles=list(configfiles)),
            snakefile=REPO / "workflow" / "Snakefile",
            workdir=REPO,
        )
        workflow.dag()
        # Workflow.is_local says True for every rule under the local executor; this is what
        # it says under a cluster executor.
        parsed = workflow._workflow
        return {
            rule.name for rule in parsed.rules if rule.group is None and (rule.name in parsed._localrules or rule.norun)
        }


def job_counts(jobs) -> Counter:
    return Counter(rule for rule, _ in jobs)


def tree_state(work: Path, folders: Iterable[str] = ("results", "resources", "config", "workflow")) -> dict:
    """Every file and folder under ``folders`` (but the hub cache) with its size, mtime and
    inode: a change made in place (a rewrite, a touch, a removal) shows up here."""
    state = {}
    for folder in folders:
        for path in sorted((work / folder).rglob("*")):
            if "hf_home" in path.parts:
                continue
            stat = path.lstat()
            state[path.relative_to(work).as_posix()] = (
                stat.st_size if path.is_file() else 0,
                stat.st_mtime_ns,
                stat.st_ino,
            )
    return state
