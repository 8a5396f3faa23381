"""Provenance of the finished default run: records with true hashes, lineage, verify, the index."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from default_config import DEFAULT, MODELS
from reprolm.provenance import content_hash, provenance_path
from workflow_helpers import REPO, copy_run

pytestmark = pytest.mark.workflow


def test_every_output_has_provenance_with_true_hashes(default_run):
    outputs = [
        default_run / "results/datasets/tlg/test.parquet",
        default_run / f"results/models/{MODELS[0]}",
        default_run / f"results/generations/{MODELS[0]}/tlg.parquet",
        default_run / f"results/scores/length_levels/{MODELS[0]}/tlg.json",
        default_run / "results/tables/ruler",
    ]
    for output in outputs:
        record = json.loads(provenance_path(output).read_text())
        assert record["outputs"][0]["sha256"] == content_hash(output)
        assert record["code"]["commit"] and "torch" in record["packages"]
        assert record["started"] <= record["finished"] and record["seed"] == DEFAULT["seed"]
        for group in record["inputs"].values():
            for item in group:
                assert item["sha256"] == content_hash(default_run / item["path"])
    finetune = json.loads(provenance_path(default_run / f"results/models/{MODELS[0]}").read_text())
    assert finetune["rule"] == "finetune"
    assert finetune["params"]["recipe"]["learning_rate"] == DEFAULT["recipes"]["ruler"]["learning_rate"]
    assert finetune["wildcards"] == dict(zip(("base", "recipe"), MODELS[0].split("/")))


def test_every_generation_record_carries_its_length_budget_and_stops_and_nothing_is_redacted(default_run):
    """The default names no secret, so no record of the run hides anything: a generation's
    ``max_new_tokens`` and a Ruler recipe's ``add_tokens`` are settings."""
    generations = sorted((default_run / "results/generations").rglob("*.parquet"))
    assert generations
    for output in generations:
        record = json.loads(provenance_path(output).read_text())
        budget = record["params"]["promptset"]["sampling"]["max_new_tokens"]
        assert record["generation"]["max_new_tokens"] == budget, output
        assert "<|eos|>" in record["generation"]["stop"], output
    ruler = json.loads(provenance_path(default_run / f"results/generations/{MODELS[0]}/tlg.parquet").read_text())
    assert ruler["generation"]["stop"][1:] == [f"[MLT:{target['name']}]" for target in DEFAULT["length_targets"]]
    finetune = json.loads(provenance_path(default_run / f"results/models/{MODELS[0]}").read_text())
    assert finetune["params"]["recipe"]["add_tokens"] == "mlt"
    records = [
        *(default_run / "results").rglob("*provenance.json"),
        *(default_run / "resources").rglob("*provenance.json"),
    ]
    assert [str(path) for path in records if "<redacted>" in path.read_text()] == []


def test_lineage_traces_a_table_back_to_its_raw_sources(default_run, capsys):
    from reprolm.cli import main
    from reprolm.provenance.query import lineage

    graph = lineage("results/tables/gem", root=default_run)
    artifacts = graph["artifacts"]
    table = artifacts["results/tables/gem"]
    assert table["rule"] == "study_tables" and table["wildcards"] == {"study": "gem"}
    assert table["code"]["commit"] and len(table["params"]["code"]) == 64
    # table <- score <- generations <- model <- dataset <- raw source, each with its record.
    chain = [
        "results/scores/answer_voting/tiny_llama/ce/gsm8k_samples.json",
        "results/generations/tiny_llama/ce/gsm8k_samples.parquet",
        "results/models/tiny_llama/ce",
        "results/datasets/chat_sft/train.parquet",
        "resources/raw/ultrafeedback_sft",
    ]
    for parent, child in zip(["results/tables/gem"] + chain, chain):
        assert child in artifacts[parent]["inputs"], (parent, child)
        assert artifacts[child]["sha256"] == content_hash(default_run / child)
    assert artifacts["resources/raw/ultrafeedback_sft"]["inputs"] == []
    assert main(["--root", str(default_run), "lineage", "results/tables/gem", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(graph))
    assert main(["--root", str(default_run), "lineage", "results/models/tiny_llama/ce"]) == 0
    tree = capsys.readouterr().out.splitlines()
    assert tree[0].startswith("results/models/tiny_llama/ce  [rule finetune base=tiny_llama recipe=ce]")
    assert any("resources/raw/ultrafeedback_sft  [rule raw_source" in line for line in tree)
    assert main(["--root", str(default_run), "lineage", "results/nothing.json"]) == 2


def test_verify_finds_modified_results_and_stale_descendants(default_run, tmp_path, capsys):
    from reprolm.cli import main

    score = "results/scores/diversity/tiny_llama/ce/poems.json"
    # The score is rewritten in place: a real copy of it.
    copy_run(default_run, tmp_path, writable=[score])
    assert main(["--root", str(tmp_path), "verify"]) == 0
    edited = json.loads((tmp_path / score).read_text())
    edited["distinct"] = 99.0
    (tmp_path / score).write_text(json.dumps(edited))
    assert main(["--root", str(tmp_path), "verify"]) == 1
    report = capsys.readouterr().out.splitlines()
    assert f"{score}: modified after it was made" in report
    # The GEM tables and plots (one job) read it.
    for output in ("results/tables/gem", "results/plots/gem"):
        assert f"{output}: inputs changed since it was made: {score}" in report
    assert len(report) == 3


def test_the_report_lists_the_provenance_of_everything_behind_it(default_run):
    index = pd.read_csv(default_run / "results/report/provenance.csv").set_index("artifact")
    for artifact in (
        "results/tables/gem",
        "results/report/leaderboard.csv",
        "results/models/tiny_llama/ce",
        "resources/raw/ultrafeedback_sft",
        "resources/models/tiny_llama",
    ):
        assert index.loc[artifact, "sha256"] == content_hash(default_run / artifact), artifact
    assert index.loc["results/models/tiny_llama/ce", "rule"] == "finetune"
    recorded = index[index["rule"].notna()]
    assert recorded["commit"].notna().all() and recorded["host"].notna().all()
    # Configuration files the jobs read have no record of their own; they are listed with their hash.
    assert index.loc["config/flr_followups.yaml", "sha256"] == content_hash(REPO / "config/flr_followups.yaml")
    assert len(index.loc["results/tables/gem", "library code"]) == 16
