"""The jobs of a config's DAG as Snakemake itself builds them: its own API, in this process.
The one reader of the DAG that ``reprolm impact`` (both sides of a change) and ``reprolm
plan`` (the jobs it prices, and those still to run here) share.

Every job is described by what Snakemake's rerun triggers compare: its params (the library
code's fingerprint, ``params.code``, apart), its input files, its rule's code and its software
environment, with its outputs, the jobs it reads from and what it asks the scheduler for.

Run as a script (:func:`job_states`) it describes the jobs of another tree with that tree's
package: what it imports of the package is nothing, so an old revision's package serves.
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
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

SNAKEFILE = Path("workflow") / "Snakefile"


@dataclass
class JobState:
    """One job as Snakemake's rerun triggers see it."""

    rule: str
    wildcards: dict
    params: list[str]
    code: str
    inputs: list[str]
    software: str
    outputs: list[str] = field(default_factory=list)
    needs: list[str] = field(default_factory=list)  # the first output of each job it reads from
    gpus: int = 0
    runtime_min: float = 0.0  # as requested; 0 where it is sized from inputs not made yet


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _local_file(source) -> Path:
    return Path(source.get_path_or_uri(secret_free=True))


def _state(job, persistence, sized: bool) -> JobState:
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
    state = JobState(
        rule=job.rule.name,
        wildcards=dict(job.wildcards_dict),
        params=serialised,
        code=_digest(f"{code}\n{rule_code}"),
        inputs=sorted(str(path) for path in job.input),
        software=_digest(env),
        outputs=[str(path) for path in job.output],
    )
    if sized:
        resources = job.resources
        state.gpus = _number(resources.get("gpu", 0))
        state.runtime_min = _number(resources.get("runtime", 0))
    return state


def _number(value) -> int:
    """A resource as a number; 0 for one sized from inputs not made yet (``<TBD>``)."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _parse_once() -> None:
    """Snakemake parses each rules file anew for every workflow it reads; this process reads
    the same files for many configs (:func:`dag_states`), so each file's parse is kept, by
    its text and place among the workflow's rules."""
    import snakemake.workflow

    if getattr(snakemake.workflow.parse, "kept", False):
        return
    parse = snakemake.workflow.parse
    kept: dict = {}

    def parse_kept(path, workflow, linemap, overwrite_shellcmd=None, rulecount=0):
        key = (path.get_path_or_uri(secret_free=True), _local_file(path).read_text(), overwrite_shellcmd, rulecount)
        if key not in kept:
            lines: dict = {}
            kept[key] = (*parse(path, workflow, lines, overwrite_shellcmd, rulecount), lines)
        code, count, lines = kept[key]
        linemap.update(lines)
        return code, count

    parse_kept.kept = True
    snakemake.workflow.parse = parse_kept


@dataclass
class Side:
    """One side of a change: its jobs by first output, and the config they were read with
    (the workflow's, retired judges' successors in their places)."""

    states: dict[str, JobState]
    config: dict


def dag_states(
    root: str | Path,
    configfile: str | Path | None = None,
    config: Mapping | None = None,
    pending: bool = False,
    sized: bool = True,
) -> Side:
    """Every job of the config's whole DAG (as from scratch), by its first output: Snakemake's
    own parse of the workflow in ``root``, in this process. ``configfile``: as ``--configfile``
    (default: the embedded config/config.yaml); ``config``: as ``--config``, laid over it.
    ``pending``: only the jobs Snakemake would run here now, those whose outputs are missing
    or incomplete, were made with other params or inputs, or come after such a job (not on a
    newer input or changed code alone: those still leave a file this config made).
    ``sized``: read each job's GPUs and runtime request; what is compared for a rerun does not
    need them, and Snakemake's evaluation of every job's resources is a quarter of a read."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.enums import Quietness, RerunTrigger
    from snakemake.settings.types import (
        ConfigSettings,
        DAGSettings,
        OutputSettings,
        ResourceSettings,
        StorageSettings,
    )

    _parse_once()
    root = Path(root).resolve()
    here = Path.cwd()
    configfiles = [Path(configfile).resolve()] if configfile else []
    try:
        with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
            workflow_api = api.workflow(
                resource_settings=ResourceSettings(cores=1),
                storage_settings=StorageSettings(),
                config_settings=ConfigSettings(configfiles=configfiles, config=dict(config or {})),
                snakefile=root / SNAKEFILE,
                workdir=root,
            )
            if pending:
                workflow_api.dag(
                    DAGSettings(rerun_triggers={RerunTrigger.PARAMS, RerunTrigger.INPUT}, force_incomplete=True)
                )
            else:
                workflow_api.dag(DAGSettings(forceall=True))
            workflow = workflow_api._workflow
            workflow._prepare_dag(forceall=not pending, ignore_incomplete=not pending, lock_warn_only=True, nolock=True)
            workflow._build_dag()
            dag = workflow.dag
            persistence = workflow.persistence
            states = {}
            for job in dag.needrun_jobs():
                if job.rule.norun:
                    continue
                state = _state(job, persistence, sized)
                state.needs = sorted(str(dep.output[0]) for dep in dag.dependencies[job] if not dep.rule.norun)
                states[str(job.output[0])] = state
            return Side(states, json.loads(json.dumps(dict(workflow.globals["config"]), default=str)))
    finally:
        os.chdir(here)


def job_states(
    root: str | Path, configfile: str | Path | None = None, package: str | Path | None = None, sized: bool = True
) -> Side:
    """:func:`dag_states` of ``root``, run with the package of the folder ``package`` (its
    ``src``) in a process of its own, or in this process where it is not given."""
    if package is None:
        return dag_states(root, configfile, sized=sized)
    command = [sys.executable, __file__, "--states", str(root)]
    if configfile:
        command += ["--configfile", str(configfile)]
    if not sized:
        command.append("--unsized")
    env = {**os.environ, "PYTHONPATH": str(Path(package).resolve() / "src")}
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"the workflow of {root} could not be read:\n{(result.stdout + result.stderr)[-3000:]}")
    found = json.loads(result.stdout)
    return Side({key: JobState(**value) for key, value in found["states"].items()}, found["config"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--states", required=True)
    parser.add_argument("--configfile")
    parser.add_argument("--unsized", action="store_true")
    args = parser.parse_args()
    with contextlib.redirect_stdout(io.StringIO()):
        side = dag_states(args.states, args.configfile, sized=not args.unsized)
    print(json.dumps({"states": {key: asdict(state) for key, state in side.states.items()}, "config": side.config}))
