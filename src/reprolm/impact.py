"""What a change will rerun, and what that costs, before anything runs: ``reprolm impact``.

A change is a config (``--configfile``, or ``--config KEY=VALUE`` laid over the current one)
or code (the working tree against a git revision, ``--rev``). Both sides are read the way
Snakemake reads them: the workflow is parsed and its whole DAG built (Snakemake's own API, in
one process), and every job is described by what Snakemake's rerun triggers compare
(:data:`TRIGGERS`): its params (the library code's fingerprint, ``params.code``, apart), its
input files, its rule's code and its software environment. A job of the changed side reruns
when one of these differs from the same job (the same outputs) of the current side, when it
is new, or when a job it reads from reruns (``upstream``): what ``snakemake -n`` would say
after a finished run of the current side.

The cost of the rerun jobs is ``reprolm plan``'s model of them (:mod:`reprolm.plan`),
calibrated on the records of this run's artifacts where there are any.

This module imports nothing of the package at its top: ``--rev`` describes the jobs of another
revision's tree by running this file with that tree's package (:func:`job_states`).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

SNAKEFILE = Path("workflow") / "Snakefile"
# Snakemake's rerun triggers, in the words of `--rerun-triggers` (``code`` here also covers
# the library code a job runs, its ``params.code``), then what a dry run adds.
TRIGGERS = ("params", "input", "code", "software-env")
NEW, UPSTREAM = "new", "upstream"
# The rules whose jobs the summary line counts, by what they make.
RETRAINS = ("finetune", "train_before_test", "build_base_model", "extrapolate")
REGENERATES = ("generate", "generate_api")
RESCORES = ("score", "lm_eval")


@dataclass
class JobState:
    """One job as Snakemake's rerun triggers see it."""

    rule: str
    wildcards: dict
    params: list[str]
    code: str
    inputs: list[str]
    software: str
    needs: list[str] = field(default_factory=list)  # the first output of each job it reads from


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _local_file(source) -> Path:
    return Path(source.get_path_or_uri(secret_free=True))


def _state(job, persistence) -> JobState:
    params = dict(job.params.items())
    code = params.pop("code", "")
    rule_code = persistence._code(job.rule) or ""
    if job.rule.script:
        # Snakemake dates a script by its mtime; between two trees its text is what differs.
        rule_code += _local_file(job.rule.basedir.join(job.rule.script)).read_text()
    serialised = sorted(repr(value) for value in params.values())
    env = ""
    if job.conda_env_spec:
        env = _local_file(job.conda_env_spec.file).read_text()
    return JobState(
        rule=job.rule.name,
        wildcards=dict(job.wildcards_dict),
        params=serialised,
        code=_digest(f"{code}\n{rule_code}"),
        inputs=sorted(str(path) for path in job.input),
        software=_digest(env),
    )


def dag_states(root: str | Path, configfile: str | Path | None = None) -> dict[str, JobState]:
    """Every job of the config's whole DAG (as from scratch), by its first output: Snakemake's
    own parse of the workflow in ``root``, in this process. ``configfile``: as ``--configfile``
    (default: the embedded config/config.yaml)."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.enums import Quietness
    from snakemake.settings.types import (
        ConfigSettings,
        DAGSettings,
        OutputSettings,
        ResourceSettings,
        StorageSettings,
    )

    root = Path(root).resolve()
    here = Path.cwd()
    configfiles = [Path(configfile).resolve()] if configfile else []
    try:
        with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
            workflow_api = api.workflow(
                resource_settings=ResourceSettings(cores=1),
                storage_settings=StorageSettings(),
                config_settings=ConfigSettings(configfiles=configfiles),
                snakefile=root / SNAKEFILE,
                workdir=root,
            )
            workflow_api.dag(DAGSettings(forceall=True))
            workflow = workflow_api._workflow
            workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True, nolock=True)
            workflow._build_dag()
            dag = workflow.dag
            persistence = workflow.persistence
            states = {}
            for job in dag.needrun_jobs():
                if job.rule.norun:
                    continue
                state = _state(job, persistence)
                state.needs = sorted(str(dep.output[0]) for dep in dag.dependencies[job] if not dep.rule.norun)
                states[str(job.output[0])] = state
            return states
    finally:
        os.chdir(here)


def job_states(root: str | Path, configfile: str | Path | None = None, package: str | Path | None = None) -> dict:
    """:func:`dag_states` of ``root``, run with the package of the folder ``package`` (its
    ``src``) in a process of its own, or in this process where it is not given."""
    if package is None:
        return dag_states(root, configfile)
    command = [sys.executable, __file__, "--states", str(root)]
    if configfile:
        command += ["--configfile", str(configfile)]
    env = {**os.environ, "PYTHONPATH": str(Path(package) / "src")}
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"the workflow of {root} could not be read:\n{(result.stdout + result.stderr)[-3000:]}")
    return {key: JobState(**value) for key, value in json.loads(result.stdout).items()}


@dataclass
class Rerun:
    """A job the change reruns, and why: Snakemake's triggers (:data:`TRIGGERS`), ``new``
    (its outputs are not made by the current side), or ``upstream`` alone."""

    key: str
    state: JobState
    reasons: list[str]


def reruns(current: Mapping[str, JobState], changed: Mapping[str, JobState]) -> list[Rerun]:
    """The jobs of ``changed`` that rerun after a finished run of ``current``, in DAG order."""
    own: dict[str, list[str]] = {}
    for key, state in changed.items():
        before = current.get(key)
        if before is None:
            own[key] = [NEW]
            continue
        reasons = [
            trigger
            for trigger, differs in (
                ("params", before.params != state.params),
                ("input", before.inputs != state.inputs),
                ("code", before.code != state.code),
                ("software-env", before.software != state.software),
            )
            if differs
        ]
        if reasons:
            own[key] = reasons
    rerun: dict[str, list[str]] = {}

    def visit(key: str) -> bool:
        if key not in rerun:
            rerun[key] = []  # a placeholder while its needs are visited
            upstream = any([visit(need) for need in changed[key].needs if need in changed])
            reasons = own.get(key, []) + ([UPSTREAM] if upstream and key not in own else [])
            rerun[key] = reasons
        return bool(rerun[key])

    for key in changed:
        visit(key)
    return [Rerun(key, changed[key], reasons) for key, reasons in rerun.items() if reasons]


def rules_rerun(found: Iterable[Rerun]) -> Counter:
    return Counter(job.state.rule for job in found)


def rules_triggered(found: Iterable[Rerun]) -> set[str]:
    """The rules with a job rerun by one of its own triggers (not only by a job upstream)."""
    return {job.state.rule for job in found if job.reasons != [UPSTREAM]}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--states", required=True)
    parser.add_argument("--configfile")
    args = parser.parse_args()
    with contextlib.redirect_stdout(io.StringIO()):
        found = dag_states(args.states, args.configfile)
    print(json.dumps({key: asdict(state) for key, state in found.items()}))
