"""What a job needs: the cost model ``reprolm plan`` prices a run with, and the runtime a job
asks the scheduler for from it (where the config says to size requests from need).

Each job is estimated by a model of its stage (:func:`estimate_job`):

- finetune: ``6 x N x T`` FLOPs for ``N`` parameters and ``T`` trained tokens, ``T`` =
  optimizer steps x batch x accumulation x GPUs x ``max_length`` when the recipe sets
  ``max_steps``, else epochs x dataset rows x ``max_length`` (every example counted at the
  recipe's full length: an upper bound that calibration corrects);
- a study's own step, by the study (:meth:`reprolm.studies.Study.job_flops`; LM-Harmony's
  train_before_test: ``6 x N x`` (training documents x epochs x ``max_length``) plus
  ``2 x N x`` (validation and test documents x (epochs + 1) x ``max_length``));
- generate: ``2 x N x`` prompts x samples x (``PROMPT_TOKENS`` + ``max_new_tokens``);
- a model judge's job (the rule's ``judged``, :class:`reprolm.stages.RuleStage`): ``2 x N x``
  rows x answers a row x the tokens its kind reads forward for one answer
  (:attr:`reprolm.score.judges.JudgeKind.forward_tokens`; a generation's answer is
  ``PROMPT_TOKENS`` + ``max_new_tokens``, a dataset row's is bounded by the judge's
  ``max_length``), ``N`` the judge's own model (:func:`job_model`);
- pretrain (a built tiny model): ``6 x N x`` steps x batch x block size;
- extrapolate and merge (weight arithmetic, streamed tensor by tensor): two checkpoints read
  and one written, ``3 x 4 x N`` bytes at ``STREAM_BYTES_PER_S``.

Time is FLOPs / (the device's peak x its utilisation, ``DEVICES``), after reading the model's
weights (``2 x N`` bytes at ``STREAM_BYTES_PER_S``); every job the model prices also starts
(``JOB_START_SECONDS``: its interpreter, Snakemake and imports on the node). Jobs the model does not
cover (lm-eval suites, released-verdict judging, GPU scores, a set of unknown size) are
bounded by what they ask the scheduler for, marked ``requested``; CPU jobs get
``CPU_JOB_SECONDS``. A job that ``reprolm rehearse --sizes`` ran at the papers' sizes takes
its measured wall time (``MEASURED``).

Rows are the config's (``rows``, ``num``) until the dataset is built; a job sized when it is
about to run (Snakemake evaluates resources again once a job's inputs exist) counts the rows
its dataset was built with (:class:`BuiltRows`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from reprolm.config.lookups import promptset_spec, recipe_spec
from reprolm.config.resources import attempt_size, judge_base
from reprolm.errors import ConfigError
from reprolm.models.parameters import model_parameters
from reprolm.paths import dataset_dir
from reprolm.score.judges import judge_kind
from reprolm.stages import RuleStage, rule_stage, stage_of
from reprolm.studies import job_flops

# Dense bf16 peak FLOP/s and the share of it a job reaches (training; a judge's batched
# forward passes, padding included; generation, bound by decoding). The CPU figure is per
# core of a current server CPU in float32. Training on Hopper: bench/gpu_smoke measured 27 %
# on an H200 (a 1.24B Llama through our recipe path, 2048 tokens, gradient checkpointing, bf16
# autocast; bench/RESULTS.md); 7-8B models spend less of a step in elementwise kernels, so
# 30 %, where 40 % (H200) and 35 % (H100) were assumed before any GPU ran. The H100 has the
# H200's compute and less memory bandwidth.
DEVICES = {
    "h100": {"peak": 989e12, "train": 0.30, "forward": 0.30, "generate": 0.10},
    "h200": {"peak": 989e12, "train": 0.30, "forward": 0.35, "generate": 0.12},
    "a100": {"peak": 312e12, "train": 0.40, "forward": 0.35, "generate": 0.10},
    "cpu": {"peak": 50e9, "train": 0.20, "forward": 0.20, "generate": 0.05},
}
PROMPT_TOKENS = 256
# A CPU job's own work (a score, a table), and what every job spends before it: its
# interpreter, Snakemake and the job's imports on the node.
CPU_JOB_SECONDS = 30.0
JOB_START_SECONDS = 60.0
# Bytes per parameter held on the GPUs: a finetune keeps float32 weights, gradients and two
# Adam moments (ZeRO shards them over the job's GPUs); inference holds bf16 weights.
TRAINING_BYTES, INFERENCE_BYTES = 16, 2
# A finetune keeps two checkpoints (weights and optimizer, 12 bytes/param) and the final
# float32 weights.
CHECKPOINT_BYTES = 2 * 12 + 4


@dataclass
class PlannedJob:
    rule: str
    wildcards: dict
    inputs: list[str]
    outputs: list[str]
    gpus: int = 0
    runtime_min: float = 0.0
    stage: str = ""
    seconds: float = 0.0
    basis: str = ""
    peak_gpu_gb: float = 0.0
    checkpoint_gb: float = 0.0
    after: list[int] = field(default_factory=list)

    @property
    def gpu_seconds(self) -> float:
        return self.seconds * self.gpus


# Extrapolation and merges stream checkpoints (float32 at most: 4 bytes a parameter, two read
# and one written) at a network file system's single-stream rate; a job that runs a model
# first reads its weights (bf16) at that rate.
STREAMED_STAGES = ("extrapolate", "merge")
STREAMED_BYTES_PER_PARAMETER = 3 * 4
STREAM_BYTES_PER_S = 200e6
LOAD_BYTES_PER_PARAMETER = 2
# What ``reprolm rehearse --sizes`` measured, per rule and job.
MEASURED = Path("results") / "rehearsal" / "sizes.json"
# A request from need is never under this many minutes (SLURM counts whole minutes, and a job
# starts its interpreter and Snakemake on the node first).
MIN_RUNTIME_MIN = 2


class BuiltRows(Mapping):
    """Rows of each dataset built under ``root`` (the most of its splits), read from its
    parquet files' metadata when first asked for. A split that cannot be read (a build cut
    short, which Snakemake makes again before any job reads it) does not count: a resource
    lookup must not fail the run over a size. Iterating gives the datasets asked for so far."""

    def __init__(self, root: Path):
        self.root, self._rows = root, {}

    def __getitem__(self, dataset: str) -> int:
        if dataset not in self._rows:
            splits = sorted((self.root / dataset_dir(dataset)).glob("*.parquet"))
            self._rows[dataset] = max(filter(None, map(_parquet_rows, splits)), default=None)
        if self._rows[dataset] is None:
            raise KeyError(dataset)
        return self._rows[dataset]

    def __iter__(self):
        return iter(dataset for dataset, rows in self._rows.items() if rows is not None)

    def __len__(self) -> int:
        return sum(rows is not None for rows in self._rows.values())


def _parquet_rows(path: Path) -> int | None:
    """A parquet file's rows from its footer; None where it cannot be read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path).metadata.num_rows
    except (pa.ArrowException, OSError):
        return None


def job_model(config: Mapping, wildcards: Mapping) -> str | None:
    """The base model a job runs: a judge's job runs its judge's own model (its ``base``
    wildcard names the model judged), an API judge's none; else its ``base``."""
    if "judge" in wildcards:
        return judge_base(config, wildcards["judge"])
    base = wildcards.get("base")
    return base if base in config.get("base_models", {}) else None


def judged_tokens(
    config: Mapping, wildcards: Mapping, entry: RuleStage, built: Mapping[str, int], root: Path
) -> int | None:
    """The tokens a model judge's job reads forward (rows x answers x its kind's tokens per
    answer); None where a count is unknown."""
    spec = config["judges"][wildcards["judge"]]
    per_answer = judge_kind(spec).forward_tokens
    if entry.judged == "promptset":
        promptset = promptset_spec(config, wildcards["promptset"])
        sampling = promptset.get("sampling", {})
        rows = dataset_rows(config, promptset["dataset"], built)
        rows = rows * sampling.get("n", 1) if rows else None
        answer = PROMPT_TOKENS + sampling["max_new_tokens"]
    else:
        rows, answer = dataset_rows(config, wildcards["dataset"], built), None
    try:
        tokens = per_answer(spec, answer, root) if per_answer else None
    except ValueError as error:  # a judge file that cannot be read (e.g. FLR's follow-ups)
        raise ConfigError(f"judges.{wildcards['judge']}: {error}") from error
    return rows * entry.answers * tokens if rows and tokens else None


def dataset_rows(config: Mapping, dataset: str, built: Mapping[str, int]) -> int | None:
    """Rows of a dataset: as this config built it (:func:`built_rows`), else the config's count."""
    if dataset in built:
        return built[dataset]
    spec = config.get("datasets", {}).get(dataset, {})
    params = spec.get("params", {})
    for key in ("rows", "num"):
        if key in spec or key in params:
            return int(spec.get(key, params.get(key)))
    return None


def estimate_job(
    job: PlannedJob, config: Mapping, device: Mapping, size: int | None, built: Mapping[str, int], root: Path
) -> None:
    """Fill the job's seconds, basis, peak GPU memory and checkpoint disk (``size``: the
    parameters of the model it runs, :func:`job_model`; ``built``: the rows of the datasets
    this config built, :func:`reprolm.plan.built_rows` or :class:`BuiltRows`)."""
    requested = job.runtime_min * 60
    flops, kind = None, "train"
    wildcards = job.wildcards
    entry = rule_stage(job.rule)
    if size and job.stage == "finetune":
        recipe = recipe_spec(config, wildcards["recipe"])
        if recipe.get("max_steps"):
            examples = (
                recipe["max_steps"]
                * recipe.get("per_device_train_batch_size", 1)
                * recipe.get("gradient_accumulation_steps", 1)
                * max(1, job.gpus)
            )
        else:
            rows = dataset_rows(config, recipe["dataset"], built)
            examples = rows * recipe.get("num_train_epochs", 1) if rows else None
        if examples:
            flops = 6 * size * examples * recipe["max_length"]
        job.checkpoint_gb = size * CHECKPOINT_BYTES / 1e9
    elif size and job.stage == "pretrain":
        pretrain = config["base_models"][wildcards["base"]]["build"]["pretrain"]
        flops = 6 * size * pretrain["steps"] * pretrain["batch_size"] * pretrain["block_size"]
    elif size and job.stage == "generate" and not entry.api:
        promptset = promptset_spec(config, wildcards["promptset"])
        prompts = dataset_rows(config, promptset["dataset"], built)
        sampling = promptset.get("sampling", {})
        if prompts:
            flops = 2 * size * prompts * sampling.get("n", 1) * (PROMPT_TOKENS + sampling["max_new_tokens"])
            kind = "generate"
    elif size and entry.judged and not entry.api:
        tokens = judged_tokens(config, wildcards, entry, built, root)
        flops = 2 * size * tokens if tokens else None
        kind = "forward"
    elif size and job.stage in STREAMED_STAGES:
        streamed = STREAMED_BYTES_PER_PARAMETER * size / STREAM_BYTES_PER_S
        job.seconds, job.basis = JOB_START_SECONDS + streamed, "bytes streamed"
        return
    elif size:
        flops = job_flops(config, job.rule, wildcards, size)
    if size:
        training = entry.trains
        held = size * (TRAINING_BYTES if training else INFERENCE_BYTES)
        job.peak_gpu_gb = held / max(1, job.gpus if training else 1) / 1e9 if job.gpus else 0.0
    if flops is not None:
        work = flops / (device["peak"] * device[kind] * max(1, job.gpus if job.gpus else 1))
        job.seconds = JOB_START_SECONDS + LOAD_BYTES_PER_PARAMETER * size / STREAM_BYTES_PER_S + work
        job.basis = "tokens x parameters"
    elif job.gpus:
        job.seconds, job.basis = requested, "requested"
    else:
        job.seconds, job.basis = JOB_START_SECONDS + CPU_JOB_SECONDS, "per-job figure"


def apply_measurements(jobs: list[PlannedJob], root: Path) -> int:
    """Jobs the rehearsal measured take its wall time; how many did."""
    path = root / MEASURED
    if not path.is_file():
        return 0
    try:
        figures = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"{path}: not the JSON `reprolm rehearse --sizes` writes ({error}); rerun it, or delete the file"
        ) from error
    measured = 0
    for job in jobs:
        figure = figures.get(job.rule, {}).get("/".join(job.wildcards.values()))
        if figure:
            job.seconds, job.basis = figure["seconds"], "measured by the rehearsal"
            measured += 1
    return measured


def job_device(settings: Mapping) -> str:
    """The device a job's need is modelled on: a GPU job's ``gpu_model`` where the model knows
    it, else the slowest GPU it knows (a request sized for it holds on faster ones); the CPU
    for a job that asks for no GPU."""
    if not settings.get("gpus"):
        return "cpu"
    named = str(settings.get("gpu_model") or "").lower()
    if named in DEVICES and named != "cpu":
        return named
    gpus = [name for name in DEVICES if name != "cpu"]
    return min(gpus, key=lambda name: DEVICES[name]["peak"] * DEVICES[name]["train"])


def modelled_need(config: Mapping, rule: str, wildcards: Mapping, settings: Mapping, root: Path) -> PlannedJob:
    """One job as the cost model prices it (the rows of the datasets built under ``root``,
    else the config's; the rehearsal's measurements), on :func:`job_device`."""
    job = PlannedJob(rule, dict(wildcards), [], [], gpus=int(settings.get("gpus") or 0), stage=stage_of(rule))
    model = job_model(config, wildcards)
    size = model_parameters(config, model, root)[0] if model else None
    estimate_job(job, config, DEVICES[job_device(settings)], size, BuiltRows(root), root)
    apply_measurements([job], root)
    return job


@dataclass(frozen=True)
class RuntimeRequest:
    minutes: int
    # Attempts the job needs under ``runtime_limit`` (a job that resumes where it stopped).
    attempts: int = 1
    need_s: float | None = None  # None: not sized from need


def runtime_request(config: Mapping, rule: str, wildcards: Mapping, settings: Mapping, root: Path) -> RuntimeRequest:
    """The minutes a job asks for. Where its settings give ``runtime_over_need`` and the cost
    model sizes the job (not only bounds it by its request): that many times its modelled
    need, at least ``MIN_RUNTIME_MIN``, plus ``stop_warning_s`` for a job that saves its
    progress on SLURM's warning and resumes (its rule's entry: ``resumes``); such a job asks
    for at most ``runtime_limit`` and runs as several attempts (Snakemake's retries). Else its
    ``runtime``."""
    factor = settings.get("runtime_over_need")
    if not factor:
        return RuntimeRequest(settings["runtime"])
    job = modelled_need(config, rule, wildcards, settings, root)
    if job.basis.startswith("requested") or job.seconds <= 0:
        return RuntimeRequest(settings["runtime"])
    resumes = rule_stage(rule).resumes
    lead = settings["stop_warning_s"] if resumes else 0
    minutes = max(MIN_RUNTIME_MIN, math.ceil((factor * job.seconds + lead) / 60))
    limit = settings.get("runtime_limit")
    if not (resumes and limit and minutes > limit):
        return RuntimeRequest(minutes, 1, job.seconds)
    # Each attempt works until the warning, then saves.
    attempts = math.ceil(factor * job.seconds / max(60 * limit - lead, 60))
    return RuntimeRequest(limit, attempts, job.seconds)


def job_size(
    config: Mapping, key: str, rule: str, wildcards: Mapping, settings: Mapping, attempt: int, root: Path
) -> int:
    """A job's ``mem_mb`` or ``runtime`` resource for its ``attempt`` (what the workflow's
    resource lookups return): the runtime from :func:`job_runtime`, the memory as its settings
    give it, grown by the config's ``retry_growth``."""
    if key == "runtime":
        return job_runtime(config, rule, wildcards, settings, attempt, root)
    return attempt_size(config, key, settings[key], attempt)


def job_runtime(config: Mapping, rule: str, wildcards: Mapping, settings: Mapping, attempt: int, root: Path) -> int:
    """The runtime resource of a job's ``attempt``: :func:`runtime_request`, grown by the
    config's ``retry_growth``; a job that resumes never asks for more than ``runtime_limit``
    (its next attempt goes on from where this one stopped)."""
    request = runtime_request(config, rule, wildcards, settings, root)
    minutes = attempt_size(config, "runtime", request.minutes, attempt)
    limit = settings.get("runtime_limit")
    return min(minutes, limit) if limit and rule_stage(rule).resumes else minutes
