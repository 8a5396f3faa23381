"""What the workflow must know of an lm-eval task before any job runs (whether it has a
training split, which metrics it reports), answered from a small cache.

lm-eval's task index takes seconds to build, too slow for every DAG build; the answers only
change with the lm-eval version, so they are cached per version.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import cache
from importlib.metadata import version
from pathlib import Path

FIELDS = {"training_split", "metrics", "yaml"}


def _facts(task: str) -> dict:
    from reprolm.score.lm_eval_bridge import builtin_task_config, task_yaml

    yaml = task_yaml(task)
    config = builtin_task_config(task, resolve_functions=False, yaml=yaml)
    if "group" in config:
        # A group (MMLU) reports its aggregate metrics, each under its own filters.
        metrics = [
            f"{m['metric']},{f}"
            for m in config.get("aggregate_metric_list") or []
            for f in m.get("filter_list") or ["none"]
        ]
    else:
        filters = [f["name"] for f in config.get("filter_list") or []] or ["none"]
        metrics = [f"{m['metric']},{f}" for m in config.get("metric_list") or [] for f in filters]
    return {"training_split": bool(config.get("training_split")), "metrics": metrics, "yaml": yaml}


@cache
def _lm_eval_version() -> str:
    return version("lm_eval")


@cache
def _stored(path: Path, stamp: tuple[int, int]) -> dict:
    """The cache file's content, read once per version of it (``stamp``: its mtime and size):
    a DAG build asks for the facts of each task setting."""
    return json.loads(path.read_text())


def task_facts(tasks: Iterable[str], cache: str | Path) -> dict[str, dict]:
    """``{task: {"training_split": bool, "metrics": ["acc,none", ...], "yaml": path}}``; a
    metric is named as lm-eval reports it, ``{metric},{filter}`` (``none`` for a task without
    filters); ``yaml``: the task's YAML, relative to lm-eval's tasks folder."""
    cache = Path(cache)
    key = f"lm_eval=={_lm_eval_version()}"
    stat = cache.stat() if cache.exists() else None
    stored = _stored(cache.resolve(), (stat.st_mtime_ns, stat.st_size)) if stat else {}
    # (facts written before a field was added are asked again)
    known = {
        task: facts for task, facts in stored.get(key, {}).items() if isinstance(facts, dict) and FIELDS <= set(facts)
    }
    tasks = list(dict.fromkeys(tasks))
    missing = [task for task in tasks if task not in known]
    if missing:
        for task in missing:
            known[task] = _facts(task)
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({**stored, key: known}, indent=2, sort_keys=True) + "\n")
    return {task: known[task] for task in tasks}


def refuse_tasks_without_training_split(tasks: list[dict], cache: str | Path, where: str) -> None:
    """Fail before any job runs if a configured task cannot be trained on."""
    facts = task_facts([t["task"] for t in tasks], cache)
    refused = [t["name"] for t in tasks if not facts[t["task"]]["training_split"]]
    if refused:
        usable = [t["name"] for t in tasks if facts[t["task"]]["training_split"]]
        raise ValueError(
            f"{where}: tasks without a training split cannot be trained on: {refused}; "
            f"configured tasks that have one: {usable}"
        )


def refuse_metrics_not_reported(tasks: Mapping[str, Mapping], cache: str | Path) -> None:
    """``tasks``: config key -> task setting with ``task`` and ``metric``. Fail before any job
    runs if lm-eval's task does not report the configured metric, which would otherwise fail
    only after the evaluation ran."""
    facts = task_facts([t["task"] for t in tasks.values()], cache)
    for where, task in tasks.items():
        reported = facts[task["task"]]["metrics"]
        if task["metric"] not in reported:
            raise ValueError(
                f"{where}.metric: lm-eval's task {task['task']!r} does not report "
                f"{task['metric']!r}; it reports {reported}"
            )


def task_yamls(tasks: Iterable[str], cache: str | Path) -> dict[str, str]:
    """Where lm-eval's YAML of each task is (relative to its tasks folder), for the jobs that
    evaluate them: they read it without building lm-eval's index of every task."""
    return {task: facts["yaml"] for task, facts in task_facts(tasks, cache).items()}
