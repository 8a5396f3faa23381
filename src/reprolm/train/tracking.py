"""Optional experiment tracking of training runs: TensorBoard or Weights & Biases.

Off by default; the config's ``tracking.report_to`` turns it on for every finetune and
train-before-test. It is read from the config, not passed as a rule param: where the loss
curves go must never rerun a training job.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

REPORTERS = ("none", "tensorboard", "wandb")
TENSORBOARD_ROOT = Path("logs/tensorboard")
WANDB_ROOT = Path("logs/wandb")


def report_to(settings: Mapping, run_name: str) -> list[str]:
    """The Trainer's ``report_to`` for ``settings`` (the config's ``tracking``), with the
    logger told where this run's records go: ``logs/tensorboard/{run_name}``, or a W&B run
    named ``run_name`` in project ``tracking.project`` (its files under ``logs/wandb``; set
    ``WANDB_MODE=offline`` where nodes have no internet and sync them later)."""
    reporter = settings.get("report_to", "none")
    if reporter not in REPORTERS:
        raise ValueError(f"tracking.report_to: {reporter!r}; choose from {list(REPORTERS)}")
    if reporter == "tensorboard":
        # transformers 5 takes TensorBoard's folder from here (otherwise it writes inside
        # the checkpoint folder, which a finished run deletes).
        os.environ["TENSORBOARD_LOGGING_DIR"] = str((TENSORBOARD_ROOT / run_name).resolve())
    elif reporter == "wandb":
        os.environ.setdefault("WANDB_PROJECT", settings.get("project", "reprolm"))
        os.environ["WANDB_NAME"] = run_name
        WANDB_ROOT.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("WANDB_DIR", str(WANDB_ROOT.resolve()))
    return [] if reporter == "none" else [reporter]
