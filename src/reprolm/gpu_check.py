"""What a GPU job checks first: that the node's GPUs can run the installed torch at the job's
precision, named in words before any library fails with its own.

The GPU install set pins torch's CUDA build, which needs an NVIDIA driver at least as new as
its CUDA release allows (minor-version compatibility within a CUDA major), and the paper's
stages run in bfloat16, which needs compute capability 8.0 (Ampere) or newer. A CPU build of
torch (``make setup``'s, the development set) has no GPU to check: its jobs run on the CPU,
which the log says.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

LOG = logging.getLogger(__name__)

# The oldest Linux driver each CUDA major release runs on (NVIDIA's CUDA compatibility table,
# minor-version compatibility: any 12.x build runs on a 12.0 driver).
MINIMUM_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
DRIVER_VERSION_FILE = Path("/proc/driver/nvidia/version")
BF16_CAPABILITY = (8, 0)


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
