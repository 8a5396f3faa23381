"""Start a finetune in-process, or over several workers with torchrun.

On a SLURM node the rule asks for one task on one node and torchrun starts one worker per
granted GPU itself (nccl); a DeepSpeed recipe (its ZeRO config) runs in those workers. The
deepspeed launcher is not used: it kills its workers 30 s after a SIGTERM, whatever is set,
and a ZeRO-3 checkpoint of an 8B model with its optimizer state takes longer to write;
torchrun is configured to leave SIGTERM to the workers, which save and stop
(reprolm.stopping) within the job's ``stop_warning_s``; the launcher's parent passes a stop
it receives on to them, in case the cluster signals only its process group. On a machine
without CUDA, ``torchrun --nproc_per_node 1`` runs the same DeepSpeed path on DeepSpeed's
CPU accelerator with the gloo backend, which is how the tests exercise it (without
DeepSpeed's shared-memory allreduce kernel, which one worker does not need: see
``finetune``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from reprolm.stopping import JobStopped, stop_request
from reprolm.train.finetune import FinetuneSpec, run, stop_note_path

LAUNCHERS = ("none", "torchrun")
# The signals torchrun handles (passing them on to its workers, then killing them): not
# SIGTERM, which SLURM sends every process of the job for the workers to save and stop.
TORCHRUN_SIGNALS = ("SIGINT", "SIGHUP", "SIGQUIT")
# How often the launcher's parent looks for a stop signal to pass on to the workers.
STOP_POLL_S = 1.0


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch_command(nproc: int, spec_path: str, port: int) -> list[str]:
    """torchrun's command line; the workers see the job's CUDA_VISIBLE_DEVICES as it is.
    torchrun handles only the signals it is given here (its environment variable
    TORCHELASTIC_SIGNALS_TO_HANDLE is overwritten from this option): SIGTERM is left out,
    since torchrun would pass it on and kill the workers 30 s later, mid-checkpoint."""
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"
    return [
        torchrun,
        f"--nproc_per_node={nproc}",
        f"--signals_to_handle={','.join(TORCHRUN_SIGNALS)}",
        "--master_addr=127.0.0.1",
        f"--master_port={port}",
        "-m",
        "reprolm.train.finetune",
        spec_path,
    ]


def _ignore_stop_signals() -> None:
    """In the launcher before it starts: a stop signal (SIGTERM from SLURM, which reaches
    every process of the job) is the workers' to handle, by saving a checkpoint; torchrun
    would otherwise kill them 30 s after it. The workers set their own handler, and torchrun
    leaves SIGTERM alone when it is not among its ``--signals_to_handle``."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _pass_on_stop(launcher: subprocess.Popen, signal_name: str) -> None:
    """Send the stop signal this process got to the launcher's workers (torchrun starts them
    in sessions of their own): where the cluster signals only the job's process group, they
    would not hear of it otherwise. One that got it already from SLURM ignores the repeat."""
    import psutil

    for worker in psutil.Process(launcher.pid).children(recursive=True):
        try:
            worker.send_signal(signal.Signals[signal_name])
        except psutil.NoSuchProcess:
            pass


def _run_passing_on_stops(command: list[str], env: dict[str, str], log) -> int:
    """Run the launcher to its end; a stop signal this process receives meanwhile
    (reprolm.stopping) is passed on to the workers once. Returns the exit status."""
    launcher = subprocess.Popen(
        command, env=env, stdout=log, stderr=subprocess.STDOUT if log else None, preexec_fn=_ignore_stop_signals
    )
    passed_on = False
    while True:
        try:
            return launcher.wait(timeout=STOP_POLL_S)
        except subprocess.TimeoutExpired:
            if stop_request.requested and not passed_on:
                _pass_on_stop(launcher, stop_request.signal_name)
                passed_on = True


def launcher_environment() -> dict[str, str]:
    import torch

    env = dict(os.environ)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    # The interpreter's bin folder first, so DeepSpeed's op compiler finds the ninja that
    # came with the environment even when the environment is not activated.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    if not torch.cuda.is_available():
        # Without CUDA DeepSpeed guesses an accelerator; name the CPU one so that guess
        # cannot land on another installed backend.
        env.setdefault("DS_ACCELERATOR", "cpu")
    return env


def launch(spec: FinetuneSpec, launcher: str = "none", nproc: int = 1, log_path: str | None = None) -> None:
    if launcher not in LAUNCHERS:
        raise ValueError(f"unknown launcher {launcher!r}; choose from {LAUNCHERS}")
    if launcher == "none":
        if spec.deepspeed:
            # DeepSpeed initialises torch.distributed from a launcher's RANK/WORLD_SIZE/
            # MASTER_ADDR; in-process it falls back to MPI discovery and fails obscurely.
            raise ValueError(f"DeepSpeed config {spec.deepspeed} needs launcher torchrun, not none")
        run(spec)
        return
    env = launcher_environment()
    if spec.deepspeed and nproc > 1 and env.get("DS_ACCELERATOR") == "cpu":
        # Without a GPU backend accelerate reports a DeepSpeed world of one process, so
        # every worker would act as rank 0 and the batch sizes DeepSpeed checks disagree.
        raise ValueError(f"DeepSpeed on CPU runs one worker only, not {nproc}")
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = str(Path(tmp) / "finetune_spec.json")
        spec.save(spec_path)
        command = launch_command(max(1, nproc), spec_path, free_port())
        log = open(log_path, "a") if log_path else None
        stop_note = stop_note_path(spec)
        stop_note.unlink(missing_ok=True)
        try:
            returncode = _run_passing_on_stops(command, env, log)
        finally:
            if log:
                log.close()
        if returncode != 0 and stop_note.exists():
            note = json.loads(stop_note.read_text())
            stop_note.unlink()
            raise JobStopped(note["signal"], note["progress"])
        if returncode != 0:
            where = f"; see {log_path}" if log_path else ""
            raise RuntimeError(f"{launcher} finetune exited with status {returncode}{where}")
