"""Jobs that SLURM stops, on the session's test cluster: a finetune that runs past its time
limit, and a generation preempted by an urgent job.

The small config of ``test_slurm_workflow`` with two changes: the finetune trains on the CPU
partition for longer than its one-minute time limit (its first attempt paced, a few hundred
steps of at least ``PACED_STEP_S`` each), with no early warning
(``stop_warning_s: 0``), so SLURM's own SIGTERM at the limit stops it; and the generation of
the base model (on the GPU partition, two prompts per shard) is preempted as soon as its first
shard is saved, by a job in the ``urgent`` partition that needs both GPUs. The finetune must
save a checkpoint on the SIGTERM, fail as TIMEOUT, and be retried by Snakemake from that
checkpoint; the generation must save its shard, wait out the grace time, be requeued by SLURM
under the same job id (the executor waits for it: one job, not two), and resume after the
saved shard. Their provenance records name the stopped attempt.

Their inputs (tokenizer, base model, datasets) are made once, by a local run, and copied: the
SLURM workflow test makes those on the cluster. From them, the finetune and the generation run
through profiles/slurm in one folder and locally, uninterrupted, in the other, at once.
Both must end byte-identical to the local run's.

The test raises the retried finetune's time limit, as a cluster's admin would, so that how far
a busy machine gets in one minute does not decide how many retries it takes.
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import json
import re
import shutil
import time
from pathlib import Path

import pytest

from reprolm.provenance import content_hash, provenance_path
from slurm_cluster import GPU_PARTITION, GPU_TYPE, URGENT_PARTITION
from test_slurm_workflow import (
    BASE,
    PROFILE,
    PROMPTSET,
    RECIPE,
    cluster_env,
    finish,
    prepared,
    rule_of,
    run_id,
    small_config,
    start,
    write_small_config,
)
from workflow_helpers import copy_run, snakemake_env

RUN_TIMEOUT_S = 600
pytestmark = [pytest.mark.slurm, pytest.mark.timeout(RUN_TIMEOUT_S + 120)]
MODEL = f"results/models/{BASE}/{RECIPE}"
GENERATION = f"results/generations/{BASE}/pretrained/{PROMPTSET}.parquet"
SHARDS = f"results/checkpoints/generate/{BASE}/pretrained/{PROMPTSET}"
DATASET = "results/datasets/tlg/test.parquet"
# The finetune's first attempt on the cluster takes at least PACED_STEP_S a step
# (tests/slurm_profile_test/site/sitecustomize.py): its steps last well over the 60-90 s after
# which SLURM ends a one-minute job (it looks at time limits every 30 s), while the CPU does
# each in about 0.1 s. The retry, resumed from its checkpoint, and the local run are unpaced.
FINETUNE_STEPS, PACED_STEP_S = 150, 0.8
# Enough shards (about 0.15 s each) that the run is still generating when the urgent job lands.
PROMPTS, SHARD_SIZE = 96, 2


def stops_config() -> dict:
    config = small_config()
    base = config["base_models"][BASE]
    base["resources"] = {
        "finetune": {"gpus": 0, "threads": 1, "runtime": 1, "stop_warning_s": 0},
        "generate": {"gpus": 1, "cpus_per_gpu": 1, "slurm_partition": GPU_PARTITION, "gpu_model": GPU_TYPE},
    }
    config["resources"] = {}
    # Checkpoints only where a stop asks for one.
    config["recipes"][RECIPE].update(max_steps=FINETUNE_STEPS, save_steps=100_000, logging_steps=100)
    config["datasets"]["tlg"]["params"]["num"] = PROMPTS
    config["promptsets"][PROMPTSET]["sampling"]["max_new_tokens"] = 200
    config["generation"] = {"backend": "transformers", "batch_size": SHARD_SIZE, "shard_size": SHARD_SIZE}
    return config


def prepared_for_stops(work: Path) -> Path:
    prepared(work)
    write_small_config(work, stops_config())
    return work


def upstream_made_locally(work: Path) -> Path:
    """The stops config's inputs of the finetune and the generation, made by a local run (the
    SLURM workflow test makes them on the cluster)."""
    upstream = (f"resources/models/{BASE}", "results/datasets/ruler_train/train.parquet", DATASET)
    finish(start(prepared_for_stops(work), snakemake_env(work), "--cores", "2", targets=upstream))
    return work


def steer(cluster, work: Path, run_output: concurrent.futures.Future) -> None:
    """Until the run ends: once the generation has saved a shard, submit the urgent job that
    preempts it; give every retry of the finetune ten minutes."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    preempted, finetunes = False, []
    while not run_output.done():
        assert time.monotonic() < deadline, "the run did not end within the time limit"
        if not preempted and list((work / SHARDS).glob("*/shard-00000.jsonl")):
            cluster.run(
                "sbatch",
                "--parsable",
                "--partition",
                URGENT_PARTITION,
                f"--gres=gpu:{GPU_TYPE}:2",
                "--cpus-per-task",
                "1",
                "--mem",
                "100",
                "--job-name",
                "urgent",
                "--output",
                "/dev/null",
                "--wrap",
                "sleep 1",
            )
            preempted = True
        queue = cluster.run("squeue", "--noheader", "--format=%i|%k").stdout.split()
        for job_id in (job.split("|")[0] for job in queue if job.split("|")[1].startswith("rule_finetune")):
            if job_id not in finetunes:
                finetunes.append(job_id)
                if len(finetunes) > 1:
                    cluster.run("scontrol", "update", f"JobId={job_id}", "TimeLimit=10")
        time.sleep(0.5)
    assert preempted, "the run ended before the generation saved a shard"


@pytest.fixture(scope="module")
def stopped_runs(slurm_cluster, tmp_path_factory):
    """(SLURM work dir, local work dir, SLURM run's output, sacct records with requeues)."""
    local_work = upstream_made_locally(tmp_path_factory.mktemp("local_stops"))
    cluster_work = copy_run(local_work, tmp_path_factory.mktemp("slurm_stops"))
    shutil.copy2(local_work / "small.yaml", cluster_work)
    since = dt.datetime.now().replace(microsecond=0) - dt.timedelta(seconds=1)
    paced = dict(cluster_env(cluster_work, slurm_cluster), REPROLM_TEST_PACED_STEP_S=str(PACED_STEP_S))
    on_cluster = start(cluster_work, paced, *PROFILE, targets=(MODEL, GENERATION))
    local = start(local_work, snakemake_env(local_work), "--cores", "2", targets=(MODEL, GENERATION))
    with concurrent.futures.ThreadPoolExecutor(1) as reader:
        # Read the run's output in a thread, so that it never waits on a full pipe meanwhile.
        cluster_output = reader.submit(finish, on_cluster)
        try:
            steer(slurm_cluster, cluster_work, cluster_output)
        except BaseException:
            for process in (on_cluster, local):
                process.kill()
            local.communicate()
            raise
        cluster_out = cluster_output.result()
    finish(local)
    records = [
        r
        for r in slurm_cluster.sacct("--duplicates", "--name", run_id(cluster_out), "--starttime", since.isoformat())
        if "." not in r["JobID"]
    ]
    return cluster_work, local_work, cluster_out, records


def jobs_of(records: list[dict], rule: str) -> list[dict]:
    return [r for r in records if rule_of(r) == rule]


def stopped_attempts(work: Path, output: str) -> list[dict]:
    return json.loads(provenance_path(work / output).read_text())["execution"].get("stopped_attempts", [])


@pytest.mark.parametrize("output", [MODEL, GENERATION])
def test_stopped_jobs_end_as_the_uninterrupted_run(stopped_runs, output):
    cluster_work, local_work, _, _ = stopped_runs
    assert content_hash(cluster_work / output) == content_hash(local_work / output)
    assert not stopped_attempts(local_work, output)


def test_a_finetune_past_its_time_limit_is_retried_from_its_checkpoint(stopped_runs):
    cluster_work, _, cluster_out, records = stopped_runs
    finetunes = jobs_of(records, "finetune")
    assert [job["State"] for job in finetunes] == ["TIMEOUT", "COMPLETED"], finetunes
    first, retry = finetunes
    # The retry's log (each attempt rewrites it): it trained on from the saved step.
    log = (cluster_work / "logs" / "finetune" / BASE / f"{RECIPE}.log").read_text()
    resumed = int(log.split("resuming from ")[-1].split("checkpoint-")[1].split()[0])
    assert 0 < resumed < FINETUNE_STEPS
    assert f"global step {resumed}" in log and f"Total optimization steps = {FINETUNE_STEPS:,}" in log
    assert "Trying to restart job" in cluster_out
    stops = stopped_attempts(cluster_work, MODEL)
    assert [(stop["slurm_job_id"], stop["signal"], stop["cause"], stop["progress"]) for stop in stops] == [
        (first["JobID"], "SIGTERM", "time limit or cancel", f"checkpoint at step {resumed}")
    ]
    execution = json.loads(provenance_path(cluster_work / MODEL).read_text())["execution"]
    assert execution["slurm_job_id"] == retry["JobID"]
    assert not list((cluster_work / "results" / "checkpoints" / "stopped_attempts").glob("*/*.jsonl"))


def test_a_preempted_generation_is_requeued_once_and_resumes_after_its_saved_shards(stopped_runs):
    cluster_work, _, cluster_out, records = stopped_runs
    generations = jobs_of(records, "generate")
    # One job id: SLURM requeued it; Snakemake neither failed it nor submitted another.
    assert len({job["JobID"] for job in generations}) == 1, generations
    assert [job["State"] for job in generations] == ["PREEMPTED", "COMPLETED"], generations
    # Submitted once, packed with its model's other generations. (The SLURM executor prints
    # no "rule generate:" block for a job it submits, only its submission line.)
    submitted = r"has been submitted with SLURM jobid \d+ \(log: \S*/group_generate_\w+_generate/"
    assert len(re.findall(submitted, cluster_out)) == 1
    [stop] = stopped_attempts(cluster_work, GENERATION)
    assert (stop["signal"], stop["cause"], stop["slurm_job_id"]) == ("SIGTERM", "preemption", generations[0]["JobID"])
    saved = int(stop["progress"].split(" of ")[0])
    assert 1 <= saved < PROMPTS // SHARD_SIZE
    log = (cluster_work / "logs" / "generate" / BASE / "pretrained" / f"{PROMPTSET}.log").read_text()
    assert log.count("kept from an earlier attempt") == saved
    assert not list((cluster_work / SHARDS).glob("*/shard-*.jsonl"))
