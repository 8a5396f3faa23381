"""Evaluate models with lm-eval's own built-in task definitions, optionally on local data.

A task is always lm-eval's built-in configuration (prompt templates, ``process_docs``,
``doc_to_*`` functions, metrics, filters), loaded from its YAML with its ``!function``
references resolved. For local data the only change is where the documents come from:
``dataset_path: parquet`` with ``data_files`` mapping each split the task reads to
``{data_dir}/{split}.parquet``. The resulting config dict goes to ``lm_eval.simple_evaluate``
like any task config. With ``data_dir=None`` the config is left as lm-eval ships it and the
data comes from the hub, so real runs and offline fixture runs share one code path.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache, partial
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from reprolm.data.schemas import DataError
from reprolm.data.upstream import nltk_data_needed, schema_for_task
from reprolm.io import atomic_path
from reprolm.progress import Interval, ProgressCounter, interval

if TYPE_CHECKING:
    from lm_eval.api.model import LM
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.tasks import TaskManager

# lm-eval's default seed for few-shot sampling (and numpy and torch): with it, few-shot
# contexts are the ones the lm-eval CLI builds by default. One seed is given to all of
# lm-eval's generators, so a run is reproducible from the single number recorded.
LM_EVAL_DEFAULT_SEED = 1234
SPLIT_KEYS = ("training_split", "validation_split", "test_split", "fewshot_split")


@dataclass(frozen=True)
class TaskSpec:
    """One evaluation: an lm-eval task, its few-shot count, the metric to report, the data.

    ``metric`` is lm-eval's result key, ``"{metric},{filter}"`` (e.g. ``"acc_norm,none"``,
    ``"exact_match,flexible-extract"``). ``data_dir`` holds ``{split}.parquet`` files in
    the upstream schema; None reads the hub dataset named in the task's YAML.
    ``gen_kwargs`` update the task's own ``generation_kwargs`` (e.g. ``max_gen_toks``).
    ``limit`` caps the evaluated documents for this task, over ``evaluate_tasks(limit=)``.
    """

    name: str
    task: str
    num_fewshot: int
    metric: str
    data_dir: str | Path | None = None
    gen_kwargs: dict[str, Any] | None = field(default=None, hash=False)
    limit: int | None = None
    # Where lm-eval's index puts the task's YAML, relative to lm-eval's tasks folder (the
    # workflow passes it from reprolm.score.task_facts): the job reads that file and never
    # builds the index itself. None: the index is built (about 6 s of CPU).
    yaml: str | None = None


@cache
def task_manager() -> TaskManager:
    """lm-eval's index of built-in tasks; built once per process, since it parses every task
    YAML lm-eval ships (about 6 s of CPU)."""
    from lm_eval.tasks import TaskManager

    return TaskManager()


@cache
def config_task_manager() -> TaskManager:
    """A TaskManager without lm-eval's index: what loading and evaluating a task given as a
    whole config (:func:`task_config`, includes merged) needs."""
    from lm_eval.tasks import TaskManager

    return TaskManager(include_defaults=False)


def tasks_folder() -> Path:
    """The folder of lm-eval's built-in task YAML files."""
    import lm_eval.tasks

    return Path(lm_eval.tasks.__file__).resolve().parent


def task_yaml(task: str) -> str:
    """Where lm-eval's index finds the YAML of ``task``, relative to :func:`tasks_folder`."""
    entry = task_manager().task_index.get(task)
    if entry is None or entry.yaml_path is None:
        raise ValueError(f"lm-eval {version('lm_eval')} has no YAML-defined task {task!r}")
    return Path(entry.yaml_path).resolve().relative_to(tasks_folder()).as_posix()


def builtin_task_config(task: str, resolve_functions: bool = True, yaml: str | None = None) -> dict[str, Any]:
    """lm-eval's own configuration of ``task``: its YAML with includes merged and
    ``!function`` references resolved to the task's Python functions (left as their
    ``module.name`` text without ``resolve_functions``: importing a task's module can run
    code, such as IFEval's NLTK download, that reading its facts does not need). ``yaml``:
    where the task's YAML is (:func:`task_yaml`), else lm-eval's index is asked."""
    return _task_yaml(tasks_folder() / (yaml or task_yaml(task)), resolve_functions)


def leaf_tasks(task: str) -> list[str | dict]:
    """The tasks lm-eval runs for ``task``: itself, or a group's (or tag's) tasks, nested
    groups expanded, from lm-eval's own task files (nothing downloaded). A group's task given
    inline (a config, not a name) is returned as that config."""
    index = task_manager().task_index
    leaves: list = []
    pending, seen = [task], set()
    while pending:
        name = pending.pop(0)
        if isinstance(name, dict):
            leaves.append(name)
            continue
        if name in seen:
            continue
        seen.add(name)
        entry = index.get(name)
        if entry is None:
            raise ValueError(f"lm-eval {version('lm_eval')} has no task or group {name!r} (named by {task!r})")
        subtasks = (entry.cfg or {}).get("task")
        if entry.kind.name == "TAG":
            pending.extend(sorted(other for other, item in index.items() if name in (item.tags or ())))
        elif isinstance(subtasks, list):
            # A subtask is a task's name, a task's name with overrides, or a config of its own.
            pending.extend(
                sub["task"]
                if isinstance(sub, dict) and not sub.get("dataset_path") and isinstance(sub.get("task"), str)
                else sub
                for sub in subtasks
            )
        else:
            leaves.append(name)
    return leaves


def _function_reference(loader, node) -> str:
    return loader.construct_scalar(node)


def _task_yaml(path: Path, resolve_functions: bool = True) -> dict[str, Any]:
    """A task YAML read as lm-eval reads it: ``!function`` through lm-eval's public
    ``utils.import_function``, includes merged under the file's own keys, an include's
    ``task_list`` not inherited. lm-eval 0.4.13 loads task YAML only in a private module
    (``tasks._yaml_loader``), and its public ``TaskManager.load`` downloads the task's data."""
    import yaml
    from lm_eval.utils import import_function

    loader = type("TaskYamlLoader", (yaml.SafeLoader,), {})
    function = partial(import_function, yaml_path=path) if resolve_functions else _function_reference
    loader.add_constructor("!function", function)
    config = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
    includes = config.pop("include", [])
    merged = {}
    for include in [includes] if isinstance(includes, str) else includes:
        included = _task_yaml(path.parent / include, resolve_functions)
        included.pop("task_list", None)
        merged.update(included)
    return merged | config


def eval_split(config: dict[str, Any]) -> str:
    """The split lm-eval scores: the test split if the task has one, else validation."""
    split = config.get("test_split") or config.get("validation_split")
    if split is None:
        raise ValueError(f"lm-eval task {config.get('task')!r} declares neither a test nor a validation split")
    return split


def fewshot_source_split(config: dict[str, Any]) -> str:
    """The split lm-eval draws few-shot examples from, by lm-eval's own precedence: an
    explicit few-shot split, else training, else validation, else test."""
    explicit = (config.get("fewshot_config") or {}).get("split") or config.get("fewshot_split")
    return explicit or config.get("training_split") or config.get("validation_split") or config.get("test_split")


def _local_data_override(spec: TaskSpec, config: dict[str, Any]) -> dict[str, Any]:
    """Config keys that point the task at ``spec.data_dir``.

    The evaluated split must exist, and so must the few-shot split when examples are drawn
    from it. lm-eval's task constructor also reads the few-shot split when no examples are
    drawn, so for a zero-shot run a split that is absent locally is declared absent (None),
    and lm-eval falls back to a split that exists; this changes nothing that is scored.
    """
    data_dir = Path(spec.data_dir)
    evaluated, fewshot_pool = eval_split(config), fewshot_source_split(config)
    needed = {evaluated: "the evaluated documents"}
    if spec.num_fewshot > 0:
        needed.setdefault(fewshot_pool, f"{spec.num_fewshot}-shot examples")
    declared = {config[key] for key in SPLIT_KEYS if config.get(key)} | {fewshot_pool}
    present = {split for split in declared if (data_dir / f"{split}.parquet").is_file()}
    for split, purpose in needed.items():
        if split not in present:
            found = sorted(path.name for path in data_dir.glob("*.parquet")) if data_dir.is_dir() else "folder missing"
            raise FileNotFoundError(
                f"{data_dir}: no {split}.parquet, which lm-eval task {spec.task!r} (spec {spec.name!r}) "
                f"reads for {purpose}; found: {found}"
            )
    if spec.num_fewshot > 0:
        _check_fewshot_pool(spec, data_dir / f"{fewshot_pool}.parquet", same_as_evaluated=fewshot_pool == evaluated)

    override: dict[str, Any] = {
        "dataset_path": "parquet",
        "dataset_name": None,
        "dataset_kwargs": {"data_files": {split: str(data_dir / f"{split}.parquet") for split in sorted(present)}},
    }
    for key in SPLIT_KEYS:
        if config.get(key) and config[key] not in present:
            override[key] = None
    fewshot_config = config.get("fewshot_config") or {}
    if fewshot_config.get("split") and fewshot_config["split"] not in present:
        override["fewshot_config"] = {**fewshot_config, "split": None}
    return override


def _check_fewshot_pool(spec: TaskSpec, path: Path, *, same_as_evaluated: bool) -> None:
    """lm-eval would fail obscurely (or silently use fewer examples) with too small a pool;
    when the pool is the evaluated split, the evaluated document itself is excluded."""
    needed = spec.num_fewshot + int(same_as_evaluated)
    rows = pq.ParquetFile(path).metadata.num_rows
    if rows < needed:
        raise ValueError(
            f"{path}: {rows} documents, but spec {spec.name!r} needs {needed} for {spec.num_fewshot}-shot examples"
        )


def _validate_local_docs(task: str, data_files: dict[str, str]) -> None:
    """Check every row of the local splits against the task's upstream schema, so a bad
    document fails with its file, row and field rather than deep inside lm-eval."""
    schema = schema_for_task(task)
    if schema is None:
        return
    check = schema.check
    for path in data_files.values():
        for row, record in enumerate(pq.read_table(path).to_pylist()):
            problem = check(record)
            if problem:
                raise DataError(path, row, *problem)


def task_config(spec: TaskSpec) -> dict[str, Any]:
    """The config dict evaluated for ``spec``: lm-eval's built-in task config, the few-shot
    count, generation overrides and, for local data, the data source (whose documents are
    checked against the upstream schema here, before any model time is spent)."""
    config = builtin_task_config(spec.task, yaml=spec.yaml)
    fixed_shots = config.get("num_fewshot")
    # lm-eval ignores a requested few-shot count when the YAML pins it to 0 (TruthfulQA's
    # prompt carries its own examples); asking for more is a configuration mistake.
    if fixed_shots == 0 and spec.num_fewshot != 0:
        raise ValueError(
            f"spec {spec.name!r}: lm-eval task {spec.task!r} is defined zero-shot; "
            f"num_fewshot={spec.num_fewshot} cannot apply"
        )
    config["num_fewshot"] = spec.num_fewshot
    if spec.gen_kwargs:
        if config.get("output_type") != "generate_until":
            raise ValueError(
                f"spec {spec.name!r}: gen_kwargs given, but lm-eval task {spec.task!r} is "
                f"{config.get('output_type')!r}, not generate_until"
            )
        config["generation_kwargs"] = {**(config.get("generation_kwargs") or {}), **spec.gen_kwargs}
    if spec.data_dir is not None:
        config.update(_local_data_override(spec, config))
        _validate_local_docs(spec.task, config["dataset_kwargs"]["data_files"])
    unscorable = unscorable_instructions(spec.task)
    if unscorable:
        config["process_docs"] = partial(_without_instructions, frozenset(unscorable))
    return config


def use_nltk_data(folders) -> None:
    """Let NLTK find packages in ``folders`` (fetched by the download rules) before its own
    search path, so a check needing one runs on a node without internet."""
    import nltk

    for folder in reversed([str(folder) for folder in folders]):
        if folder not in nltk.data.path:
            nltk.data.path.insert(0, folder)


def unscorable_instructions(task: str) -> dict[str, str]:
    """The instructions of ``task`` whose check cannot run on this machine, with why.
    Documents carrying one are left out of the evaluation (and counted in its summary)
    rather than failing the run or being scored as failures."""
    import nltk

    missing = {}
    for instruction, resource in nltk_data_needed(task).items():
        try:
            nltk.data.find(resource)
        except LookupError:
            missing[instruction] = (
                f"NLTK's {resource} data is not installed and cannot be downloaded offline "
                f"(install it with `python -m nltk.downloader {resource.split('/')[-1]}`)"
            )
    return missing


def _without_instructions(instructions: frozenset[str], dataset):
    return dataset.filter(lambda doc: not instructions.intersection(doc["instruction_id_list"]))


def _unscored_docs(spec: TaskSpec, config: dict[str, Any], instructions: dict[str, str]) -> dict[str, Any]:
    """What a summary says of left-out instructions: which, why, and (for local data, which
    can be read here) how many evaluated documents carried one."""
    unscored: dict[str, Any] = {"instructions": instructions}
    if spec.data_dir is not None:
        path = config["dataset_kwargs"]["data_files"][eval_split(config)]
        ids = pq.read_table(path, columns=["instruction_id_list"]).column(0).to_pylist()
        unscored["docs"] = sum(bool(set(instructions).intersection(row)) for row in ids)
    return unscored


def build_task(spec: TaskSpec) -> ConfigurableTask:
    """The lm-eval task object for ``spec``, with its documents loaded (e.g. to read the
    documents through the task's own ``doc_to_text`` and ``doc_to_target``)."""
    return config_task_manager().load([task_config(spec)])["tasks"][spec.task]


def hf_placement(gpus: int) -> dict:
    """lm-eval's placement arguments for a checkpoint it loads, given the job's visible GPUs:
    the CPU, one GPU, or the layers spread over all of them (``parallelize``: accelerate's
    device map, one process), as the job was granted."""
    if gpus == 0:
        return {"device": "cpu"}
    return {"device": "cuda"} if gpus == 1 else {"parallelize": True}


def language_model(
    model,
    tokenizer=None,
    *,
    backend: str = "hf",
    batch_size: int | str = 8,
    dtype: str = "auto",
    tensor_parallel_size: int = 1,
    seed: int = LM_EVAL_DEFAULT_SEED,
) -> LM:
    """lm-eval's model wrapper.

    ``hf``: ``model`` is a checkpoint path (loaded on the job's GPUs, or the CPU, in ``dtype``,
    "auto" being the checkpoint's own) or an already-loaded ``transformers`` model, used as it
    is (its placement and dtype), with its ``tokenizer`` (required then).
    ``vllm`` (GPU only, never run on CPU): ``model`` and ``tokenizer`` (or None) must be
    paths, since vLLM loads both itself; its tensor parallelism is ``tensor_parallel_size``.
    """
    from lm_eval.api.registry import get_model

    from reprolm.models.loading import adapter_base, trusts_remote_code, visible_gpus

    if backend == "hf":
        if isinstance(model, (str, Path)):
            # A LoRA adapter folder (peft.save: adapter): lm-eval applies it to its base,
            # with the adapter's tokenizer (a finetune may have grown the vocabulary).
            base = adapter_base(model)
            return get_model("hf")(
                pretrained=base or str(model),
                peft=str(model) if base else None,
                tokenizer=tokenizer or (str(model) if base else None),
                dtype=dtype,
                batch_size=batch_size,
                trust_remote_code=trusts_remote_code(model),
                **hf_placement(visible_gpus()),
            )
        if tokenizer is None:
            raise ValueError("an already-loaded model needs its tokenizer")
        return get_model("hf")(pretrained=model, tokenizer=tokenizer, batch_size=batch_size)
    if backend == "vllm":
        if not isinstance(model, (str, Path)) or not isinstance(tokenizer, (str, Path, type(None))):
            raise TypeError("the vllm backend loads model and tokenizer itself: pass paths, not loaded objects")
        return get_model("vllm")(
            pretrained=str(model),
            tokenizer=None if tokenizer is None else str(tokenizer),
            dtype=dtype,
            batch_size=batch_size,
            tensor_parallel_size=tensor_parallel_size,
            seed=seed,
            trust_remote_code=trusts_remote_code(model),
        )
    raise ValueError(f"unknown backend {backend!r}; known: 'hf', 'vllm'")


def _number_or_none(value) -> float | None:
    """lm-eval reports an uncomputed stderr as "N/A" and an undefined one as NaN; JSON wants null."""
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def _summarise(spec: TaskSpec, config: dict[str, Any], output: dict) -> dict[str, Any]:
    task_results = output["results"][spec.task]
    if spec.metric not in task_results:
        reported = sorted(key for key in task_results if "," in key and "_stderr" not in key)
        raise KeyError(
            f"spec {spec.name!r}: lm-eval task {spec.task!r} reports no {spec.metric!r}; reported: {reported}"
        )
    metric, _, filter_name = spec.metric.partition(",")
    return {
        "task": spec.task,
        "metric": spec.metric,
        "value": _number_or_none(task_results[spec.metric]),
        "stderr": _number_or_none(task_results.get(f"{metric}_stderr,{filter_name}")),
        # lm-eval's metric keys are "{metric},{filter}"; the others ("alias", "name",
        # "sample_len") describe the task, not its scores.
        "metrics": {key: _number_or_none(value) for key, value in task_results.items() if "," in key},
        "n_docs": output["n-samples"][spec.task]["effective"],
        "n_docs_available": output["n-samples"][spec.task]["original"],
        "num_fewshot": output["n-shot"][spec.task],
        # How a generation task answered: greedy or sampled, and how long it could answer.
        "generation_kwargs": config.get("generation_kwargs"),
        "task_version": output["versions"][spec.task],
        "data": str(spec.data_dir)
        if spec.data_dir is not None
        else f"{config['dataset_path']}:{config.get('dataset_name')}",
        "unscored": _unscored_docs(spec, config, unscorable)
        if (unscorable := unscorable_instructions(spec.task))
        else None,
    }


def sample_records(spec: TaskSpec, logged: list[dict], task: str | None = None) -> list[dict]:
    """lm-eval's per-sample log of one task as reprolm keeps it: per document, the spec and
    task (a group's member task, for a group), ``doc_id``, ``values`` (each metric's per-document value, whose mean over documents
    is the reported score), the ``target``, the request ``arguments`` and the model's
    ``filtered_resps``, and lm-eval's hashes of the document and prompt."""
    kept = ("doc_id", "target", "arguments", "filtered_resps", "filter", "doc_hash", "prompt_hash", "target_hash")
    return [
        {
            "spec": spec.name,
            "task": task or spec.task,
            **{key: sample.get(key) for key in kept},
            "values": {metric: sample[metric] for metric in sample.get("metrics", []) if metric in sample},
        }
        for sample in logged
    ]


@cache
def environment_report() -> dict[str, Any]:
    """lm-eval's report of the environment (``add_env_info``: ``torch.utils.collect_env``,
    which runs pip and other subprocesses, about 1.5 s), collected once per process.

    Every ``simple_evaluate`` call attaches it to its results; of those reprolm keeps only
    what lm-eval's W&B logger sends, and within one process the environment does not change,
    so one report serves every evaluation.
    """
    from lm_eval.loggers.utils import add_env_info

    report: dict[str, Any] = {}
    add_env_info(report)
    return report


@contextmanager
def environment_report_once(logged: bool) -> Iterator[None]:
    """Inside this block, lm-eval's evaluations attach :func:`environment_report` instead of
    collecting the report again, or, where no W&B logger sends the results on (``logged``),
    none: nothing would read it. The evaluation is not touched."""
    import lm_eval.evaluator as evaluator

    collect = evaluator.add_env_info
    evaluator.add_env_info = (
        (lambda storage: storage.update(environment_report())) if logged else (lambda storage: None)
    )
    try:
        yield
    finally:
        evaluator.add_env_info = collect


# The parts of simple_evaluate's output keyed by task name.
TASK_KEYED = ("results", "configs", "versions", "n-shot", "higher_is_better", "n-samples", "samples")


def wandb_logger(init_args: Mapping[str, Any]):
    """lm-eval's own W&B logger, attached to the process's W&B run (a Trainer's, in
    train-before-test) or starting one with ``init_args`` (reprolm.train.tracking.evaluation_run)."""
    from lm_eval.loggers import WandbLogger

    return WandbLogger(init_args=dict(init_args))


def log_evaluation(logger, output: Mapping[str, Any], label: str | None = None) -> None:
    """One ``simple_evaluate`` output through lm-eval's W&B logger, as lm-eval's CLI logs
    it: results, their table and artifact, and the per-sample tables where samples were
    logged. ``label`` names the evaluation within its run (``boolq-valid``), so that several
    evaluations of one task in one run keep apart."""
    if label is not None:
        output = {
            key: {f"{task}-{label}": value for task, value in part.items()}
            if key in TASK_KEYED and isinstance(part, Mapping)
            else part
            for key, part in output.items()
        }
    logger.post_init(dict(output))
    logger.log_eval_result()
    if output.get("samples"):
        logger.log_eval_samples(output["samples"])


REQUEST_TYPES = ("loglikelihood", "loglikelihood_rolling", "generate_until")


@contextmanager
def counting_requests(lm: LM, requests_per_line: int) -> Iterator[None]:
    """Inside this block ``lm`` logs the requests it has answered of each call, with rate and
    ETA, every ``requests_per_line`` and at least every interval's seconds
    (reprolm.progress): lm-eval's own progress bar is a tqdm bar, which a log file turns into
    one line of carriage returns. Answers are counted through lm-eval's per-answer hook (the
    cache hook, which its CachingLM replaces: the replacement is counted too); the total is
    the number of requests each call is given (with a response cache, those not cached)."""
    from lm_eval.api.model import CacheHook

    every = Interval(steps=requests_per_line, seconds=interval().seconds)
    counters: dict[str, ProgressCounter] = {}

    class CountingHook(CacheHook):
        def __init__(self, inner: CacheHook):
            self.inner = inner

        def add_partial(self, attr, req, res) -> None:
            self.inner.add_partial(attr, req, res)
            if attr in counters:
                counters[attr].advance()

    def counted(request_type: str):
        answer = getattr(lm, request_type)

        def answer_counting(requests):
            counters[request_type] = ProgressCounter(f"lm-eval {request_type}", len(requests), "requests", every)
            try:
                return answer(requests)
            finally:
                del counters[request_type]

        return answer_counting

    original_hook = lm.cache_hook
    for request_type in REQUEST_TYPES:
        setattr(lm, request_type, counted(request_type))
    lm.set_cache_hook = lambda hook: type(lm).set_cache_hook(lm, CountingHook(hook))
    lm.set_cache_hook(original_hook)
    try:
        yield
    finally:
        for attribute in (*REQUEST_TYPES, "set_cache_hook"):
            delattr(lm, attribute)
        lm.cache_hook = original_hook


def evaluate_tasks(
    model,
    tokenizer,
    tasks: list[TaskSpec],
    *,
    batch_size: int | str = 8,
    dtype: str = "auto",
    limit: int | None = None,
    backend: str = "hf",
    tensor_parallel_size: int = 1,
    seed: int = LM_EVAL_DEFAULT_SEED,
    bootstrap_iters: int = 100_000,
    apply_chat_template: bool = False,
    fewshot_as_multiturn: bool = False,
    samples_output: str | None = None,
    response_cache: str | Path | None = None,
    logger=None,
    log_label: str | None = None,
) -> dict[str, Any]:
    """Evaluate one model on every task through ``lm_eval.simple_evaluate``.

    ``logger``: lm-eval's W&B logger (:func:`wandb_logger`), which each task's output goes
    through as it is evaluated (:func:`log_evaluation`, labelled ``log_label``).

    ``response_cache``: a folder for lm-eval's response cache (``use_cache``, one SQLite file
    per task spec), which keeps every answered request as it is answered: an evaluation that
    was stopped resumes with only the requests it had not answered. lm-eval keys the cache by
    the requests alone, so the folder must be the model's own (see ``run_suite``).

    ``samples_output``: a gzipped JSON-lines file of lm-eval's per-sample log (see
    :func:`sample_records`), so that every score can be audited document by document.

    ``apply_chat_template`` renders each prompt through the tokenizer's chat template, for
    models trained on chat-formatted task text; ``fewshot_as_multiturn`` (with it) makes
    each few-shot example a user and an assistant turn rather than text of one user turn.

    ``model``, ``tokenizer``, ``backend``, ``dtype`` and ``tensor_parallel_size``
    are as in :func:`language_model`. The model is wrapped once and reused for all tasks.
    Each task runs in its own ``simple_evaluate`` call because limits are per call and
    specs may differ in limit.
    Returns ``{"lm_eval_version", "backend", "seed", "tasks": {spec.name: summary}}`` where a
    summary holds the chosen metric's ``value`` and ``stderr`` (None where lm-eval gives no
    finite number), every metric lm-eval reported, ``n_docs`` (evaluated) and
    ``n_docs_available``, the actual ``num_fewshot``, and the task version.
    """
    import lm_eval

    if fewshot_as_multiturn and not apply_chat_template:
        raise ValueError("fewshot_as_multiturn: few-shot examples become chat turns only with apply_chat_template")
    names = [spec.name for spec in tasks]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"task spec names must be unique; repeated: {duplicates}")
    # Fail on a missing split or a bad document before spending time loading the model.
    configs = {spec.name: task_config(spec) for spec in tasks}

    lm = language_model(
        model,
        tokenizer,
        backend=backend,
        batch_size=batch_size,
        dtype=dtype,
        tensor_parallel_size=tensor_parallel_size,
        seed=seed,
    )
    summaries, samples = {}, []
    # A progress line every interval's steps of batches.
    requests_per_line = interval().steps * (batch_size if isinstance(batch_size, int) else 1)
    with environment_report_once(logger is not None), counting_requests(lm, requests_per_line):
        for spec in tasks:
            output = lm_eval.simple_evaluate(
                model=lm,
                tasks=[configs[spec.name]],
                task_manager=config_task_manager(),
                limit=spec.limit if spec.limit is not None else limit,
                bootstrap_iters=bootstrap_iters,
                log_samples=samples_output is not None,
                random_seed=seed,
                use_cache=None if response_cache is None else str(Path(response_cache) / spec.name),
                numpy_random_seed=seed,
                torch_random_seed=seed,
                fewshot_random_seed=seed,
                apply_chat_template=apply_chat_template,
                fewshot_as_multiturn=fewshot_as_multiturn,
            )
            summaries[spec.name] = _summarise(spec, configs[spec.name], output)
            if logger is not None:
                log_evaluation(logger, output, log_label)
            if samples_output is not None:
                # A group (MMLU) logs its documents under each of its tasks.
                for task_name, logged in output["samples"].items():
                    samples.extend(sample_records(spec, logged, task_name))
    if samples_output is not None:
        lines = "".join(json.dumps(record, sort_keys=True, default=str) + "\n" for record in samples)
        with atomic_path(samples_output) as tmp, tmp.open("wb") as raw:
            # No time or file name in the gzip header: the same samples give the same bytes.
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as stream:
                stream.write(lines.encode())
    return {
        "lm_eval_version": version("lm_eval"),
        "backend": backend,
        "seed": seed,
        "apply_chat_template": apply_chat_template,
        "fewshot_as_multiturn": fewshot_as_multiturn,
        "tasks": summaries,
    }
