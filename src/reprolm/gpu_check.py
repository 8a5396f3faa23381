"""What a GPU job does first: run locally, take its own GPUs of the machine's
(:func:`claim_local_gpus`); then check that they can run the installed torch at the job's
precision, named in words before any library fails with its own.

The GPU install set pins torch's CUDA build, which needs an NVIDIA driver at least as new as
its CUDA release allows (minor-version compatibility within a CUDA major), and the paper's
stages run in bfloat16, which needs compute capability 8.0 (Ampere) or newer. A CPU build of
torch (``make setup``'s, the development set) has no GPU to check: its jobs run on the CPU,
which the log says.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import logging
import os
import re
import sys
from collections.abc import Iterator, MutableMapping
from pathlib import Path

LOG = logging.getLogger(__name__)

# The oldest Linux driver each CUDA major release runs on (NVIDIA's CUDA compatibility table,
# minor-version compatibility: any 12.x build runs on a 12.0 driver).
MINIMUM_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
DRIVER_VERSION_FILE = Path("/proc/driver/nvidia/version")
# One folder per GPU the driver runs, read without starting CUDA.
DRIVER_GPUS = Path("/proc/driver/nvidia/gpus")
BF16_CAPABILITY = (8, 0)
# Where the local jobs of every run on this machine (and user) hold their GPUs: one lock file
# per GPU and share, so that jobs spread over the GPUs and two share one only when more GPU
# jobs run at once than there are GPUs (a `--resources gpu=N` over the count, on purpose for
# tiny models). The kernel drops a lock when its job's process ends, however it ends.
LOCAL_GPU_LOCKS = Path("/tmp") / f"reprolm-gpus-{os.getuid()}"


class GpuUnusable(RuntimeError):
    """The job's GPUs cannot run it; the message says why and what to change."""


def driver_version(version_file: Path = DRIVER_VERSION_FILE) -> str | None:
    """The loaded NVIDIA kernel driver's version, as it writes it, or None where none is loaded."""
    try:
        text = version_file.read_text()
    except OSError:
        return None
    found = re.search(r"Kernel Module(?: for \w+)?\s+(\d+(?:\.\d+)+)", text)
    return found.group(1) if found else None


def _parts(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def check_gpus(asked: int, precision: str | None, version_file: Path = DRIVER_VERSION_FILE) -> None:
    """Raise GpuUnusable naming the problem where a job asking ``asked`` GPUs cannot use them
    at ``precision``: no CUDA device usable (no driver, or one too old for torch's CUDA),
    fewer devices than granted, or bfloat16 on a GPU without it."""
    import torch

    built_for = torch.version.cuda
    if built_for is None:
        LOG.warning(
            "this job asks for %d GPU(s) but torch %s is a CPU build: it runs on the CPU (make setup-gpu installs "
            "the GPU set)",
            asked,
            torch.__version__,
        )
        return
    if not torch.cuda.is_available():
        driver = driver_version(version_file)
        cuda_major = int(built_for.split(".")[0])
        needed = MINIMUM_DRIVER.get(cuda_major)
        if driver is None:
            why = f"no NVIDIA driver is loaded on this node ({version_file} is not there)"
        elif needed is not None and _parts(driver) < _parts(needed):
            why = (
                f"the NVIDIA driver {driver} on this node is older than torch {torch.__version__}'s "
                f"CUDA {built_for} needs (>= {needed}): update the driver, or route the job to nodes with one"
            )
        else:
            why = f"CUDA reports no usable device under driver {driver} (CUDA_VISIBLE_DEVICES, or a GPU fault)"
        raise GpuUnusable(f"this job asks for {asked} GPU(s) and torch {torch.__version__} cannot use any: {why}")
    seen = torch.cuda.device_count()
    if seen < asked:
        raise GpuUnusable(f"this job asks for {asked} GPU(s) and torch sees {seen} (CUDA_VISIBLE_DEVICES)")
    if precision == "bfloat16":
        for device in range(seen):
            capability = torch.cuda.get_device_capability(device)
            if capability < BF16_CAPABILITY:
                raise GpuUnusable(
                    f"GPU {device} ({torch.cuda.get_device_name(device)}, compute capability "
                    f"{capability[0]}.{capability[1]}) has no bfloat16, which this job's precision asks for "
                    "(compute capability >= 8.0: A100, H100 or newer): route the stage to such GPUs "
                    "(gpu_model or constraint), or set its precision to float16 or float32"
                )


def machine_gpus(env: MutableMapping[str, str], driver_gpus: Path) -> list[str]:
    """The GPUs a local job may take, as CUDA_VISIBLE_DEVICES names them: those the run was
    given (CUDA_VISIBLE_DEVICES set for it) else one index per GPU the driver runs; none
    without a driver."""
    given = env.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return [device.strip() for device in given.split(",") if device.strip()]
    try:
        return [str(index) for index in range(sum(1 for _ in driver_gpus.iterdir()))]
    except OSError:
        return []


@contextlib.contextmanager
def claim_local_gpus(
    asked: int,
    env: MutableMapping[str, str] | None = None,
    locks: Path | None = None,
    driver_gpus: Path | None = None,
) -> Iterator[list[str]]:
    """Hold ``asked`` of this machine's GPUs for a local job's life, and name them in
    CUDA_VISIBLE_DEVICES for the job and every process it starts (torchrun's workers, vLLM's).

    Snakemake counts a local run's ``gpu`` resource but says no job which GPUs are its own, so
    without this every job sees every GPU: a one-GPU finetune takes GPU 0 whatever else runs
    there, and an inference model is spread over all of them. Free GPUs are taken first; a GPU
    already held is shared (with a warning) only when none is free. Under SLURM the grant
    decides, and without a driver there is nothing to take: both yield no GPUs."""
    env = os.environ if env is None else env
    locks = LOCAL_GPU_LOCKS if locks is None else locks
    devices = machine_gpus(env, DRIVER_GPUS if driver_gpus is None else driver_gpus)
    if not asked or env.get("SLURM_JOB_ID") or asked > len(devices):
        # More GPUs asked than there are: check_gpus says so in words.
        yield []
        return
    locks.mkdir(parents=True, exist_ok=True)
    held: dict[str, int] = {}
    shared = []
    before = env.get("CUDA_VISIBLE_DEVICES")
    try:
        for share in itertools.count():
            for device in devices:
                if len(held) == asked:
                    break
                if device in held:
                    continue
                descriptor = os.open(locks / f"gpu{device}.{share}", os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(descriptor)
                    continue
                held[device] = descriptor
                if share:
                    shared.append(device)
            if len(held) == asked:
                break
        claimed = [device for device in devices if device in held]
        if shared:
            LOG.warning(
                "GPU %s shared with another local job: more GPU jobs run at once than this machine's %d GPU(s) "
                "(snakemake --resources gpu=N above that count)",
                ", ".join(shared),
                len(devices),
            )
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            LOG.warning(
                "CUDA started in this job before it took its GPUs: this process still sees all of them, "
                "the processes it starts see %s",
                ",".join(claimed),
            )
        env["CUDA_VISIBLE_DEVICES"] = ",".join(claimed)
        LOG.info("this job holds GPU(s) %s of %s", ",".join(claimed), ",".join(devices))
        yield claimed
    finally:
        for descriptor in held.values():
            os.close(descriptor)
        if before is None:
            env.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            env["CUDA_VISIBLE_DEVICES"] = before
