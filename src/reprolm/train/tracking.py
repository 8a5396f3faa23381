"""Optional experiment tracking of training runs: TensorBoard, Weights & Biases or MLflow,
one or several.

Off by default; the config's ``tracking.report_to`` turns it on for every finetune and
train-before-test; with ``wandb`` named, lm-eval's evaluations (the ``lm_eval`` rule and
train-before-test's) log through lm-eval's own W&B logger too. It is read from the config, not passed as a rule param: where the loss
curves go must never rerun a training job. Each run is named after its artifact and the
key of what it trains (``run_name``), which is also its checkpoint folder's name.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path

from reprolm.errors import ConfigError

# Each logger, and the package transformers' integration of it needs.
REPORTER_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}
TENSORBOARD_ROOT = Path("logs/tensorboard")
WANDB_ROOT = Path("logs/wandb")
DEFAULT_PROJECT = "reprolm"


def run_name(artifact: str, key: str) -> str:
    """A tracked run's name: the artifact it makes and the key of its training (e.g.
    ``results/models/tiny/sft@1f2e3d4c5b6a7980``), so that runs of other settings for the
    same artifact stay apart and each can be found from the artifact's provenance."""
    return f"{artifact}@{key}"


def reporters(settings: Mapping) -> list[str]:
    """``tracking.report_to`` as a list (one name or several; ``none`` for none), each one
    known and its package installed, else a ConfigError naming the key."""
    configured = settings.get("report_to", "none")
    names = [configured] if isinstance(configured, str) else list(configured)
    names = [name for name in names if name != "none"]
    for name in names:
        if name not in REPORTER_PACKAGES:
            raise ConfigError(
                f"tracking.report_to: {name!r}; choose from {['none', *REPORTER_PACKAGES]} (or a list of them)"
            )
        package = REPORTER_PACKAGES[name]
        if importlib.util.find_spec(package) is None:
            raise ConfigError(
                f"tracking.report_to: {name!r} needs the {package!r} package, which is not installed; "
                f"pip install {package} (and add it to workflow/envs/train.yaml when running with --use-conda)"
            )
    return names


def report_to(settings: Mapping, name: str) -> list[str]:
    """The Trainer's ``report_to`` for ``settings`` (the config's ``tracking``), with each
    logger told where run ``name`` goes: ``logs/tensorboard/{name}``; a W&B run ``name`` in
    project ``tracking.project`` (files under ``logs/wandb``; ``WANDB_MODE=offline`` where
    nodes have no internet, synced later); an MLflow run in experiment ``tracking.project``
    (the server from ``MLFLOW_TRACKING_URI``). The run's display name reaches W&B and MLflow
    as ``TrainingArguments.run_name``."""
    names = reporters(settings)
    project = settings.get("project", DEFAULT_PROJECT)
    if "tensorboard" in names:
        # transformers 5 takes TensorBoard's folder from here (otherwise it writes inside
        # the checkpoint folder, which a finished run deletes).
        os.environ["TENSORBOARD_LOGGING_DIR"] = str((TENSORBOARD_ROOT / name).resolve())
    if "wandb" in names:
        os.environ.setdefault("WANDB_PROJECT", project)
        os.environ["WANDB_NAME"] = name
        WANDB_ROOT.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("WANDB_DIR", str(WANDB_ROOT.resolve()))
    if "mlflow" in names:
        os.environ.setdefault("MLFLOW_EXPERIMENT_NAME", project)
    return names


def evaluation_run(settings: Mapping, name: str, job_type: str = "evaluation") -> dict | None:
    """``wandb.init``'s arguments for lm-eval's W&B logger (``lm_eval.loggers.WandbLogger``)
    of the evaluation run ``name``, in project ``tracking.project`` with its files under
    ``logs/wandb``; None where ``tracking.report_to`` does not name wandb."""
    if "wandb" not in reporters(settings):
        return None
    WANDB_ROOT.mkdir(parents=True, exist_ok=True)
    return {
        "name": name,
        "project": os.environ.get("WANDB_PROJECT", settings.get("project", DEFAULT_PROJECT)),
        "dir": os.environ.get("WANDB_DIR", str(WANDB_ROOT.resolve())),
        "job_type": job_type,
    }
