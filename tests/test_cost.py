"""What a result cost: the usage in each job's provenance record, summed over the lineage
with shared jobs once and stopped attempts added; and the usage a job records, from SLURM's
allocation on a cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from default_config import DEFAULT
from reprolm.cli import main
from reprolm.provenance import content_hash, provenance_path
from reprolm.provenance.cost import cost_table, lineage_jobs, summary
from reprolm.provenance.environment import granted_gpus, job_usage
from workflow_helpers import REPO, dry_run_details


def usage(wall: float, gpus: int = 0, cpu: float = 0.0, model: str | None = None) -> dict:
    return {
        "source": "slurm",
        "wall_seconds": wall,
        "gpus": gpus,
        "gpu_model": model,
        "gpu_seconds": gpus * wall,
        "cpus": 1,
        "cpu_seconds": cpu,
        "max_rss_mb": 1.0,
    }


def recorded(root: Path, path: str, rule: str, inputs: list[str], execution: dict, wildcards=None) -> None:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(path)
    record = {
        "rule": rule,
        "wildcards": wildcards or {"name": path},
        "params": {},
        "code": {},
        "started": "t0",
        "finished": "t1",
        "execution": execution,
        "inputs": {"input": [{"path": p, "sha256": content_hash(root / p)} for p in inputs]},
        "outputs": [{"path": path, "sha256": content_hash(target)}],
    }
    provenance_path(target).write_text(json.dumps(record))


@pytest.fixture
def run(tmp_path) -> Path:
    """Two finetunes of one base model (pretrained on 2 GPUs for an hour), one of them
    stopped once at its time limit, each generating on one H100; a table of both."""
    recorded(
        tmp_path,
        "resources/models/base",
        "build_base_model",
        [],
        {"usage": usage(3600, gpus=2, cpu=7200, model="h100")},
    )
    recorded(
        tmp_path,
        "results/models/base/a",
        "finetune",
        ["resources/models/base"],
        {
            "usage": usage(1800, gpus=4, cpu=100, model="h100"),
            "stopped_attempts": [{"signal": "SIGTERM", "usage": usage(900, gpus=4, cpu=50, model="h100")}],
        },
    )
    recorded(
        tmp_path,
        "results/models/base/b",
        "finetune",
        ["resources/models/base"],
        {"usage": usage(1800, gpus=4, cpu=100, model="h100")},
    )
    for model in ("a", "b"):
        recorded(
            tmp_path,
            f"results/generations/{model}.parquet",
            "generate",
            [f"results/models/base/{model}"],
            {"usage": usage(360, gpus=1, cpu=360, model="h100")},
        )
    recorded(
        tmp_path,
        "results/tables/study.csv",
        "study_tables",
        ["results/generations/a.parquet", "results/generations/b.parquet"],
        {"usage": usage(10, cpu=10)},
    )
    return tmp_path


def test_a_tables_cost_counts_the_shared_base_model_once_and_adds_stopped_attempts(run):
    table = cost_table(lineage_jobs(["results/tables/study.csv"], root=run)).set_index("stage")
    # base 2 GPUs x 1 h; finetunes 4 x 0.5 h each, plus 4 x 0.25 h stopped; generations 1 x 0.1 h each.
    assert table.loc["pretrain", "GPU hours"] == pytest.approx(2.0)
    assert table.loc["finetune", "GPU hours"] == pytest.approx(4 * 0.5 * 2 + 4 * 0.25)
    assert table.loc["finetune", ["jobs", "stopped attempts"]].tolist() == [2, 1]
    assert table.loc["finetune", "GPU hours in stopped attempts"] == pytest.approx(1.0)
    assert table.loc["generate", "GPU hours"] == pytest.approx(0.2)
    assert table.loc["total", "GPU hours"] == pytest.approx(2.0 + 5.0 + 0.2)
    assert table.loc["total", "CPU hours"] == pytest.approx((7200 + 250 + 720 + 10) / 3600)
    assert table.loc["total", ["jobs", "jobs without usage"]].tolist() == [6, 0]
    assert table.loc["total", "GPU models"] == "h100"
    assert summary(table.reset_index(), "the table") == (
        "the table cost 7.2 GPU-hours, of which finetune 5, pretrain 2, generate 0.2; 2.272 CPU-hours over 6 jobs; "
        "1 stopped attempts spent 1 GPU-hours."
    )


def test_reprolm_cost_over_one_model_and_records_without_usage(run, capsys):
    assert main(["--root", str(run), "cost", "--json", "results/models/base/b"]) == 0
    rows = {row["stage"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["total"]["GPU hours"] == pytest.approx(2.0 + 2.0)
    record = json.loads(provenance_path(run / "results/models/base/a").read_text())
    record["execution"] = {"host": "older"}
    provenance_path(run / "results/models/base/a").write_text(json.dumps(record))
    assert main(["--root", str(run), "cost", "results/models/base/a"]) == 0
    assert "1 jobs have no recorded usage (not counted)" in capsys.readouterr().out
    assert main(["--root", str(run), "cost", "nowhere"]) == 2


@pytest.mark.slow
def test_job_usage_takes_gpus_and_cpus_from_the_slurm_allocation(monkeypatch):
    for variable in (
        "SLURM_JOB_ID",
        "SLURM_STEP_GPUS",
        "SLURM_JOB_GPUS",
        "SLURM_GPUS_ON_NODE",
        "SLURM_CPUS_PER_TASK",
        "SLURM_CPUS_ON_NODE",
        "CUDA_VISIBLE_DEVICES",
    ):
        monkeypatch.delenv(variable, raising=False)
    local = job_usage(10.0, cpus=2)
    assert (local["source"], local["gpus"], local["gpu_seconds"], local["cpus"]) == ("local", 0, 0.0, 2)
    monkeypatch.setenv("SLURM_JOB_ID", "0")  # no such job: the GPU type stays unknown
    monkeypatch.setenv("SLURM_STEP_GPUS", "1,3")
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "16")
    on_slurm = job_usage(10.0, cpus=2)
    assert (on_slurm["source"], on_slurm["gpus"], on_slurm["gpu_seconds"], on_slurm["cpus"]) == ("slurm", 2, 20.0, 16)
    assert on_slurm["cpu_seconds"] > 0


def test_a_local_job_holds_the_gpus_its_rule_asked_for_not_every_gpu_it_sees(monkeypatch):
    # Stand-in for a machine with four GPUs (none here): every local job sees all four, as
    # bench/gpu_smoke found on an H200, where CPU rules' tables were billed GPU-seconds.
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    local = {}
    assert granted_gpus(local, asked=0) == 0
    assert granted_gpus(local, asked=1) == 1
    assert granted_gpus(local, asked=8) == 4
    assert granted_gpus(local) == 4
    assert granted_gpus({"SLURM_STEP_GPUS": "2,3"}, asked=0) == 2
    for variable in ("SLURM_JOB_ID", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE"):
        monkeypatch.delenv(variable, raising=False)
    usage = job_usage(10.0, cpus=2, asked_gpus=0)
    assert (usage["gpus"], usage["gpu_seconds"], usage["gpu_model"]) == (0, 0.0, None)


@pytest.mark.slow
def test_the_default_dag_costs_each_studys_tables_and_plots():
    jobs = dry_run_details(REPO, "--forceall")
    costs = {job.wildcards["study"]: job for job in jobs if job.rule == "study_cost"}
    assert sorted(costs) == sorted(DEFAULT["studies"])
    for study, job in costs.items():
        assert job.outputs == [f"results/report/cost/{study}.csv"]
        assert sorted(job.inputs) == [f"results/plots/{study}", f"results/tables/{study}"]
    everything = next(job for job in jobs if job.rule == "all")
    assert {f"results/report/cost/{study}.csv" for study in costs} <= set(everything.inputs)
