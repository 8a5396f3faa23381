"""What cluster jobs would otherwise fetch from the internet, fetched beforehand.

Many clusters' compute nodes have no internet access. Each function here runs in a download
rule (a Snakemake local rule, on the submitting host) and leaves in ``resources/`` what a
job would read from a hub at run time: NLTK data packages and snapshots of hub models that
are not base models (sentence encoders); an lm-eval task's datasets:
:func:`reprolm.score.lm_eval_bridge.cache_lm_eval_task`.
"""

from __future__ import annotations

from pathlib import Path

from reprolm.io import atomic_path

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
