"""An lm-eval suite from config: task specs with local docs, run through the bridge."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from reprolm.provenance.hashing import recorded_hash


def task_specs(suite: Mapping, sources: Mapping[str, str]):
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
        )
        for task in suite["tasks"]
    ]


def run_suite(
    model_path: str,
    suite: Mapping,
    sources: Mapping[str, str],
    *,
    backend: str,
    precision: str,
    seed: int,
    tensor_parallel_size: int = 1,
    nltk_data: Sequence[str] = (),
    samples_output: str | None = None,
    cache_root: str | None = None,
) -> dict:
    """``nltk_data``: NLTK data folders the download rules fetched (IFEval's punkt_tab);
    ``samples_output``: where lm-eval's per-sample log goes (lm_eval_bridge.evaluate_tasks);
    ``cache_root``: where answered requests are kept until the score is written, in a folder
    keyed by the model's content and the suite's settings, so a stopped evaluation resumes
    and a retrained model never reuses another's answers."""
    from reprolm.score.lm_eval_bridge import evaluate_tasks, use_nltk_data

    use_nltk_data(nltk_data)
    lm_backend = "vllm" if backend == "vllm" else "hf"
    specs = task_specs(suite, sources)
    cache = None
    if cache_root is not None:
        key = json.dumps(
            [
                recorded_hash(model_path) or str(Path(model_path).resolve()),
                suite,
                dict(sources),
                lm_backend,
                precision,
                seed,
            ],
            sort_keys=True,
        )
        cache = Path(cache_root) / hashlib.sha256(key.encode()).hexdigest()[:16]
        cache.mkdir(parents=True, exist_ok=True)
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
        samples_output=samples_output,
        response_cache=cache,
    )
    if cache is not None:
        shutil.rmtree(cache, ignore_errors=True)
    # Score files are written with sorted keys; tables follow the suite's own order.
    return {**result, "task_order": [spec.name for spec in specs]}
