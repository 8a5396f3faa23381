"""Judge succession: a retired judge's successor replaces it in the judged rules, and the
judge agreement table measures the successor against the retired judge's released verdicts
(raw agreement, Cohen's kappa, win rates under both judges with paired intervals)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from chat_endpoint_standin import ChatEndpointStandIn
from reprolm.aggregate.judge_agreement import agreement, agreement_rows, released_items, succession_table
from reprolm.aggregate.judge_notes import judge_caption, table_judge_notes
from reprolm.aggregate.uncertainty import percentile_interval, unit_draws
from reprolm.config import overlays
from reprolm.errors import ConfigError
from reprolm.score.judges import make_judge, succeeded_judges, successors, with_successors
from reprolm.score.judging import judge_released_items
from reprolm.studies.expo import Expo, evaluation_scores
from workflow_helpers import REPO, dry_run_details, scratch_copy, snakemake

RELEASED = [
    REPO / "config/reference/alpaca_eval/OpenHermes-2.5-Mistral-7B.json",
    REPO / "config/reference/alpaca_eval/FuseChat-Llama-3.2-3B-Instruct.json",
]
KEY_ENV = "REPROLM_SUCCESSION_TEST_KEY"


def test_raw_agreement_and_cohens_kappa_on_a_hand_computed_example():
    # Verdicts: original A A R R A R, successor A R R R A A (A: the answer, R: the reference).
    # Agreement 4/6; both judges prefer the answer half the time, so chance agreement is
    # 0.5 and kappa = (4/6 - 0.5) / (1 - 0.5) = 1/3. The unjudged last item is left out.
    original = [0.9, 0.8, 0.1, 0.2, 0.7, 0.3, float("nan")]
    successor = [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    result = agreement(original, successor)
    assert result["items"] == 6
    assert result["raw_agreement"] == pytest.approx(4 / 6)
    assert result["kappa"] == pytest.approx(1 / 3)
    # A tie is a verdict of its own: it agrees only with a tie.
    assert agreement([0.5, 0.5, 1.0], [0.5, 1.0, 1.0])["raw_agreement"] == pytest.approx(2 / 3)


def test_win_rates_under_both_judges_with_a_paired_interval_over_the_instructions():
    instructions = [f"q{i}" for i in range(8)]
    original = [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    succeeding = [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    items = [
        {"model": "m", "instruction": q, "reference": "r", "answer": "a", "original": o}
        for q, o in zip(instructions, original)
    ]
    identity = {"original judge": "old", "successor judge": "new"}
    (row,) = agreement_rows(items, succeeding, identity)
    assert row["original judge"] == "old" and row["successor judge"] == "new"
    assert row["original win rate"].value == pytest.approx(50.0)
    assert row["successor win rate"].value == pytest.approx(75.0)
    assert row["difference"] == pytest.approx(25.0)
    # The same draws of the instructions for both judges: the interval of the differences.
    draws = unit_draws(instructions)
    by_hand = 100 * (np.array(succeeding)[draws].mean(axis=1) - np.array(original)[draws].mean(axis=1))
    assert (row["difference lo"], row["difference hi"]) == pytest.approx(percentile_interval(by_hand))
    assert row["difference lo"] >= 0  # the successor never prefers the answer less on any item
    # A successor that agrees everywhere differs by exactly nothing in every draw.
    (same,) = agreement_rows(items, original, identity)
    assert (same["difference"], same["difference lo"], same["difference hi"]) == (0.0, 0.0, 0.0)
    assert same["raw_agreement"] == 1.0 and same["kappa"] == pytest.approx(1.0)


def test_a_retired_judge_is_replaced_by_its_successor_wherever_the_config_names_it():
    config = {
        "judges": {
            "gpt4": {"kind": "chat_endpoint", "successor": "gpt4o"},
            "gpt4o": {"kind": "chat_endpoint", "successor": "gpt41"},
            "gpt41": {"kind": "chat_endpoint"},
            "rm": {"kind": "reward_model"},
        },
        "expo": {"judge": "rm", "benchmark_judge": "gpt4", "judge_validation": "gpt4"},
        "flr": {"judges": ["rm", "gpt4o"], "alignment": {"judge": "gpt4", "graders": ["gpt4"]}},
    }
    assert successors(config["judges"]) == {"gpt4": "gpt41", "gpt4o": "gpt41"}
    succeeded = with_successors(config)
    assert succeeded["expo"] == {"judge": "rm", "benchmark_judge": "gpt41", "judge_validation": "gpt4"}
    assert succeeded["flr"] == {"judges": ["rm", "gpt41"], "alignment": {"judge": "gpt41", "graders": ["gpt41"]}}
    assert succeeded["judges"] == config["judges"]
    assert succeeded_judges(config, "expo") == {"gpt4": "gpt41"}
    assert succeeded_judges(config, "flr") == {"gpt4o": "gpt41", "gpt4": "gpt41"}
    with pytest.raises(ConfigError, match=r"judges.gpt41.successor: 'gpt5' is not a judges entry"):
        successors({**config["judges"], "gpt41": {"kind": "chat_endpoint", "successor": "gpt5"}})
    with pytest.raises(ConfigError, match=r"gpt4 -> gpt4o -> gpt41 -> gpt4\) is a cycle|is a cycle"):
        successors({**config["judges"], "gpt41": {"kind": "chat_endpoint", "successor": "gpt4"}})


def test_released_alpaca_eval_verdicts_against_a_stand_in_successor(chat_endpoint, monkeypatch, tmp_path):
    """The committed released verdicts of GPT-4 Turbo, read by our reader, judged again by
    a chat endpoint (the recording stand-in, which prefers the longer answer)."""
    monkeypatch.setenv(KEY_ENV, "sk-test")
    items = released_items(RELEASED)
    assert len(items) == 120
    by_model = pd.DataFrame(items).groupby("model")["original"].mean() * 100
    # The released verdicts' own win rates on these 60 instructions (README's figures).
    assert by_model.round(2).to_dict() == {"FuseChat-Llama-3.2-3B-Instruct": 45.96, "OpenHermes-2.5-Mistral-7B": 3.06}
    spec = {"kind": "chat_endpoint", "base_url": chat_endpoint, "model": "stand-in", "api_key_env": KEY_ENV}
    successor = judge_released_items(make_judge(spec, name="standin"), items)
    assert len(ChatEndpointStandIn.seen) == 120
    assert successor == [float(len(i["answer"]) > len(i["reference"])) for i in items]
    retired = {"kind": "chat_endpoint", "model": "gpt-4-1106-preview", "as_of": "2023-11-06", "released_verdicts": []}
    succession = {
        "gpt4_turbo": {"spec": retired, "successor": "standin", "successor_spec": {**spec, "as_of": "2026-01-01"}}
    }
    verdicts = tmp_path / "verdicts.json"
    verdicts.write_text(json.dumps({"items": items, "successor": successor}))
    table = succession_table(succession, {"gpt4_turbo": str(verdicts)})
    assert list(table["model"]) == ["FuseChat-Llama-3.2-3B-Instruct", "OpenHermes-2.5-Mistral-7B", "all"]
    assert set(table["original model"]) == {"gpt-4-1106-preview"} and set(table["successor as of"]) == {"2026-01-01"}
    overall = table.set_index("model").loc["all"]
    assert overall["items"] == 120
    same = sum((i["original"] > 0.5) == (s > 0.5) for i, s in zip(items, successor))
    assert overall["raw_agreement"] == pytest.approx(same / 120)
    assert overall["original win rate"].value == pytest.approx(np.mean([i["original"] for i in items]) * 100)


def _expo_evaluation_paths(configfile: str) -> list[str]:
    """The ExPO study's win-rate and grade paths of its first pair, as the workflow sees the
    config (after succession)."""
    config = with_successors(overlays.load(REPO / configfile, REPO))
    base, recipe = Expo().models(config)[0]
    return evaluation_scores(config, base, recipe, 0.3)


@pytest.mark.slow
def test_the_default_config_runs_the_successor_and_makes_the_agreement_table(tmp_path, chat_endpoint):
    """The default config's retired gpt4_turbo acts through tiny_rm; an overlay giving it the
    stand-in endpoint as successor makes the agreement table for real."""
    assert all("gpt4_turbo" not in path for path in _expo_evaluation_paths("config/config.yaml"))
    assert any(
        path.startswith("results/scores/win_rate_tiny_rm/") for path in _expo_evaluation_paths("config/config.yaml")
    )
    work = scratch_copy(tmp_path)
    jobs = dry_run_details(work, "results/tables/judge_agreement/expo.csv")
    assert [(job.rule, job.outputs) for job in jobs if job.rule != "all"][-2:] == [
        ("judge_released", ["results/scores/judge_released/tiny_rm/gpt4_turbo.json"]),
        ("judge_agreement", ["results/tables/judge_agreement/expo.csv"]),
    ]
    overlay = {
        "extends": "config/config.yaml",
        "judges": {
            "standin": {
                "kind": "chat_endpoint",
                "base_url": chat_endpoint,
                "model": "stand-in",
                "api_key_env": KEY_ENV,
                "as_of": "2026-01-01",
            },
            "gpt4_turbo": {"successor": "standin"},
        },
    }
    (work / "config" / "succession.yaml").write_text(yaml.safe_dump(overlay))
    snakemake(
        work,
        "results/tables/judge_agreement/expo.csv",
        "--configfile",
        "config/succession.yaml",
        env={KEY_ENV: "sk-test"},
    )
    table = pd.read_csv(work / "results/tables/judge_agreement/expo.csv")
    assert set(table["original judge"]) == {"gpt4_turbo"} and set(table["successor judge"]) == {"standin"}
    assert set(table["original model"]) == {"gpt-4-1106-preview"} and set(table["successor model"]) == {"stand-in"}
    assert list(table["items"]) == [60, 60, 120]
    assert {"kappa", "original win rate lo", "successor win rate hi", "difference lo"} <= set(table.columns)
    assert "sk-test" not in (work / "logs/judge_released/standin/gpt4_turbo.log").read_text()


def test_paper_config_replaces_the_retired_gpt4_judges():
    """Its judge agreement job, measuring the successor, is in the paper DAG's dry run of
    tests/test_api_judges.py (one dry run of paper.yaml for both)."""
    paths = _expo_evaluation_paths("config/paper.yaml")
    assert not any("alpaca_eval_gpt4_turbo/" in path or "grade_gpt4_mt_bench/" in path for path in paths)
    assert any("win_rate_alpaca_eval_gpt4o_mini/" in path for path in paths)
    assert any("grade_gpt41_mt_bench/" in path for path in paths)


def test_judged_table_captions_name_the_judge_its_date_and_the_measured_agreement():
    """paper.yaml's ExPO tables: AlpacaEval by the gpt-4o-mini annotator acting for GPT-4
    Turbo (released verdicts: its agreement measured), MT-Bench by GPT-4.1 acting for GPT-4
    (released grades: correlation, difference, within one point), the alpha search by a
    reward model that replaces nobody."""
    written = overlays.load(REPO / "config/paper.yaml", REPO)
    notes = table_judge_notes(Expo().table_judges(written), written["judges"], written["base_models"])
    assert [note["judge"] for note in notes["alpaca_eval"]] == ["alpaca_eval_gpt4o_mini"]
    assert [note["judge"] for note in notes["mt_bench"]] == ["gpt41_mt_bench"]
    agreement = pd.DataFrame(
        [
            {
                "original judge": "alpaca_eval_gpt4_turbo",
                "successor judge": "alpaca_eval_gpt4o_mini",
                "model": m,
                "items": n,
                "raw_agreement": a,
                "kappa": k,
                "measured": "released verdicts",
            }
            for m, n, a, k in (("OpenHermes", 60, 0.9, 0.5), ("all", 120, 0.8125, 0.61234))
        ]
    )
    caption = judge_caption(notes["alpaca_eval"], "expo", agreement)
    assert caption == (
        "Judge: alpaca_eval_gpt4o_mini (AlpacaEval annotator weighted_alpaca_eval_gpt-4o-mini-2024-07-18, "
        "as of 2024-07-18), acting for the retired alpaca_eval_gpt4_turbo (AlpacaEval annotator "
        "weighted_alpaca_eval_gpt4_turbo, as of 2023-11-06); agreement with it on 120 released verdicts: "
        "raw agreement 0.812, Cohen's kappa 0.612 (results/tables/judge_agreement/expo.csv)."
    )
    # Before the agreement is measured (the report's caption), it says where it will be.
    assert "(raw agreement, Cohen's kappa) is in results/tables/judge_agreement/expo.csv" in judge_caption(
        notes["alpaca_eval"], "expo"
    )
    mt_bench = judge_caption(notes["mt_bench"], "expo", agreement)
    assert mt_bench.startswith("Judge: gpt41_mt_bench (chat endpoint gpt-4.1-2025-04-14, as of 2025-04-14), ")
    assert "acting for the retired gpt4_mt_bench (chat endpoint gpt-4, as of 2023-06-13)" in mt_bench
    assert "agreement with it: none measured (results/tables/judge_agreement/expo.csv has no row" in mt_bench
    grades = agreement.assign(
        **{
            "original judge": "gpt4_mt_bench",
            "successor judge": "gpt41_mt_bench",
            "measured": "released grades",
            "pearson": 0.71,
            "mean_difference": -0.25,
            "within_1": 62.5,
        }
    )
    assert judge_caption(notes["mt_bench"], "expo", grades).endswith(
        "agreement with it on 120 released grades: Pearson 0.710, mean difference -0.25, within one point 62.5% "
        "(results/tables/judge_agreement/expo.csv)."
    )
    assert "on the released grades (Pearson, mean difference, within one point) is in" in judge_caption(
        notes["mt_bench"], "expo"
    )
    search = judge_caption(notes["alpha_search"], "expo")
    assert search.startswith("Judge: expo_rm (reward model rm_mistral_7b/pretrained, hub weqweasdas/RM-Mistral-7B")
    assert "acts for no retired judge" in search
    # The default's reward model is a stand-in; a kappa both judges leave undefined says so.
    default = overlays.load(REPO / "config/config.yaml", REPO)
    stand_in = table_judge_notes(Expo().table_judges(default), default["judges"], default["base_models"])
    undefined = agreement.assign(**{"original judge": "gpt4_turbo", "successor judge": "tiny_rm", "kappa": np.nan})
    caption = judge_caption(stand_in["alpaca_eval"], "expo", undefined)
    assert "tiny_rm (reward model tiny_llama/reward, a stand-in: a tiny model this project builds" in caption
    assert "Cohen's kappa undefined (one verdict throughout)" in caption


def test_a_judged_tables_page_carries_its_judges_caption_and_an_unjudged_one_none(tmp_path):
    from reprolm.aggregate.report_pages import write_table_pages

    tables = tmp_path / "tables"
    tables.mkdir()
    pd.DataFrame({"model": ["m"], "Win Rate": [10.0]}).to_csv(tables / "alpaca_eval.csv", index=False)
    pd.DataFrame({"model": ["m"], "Avg": [1.0]}).to_csv(tables / "lm_eval.csv", index=False)
    agreement = tmp_path / "agreement.csv"
    pd.DataFrame(
        [
            {
                "original judge": "old",
                "successor judge": "new",
                "model": "m",
                "items": 7,
                "raw_agreement": 5 / 7,
                "kappa": 0.4,
            }
        ]
    ).to_csv(agreement, index=False)
    judges = {
        "old": {
            "kind": "chat_endpoint",
            "model": "gpt-4",
            "as_of": "2023-06-13",
            "successor": "new",
            "released_verdicts": ["x"],
        },
        "new": {"kind": "chat_endpoint", "model": "gpt-4.1", "as_of": "2025-04-14"},
    }
    notes = table_judge_notes({"alpaca_*": ["old"]}, judges, {})
    write_table_pages(tables, tmp_path / "pages", "expo", notes, agreement)
    page = (tmp_path / "pages" / "alpaca_eval.html").read_text()
    assert (
        "<p class='caption'>Judge: new (chat endpoint gpt-4.1, as of 2025-04-14), acting for the retired old "
        "(chat endpoint gpt-4, as of 2023-06-13); agreement with it on 7 released verdicts: raw agreement 0.714, "
        "Cohen&#x27;s kappa 0.400 (results/tables/judge_agreement/expo.csv).</p>"
    ) in page
    assert "class='caption'" not in (tmp_path / "pages" / "lm_eval.html").read_text()


def test_agreement_intervals_on_the_released_verdicts_with_a_stand_in_successor():
    """GPT-4 Turbo's released verdicts, judged again by a stand-in successor that prefers the
    longer answer: raw agreement and kappa as sklearn computes them, each with an interval
    over the instructions whose draws are the instruction bootstrap's."""
    from sklearn.metrics import cohen_kappa_score

    from reprolm.aggregate.judge_agreement import verdict, verdict_agreement

    items = released_items(RELEASED)
    successor = [float(len(i["answer"]) > len(i["reference"])) for i in items]
    intervals = verdict_agreement(items, successor)
    first, second = [verdict(i["original"]) for i in items], [verdict(s) for s in successor]
    assert intervals["raw_agreement"].value == pytest.approx(100 * np.mean(np.array(first) == np.array(second)))
    assert intervals["kappa"].value == pytest.approx(cohen_kappa_score(first, second))
    # An instruction's two items (one per generator) are drawn together: draw 0 by hand.
    instructions = list(dict.fromkeys(i["instruction"] for i in items))
    drawn = [instructions[unit] for unit in unit_draws(instructions)[0]]
    rows = [index for instruction in drawn for index, i in enumerate(items) if i["instruction"] == instruction]
    assert intervals["kappa"].replicates[0] == pytest.approx(
        cohen_kappa_score([first[r] for r in rows], [second[r] for r in rows])
    )
    for estimate in intervals.values():
        assert estimate.low <= estimate.value <= estimate.high and estimate.high > estimate.low
    # The table's row carries them (agreement as a share).
    identity = {"original judge": "gpt4_turbo", "successor judge": "standin"}
    overall = {row["model"]: row for row in agreement_rows(items, successor, identity)}["all"]
    assert overall["kappa lo"] == pytest.approx(intervals["kappa"].low)
    assert overall["raw_agreement hi"] == pytest.approx(intervals["raw_agreement"].high / 100)


def test_a_balanced_sample_takes_each_generators_verdicts_in_equal_numbers():
    from reprolm.aggregate.judge_agreement import balanced_sample, verdict

    items = released_items(RELEASED)
    sample = balanced_sample(items, per_outcome=20, seed=0)
    counts = pd.DataFrame(
        [(i["model"], verdict(i["original"])) for i in sample], columns=["model", "verdict"]
    ).value_counts()
    # OpenHermes: 2 of its 60 verdicts prefer the answer; FuseChat's are split 20 / 20 here.
    released = pd.DataFrame([(i["model"], verdict(i["original"])) for i in items], columns=["model", "verdict"])
    rarer = released[released["model"] == "OpenHermes-2.5-Mistral-7B"]["verdict"].value_counts().min()
    assert counts.to_dict() == {
        ("FuseChat-Llama-3.2-3B-Instruct", "answer"): 20,
        ("FuseChat-Llama-3.2-3B-Instruct", "reference"): 20,
        ("OpenHermes-2.5-Mistral-7B", "answer"): rarer,
        ("OpenHermes-2.5-Mistral-7B", "reference"): rarer,
    }
    assert all(item in items for item in sample)
    assert balanced_sample(items, 20, seed=0) == sample and balanced_sample(items, 20, seed=1) != sample


def test_mt_bench_grade_agreement_from_fastchats_released_grades_with_a_stand_in_successor(tmp_path):
    """GPT-4's single-answer grades in FastChat's released layout (read as the
    mt_bench_single source reads them) against a stand-in successor's: correlation, mean
    difference and agreement within one point, with intervals over questions."""
    from reprolm.aggregate.judge_agreement import grade_agreement, grade_agreement_rows
    from reprolm.data.released_ratings import mt_bench_single_ratings
    from test_flr_released import write_mt_bench

    grades = [
        (question, model, turn, score)
        for question, scores in ((81, (9, 8, 3, 2)), (82, (7, 6, 4, 1)))
        for (model, turn), score in zip([("gpt-4", 1), ("gpt-4", 2), ("llama-13b", 1), ("llama-13b", 2)], scores)
    ]
    files = write_mt_bench(tmp_path, grades=grades)
    records = mt_bench_single_ratings({**files, "questions": [files["questions"]], "judgments": [files["judgments"]]})
    assert len(records) == 8
    # The stand-in grades one point lower than GPT-4 but three lower on llama-13b's turn 2.
    successor = [r["score"] - (3 if (r["model"], r["turn"]) == ("llama-13b", 2) else 1) for r in records]
    original = [r["score"] for r in records]
    figures = grade_agreement(original, successor, [r["question_id"] for r in records])
    assert figures["mean_difference"].value == pytest.approx(np.mean(np.array(successor) - np.array(original)))
    assert figures["mean_difference"].value == pytest.approx(-1.5)
    assert figures["within_1"].value == pytest.approx(75.0)
    assert figures["pearson"].value == pytest.approx(np.corrcoef(original, successor)[0, 1])
    # Two questions: every draw holds one or both, each with its four grades.
    assert set(np.round(figures["within_1"].replicates, 6)) <= {75.0}
    identity = {"original judge": "gpt4_mt_bench", "successor judge": "standin"}
    rows = {row["model"]: row for row in grade_agreement_rows(records, successor, identity)}
    assert set(rows) == {"gpt-4", "llama-13b", "all"} and rows["all"]["items"] == 8
    assert rows["gpt-4"]["within_1"] == 100.0 and rows["llama-13b"]["within_1"] == 50.0
    assert rows["all"]["mean_difference lo"] <= -1.5 <= rows["all"]["mean_difference hi"]


def test_the_successor_grades_the_released_answers_by_fastchats_protocol_for_the_agreement_table(
    chat_endpoint, monkeypatch, tmp_path
):
    """GPT-4's released grades (FastChat's layout) and the stand-in successor grading the
    same answers through FastChat's prompts (its grade: the graded answer's words): the
    ``judge_released_grades`` job's computation, then the judge agreement table's rows."""
    from reprolm.aggregate.judge_agreement import succession_table
    from reprolm.data.released_ratings import mt_bench_single_ratings
    from reprolm.data.sources import write_source
    from reprolm.score.judging import grade_released_answers
    from test_flr_released import write_mt_bench

    monkeypatch.setenv(KEY_ENV, "sk-test")
    grades = [(81, "gpt-4", 1, 9), (81, "gpt-4", 2, 8), (82, "llama-13b", 1, 3), (82, "llama-13b", 2, 2)]
    files = write_mt_bench(tmp_path, grades=grades)
    records = mt_bench_single_ratings({**files, "questions": [files["questions"]], "judgments": [files["judgments"]]})
    # Question 82 is a math question: FastChat grades it against its reference answers.
    questions = [
        {"id": 81, "category": "writing", "reference_answers": []},
        {"id": 82, "category": "math", "reference_answers": ["Four.", "Eight."]},
    ]
    write_source(
        {"name": "judge_prompts", "schema": "fastchat_judge_prompts", "fixture": {"n": 4, "seed": 0}},
        tmp_path / "judge_prompts",
    )
    spec = {
        "kind": "chat_endpoint",
        "base_url": chat_endpoint,
        "model": "stand-in",
        "api_key_env": KEY_ENV,
        "judge_prompts": "judge_prompts",
    }
    judge = make_judge(spec, {"judge_prompts": str(tmp_path / "judge_prompts")}, name="standin")
    ChatEndpointStandIn.seen = []
    successor = grade_released_answers(judge, records, questions)
    # "{model} answers {id}." has 3 words, "{model} follows up {id}." 4.
    assert successor == [3.0, 4.0, 3.0, 4.0]
    prompts = [request["body"]["messages"][-1]["content"] for request in ChatEndpointStandIn.seen]
    assert any("Four." in prompt for prompt in prompts) and not any("Four." in p for p in prompts[:2])
    graded = tmp_path / "graded.json"
    graded.write_text(
        json.dumps(
            {
                "records": [{key: r[key] for key in ("model", "question_id", "turn", "score")} for r in records],
                "successor": successor,
            }
        )
    )
    retired = {"kind": "chat_endpoint", "model": "gpt-4", "as_of": "2023-06-13"}
    succession = {"gpt4_mt_bench": {"spec": retired, "successor": "standin", "successor_spec": spec}}
    table = succession_table(succession, {}, {"gpt4_mt_bench": str(graded)}).set_index("model")
    assert set(table["measured"]) == {"released grades"} and list(table.index) == ["gpt-4", "llama-13b", "all"]
    assert table.loc["all", "mean_difference"] == pytest.approx(np.mean(np.subtract(successor, [9, 8, 3, 2])))
    assert table.loc["gpt-4", "within_1"] == 0.0 and table.loc["llama-13b", "within_1"] == 50.0
