"""The jobs a cluster run of a config would submit, as Snakemake itself builds them.

The arguments go through Snakemake's own command line (``snakemake.cli``), so profiles,
``default-resources``, ``set-resources``, ``set-threads`` and config files are applied as in
the real run; the DAG is that of a dry run of the whole workflow (``--forceall``). Two
things of a dry run differ from a cluster run and are undone: a dry run caps every job's
threads at ``--cores`` (1 unless given), where a run through a cluster executor leaves them
as the rules ask; and a dry run executes every job locally, so which rules stay on the
submitting host is read from the workflow's ``localrules``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from snakemake import cli
from snakemake.api import DAGApi
from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry

CLUSTER_EXECUTOR = "slurm"
# The end of what Snakemake said, shown when it refuses.
SNAKEMAKE_LINES_SHOWN = 40


class DagError(RuntimeError):
    """The rehearsal cannot build the DAG: no cluster profile, or no SLURM here."""


class PreflightRefusal(DagError):
    """Snakemake refused the config or the profile before any job, as the real run would
    (Snakemake's words); ``warnings``: what it warned of before."""

    def __init__(self, message: str, warnings: Sequence[str] = ()):
        super().__init__(message)
        self.warnings = list(warnings)


class _Warnings(logging.Filter):
    """Snakemake's warnings while it reads the workflow and builds the DAG: a filter on its
    logger, which sees every record (Snakemake replaces the logger's handlers as it starts)."""

    def __init__(self):
        super().__init__()
        self.messages: list[str] = []
        self.errors: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            self.errors.append(record.getMessage())
        elif record.levelno >= logging.WARNING:
            self.messages.append(record.getMessage())
        return True


@dataclass
class ClusterDag:
    """What a cluster run of the config submits: ``jobs`` (Snakemake's job objects, their
    resources evaluated on first use as for a submission), the local jobs by rule, the
    resolved config, the executor's settings from the profile, the workflow's folder and
    what each job needs."""

    jobs: list
    local_jobs: Counter
    config: dict
    executor_settings: Any
    workdir: Path
    checkpoint_rules: list[str]
    # Each job's jobs it needs (Snakemake's own map).
    dependencies: Mapping = field(default_factory=dict)
    # What Snakemake warned of while reading the workflow (the preflight's warnings).
    warnings: list[str] = field(default_factory=list)
    # How many times a failing job runs: the first attempt and the profile's retries.
    attempts: int = 1
    # What the jobs on the submitting host make (downloads among them).
    local_outputs: set[str] = field(default_factory=set)
    # Every job, submitted or local: (rule, wildcards, outputs).
    every_job: list[tuple[str, dict, tuple[str, ...]]] = field(default_factory=list)
    # The submitted jobs that share a submission: each job's Snakemake group job (packing).
    groups: Mapping = field(default_factory=dict)


def snakemake_arguments(configfiles: Sequence[str], profile: str | None, workflow_profile: str | None) -> list[str]:
    arguments = ["--dry-run", "--forceall"]
    if configfiles:
        arguments += ["--configfile", *configfiles]
    if profile:
        arguments += ["--profile", profile]
    if workflow_profile:
        arguments += ["--workflow-profile", workflow_profile]
    return arguments


def inspect_cluster_dag(arguments: Sequence[str], inspect: Callable[[ClusterDag], Any]) -> Any:
    """``inspect(dag)`` of the config's cluster DAG, called while Snakemake's workflow is
    live (job resources are evaluated against it). Raises PreflightRefusal when Snakemake
    refuses, as it would refuse the real run."""
    parser, args = cli.parse_args(list(arguments))
    if args.executor != CLUSTER_EXECUTOR:
        raise DagError(
            f"the profile runs executor {args.executor!r}, not {CLUSTER_EXECUTOR!r}: give the SLURM profile "
            "(--profile profiles/slurm, or the name `make slurm-profile` registered)"
        )
    executor_settings = ExecutorPluginRegistry().get_plugin(args.executor).get_settings(args)
    if args.cores is None:
        # As in a cluster run: no --cores, so threads are not capped (a dry run caps them at 1).
        args.cores = sys.maxsize
    outcome: dict = {}
    execute = DAGApi.execute_workflow
    warned = _Warnings()

    def execute_then_inspect(dag_api: DAGApi, *positional, **keywords):
        result = execute(dag_api, *positional, **keywords)
        workflow = dag_api.workflow_api._workflow
        submitted, local, local_outputs = [], Counter(), set()
        for job in workflow.dag.jobs:
            if job.rule.norun:
                continue
            if job.rule.name in workflow._localrules:
                local[job.rule.name] += 1
                local_outputs.update(str(path) for path in job.output)
            else:
                submitted.append(job)
        dag = ClusterDag(
            jobs=submitted,
            local_jobs=local,
            config=dict(workflow.config),
            executor_settings=executor_settings,
            workdir=Path(workflow.workdir_init),
            checkpoint_rules=sorted({job.rule.name for job in workflow.dag.jobs if job.is_checkpoint}),
            dependencies=workflow.dag.dependencies,
            warnings=warned.messages,
            attempts=(args.retries or 0) + 1,
            local_outputs=local_outputs,
            every_job=[
                (job.rule.name, dict(job.wildcards_dict), tuple(str(path) for path in job.output))
                for job in workflow.dag.jobs
                if not job.rule.norun
            ],
            groups={job: group for job in submitted if (group := workflow.dag.get_job_group(job)) is not None},
        )
        # Snakemake prints and swallows what its API raises; the rehearsal's own errors are
        # raised again below, as they are.
        try:
            outcome["value"] = inspect(dag)
        except Exception as error:
            outcome["error"] = error
        return result

    # A dry run lists every job whatever --quiet says (Snakemake 9.27); kept back unless it fails.
    output = io.StringIO()
    snakemake_logger = logging.getLogger("snakemake.logging")
    snakemake_logger.addFilter(warned)
    try:
        with (
            mock.patch.object(DAGApi, "execute_workflow", execute_then_inspect),
            contextlib.redirect_stdout(output),
            contextlib.redirect_stderr(output),
        ):
            succeeded = cli.args_to_api(args, parser)
    finally:
        snakemake_logger.removeFilter(warned)
    if "error" in outcome:
        raise outcome["error"]
    if not succeeded or "value" not in outcome:
        # Snakemake's error, else the end of what it printed.
        told = "\n".join(warned.errors) or "\n".join(output.getvalue().strip().splitlines()[-SNAKEMAKE_LINES_SHOWN:])
        raise PreflightRefusal(told, warned.messages)
    return outcome["value"]
