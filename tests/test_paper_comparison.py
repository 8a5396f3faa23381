"""The paper comparison: headline figures looked up in a run's tables, effects checked."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from reprolm.aggregate.paper_comparison import (
    HeadlineError,
    check_entries,
    claim_lists,
    claim_settings,
    direction_table,
    expand_directions,
    headline_table,
    load_headlines,
    study_headlines,
    write_paper_comparison,
)
from reprolm.aggregate.uncertainty import mean_of
from reprolm.io import write_table
from reprolm.studies import Study


@pytest.fixture
def tables(tmp_path):
    (tmp_path / "gem").mkdir()
    pd.DataFrame({"base": ["b", "b"], "model": ["CE", "GEM"], "Avg": [40.0, 44.0]}).to_csv(
        tmp_path / "gem" / "ifeval.csv", index=False
    )
    return tmp_path


def test_headlines_are_looked_up_by_row_and_left_empty_where_the_run_has_no_such_row(tables):
    spec = {
        "headlines": [
            {
                "study": "gem",
                "figure": "IFEval",
                "model": "b CE",
                "paper": 44.7,
                "table": "ifeval",
                "where": {"base": "b", "model": "CE"},
                "column": "Avg",
            },
            {
                "study": "gem",
                "figure": "IFEval",
                "model": "Llama CE",
                "paper": 44.7,
                "table": "ifeval",
                "where": {"base": "llama", "model": "CE"},
                "column": "Avg",
            },
            {"study": "ruler", "figure": "FM", "model": "x", "paper": 1.0, "table": "tlg", "where": {}, "column": "FM"},
        ]
    }
    frame = headline_table([("headlines.yaml", spec)], tables, ["gem", "ruler"])
    assert frame["this run"].tolist()[0] == 40.0 and pd.isna(frame["this run"].tolist()[1])
    assert frame["difference"].tolist()[0] == pytest.approx(40.0 - 44.7)
    assert pd.isna(frame["this run"].tolist()[2])  # the run made no ruler tables
    assert len(headline_table([("headlines.yaml", spec)], tables, ["ruler"])) == 1  # only enabled studies


def test_directions_compare_two_rows_or_a_row_and_a_number(tables):
    spec = {
        "directions": [
            {
                "study": "gem",
                "claim": "GEM above CE",
                "table": "ifeval",
                "column": "Avg",
                "higher": {"model": "GEM"},
                "lower": {"model": "CE"},
            },
            {
                "study": "gem",
                "claim": "CE above 50",
                "table": "ifeval",
                "column": "Avg",
                "higher": {"model": "CE"},
                "lower": 50,
            },
        ]
    }
    frame = direction_table([("headlines.yaml", spec)], tables, ["gem"])
    # Plain figures without replicates: the difference, but no interval, so nothing is shown.
    assert frame["expected lower"].tolist() == [40.0, 50.0]
    assert frame["difference"].tolist() == [4.0, -10.0]
    assert frame["verdict"].tolist() == ["no interval", "no interval"]
    assert frame["shown"].tolist() == [False, False]
    assert frame["units"].isna().all()  # no replicates: nothing counted


def _claim(name: str, higher: str, lower) -> dict:
    return {
        "study": "s",
        "claim": name,
        "table": "accuracy",
        "column": "accuracy",
        "higher": {"model": higher},
        "lower": lower if isinstance(lower, (int, float)) else {"model": lower},
    }


def test_a_claim_from_too_few_units_or_one_seed_is_a_smoke_check_never_shown(tmp_path):
    # 29 prompts where one model is right on every one and the other on none: an interval far
    # above zero, yet a smoke check below 30 units; at 30 units, one seed is still one.
    _accuracy_table(tmp_path / "few", {"strong": [1.0] * 29, "weak": [0.0] * 29})
    _accuracy_table(tmp_path / "s", {"strong": [1.0] * 30, "weak": [0.0] * 30})
    few = {"directions": [{**_claim("strong above weak", "strong", "weak"), "study": "few"}]}
    spec = {"directions": [_claim("strong above weak", "strong", "weak"), _claim("strong above 50", "strong", 50)]}
    (row,) = direction_table([("h.yaml", few)], tmp_path, ["few"], min_seeds=1).to_dict("records")
    assert (row["units"], row["interval"], row["verdict"], row["shown"]) == (29, "above zero", "smoke check", False)
    assert row["p (Holm)"] is None and not row["shown after Holm"]  # not in Holm's family
    frame = direction_table([("h.yaml", spec)], tmp_path, ["s"])  # the default: 30 units, 2 seeds
    assert frame["units"].tolist() == [30, 30] and frame["seeds"].tolist() == [1, 1]
    assert frame["verdict"].tolist() == ["smoke check", "smoke check"] and not frame["shown"].any()
    assert frame["interval"].tolist() == ["above zero", "above zero"]
    assert direction_table([("h.yaml", spec)], tmp_path, ["s"], min_seeds=1)["verdict"].tolist() == ["shown"] * 2


def test_claims_name_their_models_through_config_lists():
    entry = {
        "study": "expo",
        "claim": "{base}/{recipe}: ExPO above the aligned model",
        "for_each": {"base": "expo.bases", "recipe": "expo.recipes"},
        "table": "alpaca_eval",
        "column": ["LC (+ ExPO)", "LC (Ori)"],
        "higher": {"model": "{base}/{recipe}"},
        "lower": {"model": "{base}/{recipe}"},
    }
    config = {"expo": {"bases": ["zephyr", "tulu"], "recipes": ["pretrained"]}}
    lists = claim_lists(config, [{"directions": [entry, {"for_each": {"b": "ruler.bases"}}]}])
    assert lists == {"expo.bases": ["zephyr", "tulu"], "expo.recipes": ["pretrained"], "ruler.bases": None}
    claims = expand_directions([entry], lists, "h.yaml")
    assert [(c["claim"], c["higher"], c["lower"]) for c in claims] == [
        (
            "zephyr/pretrained: ExPO above the aligned model",
            {"model": "zephyr/pretrained"},
            {"model": "zephyr/pretrained"},
        ),
        ("tulu/pretrained: ExPO above the aligned model", {"model": "tulu/pretrained"}, {"model": "tulu/pretrained"}),
    ]
    assert "for_each" not in claims[0] and claims[0]["column"] == ["LC (+ ExPO)", "LC (Ori)"]
    # A key the config lacks makes no claim; one that is not a list is refused by name.
    assert expand_directions([{**entry, "for_each": {"base": "ruler.bases"}}], lists, "h.yaml") == []
    with pytest.raises(HeadlineError, match=r"h.yaml: directions\[0\].for_each.base: config key 'expo' is not a list"):
        expand_directions([{**entry, "for_each": {"base": "expo"}}], {"expo": {"bases": []}}, "h.yaml")


def test_the_shipped_claims_make_each_papers_claim_per_model_of_the_paper_config():
    from pathlib import Path

    from reprolm.config import overlays

    repo = Path(__file__).resolve().parents[1]
    headlines = repo / "config/paper_headlines.yaml"
    paper = overlays.load(repo / "config/paper.yaml", repo)
    settings = claim_settings(paper, headlines, {})
    assert (settings["min_units"], settings["min_seeds"]) == (30, 2)
    claims = expand_directions(load_headlines(headlines)["directions"], settings["lists"], "h.yaml")
    by_study = {study: [c for c in claims if c["study"] == study] for study in paper["studies"]}
    assert [c["higher"]["model"] for c in by_study["ruler"]] == [f"{b}/ruler" for b in paper["ruler"]["bases"]]
    assert [c["lower"]["model"] for c in by_study["ruler"]] == [f"{b}/vanilla" for b in paper["ruler"]["bases"]]
    pairs = [f"{b}/{r}" for b in paper["expo"]["bases"] for r in paper["expo"]["recipes"]]
    assert len(pairs) == 14 and [c["higher"]["model"] for c in by_study["expo"]] == pairs
    assert [c["higher"]["base"] for c in by_study["gem"]] == paper["gem"]["bases"] * 2
    assert len(by_study["harmony"]) == len(by_study["flr"]) == 1


def _accuracy_table(folder, correct_by_model: dict[str, list[float]]) -> None:
    """A table of accuracies over the same prompts, written as the study writers write it."""
    ids = [f"prompt{i}" for i in range(len(next(iter(correct_by_model.values()))))]
    frame = pd.DataFrame(
        [{"model": model, "accuracy": mean_of(correct, ids, scale=100)} for model, correct in correct_by_model.items()]
    )
    write_table(frame, folder, "accuracy")


def test_effect_claims_carry_a_paired_interval_and_holm_adjusted_p(tmp_path):
    rng = np.random.default_rng(0)
    weak = rng.integers(0, 2, size=80).astype(float)
    strong = np.maximum(weak, rng.integers(0, 2, size=80))  # right wherever weak is, and more
    _accuracy_table(tmp_path / "s", {"weak": weak, "strong": strong, "twin": weak.copy()})
    spec = {
        "directions": [
            {
                "study": "s",
                "claim": "strong above weak",
                "table": "accuracy",
                "column": "accuracy",
                "higher": {"model": "strong"},
                "lower": {"model": "weak"},
            },
            {
                "study": "s",
                "claim": "twin above weak",
                "table": "accuracy",
                "column": "accuracy",
                "higher": {"model": "twin"},
                "lower": {"model": "weak"},
            },
            {
                "study": "s",
                "claim": "weak above chance",
                "table": "accuracy",
                "column": "accuracy",
                "higher": {"model": "weak"},
                "lower": 50,
            },
            {
                "study": "s",
                "claim": "weak above strong",
                "table": "accuracy",
                "column": "accuracy",
                "higher": {"model": "weak"},
                "lower": {"model": "strong"},
            },
        ]
    }
    # One seed is enough here: the test is of the interval and the adjustment.
    frame = direction_table([("h.yaml", spec)], tmp_path, ["s"], min_seeds=1).set_index("claim")
    gain = 100 * (strong.mean() - weak.mean())
    row = frame.loc["strong above weak"]
    assert row["difference"] == pytest.approx(gain)
    assert 0 < row["difference lo"] < gain < row["difference hi"]
    assert row["paired"] and row["verdict"] == "shown" and row["p"] < 0.01
    assert (row["units"], row["seeds"], row["interval"]) == (80, 1, "above zero")
    # Two identical models: a difference of exactly zero in every replicate, never an effect.
    twin = frame.loc["twin above weak"]
    assert (twin["difference"], twin["difference lo"], twin["difference hi"], twin["p"]) == (0, 0, 0, 1.0)
    assert twin["verdict"] == "not significant" and not twin["shown"]
    chance = frame.loc["weak above chance"]
    assert not chance["paired"] and chance["verdict"] == "not significant"
    assert chance["difference lo"] < 0 < chance["difference hi"]
    assert frame.loc["weak above strong", "verdict"] == "reversed"
    # Holm over the four tested claims, by hand.
    p = frame["p"].tolist()
    order = sorted(range(4), key=lambda i: p[i])
    running, expected = 0.0, [0.0] * 4
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (4 - rank) * p[i]))
        expected[i] = running
    assert frame["p (Holm)"].tolist() == pytest.approx(expected)
    assert row["shown after Holm"] == (row["p (Holm)"] < 0.05)


def test_headlines_carry_the_runs_interval(tmp_path):
    _accuracy_table(tmp_path / "s", {"m": [1.0, 0.0] * 20})
    spec = {
        "headlines": [
            {
                "study": "s",
                "figure": "accuracy",
                "model": "m",
                "paper": 55.0,
                "table": "accuracy",
                "where": {"model": "m"},
                "column": "accuracy",
            }
        ]
    }
    row = headline_table([("h.yaml", spec)], tmp_path, ["s"]).iloc[0]
    table = pd.read_csv(tmp_path / "s" / "accuracy.csv").iloc[0]
    assert (row["this run"], row["this run lo"], row["this run hi"]) == (
        50.0,
        table["accuracy lo"],
        table["accuracy hi"],
    )
    assert row["this run lo"] < 50.0 < row["this run hi"]


def test_each_headline_names_the_papers_judge_and_the_judge_that_made_the_runs_figure(tmp_path):
    """A judged table names its judge per row (ExPO's: the successor acting for the retired
    GPT-4 Turbo); the comparison sets it beside the judge the paper's figure came from."""
    (tmp_path / "expo").mkdir()
    pd.DataFrame(
        {
            "model": ["z/pretrained", "u/pretrained"],
            "Win Rate (Ori)": [9.5, 4.0],
            "judge": ["alpaca_eval_gpt4o_mini", None],
        }
    ).to_csv(tmp_path / "expo" / "alpaca_eval.csv", index=False)
    entry = {"study": "expo", "figure": "win rate", "paper": 10.2, "table": "alpaca_eval", "column": "Win Rate (Ori)"}
    spec = {
        "headlines": [
            {**entry, "model": "z", "where": {"model": "z/pretrained"}, "judge": "GPT-4 Turbo (AlpacaEval 2.0)"},
            {**entry, "model": "u", "where": {"model": "u/pretrained"}},
            {**entry, "model": "w", "where": {"model": "w/pretrained"}, "judge": "GPT-4 Turbo (AlpacaEval 2.0)"},
        ]
    }
    check_entries(spec, "h.yaml")
    frame = headline_table([("h.yaml", spec)], tmp_path, ["expo"])
    assert frame[["paper judge", "this run judge"]].fillna("").values.tolist() == [
        ["GPT-4 Turbo (AlpacaEval 2.0)", "alpaca_eval_gpt4o_mini"],
        ["", ""],  # neither names one
        ["GPT-4 Turbo (AlpacaEval 2.0)", ""],  # not made
    ]
    assert list(frame.columns)[3:7] == ["paper", "paper judge", "this run model", "this run judge"]


def _ifeval_headline(where: dict, **extra) -> dict:
    return {
        "study": "gem",
        "figure": "IFEval",
        "model": "Llama CE",
        "paper": 44.7,
        "table": "ifeval",
        "where": where,
        "column": "Avg",
        **extra,
    }


STAND_IN = {"model": "{base} {recipe}", "where": {"base": "{base}", "model": "{recipe}"}}


def test_a_headline_without_the_papers_model_shows_the_figures_of_its_stand_ins(tables):
    pd.DataFrame({"base": ["b", "b", "c"], "model": ["CE", "GEM", "CE"], "Avg": [40.0, 44.0, 30.0]}).to_csv(
        tables / "gem" / "ifeval.csv", index=False
    )
    stand_in = {**STAND_IN, "for_each": {"base": "gem.bases", "recipe": "gem.labels"}}
    spec = {
        "headlines": [
            # The paper's model is not in the run: each stand-in the run made, a row of its own.
            _ifeval_headline({"base": "llama", "model": "CE"}, stand_in=stand_in),
            # The paper's own model is in the run: its figure, and no stand-in.
            _ifeval_headline({"base": "b", "model": "CE"}, stand_in=stand_in),
            # No stand-in made: the run's figure is left empty.
            _ifeval_headline({"base": "llama", "model": "CE"}, stand_in={**stand_in, "for_each": {"base": "gem.none"}}),
        ]
    }
    lists = {"gem.bases": ["b", "c", "d"], "gem.labels": ["CE"], "gem.none": []}
    frame = headline_table([("h.yaml", spec)], tables, ["gem"], lists)
    assert frame[["model", "this run model"]].fillna("").values.tolist() == [
        ["Llama CE", "b CE"],
        ["Llama CE", "c CE"],  # d CE: not made
        ["Llama CE", "Llama CE"],
        ["Llama CE", ""],
    ]
    assert frame["this run"].tolist()[:3] == [40.0, 30.0, 40.0] and pd.isna(frame["this run"].iloc[3])
    # A stand-in is not the paper's model: no difference from the paper's figure.
    assert frame["difference"].isna().tolist() == [True, True, False, True]
    assert frame["difference"].iloc[2] == pytest.approx(40.0 - 44.7)
    # The stand-ins' config lists are the comparison's, as the claims' are.
    assert claim_lists({"gem": {"bases": ["b"], "labels": ["CE"]}}, [spec]) == {
        "gem.bases": ["b"],
        "gem.labels": ["CE"],
        "gem.none": None,
    }


def test_a_stand_in_is_checked_with_its_headline(tmp_path):
    bad = tmp_path / "headlines.yaml"
    entry = "{study: gem, figure: f, model: m, paper: 1, table: t, where: {}, column: Avg, stand_in: %s}"
    for stand_in, message in (
        ("{model: x}", r"headlines\[0\].stand_in: missing keys \['where'\], unknown keys \[\]"),
        ("{model: x, where: {}, for: {b: gem.bases}}", r"stand_in: missing keys \[\], unknown keys \['for'\]"),
        (
            "{model: x, where: {}, for_each: [gem.bases]}",
            r"stand_in.for_each: expected placeholder -> dotted config key",
        ),
        ("[x]", r"headlines\[0\].stand_in: expected a mapping"),
    ):
        bad.write_text("headlines:\n  - " + entry % stand_in + "\n")
        with pytest.raises(HeadlineError, match=message):
            load_headlines(bad)
    bad.write_text("headlines:\n  - " + entry % "{model: x, where: {}, for_each: {b: gem.bases}}" + "\n")
    spec = load_headlines(bad)
    with pytest.raises(
        HeadlineError, match=r"headlines\[0\].stand_in.for_each.b: config key 'gem.bases' is not a list"
    ):
        headline_table([("h.yaml", spec)], tmp_path, ["gem"], {"gem.bases": "b"})


def test_a_misplaced_figure_names_its_entry_and_the_table(tables):
    spec = {
        "headlines": [
            {
                "study": "gem",
                "figure": "f",
                "model": "m",
                "paper": 1,
                "table": "ifeval",
                "where": {"model": "CE"},
                "column": "Average",
            }
        ]
    }
    with pytest.raises(HeadlineError, match=r"^h.yaml: headlines\[0\]: .*ifeval.csv has no column\(s\) \['Average'\]"):
        headline_table([("h.yaml", spec)], tables, ["gem"])
    spec = {
        "headlines": [
            {
                "study": "gem",
                "figure": "f",
                "model": "m",
                "paper": 1,
                "table": "ifeval",
                "where": {"base": "b"},
                "column": "Avg",
            }
        ]
    }
    with pytest.raises(HeadlineError, match="2 rows .* must be unique"):
        headline_table([("h.yaml", spec)], tables, ["gem"])


def test_a_misplaced_figure_stops_the_comparison_naming_the_headline_file_with_no_output(tables, tmp_path):
    headlines = tmp_path / "headlines.yaml"
    headlines.write_text(
        "headlines:\n  - {study: gem, figure: f, model: m, paper: 1, table: ifeval, "
        "where: {model: CE}, column: Average}\n"
    )
    outputs = tmp_path / "headlines.csv", tmp_path / "directions.csv"
    with pytest.raises(HeadlineError, match=r"headlines.yaml: headlines\[0\]: .*ifeval.csv has no column"):
        write_paper_comparison(str(headlines), {}, tables, ["gem"], *map(str, outputs))
    assert not any(path.exists() for path in outputs)


def test_the_headline_file_is_checked_entry_by_entry_before_any_table_is_read(tmp_path):
    from pathlib import Path

    shipped = load_headlines(Path(__file__).resolve().parents[1] / "config/paper_headlines.yaml")
    assert len(shipped["headlines"]) == 37 and len(shipped["directions"]) == 6
    # ExPO's three headline pairs of docs/studies/expo.md, WR and LC, Ori and + ExPO.
    for model in ("zephyr-7b-beta", "Starling-LM-7B-beta", "internlm2-chat-1.8b"):
        assert sum(h["model"] == model for h in shipped["headlines"]) == 4, model
    bad = tmp_path / "headlines.yaml"
    bad.write_text("headlines:\n  - {study: gem, figure: f, model: m, paper: 1, table: t, where: {}, colum: Avg}\n")
    with pytest.raises(
        HeadlineError, match=r"headlines.yaml: headlines\[0\]: missing keys \['column'\], unknown keys \['colum'\]"
    ):
        load_headlines(bad)
    bad.write_text("headlines:\n  - {study: gem, figure: f, model: m, paper: high, table: t, where: {}, column: Avg}\n")
    with pytest.raises(HeadlineError, match=r"headlines\[0\].paper: expected a number, got 'high'"):
        load_headlines(bad)


# A study's own figures, as a study from its own file declares them (no ``study`` key).
HEADLINE = {
    "figure": "IFEval",
    "model": "b GEM",
    "paper": 45.0,
    "table": "ifeval",
    "where": {"model": "GEM"},
    "column": "Avg",
}
DIRECTION = {"claim": "GEM above 42", "table": "ifeval", "column": "Avg", "higher": {"model": "GEM"}, "lower": 42}


def _study(**declared) -> Study:
    """An unregistered study 'mine' with the class attributes ``declared``."""
    return type("Mine", (Study,), {"name": "mine", **declared})()


def _declaring() -> Study:
    return _study(headlines=[HEADLINE], directions=[DIRECTION])


def test_a_studys_own_figures_are_checked_and_given_its_name():
    silent = type("Silent", (Study,), {"name": "silent"})()  # declares none: left out
    assert study_headlines([silent, _declaring()]) == {
        "mine": {
            "headlines": [{"study": "mine", **HEADLINE}],
            "directions": [{"study": "mine", **DIRECTION}],
        }
    }
    entry = dict(HEADLINE)
    # The study is implied: an entry may not name one.
    with pytest.raises(
        HeadlineError, match=r"^study 'mine': headlines\[0\]: missing keys \[\], unknown keys \['study'\]$"
    ):
        study_headlines([_study(headlines=[{**entry, "study": "gem"}])])
    del entry["column"]
    with pytest.raises(
        HeadlineError, match=r"^study 'mine': headlines\[0\]: missing keys \['column'\], unknown keys \[\]$"
    ):
        study_headlines([_study(headlines=[entry])])
    with pytest.raises(HeadlineError, match=r"^study 'mine': headlines\[0\].paper: expected a number, got '45'$"):
        study_headlines([_study(headlines=[{**HEADLINE, "paper": "45"}])])
    with pytest.raises(HeadlineError, match=r"^study 'mine': directions\[1\] is not a mapping$"):
        study_headlines([_study(directions=[DIRECTION, "GEM above CE"])])


def test_the_comparison_merges_the_files_entries_with_each_studys_own(tables, tmp_path):
    (tables / "mine").mkdir()
    pd.DataFrame({"model": ["CE", "GEM"], "Avg": [41.0, 43.5]}).to_csv(tables / "mine" / "ifeval.csv", index=False)
    headlines = tmp_path / "headlines.yaml"
    headlines.write_text(
        "headlines:\n  - {study: gem, figure: IFEval, model: b CE, paper: 44.7, table: ifeval, "
        "where: {base: b, model: CE}, column: Avg}\n"
        "directions:\n  - {study: gem, claim: GEM above CE, table: ifeval, column: Avg, "
        "higher: {model: GEM}, lower: {model: CE}}\n"
    )
    outputs = tmp_path / "report" / "headlines.csv", tmp_path / "report" / "directions.csv"
    write_paper_comparison(str(headlines), study_headlines([_declaring()]), tables, ["gem", "mine"], *map(str, outputs))
    headline = pd.read_csv(outputs[0])
    assert headline[["study", "figure", "model", "paper", "this run"]].values.tolist() == [
        ["gem", "IFEval", "b CE", 44.7, 40.0],
        ["mine", "IFEval", "b GEM", 45.0, 43.5],
    ]
    assert headline["difference"].tolist() == pytest.approx([40.0 - 44.7, 43.5 - 45.0])
    direction = pd.read_csv(outputs[1])
    assert direction[
        ["study", "claim", "expected higher", "expected lower", "difference", "verdict"]
    ].values.tolist() == [
        ["gem", "GEM above CE", 44.0, 40.0, 4.0, "no interval"],
        ["mine", "GEM above 42", 43.5, 42.0, 1.5, "no interval"],
    ]
    # Only enabled studies' entries are compared, the file's and the studies' own alike.
    write_paper_comparison(str(headlines), study_headlines([_declaring()]), tables, ["mine"], *map(str, outputs))
    assert pd.read_csv(outputs[0])["study"].tolist() == ["mine"]


def test_a_misplaced_figure_of_a_study_names_the_study(tables, tmp_path):
    headlines = tmp_path / "headlines.yaml"
    headlines.write_text("headlines: []\n")
    misplaced = _study(headlines=[{**HEADLINE, "column": "Average"}])
    (tables / "mine").mkdir()
    pd.DataFrame({"model": ["GEM"], "Avg": [43.5]}).to_csv(tables / "mine" / "ifeval.csv", index=False)
    outputs = tmp_path / "headlines.csv", tmp_path / "directions.csv"
    with pytest.raises(
        HeadlineError,
        match=r"^study 'mine': headlines\[0\]: .*mine/ifeval.csv has no column\(s\) "
        r"\['Average'\]",
    ):
        write_paper_comparison(str(headlines), study_headlines([misplaced]), tables, ["mine"], *map(str, outputs))
    assert not any(path.exists() for path in outputs)


def test_a_claim_the_config_does_not_expect_carries_its_reason_and_a_misnamed_one_is_refused(tmp_path):
    from reprolm.aggregate.report_pages import headline_summary

    rng = np.random.default_rng(1)
    coin = rng.integers(0, 2, size=60).astype(float)
    _accuracy_table(tmp_path / "tables/s", {"coin": coin})
    claim = {"claim": "coin above chance", "table": "accuracy", "column": "accuracy", "higher": {"model": "coin"}}
    headlines = tmp_path / "h.yaml"
    headlines.write_text(yaml.safe_dump({"directions": [{"study": "s", **claim, "lower": 50}]}))
    reason = "a fair coin is not expected to beat chance"
    config = {"studies": ["s"], "claims": {"not_expected": {"coin above chance": reason}}}
    settings = claim_settings(config, headlines, {})
    assert settings["not_expected"] == {"coin above chance": reason}
    direction_csv = tmp_path / "directions.csv"
    write_paper_comparison(
        headlines, {}, tmp_path / "tables", ["s"], tmp_path / "headlines.csv", direction_csv, settings
    )
    (row,) = pd.read_csv(direction_csv).to_dict("records")
    assert row["not expected here"] == reason
    page = headline_summary(tmp_path / "headlines.csv", direction_csv)
    assert f"Not expected in this run: <em>coin above chance</em>: {reason}" in page
    misnamed = {"studies": ["s"], "claims": {"not_expected": {"coin above chanse": reason}}}
    with pytest.raises(
        HeadlineError, match=r"'coin above chanse' is not worded as any claim; did you mean 'coin above chance'"
    ):
        claim_settings(misnamed, headlines, {})
