"""Progress you can watch: training, generation and lm-eval log done/total with rate and ETA
at the configured interval; tracked runs are named after their artifact and key, and a
logger whose package is missing is refused at config time; ``reprolm progress`` lists a
run's jobs."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re

import pytest

from finetune_helpers import MLT_TOKENS, tiny_finetune_inputs
from reprolm.errors import ConfigError
from reprolm.progress import SECONDS_VARIABLE, STEPS_VARIABLE

# One interval for every test here: a line every 2 units, never one for time alone.
pytestmark = pytest.mark.usefixtures("every_two_steps")
RECIPE = {
    "format": "instruction_response",
    "completion_prefix": "mlt",
    "max_length": 128,
    "learning_rate": 1e-3,
    "max_steps": 6,
    "per_device_train_batch_size": 4,
    # The Trainer's own loss lines never fall due in 6 steps: the progress lines ask for theirs.
    "logging_steps": 100,
}


@pytest.fixture
def every_two_steps(monkeypatch):
    monkeypatch.setenv(STEPS_VARIABLE, "2")
    monkeypatch.setenv(SECONDS_VARIABLE, "100000")


@pytest.fixture(scope="module")
def tiny_inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    tiny_finetune_inputs(root)
    return root


def finetune_spec(root, tmp_path, report_to=()):
    from reprolm.train.finetune import FinetuneSpec

    return FinetuneSpec(
        base_model=str(root / "base"),
        output_dir=str(tmp_path / "results/models/tiny/sft"),
        checkpoint_root=str(tmp_path / "checkpoints"),
        train_file=str(root / "train.parquet"),
        recipe=RECIPE,
        seed=0,
        add_tokens=list(MLT_TOKENS),
        report_to=list(report_to),
    )


def messages(caplog, logger: str) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == logger]


def test_a_finetune_logs_step_total_loss_rate_and_eta_every_configured_steps(tiny_inputs, tmp_path, caplog):
    from reprolm.train.finetune import run

    caplog.set_level(logging.INFO)
    run(finetune_spec(tiny_inputs, tmp_path))
    lines = messages(caplog, "reprolm.train.progress")
    assert [re.match(r"step (\d+)/6 ", line).group(1) for line in lines] == ["2", "4", "6"]
    pattern = r"step \d/6 \(\d+%\), epoch [\d.]+/\d+, loss [\d.]+, lr [\d.e-]+, [\d.]+ samples/s, elapsed \S+, ETA \S+"
    assert all(re.fullmatch(pattern, line) for line in lines), lines
    assert lines[-1].endswith("ETA 00:00")


def test_a_generation_logs_batches_done_of_total(tiny_inputs, caplog):
    from reprolm.generate import SamplingParams, complete, make_backend, make_request

    caplog.set_level(logging.INFO)
    backend = make_backend("transformers", str(tiny_inputs / "base"), batch_size=2)
    prompts = [f"Boat {i}?" for i in range(7)]
    complete(backend, make_request(backend.tokenizer, prompts, SamplingParams(max_new_tokens=3)))
    lines = messages(caplog, "reprolm.generate.transformers_backend")
    # 4 batches: a line at 2 and at the end.
    assert [line.split(": ", 1)[1].split(" (")[0] for line in lines] == ["batches 2/4", "batches 4/4"]
    assert all(
        line.startswith("generating 7 prompts: ") and " batches/s, " in line and ", ETA " in line for line in lines
    )


def test_an_lm_eval_evaluation_logs_requests_answered_of_total_with_its_response_cache(tiny_inputs, tmp_path, caplog):
    from reprolm.data.task_docs import write_task_docs
    from reprolm.data.upstream import make_fixture
    from reprolm.score.lm_eval_bridge import TaskSpec, evaluate_tasks

    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    caplog.set_level(logging.INFO)
    write_task_docs(make_fixture("boolq", n=4, seed=0), tmp_path / "boolq")
    spec = TaskSpec("boolq", "boolq", 0, "acc,none", tmp_path / "boolq", limit=3)
    evaluate_tasks(
        str(tiny_inputs / "base"), None, [spec], batch_size=1, bootstrap_iters=0, response_cache=tmp_path / "cache"
    )
    # 3 documents x 2 answers; a line every 2 batches of 1 request.
    lines = messages(caplog, "reprolm.progress")
    assert [line.split(" (")[0] for line in lines] == [
        f"lm-eval loglikelihood: requests {done}/6" for done in (2, 4, 6)
    ]
    assert all(", ETA " in line for line in lines)


def test_tracked_runs_go_to_transformers_with_their_loggers_and_artifact_named_run(tiny_inputs, tmp_path, monkeypatch):
    """mlflow and wandb are not installed here: what transformers is handed is checked, and
    the environment each integration reads for its project."""
    import reprolm.train.tracking as tracking
    from reprolm.train.finetune import training_arguments

    # Set, then deleted, so that monkeypatch restores each to its absence: the variables
    # report_to sets must not reach later tests (lm-eval's logger reads WANDB_PROJECT).
    for variable in ("WANDB_PROJECT", "WANDB_NAME", "WANDB_DIR", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.setenv(variable, "")
        monkeypatch.delenv(variable)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tracking.importlib.util, "find_spec", lambda package: object())
    spec = finetune_spec(tiny_inputs, tmp_path)
    name = tracking.run_name(spec.output_dir, spec.key())
    assert name == f"{tmp_path}/results/models/tiny/sft@{spec.key()}"
    loggers = tracking.report_to({"report_to": ["mlflow", "wandb"], "project": "harmony"}, name)
    assert loggers == ["mlflow", "wandb"]
    assert os.environ["MLFLOW_EXPERIMENT_NAME"] == os.environ["WANDB_PROJECT"] == "harmony"
    assert os.environ["WANDB_NAME"] == name
    spec.report_to = loggers
    arguments = training_arguments(spec)
    assert arguments.report_to == ["mlflow", "wandb"] and arguments.run_name == name


@pytest.mark.parametrize("configured", ["mlflow", ["tensorboard", "wandb"]])
def test_a_logger_whose_package_is_missing_is_refused_at_config_time(configured):
    import importlib.util

    from reprolm.train.tracking import reporters

    missing = configured if isinstance(configured, str) else configured[1]
    assert importlib.util.find_spec(missing) is None
    with pytest.raises(ConfigError, match=rf"^tracking.report_to: '{missing}' needs the '{missing}' package"):
        reporters({"report_to": configured})
    with pytest.raises(ConfigError, match=r"^tracking.report_to: 'comet'; choose from \['none', 'tensorboard'"):
        reporters({"report_to": "comet"})


def write_record(path, rule, wildcards, started, finished, wall):
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "rule": rule,
        "wildcards": wildcards,
        "started": started,
        "finished": finished,
        "execution": {"usage": {"wall_seconds": wall}},
    }
    path.write_text(json.dumps(record))


def test_the_run_summary_lists_each_job_of_the_run_with_status_and_wall_time(tmp_path, capsys):
    from reprolm.cli import main

    (tmp_path / ".snakemake/log").mkdir(parents=True)
    (tmp_path / ".snakemake/log/2026-01-02T100000.000000.snakemake.log").touch()
    local = dt.datetime(2026, 1, 2, 10, 0).astimezone().utcoffset()
    utc = lambda hhmmss: (dt.datetime.fromisoformat(f"2026-01-02T{hhmmss}") - local).isoformat() + "+00:00"  # noqa: E731
    # Before this run: left out.
    write_record(
        tmp_path / "results/datasets/d/train.parquet.provenance.json",
        "build",
        {"d": "d"},
        utc("09:00:00"),
        utc("09:01:00"),
        60,
    )
    # Two outputs, one job.
    for output in ("a", "b"):
        write_record(
            tmp_path / f"results/models/tiny/{output}/provenance.json",
            "finetune",
            {"base": "tiny", "recipe": "sft"},
            utc("10:00:01"),
            utc("10:02:01"),
            120.4,
        )
    logs = tmp_path / "logs"
    (logs / "finetune/tiny").mkdir(parents=True)
    (logs / "finetune/tiny/sft.log").write_text(
        "2026-01-02 10:00:01,500 reprolm.rule.finetune INFO rule finetune wildcards {'base': 'tiny', 'recipe': 'sft'}\n"
    )
    (logs / "finetune/tiny/dpo.log").write_text(
        "2026-01-02 10:03:00,000 reprolm.rule.finetune INFO rule finetune wildcards {'base': 'tiny', 'recipe': 'dpo'}\n"
        "2026-01-02 10:04:00,000 reprolm.train.progress INFO step 10/40 (25%), epoch 0.50/2, loss 0.69, lr 1e-05, 3 samples/s, elapsed 01:00, ETA 03:00\n"
    )
    (logs / "generate").mkdir()
    (logs / "generate/x.log").write_text(
        "2026-01-02 10:02:30,000 reprolm.rule.generate INFO rule generate wildcards {'model': 'tiny/sft'}\n"
        "2026-01-02 10:02:40,000 reprolm.rule.generate ERROR rule generate failed\nTraceback ...\n"
    )
    now = dt.datetime(2026, 1, 2, 10, 5).astimezone()
    from reprolm.run_summary import run_jobs, run_summary

    lines = run_summary(run_jobs(tmp_path, now=now)).splitlines()
    assert lines == [
        "done        02:00  finetune  base=tiny,recipe=sft",
        f"failed      00:10  generate  model=tiny/sft  see {logs / 'generate/x.log'}",
        "running     02:00  finetune  base=tiny,recipe=dpo  "
        "step 10/40 (25%), epoch 0.50/2, loss 0.69, lr 1e-05, 3 samples/s, elapsed 01:00, ETA 03:00",
        "1 done, 1 failed, 1 running",
    ]
    assert main(["--root", str(tmp_path), "progress", "--since", "2026-01-02T08:00:00"]) == 0
    assert "done        01:00  build  d=d" in capsys.readouterr().out
