"""What each job asks the scheduler for: per base model and stage, with defaults."""

from __future__ import annotations

from collections.abc import Mapping

from reprolm.score.judges import LOCAL_JUDGES

STAGE_DEFAULTS = {"gpus": 0, "threads": 1, "mem_mb": 4000, "runtime": 60, "launcher": "none",
                  "precision": "float32", "tensor_parallel": False, "cpus_per_gpu": 8}


def model_settings(config: Mapping, base: str, stage: str) -> dict:
    """Per-base-model settings of a stage (finetune, generate, evaluate), with defaults. A GPU
    job without ``threads`` gets ``cpus_per_gpu`` per GPU: the launcher's ranks and the data
    loaders share them (one CPU would serialise four DeepSpeed ranks' tokenisation)."""
    spec = config["base_models"][base].get("resources", {})
    settings = {**STAGE_DEFAULTS, **spec.get("default", {}), **spec.get(stage, {})}
    if settings["gpus"] and "threads" not in {**spec.get("default", {}), **spec.get(stage, {})}:
        settings["threads"] = settings["cpus_per_gpu"] * settings["gpus"]
    return settings


def judge_settings(config: Mapping, judge: str) -> dict:
    """Resources of a judge's jobs: its reward model's evaluate settings; an endpoint's
    defaults (it only makes requests)."""
    spec = config["judges"][judge]
    if spec["kind"] in LOCAL_JUDGES:
        return model_settings(config, spec["model"].split("/", 1)[0], "evaluate")
    return dict(STAGE_DEFAULTS)
