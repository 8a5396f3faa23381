"""What each job asks the scheduler for: per base model and stage, with defaults.

Settings are layered, later winning: the project's defaults, the config's top-level
``resources`` (``default``, then the stage's), then the base model's own ``resources``
(``default``, then the stage's). The same layers carry where a job goes on a cluster
(``ROUTING_KEYS``: the SLURM executor plugin's resource names), so a 14B model's jobs can go
to other nodes than gpt2's jobs of the same rule.
"""

from __future__ import annotations

import errno
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path

from reprolm.errors import ConfigError
from reprolm.score.judges import judge_kind
from reprolm.score.metrics import metric_stage
from reprolm.train.objectives import objective_of

STAGE_DEFAULTS = {
    "gpus": 0,
    "threads": 1,
    "mem_mb": 4000,
    "runtime": 60,
    "launcher": "none",
    "precision": "float32",
    "tensor_parallel": False,
    "cpus_per_gpu": 8,
    "stop_warning_s": 300,
    "runtime_over_need": None,
    "runtime_limit": None,
}
# Passed to snakemake-executor-plugin-slurm as they are; unset ones are left to the profile.
ROUTING_KEYS = ("slurm_partition", "slurm_account", "qos", "constraint", "gpu_model")
# One task per job, whatever its GPUs: the job's launcher (torchrun, vLLM) starts the ranks.
# The SLURM plugin 2.6 (the newest a vLLM install resolves by itself) otherwise asks for
# --ntasks-per-gpu=1, a task and its CPUs per GPU; 2.7 and later ask only when told.
TASKS_PER_GPU = 0
# Sizes a retry may grow (config ``retry_growth``); the rest of a job's request never changes.
GROWING_KEYS = {"mem_mb": "max_mem_mb", "runtime": "max_runtime"}


def _layers(config: Mapping, base: str, stage: str) -> list[Mapping]:
    shared = config.get("resources", {})
    own = config["base_models"][base].get("resources", {})
    return [shared.get("default", {}), shared.get(stage, {}), own.get("default", {}), own.get(stage, {})]


def model_settings(config: Mapping, base: str, stage: str) -> dict:
    """Per-base-model settings of a stage (finetune, generate, evaluate, ...), with defaults.
    A GPU job without ``threads`` gets ``cpus_per_gpu`` per GPU: the launcher's ranks and the
    data loaders share them (one CPU would serialise four DeepSpeed ranks' tokenisation)."""
    given: dict = {}
    for layer in _layers(config, base, stage):
        given.update(layer)
    settings = {**STAGE_DEFAULTS, **given}
    if settings["gpus"] and "threads" not in given:
        settings["threads"] = settings["cpus_per_gpu"] * settings["gpus"]
    return settings


def routing(settings: Mapping) -> dict:
    """The cluster placement of a job with these settings, None where unset. A GPU model
    only on jobs granted GPUs: with one set, the plugin would ask for a GPU on any job."""
    placement = {key: settings.get(key) for key in ROUTING_KEYS}
    if not settings.get("gpus"):
        placement["gpu_model"] = None
    return placement


# Where on the cluster a job runs (which nodes), as opposed to who pays for it (account, QoS).
PLACEMENT_KEYS = ("slurm_partition", "constraint")


def job_routing(config: Mapping, base: str, stage: str) -> dict:
    """The cluster placement of ``base``'s ``stage`` jobs, None where unset (the profile's
    ``default-resources`` then apply). A job that asks for no GPU takes its partition and
    constraint only from its own stage's blocks (``resources.{stage}``,
    ``base_models.{base}.resources.{stage}``), never from a ``default`` block, which routes
    the GPU jobs: a CPU score job keeps the CPU jobs' partition however the GPU stages are
    routed."""
    settings = model_settings(config, base, stage)
    placement = routing(settings)
    if not settings["gpus"]:
        own: dict = {}
        if stage != "default":
            for layer in _layers(config, base, stage)[1::2]:
                own.update(layer)
        placement.update({key: own.get(key) for key in PLACEMENT_KEYS})
    return placement


def stop_signal(settings: Mapping) -> str | None:
    """The sbatch option that has SLURM send SIGTERM ``stop_warning_s`` seconds before the
    job's time limit, so a job that saves its progress on it (reprolm.stopping) has that
    long to do so; without it SLURM's SIGTERM at the limit leaves only ``KillWait``."""
    lead = settings["stop_warning_s"]
    return f"--signal=TERM@{lead}" if lead else None


def routed_keys(config: Mapping, stage: str) -> list[str]:
    """The routing keys any layer of the config sets for a stage. Only these are declared on
    the stage's rules: a declared key that a job leaves unset also drops the profile's
    ``default-resources`` value for it, so keys the config never sets stay the profile's."""
    layers = [layer for base in config["base_models"] for layer in _layers(config, base, stage)]
    return [key for key in ROUTING_KEYS if any(key in layer for layer in layers)]


def check_gpu_routing(
    config: Mapping, base: str, stage: str, cpu_partition: str | None, rule_partition: str | None = None
) -> None:
    """Refuse a cluster job of ``base``'s ``stage`` that asks for GPUs but would run where the
    CPU jobs run: without a partition (SLURM's default) or on ``cpu_partition``, the profile's
    ``default-resources`` one. Its partition is the rule's ``set-resources`` one if given, else
    the config's where any layer sets one for the stage (``routed_keys``: then a model without
    one gets none), else the profile's."""
    settings = model_settings(config, base, stage)
    if not settings["gpus"]:
        return
    if rule_partition:
        partition = rule_partition
    elif "slurm_partition" in routed_keys(config, stage):
        partition = settings.get("slurm_partition")
    else:
        partition = cpu_partition
    if partition and partition != cpu_partition:
        return
    if partition:
        where = f"on {partition!r}, the CPU jobs' partition (the profile's default-resources)"
    else:
        where = "without a partition, on SLURM's default one (the CPU jobs')"
    raise ConfigError(
        f"resources.{stage}.slurm_partition (or base_models.{base}.resources.{stage}.slurm_partition): "
        f"{base}'s {stage} jobs ask for {settings['gpus']} GPU(s) and would run {where}; set it to a partition "
        "with GPUs"
    )


def cluster_submission(workflow) -> bool:
    """Whether this Snakemake run submits jobs through a cluster executor (dry runs too), on the
    submitting host. Snakemake 9.27 knows its executor only while executing: in a real run it
    is the cluster's plugin (``local_exec`` False); a dry run's is the ``dryrun`` stand-in, and
    the one trace of the executor asked for is ``use_threads``, which Snakemake turns on for
    every non-local executor (``DAGApi.execute_workflow``) and a local run only with
    ``--force-use-threads``."""
    if workflow.remote_exec or workflow.execution_settings is None:
        return False
    if workflow.dryrun:
        return workflow.execution_settings.use_threads
    return not workflow.local_exec


def command_line_resource(resources: Mapping | None, name: str):
    """A resource of ``--default-resources`` or of one rule's ``--set-resources`` (profile keys
    included), evaluated as Snakemake evaluates them: a Python expression, else its text."""
    from snakemake.resources import Resource

    resource = (resources or {}).get(name)
    if resource is None or not resource.is_evaluable():
        return resource.value if resource is not None else None
    return Resource.cli_evaluator(name, str(resource.raw), wildcards=None, input=(), attempt=1, async_run=None)


def judge_base(config: Mapping, judge: str) -> str | None:
    """The base model whose ``evaluate`` settings a judge's jobs take; None for an endpoint."""
    spec = config["judges"][judge]
    return spec["model"].split("/", 1)[0] if judge_kind(spec).local else None


def judge_settings(config: Mapping, judge: str) -> dict:
    """Resources of a judge's jobs: its reward model's evaluate settings; an endpoint's
    defaults (it only makes requests)."""
    spec = config["judges"][judge]
    if judge_kind(spec).local:
        return model_settings(config, spec["model"].split("/", 1)[0], "evaluate")
    return dict(STAGE_DEFAULTS)


def attempt_size(config: Mapping, key: str, value: int, attempt: int) -> int:
    """``mem_mb`` or ``runtime`` for a job's ``attempt`` (1 first). A retry asks for the same
    by default, since finetunes resume from their checkpoints and a larger request may exceed
    what any partition grants (pending forever); ``retry_growth`` grows it by ``factor`` per
    retry up to its cap."""
    growth = config.get("retry_growth")
    if key not in GROWING_KEYS or not growth or attempt <= 1:
        return value
    grown = int(value * growth["factor"] ** (attempt - 1))
    cap = growth.get(GROWING_KEYS[key])
    return max(value, min(grown, cap)) if cap else grown


def node_count(settings: Mapping) -> int | None:
    """One node for a job of several GPUs (the plugin's ``nodes``: ``--nodes=1``): torchrun
    and vLLM start their workers on the node they run on, so GPUs SLURM granted on another
    node would go unused and a finetune's global batch would shrink. None: left to SLURM."""
    return 1 if settings["gpus"] > 1 else None


# GPU memory a job needs, checked before any job against the config's ``gpu_mem_gb`` (GiB).
# A mixed-precision Adam finetune keeps, per parameter, bf16 weights (2 bytes) and gradients
# (2), and fp32 master weights with Adam's two moments (12); each ZeRO stage shards more of
# them over the job's GPUs (1: the optimizer's, 2: and the gradients, 3: and the weights).
STATE_BYTES = {"weights": 2, "gradients": 2, "optimizer": 12}
ZERO_SHARDED = {0: (), 1: ("optimizer",), 2: ("optimizer", "gradients"), 3: ("optimizer", "gradients", "weights")}
# Activations per trained token with gradient checkpointing, an upper figure for the paper's
# 6-9B models (Llama-3-8B): one bf16 hidden state kept per layer (32 x 4096 x 2 bytes), one
# layer's recomputed activations (~0.3 MiB), and the fp32 logits with their gradient over a
# 128k vocabulary (~1 MiB).
ACTIVATION_BYTES_PER_TOKEN = 2 * 2**20
# CUDA context, NCCL buffers, ZeRO-3's gathered layers and the allocator's fragmentation.
WORKING_GIB = 4.0
# Inference: weights at the stage's precision (split over the GPUs only under tensor
# parallelism), plus the KV cache of a batch of long sequences and vLLM's CUDA graphs.
PRECISION_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "auto": 2}
KV_CACHE_GIB = 4.0


def setting_key(config: Mapping, base: str, stage: str, key: str) -> str:
    """The config key a setting of a base model's stage comes from (the most specific layer
    that sets it), for messages that tell the user what to change."""
    names = ["resources.default", f"resources.{stage}", f"base_models.{base}.resources.default"]
    names.append(f"base_models.{base}.resources.{stage}")
    given = [name for name, layer in zip(names, _layers(config, base, stage)) if key in layer]
    return f"{(given or [f'resources.{stage}'])[-1]}.{key}"


def zero_stage(recipe: Mapping, root: Path) -> int:
    """The ZeRO stage of a recipe's DeepSpeed config (0 without one: all states replicated)."""
    if not recipe.get("deepspeed"):
        return 0
    return int(json.loads((root / recipe["deepspeed"]).read_text()).get("zero_optimization", {}).get("stage", 0))


def finetune_gib(parameters: int, gpus: int, stage: int, recipe: Mapping) -> float:
    """GiB per GPU of a full finetune of ``parameters`` over ``gpus`` GPUs at ZeRO ``stage``;
    a recipe whose objective keeps a frozen reference model (DPO, KTO) adds its weights and
    trains pairs."""
    sharded = ZERO_SHARDED[stage]
    per_param = sum(size / (gpus if part in sharded else 1) for part, size in STATE_BYTES.items())
    paired = objective_of(recipe).reference_model
    if paired:
        per_param += STATE_BYTES["weights"] / (gpus if "weights" in sharded else 1)
    tokens = recipe.get("per_device_train_batch_size", 8) * recipe["max_length"] * (2 if paired else 1)
    return (parameters * per_param + tokens * ACTIVATION_BYTES_PER_TOKEN) / 2**30 + WORKING_GIB


def inference_gib(parameters: int, settings: Mapping) -> float:
    """GiB per GPU of a model's weights at the stage's precision, plus the KV cache."""
    shards = settings["gpus"] if settings["tensor_parallel"] else 1
    return parameters * PRECISION_BYTES[settings["precision"]] / shards / 2**30 + KV_CACHE_GIB


def stage_gpu_needs(
    config: Mapping, base: str, stage: str, parameters: int, trained: set, root: Path
) -> dict[str, float]:
    """What each job shape of a base model's stage needs per GPU (GiB), by its description."""
    settings = model_settings(config, base, stage)
    if stage != "finetune":
        need = inference_gib(parameters, settings)
        return {f"{stage} needs ~{need:.0f} GiB per GPU at {settings['precision']}": need}
    gpus, needs = settings["gpus"], {}
    for name, recipe in config.get("recipes", {}).items():
        if (base, name) in trained:
            zero = zero_stage(recipe, root)
            need = finetune_gib(parameters, gpus, zero, recipe)
            sharding = f"under ZeRO-{zero}" if zero else "without ZeRO"
            needs[f"finetune with recipe {name} needs ~{need:.0f} GiB per GPU with {gpus} GPUs {sharding}"] = need
    return needs


def score_settings(config: Mapping, base: str, metric: str) -> dict:
    """A score job's settings: its metric's stage's (as the metric's entry declares it)."""
    return model_settings(config, base, metric_stage(metric))


# A dataset build reads its sources whole into Python records (the builders shuffle and
# bucket every row, so they cannot stream): the text is held twice (the arrow table and
# Python's strings) and every row costs its dicts, lists and small objects besides. Measured
# once: a schema-true OpenHermes-2.5-sized source (1,001,551 rows, 1,603 MiB of uncompressed
# parquet data, 16 columns) built into tlg peaked at 6,695 MiB RSS in 127 s on a busy 2-core
# machine: 2 bytes per byte of data leaves 3,650 bytes per row. The request rounds both up
# and adds the interpreter with its libraries: ~9.2 GB for OpenHermes (6.7 GiB measured).
BUILD_BYTES_PER_DATA_BYTE = 2.5
BUILD_BYTES_PER_ROW = 4000
BUILD_BASE_MB = 1000
# Time: 0.08 s per MiB of data measured; six times that leaves room for a slow node and for
# builders that bucket and shuffle several sources.
BUILD_SECONDS_PER_MIB = 0.5


def parquet_size(path: str | Path) -> tuple[int, int]:
    """(rows, uncompressed bytes of data) of a parquet file, or of every parquet file in a
    folder, from the files' metadata (compression differs between sources; memory follows
    the data); another file (a score's JSON, a judge's verdicts) counts by its size, with no
    rows. A missing path raises FileNotFoundError naming it."""
    import pyarrow.parquet as pq

    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "no such file or folder", path)
    found = Path(path)
    if found.is_file() and found.suffix != ".parquet":
        return 0, found.stat().st_size
    rows = data = 0
    for file in sorted(found.glob("*.parquet")) if found.is_dir() else [found]:
        metadata = pq.ParquetFile(file).metadata
        rows += metadata.num_rows
        data += sum(metadata.row_group(index).total_byte_size for index in range(metadata.num_row_groups))
    return rows, data


def build_request(inputs: list[str]) -> dict:
    """``mem_mb`` and ``runtime`` of a dataset build from the data it reads; the project's
    defaults where those are larger."""
    sizes = [parquet_size(path) for path in inputs]
    rows, data = sum(rows for rows, _ in sizes), sum(data for _, data in sizes)
    mem_mb = BUILD_BASE_MB + math.ceil((BUILD_BYTES_PER_DATA_BYTE * data + BUILD_BYTES_PER_ROW * rows) / 1e6)
    runtime = math.ceil(BUILD_SECONDS_PER_MIB * data / 2**20 / 60)
    return {"mem_mb": max(STAGE_DEFAULTS["mem_mb"], mem_mb), "runtime": max(STAGE_DEFAULTS["runtime"], runtime)}
