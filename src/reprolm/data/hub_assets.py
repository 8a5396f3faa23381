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


def cache_lm_eval_task(task: str | Mapping, output: str | Path) -> dict:
    """Load ``task`` (a built-in task's name, a group's, or a task config) as lm-eval does,
    which downloads its datasets into the datasets cache; ``output`` records which datasets
    and how many documents per split, so the job that reads them depends on this step and its
    provenance says what was read."""
    from reprolm.score.lm_eval_bridge import task_manager

    loaded = task_manager().load([task])["tasks"]
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


def download_nltk_package(package: str, output: str | Path) -> None:
    """An NLTK data package (e.g. ``punkt_tab``, which IFEval's sentence counts need) as an
    NLTK data folder."""
    import nltk

    with atomic_path(output) as tmp:
        if not nltk.download(package, download_dir=str(tmp), quiet=True, raise_on_error=True):
            raise RuntimeError(f"NLTK could not download {package!r}")


def download_hub_model(repo_id: str, output: str | Path, revision: str | None = None) -> None:
    """A hub model's files with its PyTorch weights (a sentence encoder: modules, pooling
    config, tokenizer)."""
    from huggingface_hub import snapshot_download

    with atomic_path(output) as tmp:
        try:
            snapshot_download(repo_id=repo_id, revision=revision, local_dir=str(tmp), ignore_patterns=FOREIGN_WEIGHTS)
        except OSError as error:  # the hub's HTTP errors and offline misses alike
            raise OSError(f"hub model {repo_id!r} could not be downloaded: {error}") from error
