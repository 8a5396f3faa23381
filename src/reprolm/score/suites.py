"""An lm-eval suite from config: task specs with local docs, run through the bridge."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from reprolm.provenance.hashing import recorded_hash
from reprolm.train.tracking import evaluation_run, run_name


def task_specs(suite: Mapping, sources: Mapping[str, str], task_yamls: Mapping[str, str] | None = None):
    """``task_yamls``: lm-eval task -> its YAML (reprolm.score.task_facts.task_yamls)."""
    from reprolm.score.lm_eval_bridge import TaskSpec

    return [
        TaskSpec(
            name=task["name"],
            task=task["task"],
            num_fewshot=task["num_fewshot"],
            metric=task["metric"],
            data_dir=sources[task["source"]] if task.get("source") else None,
            gen_kwargs=task.get("gen_kwargs"),
            limit=task.get("limit"),
            yaml=(task_yamls or {}).get(task["task"]),
        )
        for task in suite["tasks"]
    ]


def run_suite(
    model_path: str,
    suite: Mapping,
    sources: Mapping[str, str],
    *,
    task_yamls: Mapping[str, str] | None = None,
    backend: str,
    precision: str,
    seed: int,
    tensor_parallel_size: int = 1,
    nltk_data: Sequence[str] = (),
    samples_output: str | None = None,
    cache_root: str | None = None,
    tracking: Mapping | None = None,
    artifact: str | None = None,
) -> dict:
    """``nltk_data``: NLTK data folders the download rules fetched (IFEval's punkt_tab);
    ``samples_output``: where lm-eval's per-sample log goes (lm_eval_bridge.evaluate_tasks);
    ``cache_root``: where answered requests are kept until the score is written, in a folder
    keyed by the model's content and the suite's settings (:func:`suite_key`), so a stopped
    evaluation resumes and a retrained model never reuses another's answers;
    ``task_yamls``: where lm-eval's YAML of each task is (read without lm-eval's index);
    ``tracking``: the config's ``tracking``: with ``report_to`` naming wandb, the results go
    through lm-eval's own W&B logger to a run named after ``artifact`` (the score file) and
    the same key (reprolm.train.tracking.run_name)."""
    from reprolm.score.lm_eval_bridge import evaluate_tasks, use_nltk_data, wandb_logger

    use_nltk_data(nltk_data)
    lm_backend = "vllm" if backend == "vllm" else "hf"
    specs = task_specs(suite, sources, task_yamls)
    key = suite_key(model_path, suite, sources, lm_backend, precision, seed)
    cache = None
    if cache_root is not None:
        cache = Path(cache_root) / key
        cache.mkdir(parents=True, exist_ok=True)
    run = evaluation_run(tracking or {}, run_name(artifact or model_path, key), job_type="lm_eval")
    logger = wandb_logger(run) if run else None
    result = evaluate_tasks(
        model_path,
        None,
        specs,
        batch_size=suite.get("batch_size", 8),
        backend=lm_backend,
        dtype=precision,
        tensor_parallel_size=tensor_parallel_size,
        seed=seed,
        apply_chat_template=suite.get("apply_chat_template", False),
        fewshot_as_multiturn=suite.get("fewshot_as_multiturn", False),
        samples_output=samples_output,
        response_cache=cache,
        logger=logger,
    )
    if logger is not None:
        logger.run.finish()
    if cache is not None:
        shutil.rmtree(cache, ignore_errors=True)
    # Score files are written with sorted keys; tables follow the suite's own order.
    return {**result, "task_order": [spec.name for spec in specs]}


def suite_key(
    model_path: str, suite: Mapping, sources: Mapping[str, str], backend: str, precision: str, seed: int
) -> str:
    """What an evaluation's scores are made of, hashed: the model's content hash (from its
    provenance record), the suite, its task data, the lm-eval backend, precision and seed."""
    material = [
        recorded_hash(model_path) or str(Path(model_path).resolve()),
        suite,
        dict(sources),
        backend,
        precision,
        seed,
    ]
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]
