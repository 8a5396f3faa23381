"""The cross-study report of the finished default run: paper comparison and the HTML report."""

from __future__ import annotations

import itertools
import json
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from default_config import DEFAULT
from reprolm.aggregate.paper_comparison import config_value
from workflow_helpers import REPO, snakemake

pytestmark = pytest.mark.workflow


def stand_ins(entry: dict) -> list[str]:
    """The default's models standing in for a headline's paper model, as the entry names them."""
    stand_in = entry.get("stand_in")
    if stand_in is None:
        return []
    lists = {name: config_value(DEFAULT, key) for name, key in stand_in.get("for_each", {}).items()}
    labels = []
    for values in itertools.product(*lists.values()):
        label = stand_in["model"]
        for name, value in zip(lists, values, strict=True):
            label = label.replace("{" + name + "}", value)
        labels.append(label)
    return labels


def test_paper_comparison_sets_headlines_beside_this_run_and_checks_directions_at_tiny_scale(default_run):
    headlines = pd.read_csv(default_run / "results/report/paper_headlines.csv")
    spec = yaml.safe_load((REPO / "config/paper_headlines.yaml").read_text())
    # The tiny default has none of the papers' models: each headline's figure is that of the
    # tiny models standing in for the paper's, a row each, and empty where it names none.
    expected = [
        (entry["figure"], entry["model"], model) for entry in spec["headlines"] for model in stand_ins(entry) or [None]
    ]
    made = [None if pd.isna(model) else model for model in headlines["this run model"]]
    assert list(zip(headlines["figure"], headlines["model"], made, strict=True)) == expected
    assert headlines["paper"].notna().all() and headlines["difference"].isna().all()
    assert (headlines["this run"].notna() == headlines["this run model"].notna()).all()
    filled = headlines[headlines["this run"].notna()]
    assert set(filled["study"]) == set(DEFAULT["studies"]) - {"flr"}  # FLR's paper has no headline figure
    # The figure of a stand-in is its own table's cell, with the interval beside it.
    tlg = pd.read_csv(default_run / "results/tables/ruler/tlg_levels.csv").set_index(["model", "level"])
    for base in DEFAULT["ruler"]["bases"]:
        (row,) = filled[
            (filled["figure"] == "TLG All-level FM") & (filled["this run model"] == f"{base}/ruler")
        ].to_dict("records")
        cell = tlg.loc[(f"{base}/ruler", "All")]
        assert (row["this run"], row["this run lo"], row["this run hi"]) == pytest.approx(
            (cell["FM"], cell["FM lo"], cell["FM hi"])
        )
    assert set(headlines["study"]) == {item["study"] for item in spec["headlines"]} & set(DEFAULT["studies"])
    directions = pd.read_csv(default_run / "results/report/effect_directions.csv")
    # The claims name the default's own models through its config: Ruler per base, ExPO per pair.
    ruler = directions[directions["study"] == "ruler"]
    assert [claim.split(":")[0] for claim in ruler["claim"]] == DEFAULT["ruler"]["bases"]
    pairs = [f"{b}/{r}" for b in DEFAULT["expo"]["bases"] for r in DEFAULT["expo"]["recipes"]]
    assert [claim.split(":")[0] for claim in directions[directions["study"] == "expo"]["claim"]] == pairs
    assert len(directions) == len(DEFAULT["ruler"]["bases"]) + len(pairs) + 2 * len(DEFAULT["gem"]["bases"]) + 2
    gem = directions[directions["claim"].str.startswith("tiny_llama: GEM-Linear keeps more poem diversity")].iloc[0]
    poems = pd.read_csv(default_run / "results/tables/gem/diversity_poems.csv").set_index("model")
    assert gem["expected higher"] == pytest.approx(poems.loc["GEM-Linear", "N-gram Distinct Ratio"], abs=1e-3)
    assert gem["expected lower"] == pytest.approx(poems.loc["CE", "N-gram Distinct Ratio"], abs=1e-3)
    assert gem["difference"] == pytest.approx(gem["expected higher"] - gem["expected lower"], abs=2e-3)
    assert gem["difference lo"] <= gem["difference"] <= gem["difference hi"] and gem["paired"]
    assert gem["interval"] == ("above zero" if gem["difference lo"] > 0 else "holds zero")
    # The tiny default's claims rest on a few dozen prompts and one seed: smoke checks, each
    # with its units and seeds, never shown and outside Holm's family.
    made = directions[directions["verdict"] != "not made"]
    assert (made["seeds"] == 1).all() and (made["units"] < 30).any()
    assert (made["verdict"] == "smoke check").sum() == len(made) - 1 and not made["shown"].any()
    assert made["p (Holm)"].isna().all()
    # Harmony's four tiny models are too few to bootstrap a Kendall tau over: no interval,
    # never "shown" on the strength of the draws that happen to define it.
    harmony = directions[directions["study"] == "harmony"]
    assert harmony["interval"].tolist() == ["none"] and harmony["units"].tolist() == [4]
    assert harmony["verdict"].tolist() == ["no interval"]
    harmony = directions[directions["study"] == "harmony"].iloc[0]
    summary = pd.read_csv(default_run / "results/tables/harmony/consistency_summary.csv").set_index("evaluation")
    assert harmony["expected higher"] == pytest.approx(summary.loc["train_before_test", "mean_kendall_tau"], abs=1e-3)


def test_every_judged_tables_page_names_its_judge_and_its_measured_agreement(default_run):
    """The default's ExPO win rates come from tiny_rm acting for the retired gpt4_turbo: the
    page says so with the agreement the judge_agreement table measured; a judge that acts for
    no retired one is named as a stand-in with no agreement."""
    agreement = pd.read_csv(default_run / "results/tables/judge_agreement/expo.csv").set_index("model").loc["all"]
    pages = default_run / "results/report/tables"
    win_rates = (pages / "expo/alpaca_eval.html").read_text()
    assert "Judge: tiny_rm (reward model tiny_llama/reward, a stand-in" in win_rates
    assert "acting for the retired gpt4_turbo (chat endpoint gpt-4-1106-preview, as of 2023-11-06)" in win_rates
    assert (
        f"on {agreement['items']} released verdicts: raw agreement {agreement['raw_agreement']:.3f}, "
        f"Cohen&#x27;s kappa {agreement['kappa']:.3f}"
    ) in win_rates
    best_of_n = (pages / "gem/chat_best_of_n.html").read_text()
    assert "Judge: tiny_rm" in best_of_n and "acts for no retired judge" in best_of_n
    for unjudged in ("ruler/tlg_levels.html", "gem/diversity_poems.html", "harmony/consistency_summary.html"):
        assert "Judge:" not in (pages / unjudged).read_text(), unjudged


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
    # The cross-study tables are pages too, each linking its CSV (tests/test_report_browser.py opens them).
    pages = [
        f"results/report/{name}.html" for name in ("paper_headlines", "effect_directions", "leaderboard", "provenance")
    ]
    pages += [f"results/report/cost/{study}.html" for study in DEFAULT["studies"]]
    missing = [name for name in made + pages if name not in html]
    assert missing == []
    # Each study's caption explains its metrics; the cross-study tables have their own.
    for explanation in (
        "half-open",
        "Kendall tau-b",
        "length-controlled win rate",
        "pair accuracy",
        "n-gram distinct ratio",
        "tiny-scale",
        "acting for the retired gpt4_turbo",
        "smoke check",
        "reprolm lineage",
        "content hash",
    ):
        assert explanation in html, explanation


def test_a_table_with_nothing_in_it_makes_a_page(tmp_path):
    from reprolm.aggregate.report_pages import table_page

    empty = tmp_path / "judge_agreement.csv"
    empty.write_text("\n")
    page = table_page(empty, "flr: judge_agreement")
    assert "flr: judge_agreement" in page and "<table" in page and "<td>" not in page


def test_a_table_page_flags_the_rows_whose_outputs_ran_to_max_new_tokens(tmp_path):
    """Any table with an ``at max_new_tokens`` column: its page warns, above the table, for
    each model with 20% or more of a row's outputs at the limit, naming the share (and the
    row's level where a model has several rows); an unknown (empty) share is no warning, and
    a table without the column has none."""
    from reprolm.aggregate.report_pages import write_table_pages

    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "errors.csv").write_text(
        "model,rmse,at max_new_tokens,at max_new_tokens lo,at max_new_tokens hi,definition\n"
        "a/ruler,3.5,100.0,100.0,100.0,template=own\n"
        "a/vanilla,4.0,19.99,10.0,30.0,template=own\n"
        "b/ruler,2.0,20.0,12.5,27.5,template=own\n"
        "b/vanilla,5.0,,,,template=own\n"
    )
    (tables / "levels.csv").write_text(
        "model,level,FM,at max_new_tokens,definition\n"
        "a/ruler,Level:0,10.0,0.0,template=own\n"
        "a/ruler,Level:1,0.0,62.5,template=own\n"
        "a/ruler,All,5.0,31.25,template=own\n"
        "a/vanilla,All,5.0,3.0,template=own\n"
    )
    (tables / "general.csv").write_text("model,arc (acc),at max_new_tokens (in the name only)\na/ruler,25.0,90.0\n")
    write_table_pages(tables, tmp_path / "pages", "study")
    errors = (tmp_path / "pages/errors.html").read_text()
    budget = "ran to max_new_tokens without stopping: their lengths measure the budget, not the model."
    assert re.findall(r"<p class='warning'>&#9888; (.*?)</p>", errors) == [
        f"100.0% of a/ruler&#x27;s outputs {budget}",
        f"20.0% of b/ruler&#x27;s outputs {budget}",
    ]
    assert errors.index("class='warning'") < errors.index("<table")
    levels = (tmp_path / "pages/levels.html").read_text()
    assert re.findall(r"<p class='warning'>&#9888; (.*?)</p>", levels) == [
        f"62.5% (Level:1), 31.25% (All) of a/ruler&#x27;s outputs {budget}"
    ]
    assert "class='warning'" not in (tmp_path / "pages/general.html").read_text()


def test_the_leaderboard_ranks_every_model_with_its_interval_over_the_prompts(default_run):
    board = pd.read_csv(default_run / "results/report/leaderboard.csv")
    assert board["mean grade"].is_monotonic_decreasing and board["rank"].tolist() == list(range(1, len(board) + 1))
    assert (board["mean grade lo"] < board["mean grade"]).all() and (board["mean grade"] < board["mean grade hi"]).all()
    # The interval is the central 95% of the kept replicates: 1000 draws of the prompts the
    # models answered, the same prompts for every model.
    replicates = pd.read_parquet(default_run / "results/report/leaderboard.replicates.parquet")
    prompts = pd.read_parquet(default_run / f"results/datasets/{DEFAULT['leaderboard']['promptset']}/test.parquet")
    assert replicates["row"].tolist() == list(range(len(board))) and (replicates["units"] == len(prompts)).all()
    for row in replicates.itertuples():
        draws = np.asarray(row.replicates)
        assert len(draws) == 1000
        low, high = np.quantile(draws, [0.025, 0.975])
        assert (low, high) == pytest.approx(
            (board.loc[row.row, "mean grade lo"], board.loc[row.row, "mean grade hi"]), abs=1e-4
        )


def test_a_leaderboard_intervals_width_is_that_of_a_mean_over_its_prompts(tmp_path):
    """Two models graded on 400 prompts (grades of spread 1): each mean grade's 95% interval is
    about +-1.96/sqrt(400) wide, and the better model ranks first."""
    from reprolm.aggregate.leaderboard import leaderboard

    rng = np.random.default_rng(0)
    grade_files = []
    for name, centre in (("weak", 0.0), ("strong", 0.5)):
        grades = rng.normal(centre, 1.0, size=400)
        path = tmp_path / f"{name}.json"
        ids = [f"prompt{i}" for i in range(400)]
        path.write_text(
            json.dumps({"judge": "j", "mean": float(grades.mean()), "ids": ids, "grades": [[g] for g in grades]})
        )
        grade_files.append(str(path))
    board = leaderboard(
        [("b", "weak"), ("b", "strong")], grade_files, [str(tmp_path / "none")] * 2, {"s": [("b", "strong")]}
    )
    assert board["model"].tolist() == ["b/strong", "b/weak"] and board["studies"].tolist() == ["s", ""]
    for grade in board["mean grade"]:
        assert grade.low < grade.value < grade.high
        assert (grade.high - grade.low) / 2 == pytest.approx(1.96 / np.sqrt(400), rel=0.15)
