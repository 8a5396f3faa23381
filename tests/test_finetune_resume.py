"""A killed finetune resumes from its latest complete checkpoint and ends where an uninterrupted one does.

Runs of ``python -m reprolm.train.finetune SPEC.json`` on a tiny Llama, on the CPU: one
uninterrupted, the reference of the module's tests; one SIGKILLed as soon as a checkpoint is
complete; a rerun of the killed spec (and, through the launcher, one stopped by SIGTERM and its
rerun).
The Trainer's resume restores weights, optimizer, schedule, RNG state and the data order
(accelerate's seedable sampler reseeds each epoch; the resumed epoch skips the batches it
already trained on), so the rerun's remaining losses and final weights must be identical,
bit for bit, to the uninterrupted run's. Both use one thread, so kernels reduce in the same
order.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from transformers import TrainerControl

from finetune_helpers import MLT_TOKENS, TRAIN_ROWS, tiny_finetune_inputs
from reprolm.provenance import content_hash
from reprolm.train import finetune
from reprolm.train.finetune import FinetuneSpec
from reprolm.train.stop_on_signal import SaveEveryMinutes

EPOCHS, BATCH, ACCUMULATION, SAVE_STEPS = 6, 2, 2, 4
STEPS_PER_EPOCH = TRAIN_ROWS // (BATCH * ACCUMULATION)
TOTAL_STEPS = EPOCHS * STEPS_PER_EPOCH
RECIPE = {
    "format": "instruction_response",
    "completion_prefix": "mlt",
    "max_length": 128,
    "learning_rate": 1e-3,
    "num_train_epochs": EPOCHS,
    "per_device_train_batch_size": BATCH,
    "gradient_accumulation_steps": ACCUMULATION,
    "lr_scheduler_type": "cosine",
    "warmup_ratio": 0.05,
    "save_steps": SAVE_STEPS,
    "logging_steps": 1,
}
RUN_TIMEOUT_S = 120
# The Trainer logs one dict per optimizer step (logging_steps 1); its `epoch` tells them apart.
STEP_LOG = re.compile(r"^\{'loss': .*'epoch': '[^']+'\}$", re.MULTILINE)


def spec(root: Path, name: str) -> FinetuneSpec:
    return FinetuneSpec(
        base_model=str(root / "base"),
        output_dir=str(root / "models" / name),
        checkpoint_root=str(root / "checkpoints" / name),
        train_file=str(root / "train.parquet"),
        recipe=dict(RECIPE),
        seed=7,
        add_tokens=list(MLT_TOKENS),
    )


def start(root: Path, run: FinetuneSpec, log_name: str) -> subprocess.Popen:
    spec_path = root / f"{log_name}.json"
    run.save(spec_path)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    with open(root / f"{log_name}.log", "w") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "reprolm.train.finetune", str(spec_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )


def finish(process: subprocess.Popen) -> int:
    try:
        return process.wait(RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise


def complete_checkpoints(folder: Path) -> dict[int, Path]:
    """Checkpoints whose trainer state is written (the Trainer's last file), by global step."""
    found = {}
    for checkpoint in folder.glob("checkpoint-*"):
        try:
            state = json.loads((checkpoint / "trainer_state.json").read_text())
        except (OSError, ValueError):
            continue
        found[state["global_step"]] = checkpoint
    return found


def kill_after_first_checkpoint(process: subprocess.Popen, folder: Path) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not complete_checkpoints(folder):
        assert process.poll() is None, "the run ended before it wrote a checkpoint"
        assert time.monotonic() < deadline, "no checkpoint within the time limit"
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait(RUN_TIMEOUT_S)


def step_logs(log: str) -> list[str]:
    return STEP_LOG.findall(log)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    """A folder with the finetune's inputs and the uninterrupted run of them ("whole"), the
    reference of every interrupted run of the module (each under a name of its own)."""
    root = tmp_path_factory.mktemp("finetune_resume")
    tiny_finetune_inputs(root)
    reference = start(root, spec(root, "whole"), "whole")
    assert finish(reference) == 0, (root / "whole.log").read_text()[-3000:]
    return root


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_killed_finetune_resumes_from_its_checkpoint_to_the_same_weights(uninterrupted, caplog):
    import torch
    from safetensors.torch import load_file

    root = uninterrupted
    whole, killed = spec(root, "whole"), spec(root, "killed")
    assert whole.key() == killed.key()
    first = start(root, killed, "killed")
    kill_after_first_checkpoint(first, killed.checkpoint_dir)
    assert first.returncode == -signal.SIGKILL
    assert not Path(killed.output_dir).exists()

    checkpoints = complete_checkpoints(killed.checkpoint_dir)
    resumed_step = max(checkpoints)
    assert 0 < resumed_step < TOTAL_STEPS
    # A kill in the middle of a save leaves the next checkpoint without trainer state; one is
    # made here so that every run checks that the rerun passes over it.
    torn = killed.checkpoint_dir / f"checkpoint-{resumed_step + SAVE_STEPS}"
    shutil.copytree(checkpoints[resumed_step], torn, dirs_exist_ok=True)
    (torn / "trainer_state.json").unlink()

    rerun = start(root, killed, "rerun")
    assert finish(rerun) == 0, (root / "rerun.log").read_text()[-3000:]

    rerun_log, whole_log = (root / "rerun.log").read_text(), (root / "whole.log").read_text()
    assert f"resuming from {checkpoints[resumed_step]}" in rerun_log
    epoch = resumed_step // STEPS_PER_EPOCH
    assert f"Resuming training from checkpoint with epoch {epoch} and global step {resumed_step}" in rerun_log
    # The rerun did only the steps after the checkpoint, and they retraced the reference.
    assert len(step_logs(whole_log)) == TOTAL_STEPS
    assert step_logs(rerun_log) == step_logs(whole_log)[resumed_step:]

    reference_weights = load_file(Path(whole.output_dir) / "model.safetensors")
    resumed_weights = load_file(Path(killed.output_dir) / "model.safetensors")
    assert reference_weights.keys() == resumed_weights.keys()
    different = [name for name in reference_weights if not torch.equal(reference_weights[name], resumed_weights[name])]
    assert not different, f"tensors differ after the resume: {different}"
    # Of the checkpoints, only hard links to the finished model are left, for a retry of a job
    # killed as it exited (at its time limit, say), after the model was in place.
    kept = killed.checkpoint_dir / finetune.FINISHED
    assert sorted(p.name for p in killed.checkpoint_dir.iterdir()) == sorted([kept.name, finetune.FINISHED_MARK])
    output = Path(killed.output_dir)
    model_files = sorted(p.name for p in output.iterdir())
    assert sorted(p.name for p in kept.iterdir()) == model_files
    assert all((kept / name).samefile(output / name) for name in model_files)
    # Snakemake deletes the output of a job SLURM timed out; the retry puts the model back
    # without training.
    before = content_hash(output)
    shutil.rmtree(output)
    with caplog.at_level(logging.INFO, logger=finetune.__name__):
        finetune.run(killed)
    assert content_hash(output) == before
    assert "kept the model an earlier attempt finished" in caplog.text
    # A finetune of the same base and recipe under other settings clears the links.
    other = dataclasses.replace(killed, recipe={**killed.recipe, "learning_rate": 5e-4}, output_dir=str(root / "other"))
    assert other.key() != killed.key()
    assert not finetune.restore_finished(other)
    assert not killed.checkpoint_dir.exists()


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_a_finetune_saving_once_per_epoch_also_saves_every_save_minutes_and_resumes_from_it(uninterrupted):
    """A recipe without save_steps saves once per epoch (GEM's and FLR's in paper.yaml); its
    timed checkpoint (save_minutes, here 30 ms: every step or two) is one mid-epoch, where a
    hard kill (SIGKILL, no signal to save on) leaves it, and the rerun resumes from it to the
    uninterrupted run's weights."""
    import torch
    from safetensors.torch import load_file

    root = uninterrupted
    timed = spec(root, "timed")
    timed.recipe = {key: value for key, value in RECIPE.items() if key != "save_steps"} | {"save_minutes": 0.0005}
    first = start(root, timed, "timed")
    kill_after_first_checkpoint(first, timed.checkpoint_dir)
    checkpoints = complete_checkpoints(timed.checkpoint_dir)
    assert 0 < min(checkpoints) < STEPS_PER_EPOCH, sorted(checkpoints)
    rerun = start(root, timed, "timed-rerun")
    assert finish(rerun) == 0, (root / "timed-rerun.log").read_text()[-3000:]
    rerun_log = (root / "timed-rerun.log").read_text()
    resumed_step = int(
        re.search(r"Resuming training from checkpoint with epoch \d+ and global step (\d+)", rerun_log)[1]
    )
    assert resumed_step in checkpoints and resumed_step % STEPS_PER_EPOCH != 0
    reference = load_file(Path(spec(root, "whole").output_dir) / "model.safetensors")
    resumed = load_file(Path(timed.output_dir) / "model.safetensors")
    assert all(torch.equal(reference[name], resumed[name]) for name in reference)


def test_the_timed_save_comes_at_the_first_step_end_after_its_minutes_and_restarts_at_each_save():
    clock = [0.0]
    callback = SaveEveryMinutes(2, clock=lambda: clock[0])
    args, state = SimpleNamespace(device="cpu"), SimpleNamespace()
    callback.on_train_begin(args, state, TrainerControl())
    saved = []
    for step, now in enumerate([30, 90, 119, 121, 150, 200, 241, 250]):
        clock[0] = now
        control = callback.on_step_end(args, state, TrainerControl())
        if control.should_save:
            saved.append(step)
            callback.on_save(args, state, control)
        elif now == 200:
            # The recipe's own save (save_steps or an epoch's end) restarts the clock too.
            callback.on_save(args, state, control)
    assert saved == [3]


def test_checkpoint_folder_changes_when_the_starting_model_is_rebuilt(tmp_path):
    """A finetune resumes only checkpoints made from the same starting weights: the spec's
    key carries the starting checkpoint's recorded content hash, not only its path."""
    start = tmp_path / "results/models/tiny/vanilla"
    start.mkdir(parents=True)

    def spec() -> FinetuneSpec:
        return FinetuneSpec(
            base_model=str(start),
            output_dir="out",
            checkpoint_root="ckpt",
            train_file="train.parquet",
            recipe={"objective": "dpo"},
        )

    unrecorded = spec().key()
    for digest in ("a" * 64, "b" * 64):
        (start / "provenance.json").write_text(json.dumps({"outputs": [{"path": str(start), "sha256": digest}]}))
        assert spec().key() == spec().key()
        assert spec().key() != unrecorded
        unrecorded = spec().key()


LAUNCH_AND_REPORT_STOP = """
import sys
from reprolm.stopping import JobStopped, STOPPED_EXIT_STATUS, watch_for_stop
from reprolm.provenance import content_hash
from reprolm.train import finetune
from reprolm.train.finetune import FinetuneSpec
from reprolm.train.stop_on_signal import SaveEveryMinutes
from reprolm.train.launch import launch

watch_for_stop()
try:
    launch(FinetuneSpec.load(sys.argv[1]), "torchrun", 1, log_path=sys.argv[2])
except JobStopped as stop:
    print(stop)
    sys.exit(STOPPED_EXIT_STATUS)
"""


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_finetune_stopped_by_sigterm_saves_its_step_and_resumes_to_the_same_weights(uninterrupted):
    """SLURM's stop (time limit, preemption) is a SIGTERM to every process of the job: here
    the launcher's parent, torchrun and its worker, as one process group. The worker saves a
    checkpoint at the end of the step it is in, torchrun lets it, and the parent reports a
    stop (not a failure); the rerun resumes from that step and ends on the uninterrupted
    run's weights, bit for bit."""
    import torch
    from safetensors.torch import load_file

    root = uninterrupted
    whole, stopped = spec(root, "whole"), spec(root, "stopped")
    stopped.save(root / "stopped.json")
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    log_path = root / "stopped.log"

    def launch_stopped() -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-c", LAUNCH_AND_REPORT_STOP, str(root / "stopped.json"), str(log_path)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

    first = launch_stopped()
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not (log_path.exists() and step_logs(log_path.read_text())):
        assert first.poll() is None, first.stdout.read()
        assert time.monotonic() < deadline, "no training step within the time limit"
        time.sleep(0.01)
    os.killpg(first.pid, signal.SIGTERM)
    output = first.communicate(timeout=RUN_TIMEOUT_S)[0]
    assert first.returncode == 75, output[-3000:]
    saved = complete_checkpoints(stopped.checkpoint_dir)
    stopped_step = max(saved)
    assert f"stopped by SIGTERM after saving its progress (checkpoint at step {stopped_step})" in output
    assert 0 < stopped_step < TOTAL_STEPS
    assert not Path(stopped.output_dir).exists()
    assert not (stopped.checkpoint_dir / "stopped.json").exists()

    log_path.write_text("")
    rerun = launch_stopped()
    assert rerun.wait(RUN_TIMEOUT_S) == 0, rerun.stdout.read()[-3000:]
    whole_log = (root / "whole.log").read_text()
    assert step_logs(log_path.read_text()) == step_logs(whole_log)[stopped_step:]
    reference_weights = load_file(Path(whole.output_dir) / "model.safetensors")
    resumed_weights = load_file(Path(stopped.output_dir) / "model.safetensors")
    different = [name for name in reference_weights if not torch.equal(reference_weights[name], resumed_weights[name])]
    assert not different, f"tensors differ after the resume: {different}"
