"""Mixed precision for every training stage: float32 master weights, low-precision compute."""

from __future__ import annotations

PRECISIONS = ("float32", "bfloat16", "float16")


def mixed_precision(precision: str | None, where: str) -> dict:
    """The Trainer's flags for ``precision``. The model stays in float32, which the optimiser
    updates (cast to bf16, AdamW's steps at a 2e-5 learning rate mostly round away); bf16 is
    autocast, fp16 autocast with loss scaling (the Trainer's gradient scaler), which needs
    CUDA. ``where`` names the config key in errors."""
    import torch

    if precision is None:
        precision = "float32"
    if precision not in PRECISIONS:
        raise ValueError(f"{where}: precision {precision!r} cannot train; choose from {list(PRECISIONS)}")
    if precision == "float16" and not torch.cuda.is_available():
        raise ValueError(
            f"{where}: float16 training needs a GPU (its loss scaling runs on CUDA); use bfloat16 or float32 here"
        )
    flags = {"bf16": precision == "bfloat16", "fp16": precision == "float16"}
    if flags["bf16"] and not torch.cuda.is_available():
        # transformers autocasts to bf16 on the CPU only when told it trains there.
        flags["use_cpu"] = True
    return flags
