"""Which lm-eval tasks have a training split, answered from a small cache.

lm-eval's task index takes seconds to build, too slow for every DAG build; the answer only
changes with the lm-eval version, so it is cached per version.
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path


def training_split_table(tasks: list[str], cache: str | Path) -> dict[str, bool]:
    cache = Path(cache)
    key = f"lm_eval=={version('lm_eval')}"
    stored = json.loads(cache.read_text()) if cache.exists() else {}
    known = stored.get(key, {})
    missing = [task for task in tasks if task not in known]
    if missing:
        from reprolm.score.lm_eval_bridge import builtin_task_config

        for task in missing:
            known[task] = bool(builtin_task_config(task).get("training_split"))
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({**stored, key: known}, indent=2, sort_keys=True) + "\n")
    return {task: known[task] for task in tasks}


def refuse_tasks_without_training_split(tasks: list[dict], cache: str | Path, where: str) -> None:
    """Fail before any job runs if a configured task cannot be trained on."""
    table = training_split_table([t["task"] for t in tasks], cache)
    refused = [t["name"] for t in tasks if not table[t["task"]]]
    if refused:
        usable = [t["name"] for t in tasks if table[t["task"]]]
        raise ValueError(f"{where}: tasks without a training split cannot be trained on: {refused}; "
                         f"configured tasks that have one: {usable}")
