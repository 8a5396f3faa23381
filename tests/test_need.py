"""What a job asks the scheduler for from its modelled need (reprolm.need): twice the cost
model's seconds where the config sets ``runtime_over_need``, on the GPU it is routed to, with
the stop warning of a job that saves on it, and at most ``runtime_limit`` for a job that
resumes, which then runs as attempts."""

from __future__ import annotations

import json
import math

import pytest

from reprolm.config.resources import model_settings
from reprolm.errors import ConfigError
from reprolm.need import (
    CPU_JOB_SECONDS,
    DEVICES,
    JOB_START_SECONDS,
    MEASURED,
    MIN_RUNTIME_MIN,
    STREAM_BYTES_PER_S,
    job_device,
    job_runtime,
    job_size,
    modelled_need,
    runtime_request,
)
from test_plan import CONFIG as PLAN_CONFIG

# test_plan's recipe, dataset and prompt set (priced by hand there), with requests from need.
CONFIG = {
    **PLAN_CONFIG,
    "resources": {"default": {"runtime_over_need": 2}, "evaluate": {"gpus": 1, "runtime": 480}},
    "base_models": {
        "big": {
            "hub": {"path": "org/Big-7B"},
            "resources": {"finetune": {"gpus": 4, "runtime": 1440}, "generate": {"gpus": 1, "gpu_model": "h100"}},
        },
        "huge": {"hub": {"path": "org/Huge-70B"}},
    },
}
FINETUNE = {"base": "big", "recipe": "sft"}


def _request(config, rule, wildcards, stage, tmp_path):
    settings = model_settings(config, wildcards["base"], stage)
    return runtime_request(config, rule, wildcards, settings, tmp_path), settings


def test_a_finetune_asks_for_twice_its_need_on_the_slowest_gpu_plus_its_stop_warning(tmp_path):
    request, settings = _request(CONFIG, "finetune", FINETUNE, "finetune", tmp_path)
    # No GPU type named: sized for the A100, the slowest the model knows.
    assert job_device(settings) == "a100"
    tokens = 100 * 4 * 2 * 4 * 1024
    need = JOB_START_SECONDS + 2 * 7e9 / STREAM_BYTES_PER_S + 6 * 7e9 * tokens / (312e12 * 0.40 * 4)
    assert request.need_s == pytest.approx(need)
    assert request.minutes == math.ceil((2 * need + 300) / 60) and request.attempts == 1
    # The model's runtime (1440) is not asked for: the job is sized.
    assert request.minutes < 1440 / 4


def test_a_generation_is_sized_on_the_gpu_it_is_routed_to(tmp_path):
    wildcards = {"base": "big", "recipe": "sft", "promptset": "ask"}
    request, settings = _request(CONFIG, "generate", wildcards, "generate", tmp_path)
    assert job_device(settings) == "h100"
    work = 2 * 7e9 * 500 * 2 * (256 + 768) / (DEVICES["h100"]["peak"] * DEVICES["h100"]["generate"])
    need = JOB_START_SECONDS + 2 * 7e9 / STREAM_BYTES_PER_S + work
    assert request.minutes == math.ceil((2 * need + 300) / 60)


def test_a_job_the_model_cannot_size_asks_for_its_runtime(tmp_path):
    request, _ = _request(CONFIG, "lm_eval", {"base": "big", "recipe": "sft", "suite": "s"}, "evaluate", tmp_path)
    assert (request.minutes, request.need_s) == (480, None)
    # Without runtime_over_need every job asks for its runtime, as before.
    plain = {**CONFIG, "resources": {}}
    request, _ = _request(plain, "finetune", FINETUNE, "finetune", tmp_path)
    assert (request.minutes, request.need_s) == (1440, None)


def test_a_short_cpu_job_asks_for_the_floor_and_a_merge_for_its_streamed_bytes(tmp_path):
    score = {"base": "big", "recipe": "sft", "promptset": "ask", "metric": "length"}
    request, _ = _request(CONFIG, "score", score, "default", tmp_path)
    assert request.need_s == JOB_START_SECONDS + CPU_JOB_SECONDS
    assert request.minutes == max(MIN_RUNTIME_MIN, math.ceil(2 * request.need_s / 60))
    merge = {"base": "huge", "recipe": "expo"}
    request, settings = _request(CONFIG, "extrapolate", merge, "extrapolate", tmp_path)
    need = JOB_START_SECONDS + 3 * 4 * 70e9 / STREAM_BYTES_PER_S
    assert modelled_need(CONFIG, "extrapolate", merge, settings, tmp_path).basis == "bytes streamed"
    # No stop warning: a merge does not resume.
    assert request.minutes == math.ceil(2 * need / 60)


def test_a_job_longer_than_the_limit_runs_as_attempts_and_a_retry_never_asks_past_it(tmp_path):
    config = {**CONFIG, "resources": {"default": {"runtime_over_need": 2, "runtime_limit": 10}}}
    request, settings = _request(config, "finetune", FINETUNE, "finetune", tmp_path)
    assert request.minutes == 10
    assert request.attempts == math.ceil(2 * request.need_s / (10 * 60 - 300)) and request.attempts > 1
    grown = {**config, "retry_growth": {"factor": 2.0, "max_runtime": 10000}}
    assert [job_runtime(grown, "finetune", FINETUNE, settings, attempt, tmp_path) for attempt in (1, 3)] == [10, 10]
    # A merge does not resume: its request is not cut to the limit (the rehearsal judges it).
    merge = {"base": "huge", "recipe": "expo"}
    settings = model_settings(config, "huge", "extrapolate")
    assert job_runtime(config, "extrapolate", merge, settings, 1, tmp_path) > 10


def test_the_workflows_lookup_grows_memory_and_sizes_runtime_and_a_broken_measurement_file_is_named(tmp_path):
    settings = model_settings(CONFIG, "big", "finetune")
    grown = {**CONFIG, "retry_growth": {"factor": 2.0}}
    assert job_size(grown, "mem_mb", "finetune", FINETUNE, settings, 2, tmp_path) == 2 * settings["mem_mb"]
    request, _ = _request(CONFIG, "finetune", FINETUNE, "finetune", tmp_path)
    assert job_size(CONFIG, "runtime", "finetune", FINETUNE, settings, 1, tmp_path) == request.minutes
    # A measurement the rehearsal wrote replaces the model's figure.
    (tmp_path / MEASURED).parent.mkdir(parents=True)
    (tmp_path / MEASURED).write_text(json.dumps({"finetune": {"big/sft": {"seconds": 600.0}}}))
    assert runtime_request(CONFIG, "finetune", FINETUNE, settings, tmp_path).minutes == math.ceil((1200 + 300) / 60)
    (tmp_path / MEASURED).write_text('{"finetune": ')
    with pytest.raises(
        ConfigError, match=r"results/rehearsal/sizes.json: not the JSON `reprolm rehearse --sizes` writes"
    ):
        job_size(CONFIG, "runtime", "finetune", FINETUNE, settings, 1, tmp_path)


def test_a_model_judges_grade_asks_for_twice_the_need_of_the_rows_its_dataset_was_built_with(tmp_path):
    """A reward model's grades of `big`'s generations, routed as the `rm` model's evaluate
    stage: the config's 500 prompts before the dataset exists, its built rows once it does
    (Snakemake evaluates a job's resources again once its inputs exist)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    config = {
        **CONFIG,
        "base_models": {**CONFIG["base_models"], "rm": {"hub": {"path": "org/rm-2B"}}},
        "judges": {"rm_judge": {"kind": "reward_model", "model": "rm/pretrained", "max_length": 512}},
    }
    wildcards = {"judge": "rm_judge", "base": "big", "recipe": "sft", "promptset": "ask"}
    settings = model_settings(config, "rm", "evaluate")

    def need(prompts):
        work = 2 * 2e9 * prompts * 2 * 512 / (DEVICES["a100"]["peak"] * DEVICES["a100"]["forward"])
        return JOB_START_SECONDS + 2 * 2e9 / STREAM_BYTES_PER_S + work

    assert modelled_need(config, "grade", wildcards, settings, tmp_path).seconds == pytest.approx(need(500))
    assert job_runtime(config, "grade", wildcards, settings, 1, tmp_path) == math.ceil(2 * need(500) / 60)
    built = tmp_path / "results" / "datasets" / "prompts"
    built.mkdir(parents=True)
    pq.write_table(pa.table({"prompt": ["q"] * 4000}), built / "test.parquet")
    assert job_runtime(config, "grade", wildcards, settings, 1, tmp_path) == math.ceil(2 * need(4000) / 60)
    # Its API twin runs no model and asks for the CPU job's floor.
    assert modelled_need(config, "grade_api", wildcards, {}, tmp_path).basis == "per-job figure"
