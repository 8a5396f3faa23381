"""Each GPU job's modelled memory per GPU against the GPUs its request can be given.

SLURM grants a request any node of its partition that has the GPU type it names
(``gpu_model``: ``--gpus=TYPE:N``) and the features its constraint asks for (``constraint``:
``-C``); the job must fit on the smallest GPUs among them. A GPU's memory is read from the
node: a feature or GRES type that writes it (``a100_80gb``, ``a100-40g``, ``gpu80gb``,
``gpumem_80g``), else its GPU type where that comes in one size (``GPU_TYPE_MEMORY_GB``; an
A100 is 40 or 80 GB, so ``a100`` alone says nothing). A node whose GPUs' memory nothing
tells leaves the job unjudged, with a warning. The need is the config check's memory model
(:func:`reprolm.config.resources.stage_gpu_needs`), judged against the share of the GPU vLLM
takes (``GPU_MEMORY_UTILIZATION``) for generation with vLLM.

So a config asks for a GPU memory size through the keys it routes with: a constraint on the
nodes' memory feature, or the typed GRES that names it (``gpu_model: a100_80gb``); the
verdict names the features of the partition's nodes whose GPUs are large enough.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from reprolm.config.resources import stage_gpu_needs
from reprolm.generate.vllm_backend import GPU_MEMORY_UTILIZATION
from reprolm.models.parameters import model_parameters
from reprolm.rehearse.submissions import ACCEPTED, Node, Partition, Shape, config_key, gpu_request
from reprolm.studies import enabled_studies

# GiB of the GPU types sold in one memory size (as SLURM's GRES types name them).
GPU_TYPE_MEMORY_GB = {"h100": 80, "h200": 141, "a10": 24, "a30": 24, "a40": 48, "l4": 24, "l40": 48, "l40s": 48}
# A feature or GRES type naming a GPU memory size: a GPU model and the size (a100_80gb),
# or a GPU memory word and the size (gpu80gb, gpumem_80g, vram-48gb).
MEMORY_NAMES = (
    re.compile(r"^[a-z]+\d+[a-z]*[_-](\d+)g(?:i?b)?$", re.IGNORECASE),
    re.compile(r"^(?:gpu|gpumem|gpu_mem|vram)[_-]?(\d+)g(?:i?b)?$", re.IGNORECASE),
)


def named_memory_gb(name: str) -> int | None:
    for pattern in MEMORY_NAMES:
        found = pattern.match(name)
        if found:
            return int(found.group(1))
    return None


def node_gpu_memory(node: Node, kind: str) -> tuple[int | None, str]:
    """(GiB of one of the node's GPUs of type ``kind`` (any type where ""), where that came
    from), or (None, "") where nothing on the node tells."""
    kinds = [kind] if kind else sorted(node.gpus)
    for name in [*kinds, *sorted(node.features)]:
        size = named_memory_gb(name)
        if size:
            return size, f"{'feature' if name in node.features else 'GPU type'} {name}"
    sizes = {GPU_TYPE_MEMORY_GB.get(name.lower()) for name in kinds}
    if len(sizes) == 1 and None not in sizes:
        return sizes.pop(), f"GPU type {kinds[0]}"
    return None, ""


def satisfies(features: frozenset[str], constraint: str | None) -> bool:
    """Whether a node's features meet an sbatch constraint (``a|b``, ``a&b``, ``[a|b]``;
    counts ``*N`` ignored)."""
    if not constraint:
        return True
    for alternative in re.sub(r"[\[\]()]", "", constraint).split("|"):
        wanted = {re.sub(r"\*\d+$", "", word) for word in re.split(r"[&,]", alternative) if word}
        if wanted <= features:
            return True
    return False


def eligible_nodes(shape: Shape, partition: Partition) -> list[Node]:
    """The partition's nodes SLURM could give the request: of its GPU type, with its features."""
    gpus, kind = gpu_request(shape)
    return [
        node
        for node in partition.nodes
        if (node.gpus.get(kind, 0) if kind else node.gpu_count) and satisfies(node.features, shape.value("-C"))
    ]


def shape_need(shape: Shape, config: Mapping, root: Path, trained: set) -> tuple[float, str, str, str] | None:
    """(GiB per GPU, what needs it, base, stage) of the shape's largest job, or None where no
    model size is known."""
    largest = None
    for stage, base in sorted(shape.sources):
        parameters, source = model_parameters(config, base, root)
        if not parameters:
            continue
        for what, need in stage_gpu_needs(config, base, stage, parameters, trained, root).items():
            vllm = stage == "generate" and config.get("generation", {}).get("backend") == "vllm"
            described = f"{what} ({base}, {parameters / 1e9:.1f}B parameters from its {source})"
            if vllm:
                need /= GPU_MEMORY_UTILIZATION
                described += f"; vLLM takes {GPU_MEMORY_UTILIZATION:.0%} of a GPU, so it needs one of ~{need:.0f} GiB"
            if largest is None or need > largest[0]:
                largest = (need, described, base, stage)
    return largest


def gpu_memory_problems(
    shapes: Sequence[Shape], partitions: Mapping[str, Partition], config: Mapping, root: Path
) -> tuple[list[str], list[str]]:
    """(failures, warnings) as verdict lines: each accepted GPU job shape that can be given
    GPUs smaller than its modelled need, with the features of the nodes that fit; each whose
    GPUs' memory nothing on the nodes tells."""
    default = next((p for p in partitions.values() if p.default), None)
    trained = {(base, recipe) for study in enabled_studies(config) for base, recipe in study.models(config)}
    failures, warnings = [], []
    unjudged: dict[tuple[str, tuple[str, ...]], list[Shape]] = {}
    for shape in shapes:
        gpus, kind = gpu_request(shape)
        partition = partitions.get(shape.value("-p")) if shape.value("-p") else default
        if shape.verdict != ACCEPTED or not gpus or not shape.sources or partition is None:
            continue
        found = shape_need(shape, config, root, trained)
        if found is None:
            continue
        need, what, base, stage = found
        nodes = eligible_nodes(shape, partition)
        memories = [(node, *node_gpu_memory(node, kind)) for node in nodes]
        unknown = [node.name for node, size, _ in memories if size is None]
        small = [(node, size, whence) for node, size, whence in memories if size is not None and size < need]
        if small:
            node, size, whence = min(small, key=lambda item: item[1])
            large = sorted(
                {
                    feature
                    for other in partition.nodes
                    for feature in [*other.features, *other.gpus]
                    if (named_memory_gb(feature) or 0) >= need
                }
            )
            failures.append(
                f"- {shape.rule} ({len(shape.jobs)} jobs: {', '.join(shape.jobs[:3])}): {what}; its request can be "
                f"given {node.name}'s GPUs of {size} GB ({whence}) in partition {partition.name}"
            )
            keys = f"{config_key(config, base, stage, 'constraint')} or {config_key(config, base, stage, 'gpu_model')}"
            fitting = f" (nodes of this partition with them: {', '.join(large)})" if large else ""
            failures.append(
                f"  change: ask for GPUs with the memory: {keys}{fitting}; or spread it over more GPUs (gpus, with tensor_parallel for generation and evaluation)"
            )
        elif unknown:
            unjudged.setdefault((partition.name, tuple(unknown[:3])), []).append(shape)
    for (name, nodes), alike in unjudged.items():
        warnings.append(
            f"- warning: the GPU memory of {', '.join(nodes)} in partition {name} is not told by a feature or GRES "
            f"type (e.g. a100_80gb): {len(alike)} GPU job shapes ({', '.join(sorted({s.rule for s in alike}))}) "
            "not judged against it"
        )
    return failures, warnings
