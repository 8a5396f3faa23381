"""The check every GPU job runs first (reprolm.gpu_check): the node's driver, devices and
bfloat16 support against the installed torch and the job's precision, each problem in words.

No GPU here: torch's CUDA queries (``torch.version.cuda``, ``torch.cuda.is_available``,
``device_count``, ``get_device_capability``, ``get_device_name``) are replaced by a stand-in
node at that boundary, and the driver's version file by one written here.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest
import torch

from reprolm.gpu_check import GpuUnusable, check_gpus, claim_local_gpus, driver_version
from reprolm.provenance import provenance_path

# What /proc/driver/nvidia/version says on a node with NVIDIA's driver loaded.
DRIVER_FILE = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  Tue Jul  8 19:02:34 UTC 2025\n"
    "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
)


def stand_in_node(monkeypatch, cuda="13.0", available=True, devices=((9, 0, "NVIDIA H100 80GB HBM3"),)):
    """A node as torch's CUDA API reports it: the build's CUDA release (None: a CPU build),
    whether CUDA works, and each device's (major, minor, name)."""
    monkeypatch.setattr(torch.version, "cuda", cuda)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: available)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(devices))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device: devices[device][:2])
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: devices[device][2])


def driver(tmp_path, version: str):
    path = tmp_path / "version"
    path.write_text(DRIVER_FILE.format(version=version))
    return path


def test_a_usable_node_passes_and_the_driver_version_is_read(tmp_path, monkeypatch):
    assert driver_version(driver(tmp_path, "580.65.06")) == "580.65.06"
    assert driver_version(tmp_path / "absent") is None
    stand_in_node(monkeypatch, devices=[(8, 0, "NVIDIA A100-SXM4-80GB")] * 4)
    check_gpus(4, "bfloat16")


def test_a_cpu_build_of_torch_runs_the_job_on_the_cpu_and_says_so(monkeypatch, caplog):
    stand_in_node(monkeypatch, cuda=None, available=False, devices=())
    with caplog.at_level(logging.WARNING):
        check_gpus(2, "bfloat16")
    assert "this job asks for 2 GPU(s) but torch" in caplog.text and "is a CPU build: it runs on the CPU" in caplog.text


def test_a_driver_too_old_for_torchs_cuda_is_named_with_both_versions(tmp_path, monkeypatch):
    stand_in_node(monkeypatch, cuda="13.0", available=False)
    with pytest.raises(GpuUnusable) as refused:
        check_gpus(1, "bfloat16", driver(tmp_path, "535.183.01"))
    assert (
        f"cannot use any: the NVIDIA driver 535.183.01 on this node is older than torch {torch.__version__}'s "
        "CUDA 13.0 needs (>= 580.65.06)"
    ) in str(refused.value)
    with pytest.raises(GpuUnusable, match=r"no NVIDIA driver is loaded on this node \(\S+absent is not there\)"):
        check_gpus(1, "bfloat16", tmp_path / "absent")
    # A driver new enough, and still no device: CUDA's visible devices or a fault.
    with pytest.raises(GpuUnusable, match="CUDA reports no usable device under driver 580.95.05"):
        check_gpus(1, "bfloat16", driver(tmp_path, "580.95.05"))


def test_fewer_devices_than_granted_and_bfloat16_on_an_older_gpu_are_refused(monkeypatch):
    stand_in_node(monkeypatch, devices=[(7, 0, "Tesla V100-SXM2-32GB")])
    with pytest.raises(GpuUnusable, match=r"asks for 2 GPU\(s\) and torch sees 1"):
        check_gpus(2, "float16")
    with pytest.raises(GpuUnusable) as refused:
        check_gpus(1, "bfloat16")
    assert str(refused.value).startswith(
        "GPU 0 (Tesla V100-SXM2-32GB, compute capability 7.0) has no bfloat16, which this job's precision asks for"
    )
    check_gpus(1, "float16")
    check_gpus(1, None)


def driver_with(tmp_path, count: int):
    """A stand-in for /proc/driver/nvidia/gpus (no GPU here): one folder per GPU."""
    gpus = tmp_path / "driver_gpus"
    for index in range(count):
        (gpus / f"0000:{index:02x}:00.0").mkdir(parents=True)
    return gpus


def test_local_jobs_take_free_gpus_first_and_share_only_past_the_count(tmp_path, caplog):
    gpus, locks = driver_with(tmp_path, 2), tmp_path / "locks"
    first, second, third = {}, {}, {}
    with (
        claim_local_gpus(1, first, locks, gpus) as taken_first,
        claim_local_gpus(1, second, locks, gpus) as taken_second,
    ):
        assert (taken_first, first["CUDA_VISIBLE_DEVICES"]) == (["0"], "0")
        assert (taken_second, second["CUDA_VISIBLE_DEVICES"]) == (["1"], "1")
        with caplog.at_level(logging.WARNING), claim_local_gpus(2, third, locks, gpus) as taken_third:
            assert taken_third == ["0", "1"]
        assert "GPU 0, 1 shared with another local job" in caplog.text
    # Released with their jobs, the environment as it was.
    assert first == {} and second == {}
    with claim_local_gpus(2, {}, locks, gpus) as again:
        assert again == ["0", "1"]


def test_a_gpu_held_by_another_process_is_left_to_it(tmp_path):
    gpus, locks = driver_with(tmp_path, 2), tmp_path / "locks"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from reprolm.gpu_check import claim_local_gpus\n"
            f"with claim_local_gpus(1, {{}}, Path({str(locks)!r}), Path({str(gpus)!r})) as taken:\n"
            "    print(taken[0], flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "0"
        with claim_local_gpus(1, {}, locks, gpus) as taken:
            assert taken == ["1"]
    finally:
        holder.communicate("")
    # The holder's process ended: its GPU is free again.
    with claim_local_gpus(1, {}, locks, gpus) as taken:
        assert taken == ["0"]


def test_the_runs_own_gpus_slurms_grant_and_no_driver_are_respected(tmp_path):
    gpus, locks = driver_with(tmp_path, 4), tmp_path / "locks"
    given = {"CUDA_VISIBLE_DEVICES": "2,3"}
    with claim_local_gpus(1, given, locks, gpus) as taken:
        assert taken == ["2"] and given["CUDA_VISIBLE_DEVICES"] == "2"
    assert given == {"CUDA_VISIBLE_DEVICES": "2,3"}
    on_slurm = {"SLURM_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": "0"}
    with claim_local_gpus(1, on_slurm, locks, gpus) as taken:
        assert taken == [] and on_slurm["CUDA_VISIBLE_DEVICES"] == "0"
    with claim_local_gpus(1, {}, locks, tmp_path / "no_driver") as taken:
        assert taken == []
    # More than the machine has: nothing taken, check_gpus names the shortfall.
    with claim_local_gpus(5, {}, locks, gpus) as taken:
        assert taken == []


def test_a_local_gpu_job_runs_on_the_gpus_it_took_and_records_them(tmp_path, monkeypatch):
    """The job step (reprolm.provenance.tracked_step) of a rule asking one GPU, on a stand-in
    two-GPU machine whose GPU 0 another job holds: the step runs with GPU 1 named in
    CUDA_VISIBLE_DEVICES, its provenance record says so, and the lock goes with the step."""
    from snakemake.iocontainers import InputFiles, Log, OutputFiles, Params, ResourceList, Wildcards
    from snakemake.script import Snakemake

    from reprolm import gpu_check
    from reprolm.provenance import tracked_step

    gpus, locks = driver_with(tmp_path, 2), tmp_path / "locks"
    monkeypatch.setattr(gpu_check, "DRIVER_GPUS", gpus)
    monkeypatch.setattr(gpu_check, "LOCAL_GPU_LOCKS", locks)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for variable in ("SLURM_JOB_ID", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
    job = Snakemake(
        InputFiles(),
        OutputFiles(["out.txt"]),
        Params(),
        Wildcards(),
        1,
        ResourceList(fromdict={"gpu": 1}),
        Log(["logs/job.log"]),
        {},
        "generate",
        None,
    )
    with claim_local_gpus(1, {}, locks, gpus) as other:
        assert other == ["0"]
        with tracked_step(job):
            seen = os.environ["CUDA_VISIBLE_DEVICES"]
            (tmp_path / "out.txt").write_text("done")
    assert seen == "1" and "CUDA_VISIBLE_DEVICES" not in os.environ
    record = json.loads(provenance_path(tmp_path / "out.txt").read_text())
    assert record["execution"]["cuda_visible_devices"] == "1"
    assert "this job holds GPU(s) 1 of 0,1" in (tmp_path / "logs" / "job.log").read_text()
    with claim_local_gpus(2, {}, locks, gpus) as both:
        assert both == ["0", "1"]
