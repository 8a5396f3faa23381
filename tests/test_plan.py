"""``reprolm plan``: the cost model's figures by hand, the schedule on a hand-made DAG,
calibration from recorded usage, and a plan of the default config against its dry run."""

from __future__ import annotations

import copy
import json
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import reprolm.plan
from reprolm.cli import main
from reprolm.dag_jobs import JobState
from reprolm.errors import ConfigError
from reprolm.need import (
    CHECKPOINT_BYTES,
    CPU_JOB_SECONDS,
    DEVICES,
    JOB_START_SECONDS,
    BuiltRows,
    PlannedJob,
    dataset_rows,
    estimate_job,
    job_model,
)
from reprolm.plan import calibrate, makespan, model_parameters, plan, planned_jobs
from reprolm.provenance.cost import stage_of
from reprolm.provenance.hashing import provenance_path
from workflow_helpers import JOB_HEADER, REPO, scratch_copy, snakemake

CONFIG = {
    "base_models": {
        "big": {"hub": {"path": "org/Big-7B"}},
        "odd": {"hub": {"path": "org/mystery"}},
        "gpt": {"hub": {"path": "org/gpt"}, "parameters": 124_000_000},
    },
    "recipes": {
        "sft": {
            "dataset": "d",
            "max_length": 1024,
            "max_steps": 100,
            "per_device_train_batch_size": 4,
            "gradient_accumulation_steps": 2,
        }
    },
    "datasets": {"prompts": {"builder": "instructions", "sources": ["s"], "params": {"num": 500}}},
    "promptsets": {"ask": {"dataset": "prompts", "sampling": {"max_new_tokens": 768, "n": 2}}},
}


def _job(rule: str, inputs: str, outputs: str, wildcards: str, gpus: int, runtime_min: float) -> JobState:
    """A job as the DAG reader gives it (reprolm.dag_jobs), from its files and wildcards."""
    return JobState(
        rule=rule,
        wildcards=dict(pair.split("=") for pair in wildcards.split(", ")),
        params=[],
        code="",
        inputs=inputs.split(", ") if inputs else [],
        software="",
        outputs=outputs.split(", "),
        gpus=gpus,
        runtime_min=runtime_min,
    )


# A finetune, the generation from it, a generation of a model of unknown size, and a score.
STATES = {
    state.outputs[0]: state
    for state in (
        _job(
            "finetune",
            "resources/models/big, results/datasets/d/train.parquet",
            "results/models/big/sft",
            "base=big, recipe=sft",
            4,
            600,
        ),
        _job(
            "generate",
            "results/models/big/sft, results/datasets/prompts/test.parquet",
            "results/generations/big/sft/ask.parquet",
            "base=big, recipe=sft, promptset=ask",
            1,
            120,
        ),
        _job(
            "generate",
            "resources/models/odd, results/datasets/prompts/test.parquet",
            "results/generations/odd/pretrained/ask.parquet",
            "base=odd, recipe=pretrained, promptset=ask",
            1,
            120,
        ),
        _job(
            "score",
            "results/generations/big/sft/ask.parquet",
            "results/scores/x/big/sft/ask.json",
            "base=big, recipe=sft, promptset=ask, metric=x",
            0,
            60,
        ),
    )
}


def test_parameters_from_config_name_or_unknown(tmp_path):
    assert model_parameters(CONFIG, "big", tmp_path) == (7_000_000_000, "name")
    assert model_parameters(CONFIG, "gpt", tmp_path) == (124_000_000, "config")
    assert model_parameters(CONFIG, "odd", tmp_path) == (None, "unknown")


def test_finetune_and_generation_estimates_by_hand():
    finetune, generate, unknown, score = planned_jobs(STATES)
    assert [job.after for job in (finetune, generate, unknown, score)] == [[], [0], [], [1]]
    assert [job.stage for job in (finetune, generate, score)] == ["finetune", "generate", "evaluate"]
    h100, size = DEVICES["h100"], 7e9
    # Every job starts (interpreter, Snakemake, imports) and reads its bf16 weights at 200 MB/s.
    start = JOB_START_SECONDS + 2 * size / 200e6
    estimate_job(finetune, CONFIG, h100, size, {}, REPO)
    tokens = 100 * 4 * 2 * 4 * 1024  # steps x batch x accumulation x GPUs x max_length
    assert finetune.seconds == pytest.approx(start + 6 * size * tokens / (989e12 * 0.30 * 4))
    assert finetune.gpu_seconds == pytest.approx(4 * finetune.seconds)
    assert finetune.peak_gpu_gb == pytest.approx(16 * size / 4 / 1e9)  # fp32 weights, grads, Adam over 4 GPUs
    assert finetune.checkpoint_gb == pytest.approx(CHECKPOINT_BYTES * size / 1e9)
    estimate_job(generate, CONFIG, h100, size, {}, REPO)
    assert generate.seconds == pytest.approx(start + 2 * size * 500 * 2 * (256 + 768) / (989e12 * 0.10))
    assert generate.basis == "tokens x parameters" and generate.peak_gpu_gb == pytest.approx(14.0)
    # Prompts as this config built them, where it did, instead of the config's num.
    estimate_job(generate, CONFIG, h100, size, {"prompts": 40}, REPO)
    assert generate.seconds == pytest.approx(start + 2 * size * 40 * 2 * (256 + 768) / (989e12 * 0.10))
    estimate_job(unknown, CONFIG, h100, None, {}, REPO)
    assert (unknown.seconds, unknown.basis) == (120 * 60, "requested")
    estimate_job(score, CONFIG, h100, size, {}, REPO)
    assert (score.seconds, score.gpus) == (JOB_START_SECONDS + CPU_JOB_SECONDS, 0)


def test_a_studys_own_step_is_estimated_by_the_study():
    """LM-Harmony's train_before_test: the plan asks the registered studies (Study.job_flops)."""
    state = _job(
        "train_before_test",
        "results/models/big/sft",
        "results/scores/train_before_test/big/sft/arc.json",
        "base=big, recipe=sft, task=arc",
        1,
        60,
    )
    (job,) = planned_jobs({state.outputs[0]: state})
    train = {"num_train_epochs": 2, "max_length": 512, "max_num_train": 100, "max_num_valid": 10, "max_num_test": 20}
    config = {**CONFIG, "harmony": {"train": train}}
    size = 7e9
    estimate_job(job, config, DEVICES["h100"], size, {}, REPO)
    flops = 6 * size * 100 * 2 * 512 + 2 * size * (10 + 20) * (2 + 1) * 512
    start = JOB_START_SECONDS + 2 * size / 200e6
    assert job.basis == "tokens x parameters" and job.seconds == pytest.approx(start + flops / (989e12 * 0.30))
    # Without a cap on every document count the study gives no figure: the request bounds it.
    del train["max_num_test"]
    estimate_job(job, config, DEVICES["h100"], size, {}, REPO)
    assert (job.seconds, job.basis) == (60 * 60, "requested")


JUDGED = {
    **CONFIG,
    "base_models": {**CONFIG["base_models"], "rm": {"hub": {"path": "org/rm"}, "parameters": 2_000_000_000}},
    "datasets": {**CONFIG["datasets"], "rated": {"builder": "rated_responses", "sources": ["r"], "rows": 300}},
    "judges": {
        "rm_judge": {"kind": "reward_model", "model": "rm/pretrained", "max_length": 512},
        "flr_judge": {"kind": "flr", "model": "rm/pretrained", "followups": "config/flr_followups.yaml"},
        "api_judge": {"kind": "chat_endpoint", "base_url": "https://x", "model": "m", "api_key_env": "KEY"},
    },
}


def _judge_job(rule: str, wildcards: str) -> PlannedJob:
    pairs = dict(pair.split("=") for pair in wildcards.split(", "))
    return PlannedJob(rule, pairs, [], [], gpus=1, runtime_min=480, stage=stage_of(rule))


def test_a_model_judges_job_is_sized_by_its_judges_model_and_what_it_reads():
    """A grade of `big`'s generations by a 2B reward model: 2 x 2B x (500 prompts x 2 samples)
    x (256 + 768 prompt and answer tokens, cut at the judge's max_length of 512), at the
    device's forward-pass share; the 7B model judged only names the generations."""
    h100, judge = DEVICES["h100"], 2e9
    start = JOB_START_SECONDS + 2 * judge / 200e6
    grade = _judge_job("grade", "judge=rm_judge, base=big, recipe=sft, promptset=ask")
    assert job_model(JUDGED, grade.wildcards) == "rm"
    estimate_job(grade, JUDGED, h100, judge, {}, REPO)
    assert grade.basis == "tokens x parameters"
    assert grade.seconds == pytest.approx(start + 2 * judge * 500 * 2 * 512 / (989e12 * 0.30))
    assert grade.peak_gpu_gb == pytest.approx(4.0)  # the judge's bf16 weights, not the 7B model's
    # A win rate judges each answer and its reference.
    win_rate = _judge_job("win_rate", "judge=rm_judge, base=big, recipe=sft, promptset=ask")
    estimate_job(win_rate, JUDGED, h100, judge, {}, REPO)
    assert win_rate.seconds - start == pytest.approx(2 * (grade.seconds - start))
    # FLR reads each answer (its max_length of 2048 bounds a dataset row) and 120 follow-ups
    # of at most 32 tokens: 6 categories x 10 positive and 10 negative in the shipped file.
    rated = _judge_job("rating_agreement", "judge=flr_judge, dataset=rated, split=test")
    estimate_job(rated, JUDGED, h100, judge, {}, REPO)
    assert rated.seconds == pytest.approx(start + 2 * judge * 300 * (2048 + 120 * 32) / (989e12 * 0.30))
    # Rows as the dataset was built, where it was, over the config's.
    estimate_job(rated, JUDGED, h100, judge, {"rated": 30}, REPO)
    assert rated.seconds == pytest.approx(start + 2 * judge * 30 * (2048 + 120 * 32) / (989e12 * 0.30))


def test_a_judges_file_that_cannot_be_read_is_refused_naming_the_judge_and_the_file(tmp_path):
    broken = tmp_path / "followups.yaml"
    broken.write_text("categories: 3\n")
    config = {**JUDGED, "judges": {"flr_judge": {**JUDGED["judges"]["flr_judge"], "followups": str(broken)}}}
    rated = _judge_job("rating_agreement", "judge=flr_judge, dataset=rated, split=test")
    with pytest.raises(ConfigError, match=rf"^judges\.flr_judge: {broken}: expected a 'categories' mapping"):
        estimate_job(rated, config, DEVICES["h100"], 2e9, {}, REPO)


def test_a_judge_the_model_cannot_size_is_bounded_by_its_request():
    h100 = DEVICES["h100"]
    # A set of unknown size: the request.
    unknown = _judge_job("pair_accuracy", "judge=rm_judge, dataset=prompts_of_no_size, split=test")
    config = {**JUDGED, "datasets": {**JUDGED["datasets"], "prompts_of_no_size": {"builder": "x", "sources": ["s"]}}}
    estimate_job(unknown, config, h100, 2e9, {}, REPO)
    assert (unknown.seconds, unknown.basis) == (480 * 60, "requested")
    # An API judge runs no model: it has none to size, and asks for no GPU.
    api = PlannedJob("grade_api", {"judge": "api_judge", "base": "big", "recipe": "sft", "promptset": "ask"}, [], [])
    assert job_model(JUDGED, api.wildcards) is None
    estimate_job(api, JUDGED, h100, None, {}, REPO)
    assert (api.seconds, api.basis) == (JOB_START_SECONDS + CPU_JOB_SECONDS, "per-job figure")


def test_a_job_sized_as_it_is_about_to_run_counts_the_rows_its_dataset_was_built_with(tmp_path):
    """Snakemake evaluates a job's resources again once its inputs exist: the need then counts
    the built dataset's rows (its largest split), not the config's."""
    built = BuiltRows(tmp_path)
    assert "rated" not in built
    folder = tmp_path / "results" / "datasets" / "rated"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"x": list(range(7))}), folder / "test.parquet")
    pq.write_table(pa.table({"x": list(range(3))}), folder / "train.parquet")
    assert BuiltRows(tmp_path)["rated"] == 7 and dataset_rows(JUDGED, "rated", BuiltRows(tmp_path)) == 7
    assert dataset_rows(JUDGED, "rated", built) == 300
    # A split cut short is not counted; a dataset with no readable split is the config's.
    (folder / "validation.parquet").write_bytes(b"PAR1 cut short")
    assert BuiltRows(tmp_path)["rated"] == 7
    for split in ("test", "train"):
        (folder / f"{split}.parquet").unlink()
    assert dataset_rows(JUDGED, "rated", BuiltRows(tmp_path)) == 300


def test_schedule_on_two_gpus():
    jobs = [
        PlannedJob("a", {}, [], [], gpus=2, seconds=10),
        PlannedJob("b", {}, [], [], gpus=1, seconds=4),
        PlannedJob("c", {}, [], [], gpus=1, seconds=5, after=[1]),
        PlannedJob("d", {}, [], [], gpus=0, seconds=30),
    ]
    # a holds both GPUs for 10 s; then b (4 s) and c after b (5 s); d runs on a CPU from 0 to 30.
    assert makespan(jobs, 2) == 30
    jobs[3].seconds = 1
    assert makespan(jobs, 2) == 19
    assert makespan(jobs, 4) == 10  # a, b and then c beside a: max(10, 4 + 5)


def _recorded(root, path: str, wall_seconds: float, gpus: int) -> str:
    output = root / path
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("x")
    usage = {"wall_seconds": wall_seconds, "gpus": gpus}
    provenance_path(output).write_text(json.dumps({"execution": {"usage": usage}}))
    return path


def test_calibration_scales_a_rule_by_its_recorded_wall_time_on_its_hardware(tmp_path):
    """Only records of outputs this config made count, and only those on the job's class of
    hardware: a tiny run's CPU record of a GPU job, or of a job another config made, does not."""
    jobs = planned_jobs(STATES)
    for job in jobs:
        job.seconds = 100.0
    generation = _recorded(tmp_path, "results/generations/big/sft/ask.parquet", 250.0, gpus=1)
    on_cpu = _recorded(tmp_path, "results/models/big/sft", 3.0, gpus=0)
    other_config = _recorded(tmp_path, "results/scores/x/big/sft/ask.json", 1.0, gpus=0)
    assert calibrate(jobs, tmp_path, {generation, on_cpu}) == {"generate": (2.5, 1)}
    assert [job.seconds for job in jobs] == [100.0, 250.0, 250.0, 100.0]
    assert jobs[2].basis.endswith("calibrated") and not jobs[0].basis.endswith("calibrated")
    # The score's record, left out above as another config's, counts once it is this config's.
    assert calibrate(jobs[3:], tmp_path, {other_config}) == {"score": (0.01, 1)}


def test_plan_outside_the_workflows_folder_says_what_is_missing(tmp_path, capsys):
    """One line naming what is missing, exit 2, before any dry run."""
    assert main(["--root", str(tmp_path), "plan", "--configfile", "config/paper.yaml"]) == 2
    assert capsys.readouterr().err == (
        f"reprolm plan: {tmp_path} is not the workflow's folder (no workflow/Snakefile there): "
        "run reprolm plan in the repository, or give --root\n"
    )
    assert main(["--root", str(REPO), "plan", "--configfile", "config/nowhere.yaml"]) == 2
    assert capsys.readouterr().err == f"reprolm plan: no config file config/nowhere.yaml in {REPO}\n"


@pytest.mark.slow
def test_plan_in_a_run_folder_prices_the_config_from_its_own_inputs(tmp_path):
    """Where the embedded default built its chat_sft (a real Snakemake job, with its metadata
    and provenance record: the default's tiny fixture rows) and a numina_sft was put by hand,
    the plan of config/paper.yaml is the fresh clone's: GEM's CE finetune of Llama-3-8B from
    paper.yaml's 61,135 rows, and no calibration on the default's CPU record."""
    import pandas as pd

    fresh = scratch_copy(tmp_path / "fresh")
    jobs = reprolm.plan.dag_jobs(fresh, "config/paper.yaml")
    run = scratch_copy(tmp_path / "run")
    snakemake(run, "results/datasets/chat_sft/train.parquet")
    by_hand = run / "results/datasets/numina_sft/train.parquet"
    by_hand.parent.mkdir(parents=True)
    pd.DataFrame({"messages": [[{"role": "user", "content": "hi"}]] * 3}).to_parquet(by_hand)
    assert len(pd.read_parquet(run / "results/datasets/chat_sft/train.parquet")) < 1000
    plans = {folder.name: plan(folder, "config/paper.yaml", jobs=copy.deepcopy(jobs)) for folder in (fresh, run)}

    def finetune(estimate, base: str, recipe: str) -> PlannedJob:
        wildcards = {"base": base, "recipe": recipe}
        return next(job for job in estimate.jobs if job.rule == "finetune" and job.wildcards == wildcards)

    # 6 x 8B parameters x 61,135 rows x 3 epochs x 2,048 tokens, on 4 H100s at 35%, after the
    # job's start and its weights' read.
    def start(size: float) -> float:
        return JOB_START_SECONDS + 2 * size / 200e6

    work = 6 * 8e9 * 61_135 * 3 * 2048 / (989e12 * 0.30 * 4)
    ce = start(8e9) + work
    gem = {name: finetune(estimate, "llama3_8b_gem", "ce").seconds for name, estimate in plans.items()}
    assert gem["run"] == gem["fresh"] == pytest.approx(ce)
    # Qwen2.5-Math-7B's on NuminaMath's 20,000 rows.
    numina = {name: finetune(estimate, "qwen25_math_7b", "ce_numina").seconds for name, estimate in plans.items()}
    assert numina["run"] == numina["fresh"] == pytest.approx(start(7e9) + work * 7 / 8 * 20_000 / 61_135)
    assert plans["run"].table().equals(plans["fresh"].table())
    assert plans["run"].summary() == plans["fresh"].summary() and "calibrated" not in plans["run"].summary()
    # A dataset build is sized from raw data not downloaded yet (<TBD> in a dry run): planned
    # with no runtime request.
    builds = [job for job in plans["fresh"].jobs if job.rule == "dataset"]
    assert builds and all(job.runtime_min == 0.0 and job.seconds > 0 for job in builds)


@pytest.mark.slow
def test_plan_of_the_default_config_has_the_dry_runs_jobs_per_stage(capsys):
    """``reprolm plan`` on the default config plans every job of Snakemake's DAG: as many of
    each stage as Snakemake's own dry run of it lists (read by the tests' own parser)."""
    assert main(["--root", str(REPO), "plan", "--device", "cpu", "--width", "2"]) == 0
    printed = capsys.readouterr().out
    assert "of wall time on 2 GPUs" in printed
    text = snakemake(REPO, "-n", "--forceall").stdout
    rules = [header.group(1) for header in map(JOB_HEADER.match, text.splitlines()) if header]
    expected = Counter(stage_of(rule) for rule in rules if rule != "all")
    assert sum(expected.values()) > 100
    estimate = plan(REPO, None, width=2, device="cpu")
    assert Counter(job.stage for job in estimate.jobs) == expected
    table = estimate.table()
    total = table[(table["study"] == "all") & (table["stage"] == "total")].iloc[0]
    assert total["jobs"] == sum(expected.values())
    assert set(table["study"]) == {"all", "ruler", "harmony", "expo", "flr", "gem"}
    assert estimate.summary().startswith(f"{sum(expected.values())} jobs: 0 GPU-hours on cpu")
    assert estimate.summary() in printed


def test_jobs_the_rehearsal_measured_take_its_figures(tmp_path):
    """``reprolm rehearse --sizes`` leaves results/rehearsal/sizes.json: per rule and job
    (its wildcards' values joined by '/'), the measured seconds."""
    import yaml

    (tmp_path / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    measured = tmp_path / "results" / "rehearsal" / "sizes.json"
    measured.parent.mkdir(parents=True)
    measured.write_text(json.dumps({"score": {"big/sft/ask/x": {"seconds": 412.5, "peak_mb": 900.0}}}))
    estimate = plan(tmp_path, "config.yaml", jobs=planned_jobs(STATES), calibrated=False)
    score = next(job for job in estimate.jobs if job.rule == "score")
    assert (score.seconds, score.basis) == (412.5, "measured by the rehearsal")
    assert [job.basis for job in estimate.jobs if job.rule != "score"] == ["tokens x parameters"] * 2 + ["requested"]
    assert estimate.measured == 1 and "1 jobs measured by the rehearsal" in estimate.summary()
