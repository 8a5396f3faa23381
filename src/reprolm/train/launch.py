"""Start a finetune in-process, or over several workers with torchrun or deepspeed.

On a SLURM node the rule asks for one task and the launcher starts one worker per granted
GPU itself. On CPU, ``torchrun --nproc_per_node 1`` runs the same DeepSpeed path with the
gloo backend, which is how the tests exercise it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from reprolm.train.finetune import FinetuneSpec, run

LAUNCHERS = ("none", "torchrun", "deepspeed")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch_command(launcher: str, nproc: int, spec_path: str, port: int) -> list[str]:
    bindir = Path(sys.executable).parent
    if launcher == "torchrun":
        torchrun = shutil.which("torchrun", path=str(bindir)) or "torchrun"
        return [torchrun, f"--nproc_per_node={nproc}", "--master_addr=127.0.0.1",
                f"--master_port={port}", "-m", "reprolm.train.finetune", spec_path]
    if launcher == "deepspeed":
        deepspeed = shutil.which("deepspeed", path=str(bindir)) or "deepspeed"
        return [deepspeed, f"--num_gpus={nproc}", f"--master_port={port}",
                "--module", "reprolm.train.finetune", spec_path]
    raise ValueError(f"unknown launcher {launcher!r}; choose from {LAUNCHERS}")


def launch(spec: FinetuneSpec, launcher: str = "none", nproc: int = 1, log_path: str | None = None) -> None:
    if launcher == "none":
        run(spec)
        return
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = str(Path(tmp) / "finetune_spec.json")
        spec.save(spec_path)
        command = launch_command(launcher, max(1, nproc), spec_path, free_port())
        env = dict(os.environ)
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        log = open(log_path, "a") if log_path else None
        try:
            result = subprocess.run(command, env=env, stdout=log, stderr=subprocess.STDOUT if log else None,
                                    check=False)
        finally:
            if log:
                log.close()
        if result.returncode != 0:
            where = f"; see {log_path}" if log_path else ""
            raise RuntimeError(f"{launcher} finetune exited with status {result.returncode}{where}")
