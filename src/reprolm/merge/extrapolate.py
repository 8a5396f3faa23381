"""ExPO model extrapolation: theta = theta_aligned + alpha * (theta_aligned - theta_sft).

Every floating-point tensor of the checkpoint is extrapolated (embeddings, norms and the
head included); integer tensors, which are buffers such as position ids, are copied from
the aligned model. Arithmetic is done in float32 and each result is stored in the aligned
tensor's own dtype (bf16 stays bf16), so alpha = 0 reproduces the aligned weights exactly.

The merge streams: tensors are read one at a time from the two checkpoints' safetensors
files, in blocks of rows for the float32 arithmetic, and the output is written in shards of
at most ``max_shard_bytes`` (safetensors serialises a shard through one copy), so the memory
used is about two shards (or twice the largest tensor in its own dtype), whatever the
model's size. Config, generation config and
tokenizer come from the aligned model.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from reprolm.io import atomic_path
from reprolm.paths import REMOTE_CODE_MARKER

log = logging.getLogger(__name__)

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
# Files of the aligned checkpoint carried over unchanged (whichever exist).
CARRIED_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
)
DEFAULT_MAX_SHARD_BYTES = 256 << 20
# Elements of a tensor extrapolated at once (64 MB of float32 per temporary).
BLOCK_ELEMENTS = 1 << 24


class IncompatibleCheckpoints(ValueError):
    """The two checkpoints cannot be extrapolated: the message names the first mismatch."""


@dataclass(frozen=True)
class TensorInfo:
    file: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count * DTYPE_BYTES[self.dtype]


DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
FLOAT_DTYPES = {"F64", "F32", "F16", "BF16"}


def tensor_index(folder: str | Path) -> dict[str, TensorInfo]:
    """Name -> (file, dtype, shape) of every tensor, from the safetensors headers only."""
    from safetensors import safe_open

    folder = Path(folder)
    if (folder / INDEX_FILE).exists():
        files = sorted(set(json.loads((folder / INDEX_FILE).read_text())["weight_map"].values()))
    elif (folder / SINGLE_FILE).exists():
        files = [SINGLE_FILE]
    else:
        raise FileNotFoundError(f"{folder}: no {SINGLE_FILE} or {INDEX_FILE}; extrapolation reads safetensors only")
    index = {}
    for file in files:
        with safe_open(folder / file, framework="pt") as handle:
            for name in handle.keys():
                piece = handle.get_slice(name)
                index[name] = TensorInfo(file, piece.get_dtype(), tuple(piece.get_shape()))
    return index


def _first_difference(first: dict, second: dict) -> str | None:
    for key in sorted(set(first) | set(second)):
        if first.get(key) != second.get(key):
            return key
    return None


def check_compatible(sft: str | Path, aligned: str | Path) -> tuple[dict[str, TensorInfo], dict[str, TensorInfo]]:
    """The two checkpoints' tensor indexes (sft, aligned), after checking that they match in
    architecture, tensor names and shapes, and vocabulary; raises IncompatibleCheckpoints
    naming the first mismatch."""
    from transformers import AutoTokenizer

    from reprolm.models.loading import trusts_remote_code

    sft, aligned = Path(sft), Path(aligned)
    configs = {
        name: json.loads((path / "config.json").read_text()) for name, path in (("sft", sft), ("aligned", aligned))
    }
    for key in ("model_type", "architectures", "vocab_size", "hidden_size", "num_hidden_layers"):
        if configs["sft"].get(key) != configs["aligned"].get(key):
            raise IncompatibleCheckpoints(
                f"config.json {key!r}: {configs['sft'].get(key)!r} in {sft} but {configs['aligned'].get(key)!r} in {aligned}"
            )
    sft_index, aligned_index = tensor_index(sft), tensor_index(aligned)
    for name in sorted(set(sft_index) | set(aligned_index)):
        if name not in sft_index or name not in aligned_index:
            where, missing = (sft, aligned) if name in sft_index else (aligned, sft)
            raise IncompatibleCheckpoints(f"tensor {name!r} is in {where} but not in {missing}")
        if sft_index[name].shape != aligned_index[name].shape:
            raise IncompatibleCheckpoints(
                f"tensor {name!r}: shape {list(sft_index[name].shape)} in {sft} but "
                f"{list(aligned_index[name].shape)} in {aligned}"
            )
    vocabularies = [
        AutoTokenizer.from_pretrained(path, trust_remote_code=trusts_remote_code(path)).get_vocab()
        for path in (sft, aligned)
    ]
    token = _first_difference(*vocabularies)
    if token is not None:
        raise IncompatibleCheckpoints(
            f"vocabulary: token {token!r} has id {vocabularies[0].get(token)} in {sft} but "
            f"{vocabularies[1].get(token)} in {aligned}"
        )
    return sft_index, aligned_index


def _shards(index: dict[str, TensorInfo], max_shard_bytes: int) -> Iterator[list[str]]:
    """Tensor names grouped into consecutive shards of at most ``max_shard_bytes`` (a tensor
    larger than that gets a shard of its own)."""
    shard, size = [], 0
    for name in sorted(index):
        nbytes = index[name].nbytes
        if shard and size + nbytes > max_shard_bytes:
            yield shard
            shard, size = [], 0
        shard.append(name)
        size += nbytes
    if shard:
        yield shard


def _extrapolated_tensor(aligned_file: Path, sft_file: Path, name: str, alpha: float, block_elements: int):
    """theta_aligned + alpha * (theta_aligned - theta_sft) for one tensor, in the aligned
    tensor's dtype. Computed in float32 over blocks of rows read straight from the files, so
    the float32 temporaries stay a few blocks whatever the tensor (a 128k-vocabulary
    embedding would otherwise need four float32 copies, about 9 GB); the operations per
    element are those of the whole-tensor formula, so the bits are too."""
    import torch
    from safetensors import safe_open

    with safe_open(aligned_file, framework="pt") as aligned, safe_open(sft_file, framework="pt") as sft:
        aligned_slice, sft_slice = aligned.get_slice(name), sft.get_slice(name)
        shape = aligned_slice.get_shape()
        if len(shape) == 0:
            aligned_value = aligned.get_tensor(name)
            result = aligned_value.to(torch.float32)
            result += alpha * (result - sft.get_tensor(name).to(torch.float32))
            return result.to(aligned_value.dtype)
        row_elements = max(1, int(torch.Size(shape[1:]).numel()))
        rows = max(1, block_elements // row_elements)
        output = None
        for start in range(0, shape[0], rows):
            block = aligned_slice[start : start + rows]
            if output is None:
                output = torch.empty(shape, dtype=block.dtype)
            result = block.to(torch.float32)
            difference = result - sft_slice[start : start + rows].to(torch.float32)
            difference *= alpha
            result += difference
            output[start : start + rows] = result.to(output.dtype)
        return output


def extrapolate(
    sft: str | Path,
    aligned: str | Path,
    alpha: float,
    output: str | Path,
    *,
    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES,
    block_elements: int = BLOCK_ELEMENTS,
) -> dict:
    """Write the extrapolated checkpoint to ``output`` (Hugging Face format); returns a summary."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    sft, aligned = Path(sft), Path(aligned)
    sft_index, index = check_compatible(sft, aligned)
    shards = list(_shards(index, max_shard_bytes))
    names = [f"model-{number:05d}-of-{len(shards):05d}.safetensors" for number in range(1, len(shards) + 1)]
    extrapolated = copied = 0
    with atomic_path(output) as tmp:
        tmp.mkdir(parents=True)
        weight_map = {}
        for shard, shard_file in zip(shards, names):
            tensors = {}
            for name in shard:
                # One tensor at a time, files reopened per tensor so no mapping outlives it.
                if index[name].dtype in FLOAT_DTYPES:
                    tensors[name] = _extrapolated_tensor(
                        aligned / index[name].file, sft / sft_index[name].file, name, alpha, block_elements
                    )
                    extrapolated += 1
                else:
                    with safe_open(aligned / index[name].file, framework="pt") as handle:
                        tensors[name] = handle.get_tensor(name)
                    copied += 1
                weight_map[name] = shard_file
            save_file(tensors, tmp / shard_file, metadata={"format": "pt"})
            del tensors
        total = sum(info.nbytes for info in index.values())
        (tmp / INDEX_FILE).write_text(
            json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2, sort_keys=True) + "\n"
        )
        # The aligned model's code files and remote-code opt-in travel with its config.
        carried = [*CARRIED_FILES, REMOTE_CODE_MARKER, *(p.name for p in aligned.glob("*.py"))]
        for file in carried:
            if (aligned / file).exists():
                shutil.copy2(aligned / file, tmp / file)
    summary = {
        "alpha": alpha,
        "extrapolated_tensors": extrapolated,
        "copied_tensors": copied,
        "shards": len(shards),
        "bytes": total,
    }
    log.info(
        "extrapolated %d tensors (alpha %g), copied %d, into %d shard(s)", extrapolated, alpha, copied, len(shards)
    )
    return summary
