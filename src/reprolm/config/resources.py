"""What each job asks the scheduler for: per base model and stage, with defaults.

Settings are layered, later winning: the project's defaults, the config's top-level
``resources`` (``default``, then the stage's), then the base model's own ``resources``
(``default``, then the stage's). The same layers carry where a job goes on a cluster
(``ROUTING_KEYS``: the SLURM executor plugin's resource names), so a 14B model's jobs can go
to other nodes than gpt2's jobs of the same rule.
"""

from __future__ import annotations

from collections.abc import Mapping

from reprolm.config.errors import ConfigError
from reprolm.score.judges import LOCAL_JUDGES

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
}
# Passed to snakemake-executor-plugin-slurm as they are; unset ones are left to the profile.
ROUTING_KEYS = ("slurm_partition", "slurm_account", "qos", "constraint", "gpu_model")
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
    return spec["model"].split("/", 1)[0] if spec["kind"] in LOCAL_JUDGES else None


def judge_settings(config: Mapping, judge: str) -> dict:
    """Resources of a judge's jobs: its reward model's evaluate settings; an endpoint's
    defaults (it only makes requests)."""
    spec = config["judges"][judge]
    if spec["kind"] in LOCAL_JUDGES:
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
