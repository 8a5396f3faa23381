"""``reprolm rehearse``: a config proven on the cluster before its first GPU-hour.

Run on the cluster's login node, in the workflow's folder, with the profile the real run
will use. Every distinct sbatch request of the config's DAG (rule x resources), built by the
installed SLURM executor plugin exactly as it would submit it, is checked against its
partition's limits and judged by the cluster with ``sbatch --test-only`` (nothing is
queued). It prints one line per request shape with its job count and the cluster's answer,
then one verdict: ready, or each shape that will fail with the config key to change. With
``sizes``, the dataset builds and the score jobs are also run at the papers' sizes
(``reprolm.rehearse.sizes``; a score job that asks for a GPU in a SLURM job with its own
request; a judge job that streams a dataset's rows modelled from a tiny stand-in judge) and those needing over 80% of their request, or failing with it, are failures too.
With ``stand_in``, one job of each rule x model family x resource class runs through the
profile on tiny stand-in models (``reprolm.rehearse.standin``), one generation stopped and
resumed on the way; one that fails, runs other than asked, or does not resume, is a failure
too.

First comes the real run's preflight, which a dry run has too: a config or profile Snakemake
refuses, and what its dry run warns a real run would refuse, fail the verdict in Snakemake's
words; its other warnings are verdict lines; a released file not downloaded yet whose URL
this host cannot reach fails it, naming the URL and the path to copy it to. So do what the
run needs from this host (``reprolm.rehearse.login_node``: access to each gated hub
repository it downloads, the API keys its jobs read, disk for its models and checkpoints)
and GPU jobs whose request can be given GPUs smaller than their modelled memory
(``reprolm.rehearse.gpu_memory``). Retries are judged at the last attempt the profile's
``retries`` and the config's ``retry_growth`` make.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

import pandas as pd
from snakemake.cli import get_profile_dir

from reprolm.data.released_ratings import ReleasedFile, released_files, unreachable
from reprolm.errors import REAL_RUN_REFUSED
from reprolm.lock import lock_path, locked_revision, read_lock
from reprolm.rehearse.dag import DagError, PreflightRefusal, inspect_cluster_dag, snakemake_arguments
from reprolm.rehearse.gpu_memory import gpu_memory_problems
from reprolm.rehearse.login_node import (
    DagJob,
    api_key_users,
    disk_problems,
    hub_access_problems,
    missing_api_keys,
    pending_hub_ids,
)
from reprolm.rehearse.sizes import Measurement, data_jobs, measure_all, save, score_jobs, streamed_jobs
from reprolm.rehearse.standin import STAND_IN_DIR, StandInRun, candidates, run_stand_ins
from reprolm.rehearse.submissions import (
    NEVER_STARTED,
    Shape,
    attempt_problems,
    group_shapes,
    judge,
    packed_problems,
    plugin_requests,
    read_partitions,
    retry_problems,
    table,
    verdict,
)

DEFAULT_PROFILE = "profiles/slurm"


@dataclass
class StandInOptions:
    """The stand-in run's: the rules to stand in (all when empty), a folder of hub
    repositories to read instead of the hub, and a time limit for its Snakemake run."""

    rules: Sequence[str] = ()
    hub_mirror: Path | None = None
    timeout_s: float | None = None


@dataclass
class Rehearsal:
    shapes: list[Shape]
    local_jobs: dict[str, int]
    checkpoint_rules: list[str]
    ready: bool
    verdict: list[str]
    notes: list[str] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)
    stand_in: StandInRun | None = None

    def table(self) -> pd.DataFrame:
        return table(self.shapes)

    def report(self) -> str:
        if not self.shapes:
            # Refused before any job: nothing was judged.
            return "\n".join(self.verdict)
        lines = [
            "Submissions: every distinct sbatch request, judged by the cluster (sbatch --test-only)",
            self.table().to_string(index=False),
        ]
        if self.local_jobs:
            local = ", ".join(f"{rule} {count}" for rule, count in sorted(self.local_jobs.items()))
            lines.append(f"On this host, not submitted: {local}")
        lines += self.notes
        if self.measurements:
            lines += ["", "Sizes: data and scoring jobs at the papers' row counts, against their request"]
            lines.append(
                pd.DataFrame(
                    [
                        {
                            "rule": m.rule,
                            "job": m.job,
                            "jobs": len(m.jobs or [m.job]),
                            "rows": ", ".join(f"{source} {rows}" for source, rows in m.rows.items()),
                            "peak MB": round(m.peak_mb),
                            "mem_mb": m.mem_mb,
                            "seconds": "-" if m.memory_only else round(m.seconds, 1),
                            "runtime s": m.runtime_min * 60,
                            "measured": m.where,
                            "flag": "; ".join(m.flags),
                        }
                        for m in self.measurements
                    ]
                ).to_string(index=False)
            )
        if self.stand_in is not None:
            run = self.stand_in
            lines += [
                "",
                f"Stand-in run: one job of each rule x model family x resource class through the profile "
                f"({run.jobs_run} SLURM jobs with those upstream, {run.seconds:.0f} s)",
            ]
            if run.outcomes:
                lines.append(pd.DataFrame(run.table()).to_string(index=False))
            if run.stop is not None:
                lines.append(f"Stop and resume ({run.stop.rule} {run.stop.job}): {run.stop.status}: {run.stop.detail}")
            lines += [f"Not stood in: {why}" for why in run.not_stood_in]
        return "\n".join(lines + [""] + self.verdict)


def cluster_partitions(env: Mapping | None = None):
    """The cluster's partitions and nodes, as ``scontrol`` shows them."""
    texts = []
    for what in ("partition", "node"):
        try:
            result = subprocess.run(
                ["scontrol", "show", what, "--oneliner"],
                capture_output=True,
                text=True,
                timeout=60,
                env=None if env is None else dict(env),
            )
        except FileNotFoundError as error:
            raise DagError("scontrol is not installed here: run the rehearsal on the cluster's login node") from error
        if result.returncode != 0:
            raise DagError(f"scontrol show {what} failed: {result.stderr.strip()}")
        texts.append(result.stdout)
    return read_partitions(*texts)


def profile_file(profile: str) -> Path:
    """The file of a ``--profile`` as Snakemake finds it (its own lookup): a path from the
    current folder, else a name in the current folder or Snakemake's profile folders
    ($XDG_CONFIG_HOME/snakemake, where `make slurm-profile` registers one). Absolute, for the
    stand-in run, which starts in a folder of its own."""
    found = get_profile_dir(profile)
    if found is None:
        raise DagError(
            f"no Snakemake profile {profile!r}: not a folder here with a profile.yaml or config.yaml, nor a "
            "profile of that name in Snakemake's profile folders (`make slurm-profile` registers profiles/slurm)"
        )
    return found[1].absolute()


def workflow_profile_file(workflow_profile: str) -> Path:
    """The file of a ``--workflow-profile`` as Snakemake finds it: the path given, else the
    folder of that name under profiles/; absolute, as :func:`profile_file`."""
    for candidate in (Path(workflow_profile), Path("profiles") / workflow_profile):
        found = get_profile_dir(str(candidate)) if candidate.exists() else None
        if found is not None:
            return found[1].absolute()
    raise DagError(
        f"no Snakemake workflow profile {workflow_profile!r}: neither it nor profiles/{workflow_profile} is a "
        "folder with a profile.yaml or config.yaml"
    )


def pending_downloads(config: Mapping, local_outputs: set[str]) -> list[ReleasedFile]:
    """The released files the run will download on this host: those its DAG makes there."""
    return [
        file
        for name, spec in config.get("sources", {}).items()
        if "released" in spec
        for file in released_files(name, spec)
        if file.path in local_outputs
    ]


def preflight(warnings: Sequence[str], downloads: Sequence[ReleasedFile]) -> tuple[list[str], list[str]]:
    """The real run's refusals and the preflight's warnings, as verdict lines: (failures,
    warnings). Downloads this host cannot make are failures, one line per host and cause
    with the count, a URL and the path to copy its file to."""
    failures = [f"- refused: {warning}" for warning in warnings if REAL_RUN_REFUSED in warning]
    notes = [f"- warning: {warning}" for warning in warnings if REAL_RUN_REFUSED not in warning]
    failed: dict[tuple[str, str], list[ReleasedFile]] = {}
    for file in downloads:
        why = unreachable(file.url)
        if why is not None:
            failed.setdefault((urlsplit(file.url).netloc, why), []).append(file)
    for (host, why), files in failed.items():
        first = files[0]
        failures.append(
            f"- {len(files)} released file(s) are not there and {host} cannot be reached from this host ({why}), "
            f"e.g. {first.key}: {first.url}: download them elsewhere and copy each to its path ({first.path}; "
            "`snakemake -n` lists the released_file jobs)"
        )
    return failures, notes


def fail_verdict(ready: bool, lines: list[str], why: str, failures: list[str]) -> tuple[bool, list[str]]:
    """The verdict with ``failures`` added: its first line says ``not ready`` and ``why``
    where it was the first failure."""
    if not failures:
        return ready, lines
    return False, ([f"not ready: {why}"] if ready else lines) + failures


def login_node_problems(
    config: Mapping,
    jobs: list[DagJob],
    workdir: Path,
    environ: Mapping[str, str],
    lock: Mapping[str, dict] | None = None,
) -> tuple[list[str], list[str], list[str]]:
    """(failures, warnings, notes) of what the run needs from this host
    (reprolm.rehearse.login_node): hub access to what it downloads (at the revisions ``lock``,
    the run's lock entries, pins), the API keys its jobs read, disk for its models and
    checkpoints."""
    pinned = lock or {}
    hub_ids = [
        replace(hub_id, revision=locked_revision(pinned, hub_id.kind, hub_id.repo, hub_id.revision) or hub_id.revision)
        for hub_id in pending_hub_ids(config, jobs, workdir)
    ]
    hub_failures, hub_warnings = hub_access_problems(hub_ids, environ)
    disk_failures, disk_notes = disk_problems(jobs, config, workdir)
    failures = hub_failures + missing_api_keys(api_key_users(config, jobs), environ) + disk_failures
    return failures, hub_warnings, disk_notes


def rehearse(
    configfiles: Sequence[str] = (),
    profile: str | None = DEFAULT_PROFILE,
    workflow_profile: str | None = None,
    env: Mapping | None = None,
    sizes: Mapping[str, int] | None = None,
    stand_in: StandInOptions | None = None,
) -> Rehearsal:
    """The submission rehearsal of a config with a profile (see the module's doc)."""
    profile_files = [
        ("--profile", profile_file(profile) if profile else None),
        ("--workflow-profile", workflow_profile_file(workflow_profile) if workflow_profile else None),
    ]
    partitions = cluster_partitions(env)
    arguments = snakemake_arguments(configfiles, profile, workflow_profile)

    def read(dag):
        requests = plugin_requests(dag)
        packed = plugin_requests(dag, packed=True)
        found = candidates(dag, requests) if stand_in else []
        builds = (data_jobs(dag), score_jobs(dag, requests), streamed_jobs(dag)) if sizes is not None else ([], [], [])
        return (
            requests,
            packed,
            dict(dag.local_jobs),
            dag.checkpoint_rules,
            dag.config,
            builds,
            dag.workdir,
            found,
            dag.warnings,
            dag.attempts,
            dag.local_outputs,
            [DagJob(rule, wildcards, outputs) for rule, wildcards, outputs in dag.every_job],
            attempt_problems(dag),
        )

    try:
        (
            requests,
            packed,
            local_jobs,
            checkpoint_rules,
            config,
            (builds, scores, streamed),
            workdir,
            found,
            warnings,
            attempts,
            local_outputs,
            every_job,
            short_of_attempts,
        ) = inspect_cluster_dag(arguments, read)
    except PreflightRefusal as refusal:
        lines = ["not ready: Snakemake refuses the real run before any job (its preflight, as a dry run has it):"]
        lines += [f"  {line}" for line in str(refusal).splitlines()]
        lines += [f"- warning: {warning}" for warning in refusal.warnings]
        return Rehearsal([], {}, [], False, lines)
    shapes = group_shapes(requests)
    judge(shapes, partitions, env)
    ready, lines = verdict(shapes, config, profile or workflow_profile or "the profile")
    retried = retry_problems(shapes, partitions, config, attempts)
    ready, lines = fail_verdict(ready, lines, "retries would ask for more than their partitions grant", retried)
    ready, lines = fail_verdict(
        ready, lines, "jobs longer than runtime_limit would need more attempts than the retries give", short_of_attempts
    )
    packed_shapes = group_shapes(packed)
    judge(packed_shapes, partitions, env)
    over = packed_problems(packed_shapes, config, profile or workflow_profile or "the profile")
    ready, lines = fail_verdict(ready, lines, "packed submissions would ask for more than their partitions grant", over)
    refusals, warned = preflight(warnings, pending_downloads(config, local_outputs))
    ready, lines = fail_verdict(
        ready, lines, "the real run's preflight refuses it or cannot fetch its inputs", refusals
    )
    lines += warned
    lock = read_lock(lock_path(configfiles))
    failures, warned, notes = login_node_problems(config, every_job, workdir, os.environ if env is None else env, lock)
    ready, lines = fail_verdict(ready, lines, "the run would stop on what this host lacks", failures)
    lines += warned
    failures, warned = gpu_memory_problems(shapes, partitions, config, workdir)
    ready, lines = fail_verdict(ready, lines, "GPU jobs can be given GPUs too small for them", failures)
    lines += warned
    if checkpoint_rules:
        notes.append(
            f"Jobs that {', '.join(checkpoint_rules)} adds once it has run are not in the DAG yet; "
            "they are jobs of the rules above"
        )
    measurements = []
    if sizes is not None:
        measurements, skipped = measure_all(builds, sizes, workdir, scores, on_cluster=True, env=env, streamed=streamed)
        notes += [f"Not measured: {why}" for why in skipped]
        notes.append(f"Measured figures for reprolm plan: {save(measurements, workdir)}")
        flagged = [m for m in measurements if m.flags]
        if flagged:
            if ready:
                lines = ["not ready: data or scoring jobs need more than their request"]
                ready = False
            for m in flagged:
                alike = f", {len(m.jobs)} jobs alike" if m.jobs and len(m.jobs) > 1 else ""
                lines.append(f"- {m.rule} ({m.job}{alike}): {'; '.join(m.flags)}")
                profile_keys = f"set-resources for rule {m.rule} (mem_mb, runtime) in {profile or workflow_profile}"
                lines.append(f"  change: {m.change or profile_keys}")
    run = None
    if stand_in is not None:
        run = run_stand_ins(
            found,
            config,
            workdir,
            [word for option, path in profile_files if path for word in (option, str(path))],
            rules=stand_in.rules,
            hub_mirror=stand_in.hub_mirror,
            env=env,
            timeout=stand_in.timeout_s,
            unstartable={
                (shape.rule, shape.options): f"{shape.verdict}: {shape.answer}"
                for shape in shapes
                if shape.verdict in NEVER_STARTED
            },
        )
        failed = [outcome for outcome in run.outcomes if outcome.status != "ran"]
        if run.stop is not None and run.stop.status == "failed":
            failed.append(run.stop)
        if failed:
            if ready:
                lines = ["not ready: jobs of the stand-in run failed on the cluster"]
                ready = False
            for outcome in failed:
                lines.append(f"- {outcome.rule} ({outcome.job}; {outcome.family}; {outcome.request}): {outcome.detail}")
                lines.append(f"  see: {STAND_IN_DIR / 'snakemake.log'} and the job's log under {STAND_IN_DIR}")
        elif not run.outcomes:
            notes.append("Stand-in run: no job could be stood in (see above)")
    return Rehearsal(shapes, local_jobs, checkpoint_rules, ready, lines, notes, measurements, run)
