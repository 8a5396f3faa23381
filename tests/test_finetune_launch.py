"""The finetune stage under real launchers: torchrun and deepspeed, DeepSpeed ZeRO-3, a tiny Llama.

On a machine without a GPU DeepSpeed runs on its CPU accelerator with gloo. Its first use
compiles a shared-memory communication op (about a minute on two cores); the build is
kept in resources/torch_extensions (git-ignored), so later runs of this file skip it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from finetune_helpers import MLT_TOKENS, tiny_finetune_inputs
from reprolm.train.finetune import FINISHED, FINISHED_MARK, FinetuneSpec
from reprolm.train.launch import launch, launch_command

# Runs in the SLURM tests' process (scripts/run-tests.sh), which waits on the cluster.
pytestmark = pytest.mark.beside_slurm

REPO = Path(__file__).resolve().parents[1]
ZERO3 = str(REPO / "config" / "deepspeed" / "zero3.json")
RECIPE = {
    "format": "instruction_response",
    "completion_prefix": "mlt",
    "max_length": 128,
    "learning_rate": 1e-3,
    "num_train_epochs": 1,
    "per_device_train_batch_size": 4,
    "lr_scheduler_type": "cosine",
    "warmup_ratio": 0.05,
    "max_steps": 6,
}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A tiny base model with its tokenizer, a Ruler-schema train file, and the launch environment."""
    pytest.importorskip("deepspeed")
    root = tmp_path_factory.mktemp("finetune_launch")
    tiny_finetune_inputs(root)

    with pytest.MonkeyPatch.context() as env:
        env.setenv("HF_HUB_OFFLINE", "1")
        # A build cache that outlives tmp folders, so the op compiles once per checkout.
        env.setenv("TORCH_EXTENSIONS_DIR", str(REPO / "resources" / "torch_extensions"))
        yield root


def zero3_spec(root: Path, name: str, train_file: str | None = None) -> FinetuneSpec:
    return FinetuneSpec(
        base_model=str(root / "base"),
        output_dir=str(root / "models" / name),
        checkpoint_root=str(root / "checkpoints" / name),
        train_file=train_file or str(root / "train.parquet"),
        recipe=dict(RECIPE),
        add_tokens=list(MLT_TOKENS),
        deepspeed=ZERO3,
    )


@pytest.fixture(scope="module")
def torchrun_zero3(workspace):
    """One ZeRO-3 finetune under torchrun, shared by the checks below."""
    spec = zero3_spec(workspace, "torchrun")
    log_path = workspace / "torchrun.log"
    launch(spec, "torchrun", 1, str(log_path))
    return spec, log_path.read_text()


def assert_finetuned_checkpoint(spec: FinetuneSpec) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(spec.output_dir)
    model = AutoModelForCausalLM.from_pretrained(spec.output_dir)
    base_tokenizer = AutoTokenizer.from_pretrained(spec.base_model)
    base = AutoModelForCausalLM.from_pretrained(spec.base_model)

    vocab = tokenizer.get_vocab()
    assert all(token in vocab for token in MLT_TOKENS)
    assert len(tokenizer) == len(base_tokenizer) + len(MLT_TOKENS)
    assert model.get_input_embeddings().weight.shape[0] == len(tokenizer)
    assert model.get_output_embeddings().weight.shape[0] == len(tokenizer)

    trained = dict(model.named_parameters())
    for name, weight in base.named_parameters():
        if "embed_tokens" in name or "lm_head" in name:
            continue
        # ZeRO-3 saves gathered weights; an empty or untouched tensor means it saved shards or never stepped.
        assert trained[name].shape == weight.shape, name
        assert not torch.equal(trained[name], weight), f"{name} unchanged by training"

    # Only the finished model's hard links stay, for a retry killed as it exits.
    assert sorted(p.name for p in spec.checkpoint_dir.iterdir()) == [FINISHED, FINISHED_MARK]
    assert not list(Path(spec.output_dir).parent.glob(f".{Path(spec.output_dir).name}.tmp-*"))


@pytest.mark.deepspeed
@pytest.mark.timeout(420)
def test_torchrun_zero3_writes_a_loadable_finetuned_checkpoint(torchrun_zero3):
    spec, _ = torchrun_zero3
    assert_finetuned_checkpoint(spec)


@pytest.mark.deepspeed
@pytest.mark.timeout(420)
def test_torchrun_log_shows_deepspeed_zero3(torchrun_zero3):
    _, log = torchrun_zero3
    # zero.Init partitioned the weights while loading, and the engine built a ZeRO-3 optimizer.
    assert "finished initializing model" in log
    assert "ZeRO stage 3 optimizer" in log
    assert "DeepSpeed Final Optimizer = DeepSpeedZeroOptimizer_Stage3" in log
    assert "Total optimization steps = 6" in log


@pytest.mark.deepspeed
@pytest.mark.timeout(420)
def test_deepspeed_launcher_runs_the_same_zero3_finetune(workspace):
    spec = zero3_spec(workspace, "deepspeed")
    log_path = workspace / "deepspeed.log"
    launch(spec, "deepspeed", 1, str(log_path))
    assert_finetuned_checkpoint(spec)
    assert "DeepSpeed Final Optimizer = DeepSpeedZeroOptimizer_Stage3" in log_path.read_text()


@pytest.mark.deepspeed
@pytest.mark.timeout(420)
def test_failed_worker_raises_naming_the_log_and_writes_no_model(workspace):
    spec = zero3_spec(workspace, "missing", train_file=str(workspace / "no_such_train.parquet"))
    log_path = workspace / "missing.log"
    with pytest.raises(RuntimeError, match="torchrun finetune exited with status") as failure:
        launch(spec, "torchrun", 1, str(log_path))
    assert str(log_path) in str(failure.value)
    assert "no_such_train.parquet" in log_path.read_text()
    assert not Path(spec.output_dir).exists()
    assert not list(Path(spec.output_dir).parent.glob(".missing.tmp-*"))


def test_deepspeed_launcher_keeps_the_granted_gpus_and_passes_only_the_spec():
    granted = launch_command("deepspeed", 2, "spec.json", 29500, visible_devices="2,3")
    assert "--include=localhost:2,3" in granted
    assert not any(arg.startswith("--num_gpus") for arg in granted)
    assert "--no_local_rank" in granted
    assert granted[-2:] == ["reprolm.train.finetune", "spec.json"]
    assert "--num_gpus=1" in launch_command("deepspeed", 1, "spec.json", 29500)


def test_deepspeed_config_needs_a_launcher(tmp_path):
    with pytest.raises(ValueError, match="needs launcher torchrun or deepspeed"):
        launch(zero3_spec(tmp_path, "none"), "none")


def test_deepspeed_on_cpu_refuses_several_workers(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("several DeepSpeed workers are fine on GPUs")
    with pytest.raises(ValueError, match="one worker only"):
        launch(zero3_spec(tmp_path, "two"), "torchrun", 2)
