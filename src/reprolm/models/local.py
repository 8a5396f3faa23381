"""A researcher's own checkpoint folder as a base model (``base_models.*.path``): checked
before any job, linked into ``resources/models/{base}`` and known by its content hash, so
that new content in the folder reruns what was made from it.

Light on imports: the workflow asks for the hash while it builds the DAG.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from reprolm.io import atomic_path, link_or_copy
from reprolm.provenance.hashing import content_files, file_sha256, manifest_hash, provenance_path

# What transformers needs to load a checkpoint: its config, and a tokenizer in one of the
# forms it reads (fast tokenizer file, its config, or a SentencePiece model).
CHECKPOINT_CONFIG = "config.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")
# What peft saves a LoRA adapter with (:mod:`reprolm.models.loading` reads the same name).
ADAPTER_CONFIG = "adapter_config.json"


def local_checkpoint_problem(path: str | os.PathLike) -> str | None:
    """What keeps ``path`` from serving as a base model, or None."""
    folder = Path(path)
    if not folder.is_dir():
        return f"{path}: no such folder (paths are relative to the working directory, {Path.cwd()})"
    if (folder / ADAPTER_CONFIG).is_file():
        return (
            f"{path}: a LoRA adapter folder, which base_models.*.path does not take yet; merge it into its base "
            "(peft's merge_and_unload, then save_pretrained with the tokenizer) and name the merged folder"
        )
    if not (folder / CHECKPOINT_CONFIG).is_file():
        return f"{path}: no {CHECKPOINT_CONFIG}; name a folder saved by save_pretrained"
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        return f"{path}: no tokenizer (one of {', '.join(TOKENIZER_FILES)}); save the tokenizer into the folder"
    return None


def _recorded_files(registered: str | os.PathLike) -> dict[str, list]:
    """The registered folder's ``{relative: [size, mtime_ns, sha256]}`` from its record."""
    record = provenance_path(registered)
    if not Path(registered).is_dir() or not record.is_file():
        return {}
    outputs = json.loads(record.read_text()).get("outputs", [])
    return outputs[0].get("files", {}) if len(outputs) == 1 else {}


def local_checkpoint_hash(path: str | os.PathLike, registered: str | os.PathLike) -> str:
    """The content hash of the checkpoint folder ``path``, as its registered copy's record
    would give it. Files whose size and time match that record (hard links share them;
    copies keep them) take the recorded hash; only new or changed files are read."""
    recorded = _recorded_files(registered)
    hashes = {}
    for relative, item in content_files(Path(path)):
        stat = item.stat()
        known = recorded.get(relative)
        same = known is not None and (known[0], known[1]) == (stat.st_size, stat.st_mtime_ns)
        hashes[relative] = [0, 0, known[2] if same else file_sha256(item)]
    return manifest_hash(hashes)


def register_local_checkpoint(path: str | os.PathLike, output: str | os.PathLike) -> int:
    """The checkpoint folder's content files (not a provenance record or Trainer
    checkpoints it may hold) hard-linked, or copied where links are refused, as ``output``;
    the number of files back."""
    problem = local_checkpoint_problem(path)
    if problem:
        raise ValueError(problem)
    files = content_files(Path(path))
    with atomic_path(output) as tmp:
        for relative, item in files:
            (tmp / relative).parent.mkdir(parents=True, exist_ok=True)
            link_or_copy(item, tmp / relative)
    return len(files)
