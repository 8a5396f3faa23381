"""Harmony in the finished default run: train-before-test scores and the consistency figures."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from default_config import DEFAULT

pytestmark = pytest.mark.workflow


def test_harmony_tables_match_the_score_files(default_run):
    harmony = DEFAULT["harmony"]
    tables = default_run / "results/tables/harmony"
    tasks = [t["name"] for t in harmony["tasks"]]
    models = sorted(f"{b}/pretrained" for b in harmony["bases"])
    for kind, key in (("direct", "direct_eval"), ("train_before_test", "train_before_test")):
        table = pd.read_csv(tables / f"{kind}_scores.csv").set_index("model")
        assert sorted(table.index) == models
        assert list(table.columns) == [column for task in tasks for column in (task, f"{task} lo", f"{task} hi")]
        for model in models:
            for task in tasks:
                score = json.loads((default_run / f"results/scores/train_before_test/{model}/{task}.json").read_text())
                assert table.loc[model, task] == pytest.approx(round(100 * score[key], 2))
                # A 0/1 metric's normal interval from its standard error over the test documents;
                # CoLA's MCC has none.
                if score["metric"].startswith("mcc"):
                    assert table.loc[model, [f"{task} lo", f"{task} hi"]].isna().all()
                else:
                    p, n = score[key], score["sizes"]["test"]
                    half = 100 * 1.959964 * math.sqrt(p * (1 - p) / (n - 1))
                    assert table.loc[model, f"{task} lo"] == pytest.approx(100 * p - half, abs=0.006)
                    assert table.loc[model, f"{task} hi"] == pytest.approx(100 * p + half, abs=0.006)
                assert (
                    score["train_before_test"] == max(score["epochs"], key=lambda e: (e["valid"], -e["epoch"]))["test"]
                )
                assert len(score["epochs"]) == harmony["train"]["num_train_epochs"]
    summary = pd.read_csv(tables / "consistency_summary.csv").set_index("evaluation")
    assert list(summary.index) == ["direct", "train_before_test"]
    # The summary is the aggregation of the score tables (NaN where every model ties).
    from reprolm.studies.harmony.rankings import ranking_consistency

    for kind in ("direct", "train_before_test"):
        matrix = pd.read_csv(tables / f"{kind}_scores.csv").set_index("model")[tasks] / 100
        expected = ranking_consistency(matrix, min_models=harmony["min_models"]).mean
        reported = summary.loc[kind, "mean_kendall_tau"]
        assert (math.isnan(expected) and math.isnan(reported)) or reported == pytest.approx(expected, abs=1e-3)
        # Four models drawn with replacement are four distinct ones in only 9% of draws, and
        # min_models is 4: too few draws define the tau for an interval.
        low, high = summary.loc[kind, ["mean_kendall_tau lo", "mean_kendall_tau hi"]]
        assert math.isnan(low) and math.isnan(high)
    # The paper's published scores are configured, but no tiny model is in them.
    comparison = pd.read_csv(tables / "reference_comparison.csv")
    assert comparison.empty and {"this run", "paper", "paper stderr", "within 2 stderr"} <= set(comparison.columns)
    for name in ("tau_direct.png", "tau_train_before_test.png", "consistency.png"):
        assert (default_run / "results/plots/harmony" / name).read_bytes()[:4] == b"\x89PNG"
    for kind in ("direct", "train_before_test"):
        board = pd.read_csv(tables / f"leaderboard_{kind}.csv")
        assert list(board.columns) == ["model", "Rank", "PC1", "PC1 lo", "PC1 hi", *tasks]


def test_harmony_default_tasks_are_learnt_so_its_figures_mean_something(default_run):
    """The fixture tasks are learnable at tiny scale: fine-tuning on boolq and cola moves
    models well above chance, every task separates the models after training, and so the
    consistency figures are defined."""
    tables = default_run / "results/tables/harmony"
    tasks = [t["name"] for t in DEFAULT["harmony"]["tasks"]]
    direct = pd.read_csv(tables / "direct_scores.csv").set_index("model")[tasks]
    trained = pd.read_csv(tables / "train_before_test_scores.csv").set_index("model")[tasks]
    assert trained["boolq"].max() >= 90 and trained["cola"].max() >= 90
    assert (trained[["boolq", "cola"]].mean() > direct[["boolq", "cola"]].mean() + 20).all()
    assert (trained.nunique() > 1).all()
    summary = pd.read_csv(tables / "consistency_summary.csv").set_index("evaluation")
    assert summary["mean_kendall_tau"].notna().all()
    assert summary.loc["train_before_test", "pc1_tasks"] == len(trained.columns)
