"""How many parameters a base model has, from what is at hand before any job: its
checkpoint's safetensors headers, the config (``parameters``, or a built model's shape) or a
size tag in its hub name."""

from __future__ import annotations

import json
import math
import re
import struct
from collections.abc import Mapping
from pathlib import Path

SIZE_TAG = re.compile(r"[-_](\d+(?:\.\d+)?)([mMbB])(?![a-zA-Z0-9])")


def safetensors_parameters(folder: Path) -> int | None:
    """Parameters of a checkpoint on disk, from its safetensors headers (no tensor is read)."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for file in files:
        with file.open("rb") as stream:
            header = json.loads(stream.read(struct.unpack("<Q", stream.read(8))[0]))
        total += sum(math.prod(entry["shape"]) for name, entry in header.items() if name != "__metadata__")
    return total


def built_parameters(build: Mapping, vocab: int) -> int:
    """A built decoder's parameters: untied embeddings and head, and per layer attention
    (4 h^2) and a gated MLP (3 h i)."""
    hidden, layers, inner = build["hidden_size"], build["num_layers"], build["intermediate_size"]
    return 2 * vocab * hidden + layers * (4 * hidden * hidden + 3 * hidden * inner)


def model_parameters(config: Mapping, base: str, root: Path) -> tuple[int | None, str]:
    """(parameters, where the figure came from) of a base model."""
    on_disk = safetensors_parameters(root / "resources" / "models" / base)
    if on_disk:
        return on_disk, "checkpoint"
    spec = config["base_models"][base]
    if spec.get("parameters"):
        return int(float(spec["parameters"])), "config"
    if "build" in spec:
        vocab = config.get("tokenizers", {}).get(spec["build"].get("tokenizer"), {}).get("vocab_size", 32000)
        return built_parameters(spec["build"], vocab), "build"
    tag = SIZE_TAG.search(spec.get("hub", {}).get("path", ""))
    if tag:
        return int(float(tag.group(1)) * (1e9 if tag.group(2).lower() == "b" else 1e6)), "name"
    return None, "unknown"
