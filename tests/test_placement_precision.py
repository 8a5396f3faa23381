"""Where models run and in what precision they train: device maps over the granted GPUs,
lm-eval's placement, the refusal of DataParallel, float32 master weights under bf16, and
fp16's refusal without CUDA. The GPU branches are checked as what they hand to
transformers and lm-eval; the CPU ones run for real."""

from __future__ import annotations

from pathlib import Path

import pytest

from finetune_helpers import MLT_TOKENS, tiny_finetune_inputs
from reprolm.models.loading import device_map, input_device, load_causal_lm
from reprolm.score.lm_eval_bridge import hf_placement
from reprolm.train.precision import mixed_precision


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tiny")
    tiny_finetune_inputs(root)
    return root


def test_models_go_to_the_cpu_one_gpu_or_across_every_granted_gpu():
    assert device_map(0) is None
    assert device_map(1) == {"": 0}
    assert device_map(4) == "auto"
    assert hf_placement(0) == {"device": "cpu"}
    assert hf_placement(1) == {"device": "cuda"}
    # lm-eval's own device map over all visible GPUs, in one process.
    assert hf_placement(2) == {"parallelize": True}


def test_an_inference_model_loads_where_the_job_runs_and_takes_inputs_there(inputs):
    import torch

    model = load_causal_lm(str(inputs / "base"), dtype="bfloat16")
    assert not model.training and model.dtype == torch.bfloat16
    assert input_device(model) == torch.device("cpu")


def test_train_before_test_refuses_gpus_its_model_would_leave_to_dataparallel(inputs):
    """With several GPUs visible and the model on one, the Trainer would copy it to each
    (nn.DataParallel). On this CPU machine accelerate's map puts the whole tiny model on
    the CPU, which is the one-device case."""
    from reprolm.studies.harmony.train_before_test import place_for_training

    with pytest.raises(ValueError, match=r"granted 2 GPUs but the model fits on one; grant it 1"):
        place_for_training(str(inputs / "base"), 2)
    import torch

    model = place_for_training(str(inputs / "base"), 0)
    assert model.dtype == torch.float32


def test_mixed_precision_flags_and_refusals():
    assert mixed_precision("bfloat16", "k") == {"bf16": True, "fp16": False, "use_cpu": True}
    assert mixed_precision(None, "k") == mixed_precision("float32", "k") == {"bf16": False, "fp16": False}
    with pytest.raises(ValueError, match=r"^harmony.train.precision: float16 training needs a GPU"):
        mixed_precision("float16", "harmony.train.precision")
    with pytest.raises(ValueError, match=r"^k: precision 'auto' cannot train"):
        mixed_precision("auto", "k")


def test_bf16_finetune_updates_float32_master_weights_at_the_papers_learning_rate(inputs, tmp_path):
    """At lr 2e-5 an AdamW step is far below bf16's resolution at the weights' scale: a
    model cast to bf16 would keep most weights as they were."""
    import torch
    from safetensors.torch import load_file

    from reprolm.train.finetune import FinetuneSpec, run

    recipe = {
        "format": "instruction_response",
        "completion_prefix": "mlt",
        "max_length": 128,
        "learning_rate": 2e-5,
        "max_steps": 2,
        "per_device_train_batch_size": 4,
        "logging_steps": 1,
    }
    run(
        FinetuneSpec(
            base_model=str(inputs / "base"),
            output_dir=str(tmp_path / "out"),
            checkpoint_root=str(tmp_path / "checkpoints"),
            train_file=str(inputs / "train.parquet"),
            recipe=recipe,
            seed=0,
            add_tokens=list(MLT_TOKENS),
            precision="bfloat16",
        )
    )
    base = load_file(inputs / "base" / "model.safetensors")
    trained = load_file(tmp_path / "out" / "model.safetensors")
    matrices = [
        name for name, value in trained.items() if value.dim() == 2 and name in base and base[name].shape == value.shape
    ]
    assert matrices and all(trained[name].dtype == torch.float32 for name in matrices)
    changed = sum(int((trained[n] != base[n]).sum()) for n in matrices)
    total = sum(trained[n].numel() for n in matrices)
    assert changed / total > 0.9, f"only {changed}/{total} weights moved"
