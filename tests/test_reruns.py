"""What a change reruns: dry runs on the finished default run (a private copy where a test writes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from default_config import DEFAULT, EXPO_MODELS, GEM, MODELS
from reprolm.config import overlays
from workflow_helpers import REPO, copy_run, dry_run_jobs, job_counts, snakemake

pytestmark = pytest.mark.workflow


def test_noop_rerun_does_nothing(default_run):
    result = snakemake(default_run, "-n")
    assert "Nothing to be done" in result.stdout + result.stderr


def test_changing_one_recipe_reruns_exactly_its_descendants(default_run, tmp_path):
    from reprolm.paths import split_expo

    changed = overlays.load(default_run / "config/config.yaml", default_run)
    changed["recipes"]["vanilla"]["learning_rate"] *= 2
    configfile = tmp_path / "changed.yaml"
    configfile.write_text(yaml.safe_dump(changed, sort_keys=True))
    jobs = dry_run_jobs(default_run, "--configfile", str(configfile))
    bases = DEFAULT["ruler"]["bases"]
    # vanilla on every Ruler base, and on tiny_llama the recipes that start from it: FLR's
    # fine-tuned scoring LM and the FLR-aligned policies (ExPO's DPO starts from its own SFT).
    descendants = ["flr_feedback", "flr_dpo", "flr_kto"]
    retrained = [(b, "vanilla") for b in bases] + [("tiny_llama", r) for r in descendants]
    assert sorted((w["base"], w["recipe"]) for rule, w in jobs if rule == "finetune") == sorted(retrained)
    for rule, wildcards in jobs:
        if "recipe" in wildcards:
            assert split_expo(wildcards["recipe"])[0] in ["vanilla"] + descendants, (rule, wildcards)
    counts = job_counts(jobs)
    assert not {"raw_source", "tokenizer", "build_base_model", "train_before_test"} & set(counts)
    # FLR scores with the vanilla model, so its online pairs are rebuilt; nothing else is.
    assert {w["dataset"] for rule, w in jobs if rule == "dataset"} == {"flr_pairs"}
    assert counts["lm_eval"] >= len(bases)
    assert {w["study"] for rule, w in jobs if rule == "study_tables"} == {"ruler", "flr"}  # not harmony, not expo


def test_adding_an_alpha_runs_only_the_new_point(default_run, tmp_path):
    # 0.9: no earlier test built that extrapolation.
    changed = overlays.load(default_run / "config/config.yaml", default_run)
    changed["expo"]["alpha_search"]["alphas"].append(0.9)
    configfile = tmp_path / "grid.yaml"
    configfile.write_text(yaml.safe_dump(changed))
    jobs = dry_run_jobs(default_run, "--configfile", str(configfile))
    new_points = {(b, f"{r}+expo0.9") for b, r in EXPO_MODELS}
    assert {(w["base"], w["recipe"] + "+expo" + w["alpha"]) for rule, w in jobs if rule == "extrapolate"} == new_points
    for rule in ("generate", "grade"):
        assert {(w["base"], w["recipe"]) for r, w in jobs if r == rule} == new_points
        assert {w["promptset"] for r, w in jobs if r == rule} == {"expo_search"}
    assert job_counts(jobs)["alpha_search"] == len(EXPO_MODELS)
    assert not {"finetune", "lm_eval", "win_rate", "dataset"} & set(job_counts(jobs))


def test_changing_the_flr_categories_reruns_exactly_what_flr_scored(default_run, tmp_path):
    changed = overlays.load(default_run / "config/config.yaml", default_run)
    changed["judges"]["flr"]["categories"] = ["relevance", "correctness"]
    configfile = tmp_path / "categories.yaml"
    configfile.write_text(yaml.safe_dump(changed))
    jobs = dry_run_jobs(default_run, "--configfile", str(configfile))
    counts = job_counts(jobs)
    assert {w["dataset"] for rule, w in jobs if rule == "dataset"} == {"flr_pairs"}
    assert sorted(w["recipe"] for rule, w in jobs if rule == "finetune") == ["flr_dpo", "flr_kto"]
    # (and the leaderboard's answers of the retrained policies)
    leaderboard = DEFAULT["leaderboard"]["promptset"]
    assert {(w["recipe"], w["promptset"]) for rule, w in jobs if rule == "generate"} == {
        ("flr_dpo", "flr_eval"),
        ("flr_kto", "flr_eval"),
        ("flr_dpo", leaderboard),
        ("flr_kto", leaderboard),
    }
    for rule in ("pair_accuracy", "rating_agreement", "model_ranking"):
        assert {w["judge"] for r, w in jobs if r == rule} == {"flr"}
    # The flr judge regrades everything it graded; other judges only the retrained policies.
    for rule, wildcards in jobs:
        if rule in ("grade", "win_rate") and wildcards["judge"] != "flr":
            assert wildcards["recipe"] in ("flr_dpo", "flr_kto"), (rule, wildcards)
    assert {w["study"] for rule, w in jobs if rule == "study_tables"} == {"flr"}
    assert not {"raw_source", "lm_eval", "extrapolate", "alpha_search", "train_before_test"} & set(counts)


def test_changing_the_voting_ks_rescores_only_the_sampled_gsm8k_answers(default_run, tmp_path):
    changed = overlays.load(default_run / "config/config.yaml", default_run)
    changed["metrics"]["answer_voting"]["ks"] = [1, 8]
    configfile = tmp_path / "ks.yaml"
    configfile.write_text(yaml.safe_dump(changed))
    jobs = dry_run_jobs(default_run, "--configfile", str(configfile))
    assert job_counts(jobs) == {
        "score": len(GEM["recipes"]),
        "study_tables": 1,
        "study_cost": 1,
        "cost_page": 1,
        "paper_comparison": 1,
        "paper_comparison_pages": 1,
        "headline_summary": 1,
        "table_pages": 1,
        "provenance_index": 1,
        "provenance_page": 1,
        "all": 1,
    }
    assert {(w["metric"], w["promptset"]) for rule, w in jobs if rule == "score"} == {
        ("answer_voting", "gsm8k_samples")
    }
    assert {w["study"] for rule, w in jobs if rule == "study_tables"} == {"gem"}


def test_moving_a_length_window_rescores_only_what_reads_it_as_impact_says(default_run, tmp_path):
    """The lower edge of Ruler's open-ended window (PM and FM): only the length scores and the
    tables and pages above them rerun, and ``reprolm impact`` names the same jobs."""
    from reprolm.impact import impact

    changed = overlays.load(default_run / "config/config.yaml", default_run)
    for window in ("pm", "fm"):
        changed["length_targets"][-1][window][0] -= 10
    configfile = tmp_path / "window.yaml"
    configfile.write_text(yaml.safe_dump(changed, sort_keys=True))
    jobs = dry_run_jobs(default_run, "--configfile", str(configfile))
    assert not {"dataset", "finetune", "extrapolate", "generate", "grade", "lm_eval"} & set(job_counts(jobs))
    assert {w["metric"] for rule, w in jobs if rule == "score"} == {
        "length_levels",
        "length_multi_mlt",
        "length_self_mlt",
    }
    assert {w["study"] for rule, w in jobs if rule == "study_tables"} == {"ruler"}
    said = impact(default_run, str(configfile))
    assert sorted((j.state.rule, sorted(j.state.wildcards.items())) for j in said.found) == sorted(
        (rule, sorted(w.items())) for rule, w in jobs if rule != "all"
    )


def _edited_library(scratch: Path, relative: str, old: str, new: str) -> dict:
    """A copy of the library (in ``scratch``, outside the run) with one edit, and the
    environment that makes jobs use it."""
    import shutil

    library = scratch / "edited_src"
    if library.exists():
        shutil.rmtree(library)
    shutil.copytree(REPO / "src", library, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    path = library / relative
    text = path.read_text()
    assert text.count(old) == 1, (relative, old)
    path.write_text(text.replace(old, new))
    return {"PYTHONPATH": str(library)}


def test_library_edits_rerun_exactly_the_jobs_whose_code_changed(default_run, tmp_path):
    """Library code is fingerprinted per job (reprolm.provenance.fingerprint): an edit reruns
    the jobs whose code it changed, and what descends from them."""
    # An unedited copy of the library: nothing to do.
    unedited = _edited_library(tmp_path, "reprolm/score/length.py", "def level_scores(", "def level_scores(")
    assert dry_run_jobs(default_run, env=unedited) == []
    # A docstring is not code.
    docstring = _edited_library(
        tmp_path,
        "reprolm/score/length.py",
        '"""Rows ``Level:0`` .. and ``All``',
        '"""Per-level rows ``Level:0`` .. and ``All``',
    )
    assert dry_run_jobs(default_run, env=docstring) == []
    # The length-level scoring: its scores and the Ruler tables, nothing else.
    scoring = _edited_library(
        tmp_path,
        "reprolm/score/length.py",
        '    rows.append(_score_row("All", counts.values()))',
        '    rows.append(_score_row("All", list(counts.values())))',
    )
    jobs = dry_run_jobs(default_run, env=scoring)
    assert {w["metric"] for rule, w in jobs if rule == "score"} == {"length_levels"}
    assert job_counts(jobs) == {
        "score": len(MODELS),
        "study_tables": 1,
        "study_cost": 1,
        "cost_page": 1,
        "paper_comparison": 1,
        "paper_comparison_pages": 1,
        "headline_summary": 1,
        "table_pages": 1,
        "provenance_index": 1,
        "provenance_page": 1,
        "all": 1,
    }
    assert [w["study"] for rule, w in jobs if rule == "study_tables"] == ["ruler"]
    # One dataset builder: that dataset and what descends from it (GEM's SFT chats).
    builder = _edited_library(
        tmp_path,
        "reprolm/data/builders.py",
        '    template = ctx.params.get("question_template", "{instruction}")',
        '    template = str(ctx.params.get("question_template", "{instruction}"))',
    )
    jobs = dry_run_jobs(default_run, env=builder)
    assert {w["dataset"] for rule, w in jobs if rule == "dataset"} == {"chat_sft"}
    assert {w["recipe"] for rule, w in jobs if rule == "finetune"} == set(GEM["recipes"])
    assert {w["recipe"] for _, w in jobs if "recipe" in w} == set(GEM["recipes"])
    assert {w["study"] for rule, w in jobs if rule == "study_tables"} == {"gem"}
    assert not {"raw_source", "tokenizer", "build_base_model", "train_before_test"} & set(job_counts(jobs))


def test_a_checkpoint_replaced_in_place_reruns_what_was_made_from_it(default_run, tmp_path):
    # The checkpoint is rewritten in place (and its marker touched): a real copy of it.
    work = copy_run(default_run, tmp_path / "run", writable=["results/models/tiny_llama/ce"])
    assert dry_run_jobs(work) == []
    # New weights under the old name: Snakemake dates the folder by its marker, which did not change.
    config = work / "results/models/tiny_llama/ce/generation_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "temperature": 0.5}))
    jobs = dry_run_jobs(work)
    assert {(w["base"], w["recipe"]) for _, w in jobs if "recipe" in w} == {("tiny_llama", "ce")}
    assert {rule for rule, _ in jobs} == {
        "generate",
        "score",
        "grade",
        "lm_eval",
        "study_tables",
        "study_cost",
        "cost_page",
        "paper_comparison",
        "paper_comparison_pages",
        "headline_summary",
        "table_pages",
        "leaderboard",
        "leaderboard_page",
        "provenance_index",
        "provenance_page",
        "all",
    }
    assert {w["study"] for rule, w in jobs if rule == "study_tables"} == {"gem"}
