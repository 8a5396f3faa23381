"""The project's workflow through SLURM: real jobs, the same outputs as a local run.

A small config derived from config/config.yaml (one tiny base model, a few pretraining and
finetune steps, eight TLG prompts) gives the finetune, generate, train-before-test and
judge rules (fake) GPUs, routed by the config to a partition and node feature of their own.
Three targets: the TLG length score of the finetuned model needs raw sources (local rules),
a tokenizer, the base model, two datasets, the finetune, the generations and the score; a
one-epoch train-before-test of the base model on boolq; an FLR judge (the finetuned model
scoring) ranking preference pairs. They run in two scratch copies at once: through profiles/slurm on the session's test cluster,
and locally. Both give every rule the threads it declares (at most 2, the local --cores;
on the cluster they become the job's CPUs and OMP_NUM_THREADS), so kernels reduce in the
same order and even the trained weights must come out bit-identical.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
from pathlib import Path

import pytest

from reprolm.config import overlays
from reprolm.provenance import content_hash, provenance_path
from reprolm.stages import pack_groups
from slurm_cluster import GPU_PARTITION, GPU_TYPE, NODE_FEATURE, SHORT_PLUGIN_WAITS
from workflow_helpers import REPO, SNAKEMAKE, scratch_copy, snakemake_env

RUN_TIMEOUT_S = 600
# Each snakemake call is bounded by RUN_TIMEOUT_S; this bounds a test with its set-up.
pytestmark = [pytest.mark.slurm, pytest.mark.timeout(2 * RUN_TIMEOUT_S + 120)]
BASE, RECIPE, PROMPTSET, METRIC = "tiny_llama", "ruler", "tlg", "length_levels"
TARGET = f"results/scores/{METRIC}/{BASE}/{RECIPE}/{PROMPTSET}.json"
# GPU work beyond the finetune chain: a train-before-test (LoRA on the base model) and a
# judge that loads a model (FLR, scoring with the finetuned model) ranking preference pairs.
TASK, JUDGE, PAIRS = "boolq", "flr_ruler", "prefs"
TBT_TARGET = f"results/scores/train_before_test/{BASE}/pretrained/{TASK}.json"
JUDGE_TARGET = f"results/scores/pair_accuracy/{JUDGE}/{PAIRS}/test.json"
TARGETS = (TARGET, TBT_TARGET, JUDGE_TARGET)
COMPARED = (
    "resources/tokenizers/tiny_bpe",
    f"resources/models/{BASE}",
    "results/datasets/tlg/test.parquet",
    "results/datasets/ruler_train/train.parquet",
    f"results/models/{BASE}/{RECIPE}",
    f"results/generations/{BASE}/{RECIPE}/{PROMPTSET}.parquet",
    TARGET,
    TBT_TARGET,
    JUDGE_TARGET,
)
# Jobs the target needs, by the rule that makes them.
CLUSTER_JOBS = {
    "tokenizer": 1,
    "build_base_model": 1,
    "dataset": 3,
    "finetune": 1,
    "generate": 1,
    "score": 1,
    "train_before_test": 1,
    "pair_accuracy": 1,
}
# GPUs per rule (and config stage): two for the finetune, so that the GPU indices a
# provenance record names are told from a GPU count.
GPUS = {"finetune": 2, "generate": 1, "train_before_test": 1, "pair_accuracy": 1}
GPU_ROUTE = {"slurm_partition": GPU_PARTITION, "constraint": NODE_FEATURE}


def _raw_sources_needed() -> int:
    config = small_config()
    needed = set(config["tokenizers"]["tiny_bpe"]["corpus"])
    needed |= set(config["base_models"][BASE]["build"]["pretrain"]["corpus"])
    for dataset in ("tlg", "ruler_train", PAIRS):
        needed |= set(config["datasets"][dataset]["sources"])
    needed |= {task["source"] for task in config["harmony"]["tasks"]}
    return len(needed)


# The config stage whose resources each rule takes (a judge's jobs: its model's evaluate).
STAGE_OF_RULE = {
    "build_base_model": "finetune",
    "finetune": "finetune",
    "generate": "generate",
    "train_before_test": "train_before_test",
    "pair_accuracy": "evaluate",
}
COMMENT = re.compile(r"rule_(\w+?)(?:_wildcards_.*)?")
PROFILE = ("--workflow-profile", "profiles/slurm", "--profile", str(REPO / "tests" / "slurm_profile_test"))


def small_config() -> dict:
    config = overlays.load(REPO / "config" / "config.yaml", REPO)
    # Ruler's chain covers every stage kind; the other studies only lengthen the run.
    config["studies"] = ["ruler"]
    for section in ("expo", "extrapolation", "flr", "gem", "leaderboard"):
        config.pop(section)
    config["harmony"]["tasks"] = [task for task in config["harmony"]["tasks"] if task["name"] == TASK]
    config["harmony"]["train"].update(num_train_epochs=1, max_num_train=16, max_num_valid=8, max_num_test=8)
    config["judges"] = {JUDGE: {**config["judges"]["flr"], "model": f"{BASE}/{RECIPE}"}}
    config["datasets"] = {name: config["datasets"][name] for name in ("tlg", "ruler_train", PAIRS)}
    base = config["base_models"][BASE]
    base["build"]["pretrain"]["steps"] = 4
    # One CPU per GPU: the test node has 2 CPUs, fewer than the default cpus_per_gpu (8). The
    # GPU stages are routed by the config (every model's GPU model, this model's partition
    # and node feature); the CPU rules stay on the default partition.
    base["resources"] = {
        STAGE_OF_RULE[rule]: {"gpus": gpus, "cpus_per_gpu": 1, **GPU_ROUTE} for rule, gpus in GPUS.items()
    }
    config["resources"] = {"default": {"gpu_model": GPU_TYPE}}
    config["base_models"] = {BASE: base}
    config["recipes"] = {RECIPE: {**config["recipes"][RECIPE], "max_steps": 4}}
    config["datasets"]["tlg"]["params"]["num"] = 8
    config["promptsets"] = {PROMPTSET: {**config["promptsets"][PROMPTSET], "sampling": {"max_new_tokens": 32}}}
    config["ruler"].update(bases=[BASE], recipes=[RECIPE], evaluations=[{"promptset": PROMPTSET, "metric": METRIC}])
    del config["ruler"]["lm_eval_suite"]
    config["ruler"].pop("lm_eval_metrics", None)
    return config


def expected_threads(rule: str) -> int:
    from reprolm.config.resources import model_settings

    stage = STAGE_OF_RULE.get(rule)
    return model_settings(small_config(), BASE, stage)["threads"] if stage else 1


def write_small_config(work: Path, config: dict) -> None:
    """``small.yaml``, written as JSON (valid YAML): Snakemake reads a JSON config file
    without its pure-Python YAML parser, which takes 0.16 s over this one in each of the
    run's Snakemake processes (two per SLURM job)."""
    (work / "small.yaml").write_text(json.dumps(config, indent=1))


def prepared(work: Path) -> Path:
    scratch_copy(work)
    write_small_config(work, small_config())
    return work


def outside_slurm(env: dict) -> dict:
    """``env`` without the variables of a SLURM job the tests themselves may run in."""
    return {k: v for k, v in env.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_"))}


def cluster_env(work: Path, cluster) -> dict:
    """The submitting host's environment, online as far as the hubs are concerned (this
    machine has no internet either way): cluster jobs must go offline by themselves."""
    env = {k: v for k, v in snakemake_env(work).items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    return dict(env, SLURM_CONF=cluster.env["SLURM_CONF"], PATH=cluster.env["PATH"], **SHORT_PLUGIN_WAITS)


def start(work: Path, env: dict, *args: str, targets: tuple[str, ...] = TARGETS) -> subprocess.Popen:
    # The targets before --configfile, which takes every path that follows it.
    return subprocess.Popen(
        [SNAKEMAKE, *args, *targets, "--configfile", "small.yaml"],
        cwd=work,
        env=outside_slurm(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(process: subprocess.Popen, succeed: bool = True) -> str:
    try:
        out, _ = process.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired as timeout:
        process.kill()
        out, _ = process.communicate()
        raise AssertionError(f"snakemake ran over {RUN_TIMEOUT_S} s:\n{out[-5000:]}") from timeout
    assert (process.returncode == 0) == succeed, out[-5000:]
    return out


def run_id(out: str) -> str:
    """The SLURM executor names every job of a run by the run's id."""
    return re.search(r"SLURM run ID: (\S+)", out).group(1)


@pytest.fixture(scope="module")
def runs(slurm_cluster, tmp_path_factory):
    """(SLURM work dir, local work dir, SLURM run's output, sacct records of its jobs)."""
    cluster_work = prepared(tmp_path_factory.mktemp("slurm_run"))
    local_work = prepared(tmp_path_factory.mktemp("local_run"))
    since = dt.datetime.now().replace(microsecond=0) - dt.timedelta(seconds=1)
    on_cluster = start(cluster_work, cluster_env(cluster_work, slurm_cluster), *PROFILE)
    local = start(local_work, snakemake_env(local_work), "--cores", "2")
    try:
        cluster_out = finish(on_cluster)
    except BaseException:
        local.kill()
        local.communicate()
        raise
    local_out = finish(local)
    assert "SLURM run ID" not in local_out
    records = [
        r
        for r in slurm_cluster.sacct("--name", run_id(cluster_out), "--starttime", since.isoformat())
        if "." not in r["JobID"]
    ]
    return cluster_work, local_work, cluster_out, records


def tres(record: dict, key: str) -> dict:
    return dict(item.split("=", 1) for item in record[key].split(",") if item)


def rule_of(record: dict) -> str:
    """The rule of a job's SLURM record; a packed submission (a Snakemake group job of one
    rule) is named by its group, then its rule."""
    name = COMMENT.fullmatch(record["Comment"]).group(1)
    packed = [rule for rule in pack_groups() if name.startswith(f"{rule}_") and name.endswith(f"_{rule}")]
    return packed[0] if packed else name


def test_cluster_rules_ran_as_completed_slurm_jobs_with_their_gpus(runs, slurm_cluster):
    _, _, _, records = runs
    by_rule: dict[str, list[dict]] = {}
    for record in records:
        by_rule.setdefault(rule_of(record), []).append(record)
    assert {rule: len(jobs) for rule, jobs in by_rule.items()} == CLUSTER_JOBS
    for rule, jobs in by_rule.items():
        for job in jobs:
            assert (job["State"], job["ExitCode"]) == ("COMPLETED", "0:0"), (rule, job)
            requested, allocated = tres(job, "ReqTRES"), tres(job, "AllocTRES")
            if rule in GPUS:
                assert (job["Partition"], job["Constraints"]) == (GPU_PARTITION, NODE_FEATURE), (rule, job)
            else:
                assert (job["Partition"], job["Constraints"]) == (slurm_cluster.partition, ""), (rule, job)
            if rule in GPUS:
                gpus = str(GPUS[rule])
                gpu_type = f"gres/gpu:{slurm_cluster.gpu_type}"
                assert requested["gres/gpu"] == requested[gpu_type] == allocated["gres/gpu"] == gpus, (rule, job)
            else:
                assert "gres/gpu" not in allocated, (rule, job)
            # The rules' threads (per stage from the config, else 1) became the job's CPUs.
            assert allocated["cpu"] == str(expected_threads(rule)), (rule, job)


def test_local_rules_ran_on_the_submitting_host(runs):
    cluster_work, _, cluster_out, records = runs
    assert not any(rule_of(r) == "raw_source" for r in records)
    assert cluster_out.count("localrule raw_source:") == _raw_sources_needed()
    for source in ("openhermes", "longform", "eli5"):
        record = json.loads(provenance_path(cluster_work / "resources" / "raw" / source).read_text())
        assert record["execution"]["slurm_job_id"] is None
        # Downloads keep the submitting host's hub access.
        assert record["execution"]["hub_offline"] is False


@pytest.mark.parametrize("output", COMPARED)
def test_outputs_equal_the_local_runs(runs, output):
    cluster_work, local_work, _, _ = runs
    assert content_hash(cluster_work / output) == content_hash(local_work / output)


def test_cluster_jobs_run_in_their_own_processes_and_local_ones_from_the_fork_server(runs):
    """The fork server is for local runs only: a SLURM job forked from a process on the
    submitting host would run outside its allocation."""
    cluster_work, local_work, _, _ = runs
    assert not (cluster_work / "logs" / "forkserver.log").exists()
    assert (local_work / "logs" / "forkserver.log").read_text().count("forked job process") > 0


@pytest.mark.parametrize(
    "rule, output",
    [
        ("finetune", f"results/models/{BASE}/{RECIPE}"),
        ("generate", f"results/generations/{BASE}/{RECIPE}/{PROMPTSET}.parquet"),
        ("score", TARGET),
        ("train_before_test", TBT_TARGET),
        ("pair_accuracy", JUDGE_TARGET),
    ],
)
def test_provenance_names_the_slurm_job_node_and_granted_gpus(runs, slurm_cluster, rule, output):
    cluster_work, local_work, _, records = runs
    execution = json.loads(provenance_path(cluster_work / output).read_text())["execution"]
    job = next(r for r in records if rule_of(r) == rule)
    assert execution["slurm_job_id"] == job["JobID"]
    # Submitted from an environment without HF_HUB_OFFLINE, the job ran with the hubs offline.
    assert execution["hub_offline"] is True
    assert execution["slurm_node"] == slurm_cluster.node
    if rule in GPUS:
        granted = execution["slurm_gpus"].split(",")
        assert len(granted) == GPUS[rule] and set(granted) <= {str(i) for i in range(slurm_cluster.gpus)}, execution
        # The test node has no device cgroups, so the process sees the node's own indices.
        assert execution["cuda_visible_devices"] == execution["slurm_gpus"], execution
    else:
        assert execution["slurm_gpus"] is None and execution["cuda_visible_devices"] is None, execution
    # Usage as the allocation granted it: GPU-seconds are the granted GPUs x the job's wall time.
    usage = execution["usage"]
    gpus = GPUS.get(rule, 0)
    assert (usage["source"], usage["gpus"], usage["cpus"]) == ("slurm", gpus, expected_threads(rule)), usage
    assert usage["gpu_model"] == (slurm_cluster.gpu_type if gpus else None), usage
    assert usage["wall_seconds"] > 0 and usage["gpu_seconds"] == pytest.approx(gpus * usage["wall_seconds"], abs=0.01)
    local = json.loads(provenance_path(local_work / output).read_text())["execution"]
    assert local["slurm_job_id"] is None and local["slurm_node"] is None and local["slurm_gpus"] is None


def test_hub_download_runs_on_the_submitting_host(slurm_cluster, tmp_path):
    """download_base_model is a localrule: never submitted, even where it fails (offline here)."""
    work = prepared(tmp_path)
    config = small_config()
    config["base_models"]["hub_llama"] = {"hub": {"path": "example/tiny-llama"}}
    # Not locked (no hub here to lock it against): the download itself is what is tested.
    config["allow_unpinned"] = True
    write_small_config(work, config)
    # Offline here, so that the download fails at once, naming the setting. One retry (the
    # profile's three would each fail alike): the retried job stays on this host too.
    offline = dict(cluster_env(work, slurm_cluster), HF_HUB_OFFLINE="1")
    out = finish(
        start(work, offline, *PROFILE, "--retries", "1", targets=("resources/models/hub_llama",)), succeed=False
    )
    assert "localrule download_base_model:" in out and out.count("Error in rule download_base_model") == 2, out[-5000:]
    assert "Trying to restart job" in out
    assert "submitted with SLURM jobid" not in out
    # An unpinned download first asks the hub for the commit it will read (reprolm.pins).
    assert "OfflineModeIsEnabled" in out and "HF_HUB_OFFLINE" in out
    assert slurm_cluster.sacct("--name", run_id(out)) == []
