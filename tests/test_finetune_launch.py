"""The finetune stage under its real launcher: torchrun, DeepSpeed ZeRO-3, a tiny Llama.

On a machine without a GPU DeepSpeed runs on its CPU accelerator with gloo, one worker, and
compiles nothing: the finetune leaves out DeepSpeed's shared-memory allreduce kernel, whose
build took about a minute of gcc on every new install.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from finetune_helpers import MLT_TOKENS, tiny_finetune_inputs
from reprolm.config.resources import model_settings
from reprolm.train.finetune import FINISHED, FINISHED_MARK, FinetuneSpec, without_cpu_shared_memory_allreduce
from reprolm.train.launch import launch, launch_command

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
        # Torch's build folder for C++ extensions, empty: a DeepSpeed op compiled would land here.
        env.setenv("TORCH_EXTENSIONS_DIR", str(root / "torch_extensions"))
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
def test_a_cpu_zero3_finetune_compiles_no_deepspeed_op(torchrun_zero3):
    _, log = torchrun_zero3
    extensions = Path(os.environ["TORCH_EXTENSIONS_DIR"])
    assert not extensions.exists() or not any(extensions.iterdir()), sorted(extensions.rglob("*"))
    assert "built successfully" not in log


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
def test_failed_worker_raises_naming_the_log_and_writes_no_model(workspace):
    spec = zero3_spec(workspace, "missing", train_file=str(workspace / "no_such_train.parquet"))
    log_path = workspace / "missing.log"
    with pytest.raises(RuntimeError, match="torchrun finetune exited with status") as failure:
        launch(spec, "torchrun", 1, str(log_path))
    assert str(log_path) in str(failure.value)
    assert "no_such_train.parquet" in log_path.read_text()
    assert not Path(spec.output_dir).exists()
    assert not list(Path(spec.output_dir).parent.glob(".missing.tmp-*"))


@pytest.mark.deepspeed
@pytest.mark.parametrize(("device", "built"), [("cuda", True), ("cpu", False)])
def test_only_the_cpu_accelerator_leaves_out_the_shared_memory_allreduce_kernel(monkeypatch, device, built):
    """A GPU finetune's DeepSpeed ops are DeepSpeed's own choice; on the CPU the kernel is
    marked unbuildable before DeepSpeed starts its communication backend."""
    pytest.importorskip("deepspeed")
    import deepspeed.accelerator
    import deepspeed.ops

    accelerator = type("Accelerator", (), {"device_name": lambda self, index=None: device})()
    monkeypatch.setattr(deepspeed.accelerator, "get_accelerator", lambda: accelerator)
    monkeypatch.setattr(
        deepspeed.ops, "__compatible_ops__", {"deepspeed_shm_comm": True, "cpu_adam": True}, raising=False
    )
    without_cpu_shared_memory_allreduce()
    assert deepspeed.ops.__compatible_ops__ == {"deepspeed_shm_comm": built, "cpu_adam": True}


def test_workers_see_the_granted_gpus_and_get_only_the_spec():
    """torchrun leaves CUDA_VISIBLE_DEVICES (SLURM's grant) to its workers; one per GPU."""
    command = launch_command(2, "spec.json", 29500)
    assert Path(command[0]).name == "torchrun"
    assert "--nproc_per_node=2" in command
    # SIGTERM is the workers' (they save and stop); torchrun would kill them 30 s after it.
    assert "--signals_to_handle=SIGINT,SIGHUP,SIGQUIT" in command
    assert not any("localhost" in arg or "num_gpus" in arg for arg in command)
    assert command[-3:] == ["-m", "reprolm.train.finetune", "spec.json"]


def test_deepspeed_config_needs_a_launcher(tmp_path):
    with pytest.raises(ValueError, match="needs launcher torchrun, not none"):
        launch(zero3_spec(tmp_path, "none"), "none")


def test_deepspeed_on_cpu_refuses_several_workers(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("several DeepSpeed workers are fine on GPUs")
    with pytest.raises(ValueError, match="one worker only"):
        launch(zero3_spec(tmp_path, "two"), "torchrun", 2)


# Longer than the 30 s the deepspeed launcher gives its workers after a SIGTERM.
SLOW_SAVE_S = 35
# Test-level stand-in for an 8B ZeRO-3 checkpoint with its optimizer state: in the workers
# only (torchrun sets LOCAL_RANK), the save a stop asks for sleeps first, so nothing is on
# disk until SLOW_SAVE_S after the signal.
SLOW_STOP_SAVE = """
import os
if "LOCAL_RANK" in os.environ:
    import time
    from transformers import Trainer
    from reprolm.stopping import stop_request

    save = Trainer._save_checkpoint

    def slow_stop_save(self, *args, **kwargs):
        if stop_request.requested:
            time.sleep(float(os.environ["SLOW_STOP_SAVE_S"]))
        return save(self, *args, **kwargs)

    Trainer._save_checkpoint = slow_stop_save
"""
# What workflow/scripts/finetune.py does; it prints how the launch ended.
LAUNCHING_SCRIPT = """
import sys
from reprolm.stopping import JobStopped, watch_for_stop
from reprolm.train.finetune import FinetuneSpec
from reprolm.train.launch import launch

watch_for_stop()
try:
    launch(FinetuneSpec.load(sys.argv[1]), sys.argv[2], 1, sys.argv[3])
except JobStopped as stop:
    print(stop)
"""


def tail(path: Path) -> str:
    return path.read_text()[-3000:] if path.exists() else f"no {path.name}"


def queued(cluster, job_id: str) -> bool:
    return bool(cluster.run("squeue", "--noheader", "--jobs", job_id, check=False).stdout.strip())


@pytest.mark.slurm
@pytest.mark.deepspeed
@pytest.mark.timeout(600)
def test_a_zero3_finetune_slurm_stops_under_the_papers_launcher_saves_mid_epoch_though_the_save_takes_over_30_s(
    slurm_cluster, workspace, tmp_path
):
    """SLURM's SIGTERM reaches every process of the job step (torchrun's workers too, in
    sessions of their own): the launcher must leave the workers alive until their checkpoint
    (weights, ZeRO optimizer shards, trainer state) is written, mid-epoch, under a recipe that
    otherwise saves once per epoch. The job runs as the workflow's do, in an ``srun`` step."""
    paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    launcher = model_settings(paper, "llama3_8b", "finetune")["launcher"]
    rows = pq.read_table(workspace / "train.parquet")
    pq.write_table(rows.take([i % rows.num_rows for i in range(4000)]), tmp_path / "train.parquet")
    spec = zero3_spec(workspace, "stopped", train_file=str(tmp_path / "train.parquet"))
    spec.recipe = {key: value for key, value in RECIPE.items() if key != "max_steps"}
    spec.save(tmp_path / "spec.json")
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SLOW_STOP_SAVE)
    (tmp_path / "launch_job.py").write_text(LAUNCHING_SCRIPT)
    log_path, printed = tmp_path / "stopped.log", tmp_path / "job.out"
    exported = {
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")]),
        "SLOW_STOP_SAVE_S": str(SLOW_SAVE_S),
        "TORCH_EXTENSIONS_DIR": os.environ["TORCH_EXTENSIONS_DIR"],
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    command = f"srun -n1 {sys.executable} {tmp_path / 'launch_job.py'} {tmp_path / 'spec.json'} {launcher} {log_path}"
    job_id = slurm_cluster.run(
        "sbatch",
        "--parsable",
        "--cpus-per-task=2",
        "--mem=4000",
        "--time=10",
        f"--output={printed}",
        f"--export=ALL,{','.join(f'{key}={value}' for key, value in exported.items())}",
        f"--chdir={tmp_path}",
        "--wrap",
        command,
    ).stdout.strip()
    try:
        # Long enough for the job to start and load on a busy machine.
        deadline = time.monotonic() + 360
        while "Total optimization steps" not in (log_path.read_text() if log_path.exists() else ""):
            assert queued(slurm_cluster, job_id) and time.monotonic() < deadline, f"no training: {tail(printed)}"
            time.sleep(0.5)
        signalled = time.monotonic()
        slurm_cluster.run("scancel", "--signal=TERM", job_id)
        while queued(slurm_cluster, job_id):
            assert time.monotonic() < signalled + 180, f"still running: {tail(log_path)}"
            time.sleep(0.5)
        ended = time.monotonic()
    finally:
        slurm_cluster.run("scancel", job_id, check=False)
    assert ended - signalled > SLOW_SAVE_S
    assert "stopped by SIGTERM" in printed.read_text(), tail(log_path)
    (checkpoint,) = spec.checkpoint_dir.glob("checkpoint-*")
    step = int(checkpoint.name.split("-")[1])
    assert 0 < step < 4000 // RECIPE["per_device_train_batch_size"], "not a mid-epoch save"
    assert json.loads((checkpoint / "trainer_state.json").read_text())["global_step"] == step
    assert list(checkpoint.glob(f"global_step{step}/*optim_states.pt")), "no ZeRO optimizer state"
    assert not Path(spec.output_dir).exists()
