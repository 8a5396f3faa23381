"""A researcher's own checkpoint folder or LoRA adapter as a base model
(``base_models.*.path``): checked before any job, and known by its content hash, so that
new content in the folder reruns what was made from it. A checkpoint folder is linked into
``resources/models/{base}``; an adapter is merged into its base there (rule
``adapter_base_model``), a plain checkpoint that every stage, vLLM and ExPO included, loads.

Light on imports: the workflow asks for the hashes while it builds the DAG.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from reprolm.io import atomic_path, link_or_copy
from reprolm.paths import REMOTE_CODE_MARKER, base_model_dir
from reprolm.provenance.hashing import content_files, content_hash, file_sha256, manifest_hash, provenance_path

# What transformers needs to load a checkpoint: its config, and a tokenizer in one of the
# forms it reads (fast tokenizer file, its config, or a SentencePiece model).
CHECKPOINT_CONFIG = "config.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")
# What peft saves a LoRA adapter with (:mod:`reprolm.models.loading` reads the same name).
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
# The adapter's record of the checkpoint it was trained on.
ADAPTER_BASE_FIELD = "base_model_name_or_path"


def is_adapter(path: str | os.PathLike) -> bool:
    return (Path(path) / ADAPTER_CONFIG).is_file()


def has_tokenizer(folder: str | os.PathLike) -> bool:
    return any((Path(folder) / name).is_file() for name in TOKENIZER_FILES)


def _adapter_problem(path: str | os.PathLike) -> str | None:
    folder = Path(path)
    try:
        recorded = json.loads((folder / ADAPTER_CONFIG).read_text()).get(ADAPTER_BASE_FIELD)
    except (ValueError, UnicodeDecodeError) as error:
        return f"{path}: {ADAPTER_CONFIG} is not JSON ({error})"
    if not isinstance(recorded, str) or not recorded:
        return f"{path}: {ADAPTER_CONFIG} names no {ADAPTER_BASE_FIELD}; set base_models.*.adapter_base"
    if not any((folder / name).is_file() for name in ADAPTER_WEIGHTS):
        return f"{path}: a LoRA adapter folder without its weights (one of {', '.join(ADAPTER_WEIGHTS)})"
    return None


def local_checkpoint_problem(
    path: str | os.PathLike, base_models: Mapping | None = None, name: str | None = None
) -> str | None:
    """What keeps ``path`` from serving as a base model, or None. A LoRA adapter folder
    serves when its base is found (:func:`adapter_base`, given the config's ``base_models``
    and the model's ``name``)."""
    folder = Path(path)
    if not folder.is_dir():
        return f"{path}: no such folder (paths are relative to the working directory, {Path.cwd()})"
    if is_adapter(folder):
        problem = _adapter_problem(folder)
        if problem is None and base_models is not None:
            try:
                adapter_base(base_models, name)
            except ValueError as error:
                return str(error)
        return problem
    if base_models is not None and "adapter_base" in base_models[name]:
        return f"{path}: not a LoRA adapter folder (no {ADAPTER_CONFIG}), so base_models.{name}.adapter_base has nothing to adapt"
    if not (folder / CHECKPOINT_CONFIG).is_file():
        return f"{path}: no {CHECKPOINT_CONFIG}; name a folder saved by save_pretrained"
    if not has_tokenizer(folder):
        return f"{path}: no tokenizer (one of {', '.join(TOKENIZER_FILES)}); save the tokenizer into the folder"
    return None


@dataclass(frozen=True)
class AdapterBase:
    """Where a LoRA adapter's base comes from: a configured base model (``name``, loaded
    from its folder under resources/models) or a checkpoint folder outside the config."""

    folder: str
    name: str | None = None


def _same_folder(a: str, b: str) -> bool:
    return os.path.normpath(os.path.abspath(a)) == os.path.normpath(os.path.abspath(b))


def adapter_base(base_models: Mapping, name: str) -> AdapterBase:
    """The base of the adapter that ``base_models.{name}.path`` names: the base model or
    checkpoint folder ``base_models.{name}.adapter_base`` names; else the configured base
    model that the adapter's ``base_model_name_or_path`` names (as its hub id, its local
    path, or its folder under resources/models); else that checkpoint folder itself. A
    ValueError names the recorded base and the key to set when none is available."""
    spec = base_models[name]
    where = f"base_models.{name}"
    chosen = spec.get("adapter_base")
    if chosen is not None:
        if chosen == name:
            raise ValueError(f"{where}.adapter_base: {chosen!r} is this adapter itself; name its base model")
        if chosen in base_models:
            return AdapterBase(base_model_dir(chosen), chosen)
        problem = local_checkpoint_problem(chosen)
        if problem or is_adapter(chosen):
            raise ValueError(
                f"{where}.adapter_base: {chosen!r} is neither a configured base model ({sorted(base_models)}) "
                f"nor a checkpoint folder ({problem or 'a LoRA adapter folder; name the base model it adapts'})"
            )
        return AdapterBase(chosen)
    recorded = json.loads((Path(spec["path"]) / ADAPTER_CONFIG).read_text())[ADAPTER_BASE_FIELD]
    for other, other_spec in base_models.items():
        if other == name:
            continue
        hub = (other_spec.get("hub") or {}).get("path")
        local = other_spec.get("path")
        if (
            recorded == hub
            or (local and _same_folder(recorded, local))
            or _same_folder(recorded, base_model_dir(other))
        ):
            return AdapterBase(base_model_dir(other), other)
    if Path(recorded).is_dir() and not is_adapter(recorded) and local_checkpoint_problem(recorded) is None:
        return AdapterBase(recorded)
    raise ValueError(
        f"{where}.path: {spec['path']} is a LoRA adapter of {recorded!r} ({ADAPTER_CONFIG}'s "
        f"{ADAPTER_BASE_FIELD}), which is neither a configured base model (by its hub.path or path) nor a "
        f"checkpoint folder here; add that model to base_models, or set {where}.adapter_base to the name of "
        "the base model it adapts or to its checkpoint folder"
    )


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


def adapter_hashes(base_models: Mapping, name: str) -> dict[str, str | None]:
    """What an adapter base model is made of, by content: the adapter folder's hash, and
    for a base outside the config its folder's (read against the folder's own provenance
    record where it has one, a workflow artifact; else every file is read). A configured
    base is the merge job's input, hashed in its record."""
    base = adapter_base(base_models, name)
    return {
        "adapter": content_hash(base_models[name]["path"]),
        "base_folder": None if base.name else local_checkpoint_hash(base.folder, base.folder),
    }


def register_local_checkpoint(path: str | os.PathLike, output: str | os.PathLike) -> int:
    """The checkpoint folder's content files (not a provenance record or Trainer
    checkpoints it may hold) hard-linked, or copied where links are refused, as ``output``;
    the number of files back."""
    problem = local_checkpoint_problem(path)
    if problem:
        raise ValueError(problem)
    if is_adapter(path):
        raise ValueError(f"{path}: a LoRA adapter folder; the adapter_base_model rule merges it into its base")
    files = content_files(Path(path))
    with atomic_path(output) as tmp:
        for relative, item in files:
            (tmp / relative).parent.mkdir(parents=True, exist_ok=True)
            link_or_copy(item, tmp / relative)
    return len(files)


# A tokenizer's files, by name: copied as they are (re-saving a tokenizer rewrites its
# config with load-time settings), from the adapter when it has a tokenizer, else its base.
TOKENIZER_PATTERNS = (
    "tokenizer*",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab*",
    "merges.txt",
    "chat_template.*",
    "*.model",
    "*.tiktoken",
)


def merge_adapter_base(adapter: str | os.PathLike, base: str | os.PathLike, output: str | os.PathLike) -> dict:
    """The adapter merged into its base, saved as a plain checkpoint in ``output``: the
    merge in float32, the weights stored in the base's own dtype; the tokenizer of the
    adapter (whose vocabulary a finetune may have grown) or, without one, the base's; the
    base's own code and its remote-code opt-in carried. What was merged comes back."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from reprolm.models.loading import from_pretrained, trusts_remote_code

    problem = _adapter_problem(adapter)
    if problem:
        raise ValueError(problem)
    stored = AutoConfig.from_pretrained(str(base), trust_remote_code=trusts_remote_code(base)).dtype
    tokenizer_source = Path(adapter) if has_tokenizer(adapter) else Path(base)
    model = from_pretrained(AutoModelForCausalLM, str(adapter), base=str(base), tokenizer=str(tokenizer_source))
    if isinstance(stored, torch.dtype):
        model = model.to(stored)
    with atomic_path(output) as tmp:
        model.save_pretrained(tmp)
        copied = {item for pattern in TOKENIZER_PATTERNS for item in tokenizer_source.glob(pattern) if item.is_file()}
        copied |= {item for item in Path(base).glob("*.py")} | set(Path(base).glob(REMOTE_CODE_MARKER))
        for item in sorted(copied):
            if not (tmp / item.name).exists():
                shutil.copy2(item, tmp / item.name)
    return {
        "adapter": str(adapter),
        "base": str(base),
        "tokenizer_from": str(tokenizer_source),
        "dtype": str(stored).removeprefix("torch."),
        "parameters": sum(parameter.numel() for parameter in model.parameters()),
    }
