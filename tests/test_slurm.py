"""Real jobs through a real SLURM: the Snakemake SLURM executor and the project's profile.

A small self-contained workflow (not the project's) runs against the session's test cluster
(tests/slurm_cluster.py via the `slurm_cluster` fixture). SLURM's own accounting (`sacct`)
is the witness that jobs went through it. Every snakemake call has a timeout, so a run that
hangs fails its test instead of the CI job.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from workflow_helpers import REPO, SNAKEMAKE

pytestmark = pytest.mark.slurm

RUN_TIMEOUT_S = 240
# Test jobs end within seconds; the plugin's default first status check comes after 40 s.
FAST_STATUS = ("--slurm-init-seconds-before-status-checks", "1")

SNAKEFILE = """
from reprolm.config.resources import attempt_size


rule all:
    input:
        "cpu.txt",
        "gpu.txt",


rule cpu:
    output:
        "cpu.txt",
    threads: config.get("cpu_threads", 1)
    shell:
        "echo job=$SLURM_JOB_ID >> {output}"


# Appends, so that a command started once per GPU task would leave two lines.
rule gpu:
    output:
        "gpu.txt",
    resources:
        gpu=config.get("gpus", 1),
    shell:
        "echo job=$SLURM_JOB_ID CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES >> {output}"


rule fail:
    output:
        "fail.txt",
    shell:
        "echo this rule fails on purpose; exit 3"


# tasks_per_gpu=0 as profiles/slurm sets it: otherwise the plugin (2.6.1) adds
# --ntasks-per-gpu=1, SLURM spreads the 3 tasks over 2 nodes and, as the partition has 1,
# accepts the job and leaves it pending (PartitionConfig) instead of refusing it.
rule too_many_gpus:
    output:
        "too_many_gpus.txt",
    resources:
        gpu=config.get("gpus", 1),
        tasks_per_gpu=0,
    shell:
        "touch {output}"


# Fails on its first attempt; each attempt asks for memory and time as the project's GPU
# rules do (reprolm.config.resources.attempt_size).
rule retried:
    output:
        "retried.txt",
    resources:
        mem_mb=lambda wildcards, attempt: attempt_size(config, "mem_mb", 1000, attempt),
        runtime=lambda wildcards, attempt: attempt_size(config, "runtime", 10, attempt),
    shell:
        "echo job=$SLURM_JOB_ID >> attempts.txt; "
        "if [ $(wc -l < attempts.txt) -ge 2 ]; then touch {output}; else exit 1; fi"


rule unknown_partition:
    output:
        "unknown_partition.txt",
    resources:
        slurm_partition="nosuchpartition",
    shell:
        "touch {output}"
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    return tmp_path


def run_snakemake(cluster, workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [SNAKEMAKE, *args], cwd=workdir, env=cluster.env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
    )


def output_of(result: subprocess.CompletedProcess) -> str:
    return result.stdout + result.stderr


def the_line(path: Path) -> str:
    lines = path.read_text().splitlines()
    assert len(lines) == 1, f"{path.name}: the rule's command ran {len(lines)} times: {lines}"
    return lines[0]


def job_record(cluster, line: str) -> dict:
    """sacct's record of the job whose id the rule wrote as `job=<id>`."""
    job_id = re.match(r"job=(\d+)", line).group(1)
    records = [r for r in cluster.sacct("--jobs", job_id) if r["JobID"] == job_id]
    assert records, f"sacct has no job {job_id}"
    return records[0]


def tres(record: dict, key: str) -> dict:
    return dict(item.split("=", 1) for item in record[key].split(",") if item)


def test_cpu_and_gpu_rules_run_as_slurm_jobs(slurm_cluster, workdir):
    result = run_snakemake(slurm_cluster, workdir, "--executor", "slurm", "--jobs", "2", *FAST_STATUS)
    assert result.returncode == 0, output_of(result)[-5000:]

    cpu = job_record(slurm_cluster, the_line(workdir / "cpu.txt"))
    gpu_line = the_line(workdir / "gpu.txt")
    gpu = job_record(slurm_cluster, gpu_line)
    assert (cpu["State"], cpu["Comment"]) == ("COMPLETED", "rule_cpu")
    assert (gpu["State"], gpu["Comment"]) == ("COMPLETED", "rule_gpu")
    assert cpu["Partition"] == gpu["Partition"] == slurm_cluster.partition
    assert "gres/gpu" not in tres(cpu, "AllocTRES")
    assert tres(gpu, "ReqTRES")["gres/gpu"] == tres(gpu, "AllocTRES")["gres/gpu"] == "1"
    assert re.fullmatch(r"job=\d+ CUDA_VISIBLE_DEVICES=\d", gpu_line), gpu_line


@pytest.mark.parametrize(
    "growth, second_attempt",
    [
        (None, {"mem": "1000M", "minutes": 10}),
        ({"factor": 2, "max_mem_mb": 1500}, {"mem": "1500M", "minutes": 20}),
    ],
)
def test_a_retry_asks_slurm_for_the_same_size_unless_growth_is_configured(
    slurm_cluster, workdir, growth, second_attempt
):
    """A finetune resumes from its checkpoint, so its retry needs no more; a doubled request
    could exceed every partition's limit and pend forever. retry_growth grows it, capped."""
    import yaml

    (workdir / "retry.yaml").write_text(yaml.safe_dump({"retry_growth": growth} if growth else {}))
    result = run_snakemake(
        slurm_cluster,
        workdir,
        "--executor",
        "slurm",
        "--jobs",
        "1",
        *FAST_STATUS,
        "--retries",
        "1",
        "--configfile",
        "retry.yaml",
        "--",
        "retried.txt",
    )
    assert result.returncode == 0, output_of(result)[-5000:]
    attempts = [job_record(slurm_cluster, line) for line in (workdir / "attempts.txt").read_text().splitlines()]
    assert [a["State"] for a in attempts] == ["FAILED", "COMPLETED"]
    assert tres(attempts[0], "ReqTRES")["mem"] == "1000M"
    assert tres(attempts[1], "ReqTRES")["mem"] == second_attempt["mem"]
    limits = [
        slurm_cluster.run("sacct", "-X", "-n", "-P", "-j", a["JobID"], "--format=TimelimitRaw").stdout.strip()
        for a in attempts
    ]
    assert limits == ["10", str(second_attempt["minutes"])]


def test_failing_rule_fails_the_run(slurm_cluster, workdir):
    result = run_snakemake(slurm_cluster, workdir, "--executor", "slurm", "--jobs", "1", *FAST_STATUS, "fail.txt")
    out = output_of(result)
    assert result.returncode != 0, out[-5000:]
    assert "Error in rule fail" in out
    failed = re.search(r"SLURM-job '(\d+)' failed, SLURM status is: 'FAILED'", out)
    assert failed, out[-5000:]
    assert slurm_cluster.sacct("--jobs", failed.group(1))[0]["State"] == "FAILED"
    assert not (workdir / "fail.txt").exists()


@pytest.mark.parametrize(
    "target, reason",
    [
        ("too_many_gpus.txt", "Requested node configuration is not available"),
        ("unknown_partition.txt", "invalid partition specified: nosuchpartition"),
    ],
)
def test_unsatisfiable_request_ends_the_run_with_slurms_reason(slurm_cluster, workdir, target, reason):
    result = run_snakemake(
        slurm_cluster,
        workdir,
        "--executor",
        "slurm",
        "--jobs",
        "1",
        *FAST_STATUS,
        "--config",
        f"gpus={slurm_cluster.gpus + 1}",
        "--",
        target,
    )
    out = output_of(result)
    assert result.returncode != 0, out[-5000:]
    assert "SLURM sbatch failed" in out and reason in out, out[-5000:]


def test_project_profile_submits_cpu_and_gpu_jobs(slurm_cluster, workdir):
    """profiles/slurm as documented (a workflow profile), plus the test-only additions."""
    result = run_snakemake(
        slurm_cluster,
        workdir,
        "--workflow-profile",
        str(REPO / "profiles" / "slurm"),
        "--profile",
        str(REPO / "tests" / "slurm_profile_test"),
        "--config",
        f"gpus={slurm_cluster.gpus}",
        f"cpu_threads={slurm_cluster.cpus}",
    )
    assert result.returncode == 0, output_of(result)[-5000:]

    cpu = job_record(slurm_cluster, the_line(workdir / "cpu.txt"))
    gpu_line = the_line(workdir / "gpu.txt")
    gpu = job_record(slurm_cluster, gpu_line)
    assert cpu["State"] == gpu["State"] == "COMPLETED"
    # The profile's default-resources (4000 MB on the first attempt), and threads not capped.
    assert tres(cpu, "ReqTRES")["mem"] == "4000M"
    assert tres(cpu, "AllocTRES")["cpu"] == str(slurm_cluster.cpus)
    # All GPUs of the node, of the model set-resources asked for, one command for all of them.
    requested = tres(gpu, "ReqTRES")
    assert requested["gres/gpu"] == requested[f"gres/gpu:{slurm_cluster.gpu_type}"] == str(slurm_cluster.gpus)
    visible = gpu_line.split("CUDA_VISIBLE_DEVICES=")[1]
    assert sorted(visible.split(",")) == [str(i) for i in range(slurm_cluster.gpus)]
