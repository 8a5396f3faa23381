"""Every distinct sbatch request of a cluster run, judged by the cluster before any job runs.

Each job's request is the one snakemake-executor-plugin-slurm builds: its own
``get_submit_command`` and ``set_gres_string``, with the partition and account arguments from
its executor's own methods, assembled as its ``Executor.run_job`` does. Jobs whose requests
differ only in what names the job (name, log file, comment) share a shape; each shape is
checked against its partition's limits (a request over one would pend forever on a cluster
that does not enforce them at submission) and then by SLURM itself with ``sbatch
--test-only``, which schedules nothing.
"""

from __future__ import annotations

import logging
import re
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from snakemake_interface_common.exceptions import WorkflowError

from reprolm.config.resources import attempt_size, model_settings
from reprolm.need import runtime_request
from reprolm.score.judges import judge_kind
from reprolm.stages import rule_stage

# The options that name one job rather than ask for resources.
JOB_NAMING = frozenset({"--job-name", "--output", "--comment", "-D", "--parsable", "--export"})
# Options the plugin writes with their value as the next word.
SEPARATE_VALUE = frozenset(
    {"-p", "-A", "-t", "-C", "-D", "--mem", "--mem-per-cpu", "--job-name", "--output", "--comment", "--clusters"}
)
COLUMNS = {
    "-p": "partition",
    "-A": "account",
    "--qos": "qos",
    "-C": "constraint",
    "--gpus": "gpus",
    "--gres": "gres",
    "--cpus-per-task": "cpus/task",
    "--cpus-per-gpu": "cpus/gpu",
    "--mem": "mem MB",
    "-t": "time min",
    "--nodes": "nodes",
}
# The workflow config's resource key behind each option, for the jobs of stages the config
# sizes (docs/configuration-keys.md, the `resources` block).
CONFIG_KEYS = {
    "-p": "slurm_partition",
    "-A": "slurm_account",
    "--qos": "qos",
    "-C": "constraint",
    "--gpus": "gpus",
    "--gres": "gpus",
    "--mem": "mem_mb",
    "-t": "runtime",
    "--nodes": "nodes",
    "--cpus-per-task": "threads",
    "--cpus-per-gpu": "cpus_per_gpu",
}
# Snakemake's resource behind each option, for the jobs of other rules (the profile's
# default-resources or set-resources).
PROFILE_KEYS = {**CONFIG_KEYS, "--gpus": "gpu", "--gres": "gres", "--cpus-per-task": "threads (set-threads)"}
# What SLURM's refusals are about, by the words of its message.
REASON_OPTIONS = (
    ("partition", ("-p",)),
    ("account", ("-A",)),
    ("qos", ("--qos",)),
    ("feature", ("-C",)),
    ("time limit", ("-t",)),
    ("memory", ("--mem",)),
    ("processors", ("--cpus-per-task", "--cpus-per-gpu")),
    ("node count", ("--nodes",)),
    ("gres", ("--gpus", "--gres")),
)
NODE_CONFIGURATION = ("--gpus", "--gres", "--mem", "--cpus-per-task", "--cpus-per-gpu", "--nodes", "-C")
STARTS = re.compile(r"Job \d+ to start at (\S+) using (\d+) processors on nodes (\S+) in partition (\S+)")
# Names the request's job; the cluster never sees it run.
REHEARSAL_JOB_NAME = "reprolm-rehearsal"
# Resources the plugin sends that a dry run leaves to be determined (Snakemake's TBDString)
# when they come from inputs not made yet; the plugin then leaves them out of the request.
SIZED_FROM_INPUTS = ("mem_mb", "mem_mb_per_cpu", "runtime")
SIZED_AT_RUN_TIME = "sized at run time"
ACCEPTED, OVER_LIMIT, REJECTED = "accepted", "over limit", "rejected"
# The verdicts of requests the cluster would leave pending (or refuse) for ever.
NEVER_STARTED = (OVER_LIMIT, REJECTED)


@dataclass(frozen=True)
class Request:
    """One job's sbatch request: the command line, or why the plugin would not build one."""

    rule: str
    job: str
    call: str = ""
    refused: str = ""
    sources: frozenset = frozenset()
    # Its memory or time comes from inputs not made yet.
    pending: bool = False

    @property
    def options(self) -> tuple[tuple[str, str | None], ...]:
        return tuple(option for option in sbatch_options(self.call) if option[0] not in JOB_NAMING)


@dataclass
class Shape:
    """Requests alike in everything but the job's name, and the cluster's answer."""

    rule: str
    options: tuple[tuple[str, str | None], ...]
    refused: str
    pending: bool = False
    jobs: list[str] = field(default_factory=list)
    call: str = ""
    sources: set = field(default_factory=set)
    verdict: str = ""
    answer: str = ""
    problem_options: tuple[str, ...] = ()

    def value(self, option: str) -> str | None:
        return dict(self.options).get(option)


def sbatch_options(call: str) -> list[tuple[str, str | None]]:
    """(option, value) pairs of an sbatch command line (``--wrap`` and the script excluded)."""
    words = shlex.split(call)[1:]
    options: list[tuple[str, str | None]] = []
    index = 0
    while index < len(words):
        word = words[index]
        if word.startswith("--wrap") or not word.startswith("-"):
            break
        if "=" in word:
            option, value = word.split("=", 1)
            options.append((option, value))
        elif word in SEPARATE_VALUE:
            options.append((word, words[index + 1]))
            index += 1
        else:
            options.append((word, None))
        index += 1
    return options


def group_shapes(requests: Sequence[Request]) -> list[Shape]:
    """One shape per rule and distinct request, in the order first seen, with its jobs."""
    shapes: dict[tuple, Shape] = {}
    for request in requests:
        key = (request.rule, request.options, request.refused, request.pending)
        shape = shapes.setdefault(
            key, Shape(request.rule, request.options, request.refused, request.pending, call=request.call)
        )
        shape.jobs.append(request.job)
        shape.sources |= request.sources
    return list(shapes.values())


# Building the requests, with the plugin's own code.


def resource_sources(config: Mapping, rule: str, wildcards: Mapping) -> frozenset:
    """(stage, base model) whose config resources size a job of ``rule``; none for rules
    the profile sizes."""
    entry = rule_stage(rule)
    judge = config.get("judges", {}).get(wildcards.get("judge", ""))
    if judge and judge_kind(judge).local and not entry.api:
        return frozenset({("evaluate", judge["model"].split("/", 1)[0])})
    if entry.resources and "base" in wildcards:
        return frozenset({(entry.resources, wildcards["base"])})
    return frozenset()


def plugin_requests(dag, logger: logging.Logger | None = None, packed: bool = False) -> list[Request]:
    """Each submitted job's sbatch command line as the installed SLURM plugin builds it;
    ``packed``: each packed submission's instead (a group job's: its members' largest GPUs,
    memory and CPUs and the sum of their runtimes), named by its group."""
    from snakemake.common.tbdstring import TBDString
    from snakemake_executor_plugin_slurm import Executor
    from snakemake_executor_plugin_slurm.partitions import read_partition_file
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import get_job_wildcards, set_gres_string
    from snakemake_executor_plugin_slurm.validation import validate_slurm_extra

    settings = dag.executor_settings
    # The executor's partition and account methods, on an executor that is never started
    # (starting one starts its job-status thread); these are the attributes they read.
    executor = Executor.__new__(Executor)
    executor.logger = logger or logging.getLogger(__name__)
    executor._partitions = read_partition_file(settings.partition_config) if settings.partition_config else None
    executor._fallback_partition = None
    executor._fallback_account_arg = None
    logdir = Path(settings.logdir) if settings.logdir else dag.workdir / ".snakemake" / "slurm_logs"
    if packed:
        units = {group: next(iter(group.jobs)) for group in dag.groups.values()}
    else:
        units = {job: job for job in dag.jobs}
    requests = []
    for job, member in units.items():
        wildcards = get_job_wildcards(job)
        rule = member.rule.name
        label = wildcards or job.name
        sources = resource_sources(dag.config, member.rule.name, dict(member.wildcards_dict))
        kind = "group" if packed else "rule"
        try:
            validate_slurm_extra(job)
            params = {
                "run_uuid": REHEARSAL_JOB_NAME,
                "slurm_logfile": logdir / f"{kind}_{job.name}" / wildcards / "%j.log",
                "comment_str": f"{kind}_{job.name}" + (f"_wildcards_{wildcards}" if wildcards else ""),
                "account": next(executor.get_account_arg(job)),
                "partition": executor.get_partition_arg(job),
                "workdir": dag.workdir,
            }
            call = get_submit_command(job, params, settings=settings) + set_gres_string(job)
            pending = any(isinstance(job.resources.get(key), TBDString) for key in SIZED_FROM_INPUTS)
            requests.append(Request(rule, label, call=call, sources=sources, pending=pending))
        except WorkflowError as error:
            requests.append(Request(rule, label, refused=str(error).strip(), sources=sources))
    return requests


# The cluster: its partitions' limits, then sbatch --test-only.


@dataclass
class Node:
    name: str
    cpus: int
    memory_mb: int
    gpus: dict[str, int]
    # Its features (constraints select nodes by them; some name its GPUs' memory).
    features: frozenset[str] = frozenset()

    @property
    def gpu_count(self) -> int:
        return sum(self.gpus.values())


@dataclass
class Partition:
    name: str
    max_minutes: int | None
    max_nodes: int | None
    max_mem_per_node_mb: int | None
    default: bool
    nodes: list[Node] = field(default_factory=list)


def scontrol_records(text: str) -> list[dict[str, str]]:
    """``scontrol show ... --oneliner`` output: one dict of its key=value fields a line."""
    records = []
    for line in text.splitlines():
        fields = re.findall(r"(\w+)=(\S*)", line)
        if fields:
            records.append(dict(fields))
    return records


def parse_gres(gres: str) -> dict[str, int]:
    """GPUs by type ("" when untyped) of a node's ``Gres`` (``gpu:h100:8(S:0-1),...``)."""
    gpus: dict[str, int] = {}
    for item in gres.split(","):
        parts = re.sub(r"\(.*?\)", "", item).split(":")
        if parts[0] == "gpu" and len(parts) >= 2 and parts[-1].isdigit():
            kind = parts[1] if len(parts) == 3 else ""
            gpus[kind] = gpus.get(kind, 0) + int(parts[-1])
    return gpus


def _limit(value: str | None) -> int | None:
    return None if value in (None, "", "UNLIMITED", "INFINITE", "NONE") else int(value)


def read_partitions(partition_text: str, node_text: str) -> dict[str, Partition]:
    """Partitions and their nodes from ``scontrol show partition|node --oneliner``."""
    from snakemake_executor_plugin_slurm.utils import parse_time_to_minutes

    partitions = {}
    for record in scontrol_records(partition_text):
        max_time = record.get("MaxTime", "UNLIMITED")
        partitions[record["PartitionName"]] = Partition(
            name=record["PartitionName"],
            max_minutes=None if max_time in ("UNLIMITED", "INFINITE") else parse_time_to_minutes(max_time),
            max_nodes=_limit(record.get("MaxNodes")),
            max_mem_per_node_mb=_limit(record.get("MaxMemPerNode")),
            default=record.get("Default") == "YES",
        )
    for record in scontrol_records(node_text):
        node = Node(
            name=record["NodeName"],
            cpus=int(record.get("CPUTot", 0)),
            memory_mb=int(record.get("RealMemory", 0)),
            gpus=parse_gres(record.get("Gres", "")),
            features=frozenset(
                feature for feature in record.get("AvailableFeatures", "").split(",") if feature not in ("", "(null)")
            ),
        )
        for name in record.get("Partitions", "").split(","):
            if name in partitions:
                partitions[name].nodes.append(node)
    return partitions


def gpu_request(shape: Shape) -> tuple[int, str]:
    """(GPUs, type or "") the request asks for."""
    for option in ("--gpus", "--gres"):
        value = shape.value(option)
        if value:
            parts = value.removeprefix("gpu:").split(":") if option == "--gres" else value.split(":")
            if option == "--gres" and not value.startswith("gpu"):
                continue
            count = int(parts[-1]) if parts[-1].isdigit() else 1
            return count, parts[0] if len(parts) == 2 else ""
    return 0, ""


def limit_problems(shape: Shape, partition: Partition) -> list[tuple[str, str]]:
    """(option, why) for each limit of ``partition`` that the request exceeds."""
    from snakemake_executor_plugin_slurm.utils import parse_time_to_minutes

    name = partition.name
    problems = []
    if shape.value("-t") and partition.max_minutes is not None:
        minutes = parse_time_to_minutes(shape.value("-t"))
        if minutes > partition.max_minutes:
            problems.append(
                ("-t", f"runtime {minutes} min is over partition {name}'s MaxTime of {partition.max_minutes} min")
            )
    nodes = int(shape.value("--nodes") or 1)
    # Without --nodes, SLURM may spread a job's GPUs over nodes; one task's CPUs never.
    one_node = shape.value("--nodes") == "1"
    if partition.max_nodes is not None and nodes > partition.max_nodes:
        problems.append(("--nodes", f"{nodes} nodes is over partition {name}'s MaxNodes of {partition.max_nodes}"))
    if not partition.nodes:
        return problems
    memory = int(shape.value("--mem") or 0)
    largest = max(node.memory_mb for node in partition.nodes)
    if partition.max_mem_per_node_mb:
        largest = min(largest, partition.max_mem_per_node_mb)
    if memory > largest:
        problems.append(("--mem", f"{memory} MB of memory a node is over the {largest} MB of partition {name}'s nodes"))
    gpus, kind = gpu_request(shape)
    if gpus:
        have = [node.gpus.get(kind, 0) if kind else node.gpu_count for node in partition.nodes]
        of_kind = f" of type {kind}" if kind else ""
        if not any(have):
            types = sorted({t for node in partition.nodes for t in node.gpus}) or ["none"]
            problems.append(
                ("--gpus", f"partition {name}'s nodes have no GPUs{of_kind} (GPU types: {', '.join(types)})")
            )
        elif one_node and gpus > max(have):
            problems.append(
                ("--gpus", f"{gpus} GPUs{of_kind} on one node; partition {name}'s nodes have at most {max(have)}")
            )
        elif gpus > sum(have):
            problems.append(("--gpus", f"{gpus} GPUs{of_kind}; partition {name} has {sum(have)} in all"))
    cpus = int(shape.value("--cpus-per-task") or 0) or int(shape.value("--cpus-per-gpu") or 0) * max(gpus, 1)
    most = max(node.cpus for node in partition.nodes)
    if cpus > most and (one_node or shape.value("--cpus-per-task")):
        option = "--cpus-per-task" if shape.value("--cpus-per-task") else "--cpus-per-gpu"
        problems.append((option, f"{cpus} CPUs on one node; partition {name}'s nodes have at most {most}"))
    return problems


def retry_problems(
    shapes: Sequence[Shape], partitions: Mapping[str, Partition], config: Mapping, attempts: int
) -> list[str]:
    """Verdict lines for the shapes whose last attempt (the profile's ``retries`` + 1), grown
    by the config's ``retry_growth``, asks for more time or memory than its partition grants:
    the first attempt passes, the retry would wait in the queue for ever. Only shapes the
    config sizes grow (the profile's ``default-resources`` ask for the same each attempt)."""
    from snakemake_executor_plugin_slurm.utils import parse_time_to_minutes

    if attempts <= 1 or not config.get("retry_growth"):
        return []
    default = next((p for p in partitions.values() if p.default), None)
    lines = []
    for shape in shapes:
        if shape.verdict != ACCEPTED or not shape.sources:
            continue
        partition = partitions.get(shape.value("-p")) if shape.value("-p") else default
        if partition is None:
            continue
        over = []
        if shape.value("-t") and partition.max_minutes is not None:
            minutes = attempt_size(config, "runtime", parse_time_to_minutes(shape.value("-t")), attempts)
            if rule_stage(shape.rule).resumes:
                minutes = _resuming_runtime(config, shape, minutes)
            if minutes > partition.max_minutes:
                over.append(
                    (
                        "retry_growth.max_runtime",
                        f"runtime {minutes} min, over partition {partition.name}'s MaxTime of "
                        f"{partition.max_minutes} min",
                    )
                )
        if shape.value("--mem") and partition.nodes:
            largest = max(node.memory_mb for node in partition.nodes)
            if partition.max_mem_per_node_mb:
                largest = min(largest, partition.max_mem_per_node_mb)
            memory = attempt_size(config, "mem_mb", int(shape.value("--mem")), attempts)
            if memory > largest:
                over.append(("retry_growth.max_mem_mb", f"{memory} MB of memory, over the {largest} MB of its nodes"))
        if over:
            lines.append(
                f"- {shape.rule} ({_examples(shape)}): its attempt {attempts} (retry_growth) asks for "
                + " and ".join(why for _, why in over)
            )
            lines.append(f"  change: {'; '.join(key for key, _ in over)} (or the profile's retries)")
    return lines


def _resuming_runtime(config: Mapping, shape: Shape, minutes: int) -> int:
    """A resuming job's grown runtime as it asks for it: never past its ``runtime_limit``
    (:func:`reprolm.need.job_runtime`)."""
    models = config.get("base_models", {})
    limits = [model_settings(config, base, stage)["runtime_limit"] for stage, base in shape.sources if base in models]
    return min(minutes, max(limits)) if limits and all(limits) else minutes


def attempt_problems(dag) -> list[str]:
    """Verdict lines for the jobs sized from need (``runtime_over_need``) that would need more
    attempts under ``runtime_limit`` than the profile's retries give (each attempt saves on
    SLURM's warning and the next resumes), by rule."""
    short: dict[str, list[tuple[str, int]]] = {}
    for job in dag.jobs:
        entry = rule_stage(job.rule.name)
        wildcards = dict(job.wildcards_dict)
        if not (entry.resumes and entry.resources and wildcards.get("base") in dag.config.get("base_models", {})):
            continue
        settings = model_settings(dag.config, wildcards["base"], entry.resources)
        request = runtime_request(dag.config, job.rule.name, wildcards, settings, dag.workdir)
        if request.attempts > dag.attempts:
            short.setdefault(job.rule.name, []).append(("_".join(map(str, wildcards.values())), request.attempts))
    lines = []
    for rule, jobs in short.items():
        names = ", ".join(name for name, _ in jobs[:3]) + (", ..." if len(jobs) > 3 else "")
        most = max(attempts for _, attempts in jobs)
        lines.append(
            f"- {rule} ({len(jobs)} jobs: {names}): needs up to {most} attempts under runtime_limit "
            f"(each saves on SLURM's warning and the next resumes); the profile's retries give {dag.attempts}"
        )
        lines.append(f"  change: the profile's retries (to {most - 1}), or runtime_limit if a partition allows longer")
    return lines


def sbatch_test_only(call: str, env: Mapping | None = None, timeout: float = 60) -> tuple[bool, str]:
    """SLURM's answer to the request (``sbatch --test-only``: nothing is queued)."""
    words = shlex.split(call)
    result = subprocess.run(
        [words[0], "--test-only", *words[1:], "--wrap=true"],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=None if env is None else dict(env),
    )
    text = (result.stderr + result.stdout).strip()
    started = STARTS.search(text)
    if result.returncode == 0 and started:
        _, cpus, nodes, partition = started.groups()
        return True, f"would start on {nodes} ({cpus} CPUs) in {partition}"
    lines = [line for line in text.splitlines() if line.strip()]
    reason = lines[-1] if lines else f"sbatch exited {result.returncode}"
    return False, re.sub(r"^(sbatch: error: |allocation failure: )", "", reason.strip())


def reason_options(reason: str, shape: Shape) -> tuple[str, ...]:
    lowered = reason.lower()
    for words, options in REASON_OPTIONS:
        if words in lowered:
            return options
    return tuple(option for option in NODE_CONFIGURATION if shape.value(option))


def judge(shapes: Sequence[Shape], partitions: Mapping[str, Partition], env: Mapping | None = None) -> None:
    """Set each shape's verdict: ``accepted``, ``over limit`` (not sent to sbatch) or
    ``rejected``, with SLURM's words or the limit, and the options at fault."""
    default = next((p for p in partitions.values() if p.default), None)
    for shape in shapes:
        if shape.refused:
            shape.verdict, shape.answer = REJECTED, f"the SLURM plugin refuses it: {shape.refused}"
            continue
        if shape.pending:
            shape.verdict = SIZED_AT_RUN_TIME
            shape.answer = "its request comes from its inputs, not made yet (see the sizes, --sizes)"
            continue
        partition = partitions.get(shape.value("-p")) if shape.value("-p") else default
        problems = limit_problems(shape, partition) if partition else []
        if problems:
            shape.verdict = OVER_LIMIT
            shape.answer = "; ".join(why for _, why in problems)
            shape.problem_options = tuple(dict.fromkeys(option for option, _ in problems))
            continue
        accepted, shape.answer = sbatch_test_only(shape.call, env)
        shape.verdict = ACCEPTED if accepted else REJECTED
        if not accepted:
            shape.problem_options = reason_options(shape.answer, shape)


# The verdict: what to change.


def _config_layers(config: Mapping, base: str, stage: str) -> list[tuple[str, Mapping]]:
    shared = config.get("resources", {})
    own = config.get("base_models", {}).get(base, {}).get("resources", {})
    return [
        ("resources.default", shared.get("default", {})),
        (f"resources.{stage}", shared.get(stage, {})),
        (f"base_models.{base}.resources.default", own.get("default", {})),
        (f"base_models.{base}.resources.{stage}", own.get(stage, {})),
    ]


def config_key(config: Mapping, base: str, stage: str, key: str) -> str:
    """The config key that sets ``key`` for a base model's stage: the most specific layer
    that sets it, else the stage's shared layer."""
    for path, layer in reversed(_config_layers(config, base, stage)):
        if key in layer:
            return f"{path}.{key}"
    return f"resources.{stage}.{key}"


def _sized_by(config: Mapping, base: str, stage: str, option: str, shape: Shape) -> str:
    """The config key behind an option; a GPU job's CPUs are cpus_per_gpu per GPU unless a
    layer sets threads; the time of a job that resumes and is sized from need is capped by
    runtime_limit (its runtime is not read)."""
    key = CONFIG_KEYS[option]
    layers = [layer for _, layer in _config_layers(config, base, stage)]
    if key == "threads" and shape.value("--gpus") and not any(key in layer for layer in layers):
        return "cpus_per_gpu"
    sized_from_need = any("runtime_over_need" in layer for layer in layers)
    if key == "runtime" and sized_from_need and rule_stage(shape.rule).resumes:
        return "runtime_limit"
    return key


def keys_to_change(shape: Shape, config: Mapping, profile: str) -> list[str]:
    """Where to change what the cluster refused: config keys for the stages the config
    sizes, the profile's resources for the rest."""
    keys = []
    for option in shape.problem_options:
        if shape.sources:
            keys += sorted(
                {
                    config_key(config, base, stage, _sized_by(config, base, stage, option, shape))
                    for stage, base in shape.sources
                }
            )
        else:
            resource = PROFILE_KEYS.get(option, option)
            keys.append(f"{resource} in {profile}'s default-resources, or set-resources for rule {shape.rule}")
    if not shape.problem_options:
        keys.append(f"the resources of rule {shape.rule}")
    return list(dict.fromkeys(keys))


def table(shapes: Sequence[Shape]) -> pd.DataFrame:
    """One line per shape: the rule, its jobs, what it asks for and the cluster's answer."""
    rows = []
    for shape in shapes:
        options = dict(shape.options)
        row = {"rule": shape.rule, "jobs": len(shape.jobs)}
        row.update({column: options.get(option) or "" for option, column in COLUMNS.items()})
        row["other"] = " ".join(
            option if value is None else f"{option}={value}"
            for option, value in shape.options
            if option not in COLUMNS and option not in ("--ntasks",)
        )
        row.update(verdict=shape.verdict, answer=shape.answer)
        rows.append(row)
    frame = pd.DataFrame(rows)
    return frame.loc[
        :, [c for c in frame.columns if c in ("rule", "jobs", "verdict", "answer") or (frame[c] != "").any()]
    ]


def _examples(shape: Shape) -> str:
    return f"{len(shape.jobs)} jobs: " + ", ".join(shape.jobs[:3]) + (", ..." if len(shape.jobs) > 3 else "")


def packed_problems(packed: Sequence[Shape], config: Mapping, profile: str) -> list[str]:
    """What the packed submissions' requests (:func:`plugin_requests` ``packed``) would meet
    that their jobs' own requests would not: a group's runtime is its jobs' sum."""
    lines = []
    for shape in packed:
        if shape.verdict in NEVER_STARTED:
            groups = ", ".join(shape.jobs[:3]) + (", ..." if len(shape.jobs) > 3 else "")
            lines.append(
                f"- {shape.rule}, packed ({len(shape.jobs)} submissions: {groups}): {shape.verdict}: {shape.answer}"
            )
            keys = keys_to_change(shape, config, profile)
            lines.append(
                f"  change: {'; '.join(keys)} (a packed submission asks for the sum of its jobs' runtimes), "
                f"or a smaller count for its group in {profile}'s group-components"
            )
    return lines


def verdict(shapes: Sequence[Shape], config: Mapping, profile: str) -> tuple[bool, list[str]]:
    """(ready, lines): every shape accepted, or what will fail and the key to change."""
    failing = [shape for shape in shapes if shape.verdict not in (ACCEPTED, SIZED_AT_RUN_TIME)]
    later = [shape for shape in shapes if shape.verdict == SIZED_AT_RUN_TIME]
    judged = [shape for shape in shapes if shape.verdict != SIZED_AT_RUN_TIME]
    jobs = sum(len(shape.jobs) for shape in judged)
    if failing:
        head = (
            f"not ready: {len(failing)} of {len(judged)} job shapes "
            f"({sum(len(s.jobs) for s in failing)} of {jobs} jobs) will fail"
        )
    else:
        head = f"ready: the cluster accepts all {len(judged)} job shapes ({jobs} jobs)"
    if later:
        head += (
            f"; {sum(len(s.jobs) for s in later)} jobs of {', '.join(sorted({s.rule for s in later}))} are "
            "sized at run time from inputs not made yet (rehearse again once they exist)"
        )
    lines = [head]
    for shape in failing:
        lines.append(f"- {shape.rule} ({_examples(shape)}): {shape.verdict}: {shape.answer}")
        lines.append(f"  change: {'; '.join(keys_to_change(shape, config, profile))}")
    return not failing, lines
