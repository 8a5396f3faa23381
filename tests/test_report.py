"""The cross-study report of the finished default run: paper comparison and the HTML report."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from default_config import DEFAULT
from workflow_helpers import REPO, snakemake

pytestmark = pytest.mark.workflow


def test_paper_comparison_sets_headlines_beside_this_run_and_checks_directions_at_tiny_scale(default_run):
    headlines = pd.read_csv(default_run / "results/report/paper_headlines.csv")
    spec = yaml.safe_load((REPO / "config/paper_headlines.yaml").read_text())
    assert len(headlines) == len(spec["headlines"])
    # The tiny default has none of the papers' models: every headline is there, none filled.
    assert headlines["this run"].isna().all() and headlines["paper"].notna().all()
    assert set(headlines["study"]) == {item["study"] for item in spec["headlines"]} & set(DEFAULT["studies"])
    directions = pd.read_csv(default_run / "results/report/effect_directions.csv")
    assert len(directions) == len(spec["directions"])
    gem = directions[directions["claim"].str.startswith("GEM-Linear keeps more poem diversity")].iloc[0]
    poems = pd.read_csv(default_run / "results/tables/gem/diversity_poems.csv").set_index("model")
    assert gem["expected higher"] == pytest.approx(poems.loc["GEM-Linear", "N-gram Distinct Ratio"], abs=1e-3)
    assert gem["expected lower"] == pytest.approx(poems.loc["CE", "N-gram Distinct Ratio"], abs=1e-3)
    # Shown only when the paired interval of the difference lies above zero.
    assert gem["difference"] == pytest.approx(gem["expected higher"] - gem["expected lower"], abs=2e-3)
    assert gem["difference lo"] <= gem["difference"] <= gem["difference hi"] and gem["paired"]
    assert gem["shown"] == (gem["difference lo"] > 0)
    assert set(directions["verdict"]) <= {"shown", "not significant", "reversed", "no interval"}
    # Harmony's four tiny models are too few to bootstrap a Kendall tau over: no interval,
    # never "shown" on the strength of the draws that happen to define it.
    assert directions[directions["study"] == "harmony"]["verdict"].tolist() == ["no interval"]
    harmony = directions[directions["study"] == "harmony"].iloc[0]
    summary = pd.read_csv(default_run / "results/tables/harmony/consistency_summary.csv").set_index("evaluation")
    assert harmony["expected higher"] == pytest.approx(summary.loc["train_before_test", "mean_kendall_tau"], abs=1e-3)


def test_html_report_holds_every_studys_tables_plots_captions_and_the_provenance(run_copy):
    default_run = run_copy  # the report is written into the run: a private copy
    snakemake(default_run, "--report", "report.html")
    html = (default_run / "report.html").read_text(errors="replace")
    # Tables are in the report as rendered pages (tests/test_report_browser.py reads them).
    made = [
        path.name if kind == "plots" else f"{path.stem}.html"
        for study in DEFAULT["studies"]
        for kind, pattern in (("tables", "*.csv"), ("plots", "*.png"))
        for path in (default_run / "results" / kind / study).glob(pattern)
    ]
    assert len(made) > 30
    missing = [
        name
        for name in made + ["paper_headlines.csv", "effect_directions.csv", "leaderboard.csv", "provenance.csv"]
        if name not in html
    ]
    assert missing == []
    # Each study's caption explains its metrics; the cross-study tables have their own.
    for explanation in (
        "half-open",
        "Kendall tau-b",
        "length-controlled win rate",
        "pair accuracy",
        "n-gram distinct ratio",
        "tiny-scale",
        "reprolm lineage",
        "content hash",
    ):
        assert explanation in html, explanation
