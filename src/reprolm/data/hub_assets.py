"""What cluster jobs would otherwise fetch from the internet, fetched beforehand.

Many clusters' compute nodes have no internet access. Each function here runs in a download
rule (a Snakemake local rule, on the submitting host) and leaves in ``resources/`` what a
job would read from a hub at run time: an lm-eval task's datasets (in the datasets cache
under ``HF_HOME``, which lm-eval then reads offline, since the task loads its data itself),
NLTK data packages, and snapshots of hub models that are not base models (sentence
encoders).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from reprolm.io import atomic_path
from reprolm.pins import LockError, pinned_commit
from reprolm.provenance.hashing import content_hash
from reprolm.provenance.records import note_read

MANIFEST = "manifest.json"
# Formats other frameworks ship beside PyTorch weights; a sentence encoder needs none of them.
FOREIGN_WEIGHTS = [
    "*.onnx",
    "onnx/*",
    "openvino/*",
    "*.h5",
    "*.msgpack",
    "*.ot",
    "tf_model*",
    "flax_model*",
    "rust_model*",
    "coreml/*",
]


def cache_lm_eval_task(task: str | Mapping, output: str | Path, revisions: Mapping[str, str] | None = None) -> dict:
    """Load ``task`` (a built-in task's name, a group's, or a task config) as lm-eval does,
    which downloads its datasets into the datasets cache; ``output`` records which datasets
    and how many documents per split, so the job that reads them depends on this step and its
    provenance says what was read. ``revisions`` (the lock's commits by hub dataset) reach
    ``datasets.load_dataset`` through each task's ``dataset_kwargs``: a group is loaded as
    its tasks, each pinned."""
    from reprolm.score.lm_eval_bridge import task_manager

    tasks = [task] if not revisions or not isinstance(task, str) else pinned_task_configs(task, revisions)
    for repo, revision in sorted((revisions or {}).items()):
        note_read({"kind": "dataset", "repo": repo, "revision": revision, "read_for": f"lm-eval task {task}"})
    loaded = task_manager().load(tasks)["tasks"]
    manifest = {
        name: {
            "dataset_path": loaded_task.config.dataset_path,
            "dataset_name": loaded_task.config.dataset_name,
            "documents": {split: loaded_task.dataset[split].num_rows for split in sorted(loaded_task.dataset)},
        }
        for name, loaded_task in sorted(loaded.items())
    }
    with atomic_path(output) as tmp:
        tmp.mkdir()
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def pinned_task_configs(task: str, revisions: Mapping[str, str]) -> list:
    """The configs of the tasks lm-eval runs for ``task`` (a group's, expanded), each hub
    dataset's ``dataset_kwargs`` given its locked revision."""
    from reprolm.score.lm_eval_bridge import builtin_task_config, leaf_tasks

    configs = []
    for leaf in leaf_tasks(task):
        config = dict(leaf) if isinstance(leaf, dict) else builtin_task_config(leaf)
        revision = revisions.get(config.get("dataset_path"))
        if revision:
            config["dataset_kwargs"] = {**(config.get("dataset_kwargs") or {}), "revision": revision}
        configs.append(config)
    return configs


def download_nltk_package(package: str, output: str | Path, locked: str | None = None) -> None:
    """An NLTK data package (e.g. ``punkt_tab``, which IFEval's sentence counts need) as an
    NLTK data folder; its archive's sha256 checked against the lock's (``locked``)."""
    import nltk

    with atomic_path(output) as tmp:
        if not nltk.download(package, download_dir=str(tmp), quiet=True, raise_on_error=True):
            raise RuntimeError(f"NLTK could not download {package!r}")
        archives = sorted(tmp.glob(f"*/{package}.zip"))
        digest = content_hash(archives[0]) if archives else None
        if locked and digest != locked:
            raise LockError(
                f"NLTK package {package!r}: archive sha256 {digest} differs from the lock's {locked} "
                f"(re-lock it deliberately: reprolm lock --update {package})"
            )
        note_read({"kind": "nltk", "package": package, "sha256": digest})


def download_hub_model(repo_id: str, output: str | Path, revision: str | None = None) -> None:
    """A hub model's files with its PyTorch weights (a sentence encoder: modules, pooling
    config, tokenizer)."""
    from huggingface_hub import snapshot_download

    with atomic_path(output) as tmp:
        try:
            revision = pinned_commit("model", repo_id, revision)
            snapshot_download(repo_id=repo_id, revision=revision, local_dir=str(tmp), ignore_patterns=FOREIGN_WEIGHTS)
        except OSError as error:  # the hub's HTTP errors and offline misses alike
            raise OSError(f"hub model {repo_id!r} could not be downloaded: {error}") from error
        note_read({"kind": "model", "repo": repo_id, "revision": revision})
