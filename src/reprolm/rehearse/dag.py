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
    """The workflow refused the config or the profile before any job (Snakemake said why)."""


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
    live (job resources are evaluated against it). Raises DagError when Snakemake refuses."""
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

    def execute_then_inspect(dag_api: DAGApi, *positional, **keywords):
        result = execute(dag_api, *positional, **keywords)
        workflow = dag_api.workflow_api._workflow
        submitted, local = [], Counter()
        for job in workflow.dag.jobs:
            if job.rule.norun:
                continue
            if job.rule.name in workflow._localrules:
                local[job.rule.name] += 1
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
    with (
        mock.patch.object(DAGApi, "execute_workflow", execute_then_inspect),
        contextlib.redirect_stdout(output),
        contextlib.redirect_stderr(output),
    ):
        succeeded = cli.args_to_api(args, parser)
    if "error" in outcome:
        raise outcome["error"]
    if not succeeded or "value" not in outcome:
        told = "\n".join(output.getvalue().strip().splitlines()[-SNAKEMAKE_LINES_SHOWN:])
        raise DagError(f"Snakemake refused the config or the profile before any job:\n{told}")
    return outcome["value"]
