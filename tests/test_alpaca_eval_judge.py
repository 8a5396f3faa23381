"""AlpacaEval 2.0 through the ``alpaca_eval`` package: what its annotator sends to GPT-4
Turbo (a local stand-in server answers, since no endpoint is reachable here), how its
verdicts come back, and its metrics, length control included, on our records and on the
ExPO authors' released verdicts."""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

import pytest

from chat_endpoint_standin import ChatEndpointStandIn
from reprolm.aggregate.judged import win_rate_estimates
from reprolm.aggregate.uncertainty import unit_draws
from reprolm.config import overlays
from reprolm.data.sources import write_source
from reprolm.score.judges import make_judge
from reprolm.score.judging import win_rates

RELEASED = Path(__file__).parent / "data" / "expo"
KEY_ENV = "REPROLM_ALPACA_EVAL_KEY"


def _gamed_source(folder: Path, n: int) -> str:
    write_source({"name": "gamed", "schema": "alpaca_eval_gamed", "fixture": {"n": n, "seed": 0}}, folder)
    return str(folder)


def _judge(base_url: str, gamed: str, **settings):
    return make_judge(
        {"kind": "alpaca_eval", "base_url": base_url, "api_key_env": KEY_ENV, "length_control": "gamed", **settings},
        {"length_control": gamed},
    )


@pytest.fixture()
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-alpaca")
    return "sk-test-alpaca"


def test_the_annotator_asks_for_one_token_and_weighs_the_two_identifiers(chat_endpoint, key, tmp_path):
    """The package's ``weighted_alpaca_eval_gpt4_turbo``: GPT-4 Turbo (gpt-4-1106-preview)
    asked for one token with its top-5 log-probabilities, the pair shown in an order shuffled
    per instruction; the preference is P(identifier of the answer). The stand-in gives the
    longer output's identifier 0.8, so the longer answer gets 0.8 whichever side it was shown."""
    judge = _judge(chat_endpoint, _gamed_source(tmp_path / "gamed", 8))
    instructions = [f"Describe item {i}." for i in range(8)]
    answers = ["a fairly long answer " * 3 if i % 2 == 0 else "short" for i in range(8)]
    references = ["a medium reference" for _ in range(8)]
    answers[7] = references[7].upper()  # same length: no preference either way
    preferences = judge.prefer(instructions, answers, references)
    assert preferences == pytest.approx([0.8, 0.2, 0.8, 0.2, 0.8, 0.2, 0.8, 0.5])

    seen = ChatEndpointStandIn.seen
    assert len(seen) == 8
    for request in seen:
        body = request["body"]
        assert request["path"] == "/v1/chat/completions"
        assert request["authorization"] == f"Bearer {key}"
        assert body["model"] == "gpt-4-1106-preview"
        assert (body["max_tokens"], body["temperature"], body["logprobs"], body["top_logprobs"]) == (1, 1, True, 5)
        assert body["messages"][0]["role"] == "system"
        assert "selects the best large language model" in body["messages"][0]["content"]
    # Position bias is averaged out: the answer is shown first (as "m") for some pairs only.
    shown_first = [
        request["body"]["messages"][-1]["content"].split('"output": """', 1)[1].startswith(answer)
        for request, answer in zip(sorted(seen, key=lambda r: _instruction(r)), answers)
    ]
    assert 0 < sum(shown_first) < len(shown_first)


def _instruction(request) -> str:
    return request["body"]["messages"][-1]["content"].split('"instruction": """', 1)[1].split('"""', 1)[0]


def test_win_rates_are_the_package_metrics_with_its_length_control(chat_endpoint, key, tmp_path):
    # A few bootstrap draws (each refits the package's GLM): the next test checks them.
    judge = _judge(chat_endpoint, _gamed_source(tmp_path / "gamed", 40), lc_resamples=20)
    ids = list(range(40))
    instructions = [f"Explain topic {i}." for i in ids]
    answers = [("word " * (5 + 7 * (i % 5))).strip() for i in ids]
    references = ["word " * 18 for _ in ids]
    result = judge.win_rates(ids, instructions, answers, references)
    preferences = result["preferences"]
    assert preferences == pytest.approx([0.8 if len(a) > len(r) else 0.2 for a, r in zip(answers, references)])
    # Win rate, its standard error, wins and draws as AlpacaEval defines them: the same as ours.
    ours = win_rates(preferences, [len(a) for a in answers], [len(r) for r in references])
    for column in ("win_rate", "standard_error", "discrete_win_rate", "n_wins", "n_draws", "mean_length"):
        assert result[column] == pytest.approx(ours[column])
    assert result["win_rate"] == pytest.approx(100 * (24 * 0.8 + 16 * 0.2) / 40)  # 24 answers are longer
    # The length-controlled win rate is the package's GLM with instruction difficulty, not
    # our two-term regression: every preference here is explained by length.
    assert "instruction difficulty" in result["lc_method"]
    assert result["lc_win_rate"] != pytest.approx(ours["lc_win_rate"], abs=0.5)
    assert judge.protocol.startswith("AlpacaEval 2.0 (alpaca_eval 0.6.6, annotator weighted_alpaca_eval_gpt4_turbo)")
    # Per pair, what the tables' intervals resample, and the GLM's figure on each draw.
    assert (result["answer_lengths"], result["reference_lengths"]) == ([len(a) for a in answers], [90] * 40)
    assert len(result["lc_win_rate_replicates"]) == 20
    estimates = win_rate_estimates({"ids": ids, **result}, "ae2.json")
    assert estimates["win_rate"].value == result["win_rate"] and estimates["lc_win_rate"].value == result["lc_win_rate"]
    assert estimates["lc_win_rate"].replicates.tolist() == result["lc_win_rate_replicates"]


@pytest.mark.slow
def test_the_packages_length_control_is_refitted_on_each_draw_of_the_prompts(key, tmp_path):
    judge = _judge("http://127.0.0.1:9", _gamed_source(tmp_path / "gamed", 30), lc_resamples=40)  # 0.1 s a draw
    ids = list(range(30))
    answers = ["x" * (40 + 13 * (i % 7)) for i in ids]
    references = ["x" * 70] * 30
    preferences = [1.8 if len(a) > 70 else 1.3 for a in answers]
    preferences[5] = math.nan  # no verdict: in the prediction, not in the fit, as the package does
    estimate = judge.length_controlled_estimate(ids, preferences, answers, references)
    assert estimate.value == judge.metrics(ids, preferences, answers, references)["lc_win_rate"]
    draws = unit_draws(ids, 40)
    for draw, replicate in list(zip(draws, estimate.replicates))[:3]:
        drawn = judge.metrics(
            [ids[i] for i in draw],
            [preferences[i] for i in draw],
            [answers[i] for i in draw],
            [references[i] for i in draw],
        )
        assert replicate == pytest.approx(drawn["lc_win_rate"], rel=1e-12)
    assert estimate.low < estimate.value < estimate.high and estimate.high - estimate.low > 1


def test_instruction_difficulty_is_read_by_prompt_id(key, tmp_path):
    """Verdicts that follow each instruction's difficulty in the length-control data, not the
    answers' lengths: the GLM's prediction varies by instruction, and giving the rows other
    prompt ids (other AlpacaEval positions) changes it."""
    from reprolm.data.sources import read_source

    gamed = _gamed_source(tmp_path / "gamed", 60)
    judge = _judge("http://127.0.0.1:9", gamed)
    difficulty = {r["index"]: r["instruction_difficulty"] for r in read_source(gamed, "alpaca_eval_gamed")}
    ids = list(range(60))
    preferences = [1 + 1 / (1 + math.exp(-2 * difficulty[i])) for i in ids]
    answers = ["x" * (50 + (7 * i) % 11) for i in ids]
    references = ["x" * 55] * 60
    by_position = judge.metrics(ids, preferences, answers, references)
    assert by_position["win_rate"] == pytest.approx(100 * sum(p - 1 for p in preferences) / 60)
    assert by_position["lc_standard_error"] > 1
    shifted = judge.metrics(list(reversed(ids)), preferences, answers, references)
    assert shifted["win_rate"] == pytest.approx(by_position["win_rate"])
    assert shifted["lc_standard_error"] < by_position["lc_standard_error"] / 2


def test_rows_the_length_control_cannot_place_are_refused_before_any_request(chat_endpoint, key, tmp_path):
    judge = _judge(chat_endpoint, _gamed_source(tmp_path / "gamed", 5))
    with pytest.raises(KeyError, match=r"answers.parquet: prompt ids \[7\] are not AlpacaEval instruction positions"):
        judge.win_rates([0, 7], ["a", "b"], ["x", "y"], ["p", "q"], "answers.parquet")
    with pytest.raises(ValueError, match="one answer per instruction; prompt ids repeat"):
        judge.win_rates([1, 1], ["a", "a"], ["x", "y"], ["p", "p"], "answers.parquet")
    assert ChatEndpointStandIn.seen == []
    with pytest.raises(ValueError, match="answers.parquet: the AlpacaEval judge gave no usable verdict on any of 3"):
        judge.metrics([0, 1, 2], [math.nan] * 3, ["a", "b", "c"], ["x", "y", "z"], "answers.parquet")
    with pytest.raises(ValueError, match="compares two answers; it gives no single grade"):
        judge.score([[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]])


def test_an_unknown_annotator_or_a_missing_key_is_named(key, tmp_path, monkeypatch):
    gamed = _gamed_source(tmp_path / "gamed", 3)
    with pytest.raises(
        ValueError, match=r"no annotator 'weighted_alpaca_eval_gpt5'; it has .*weighted_alpaca_eval_gpt4_turbo"
    ):
        make_judge(
            {
                "kind": "alpaca_eval",
                "annotator": "weighted_alpaca_eval_gpt5",
                "base_url": "http://127.0.0.1:9",
                "api_key_env": KEY_ENV,
                "length_control": "gamed",
            },
            {"length_control": gamed},
        )
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ValueError, match=f"environment variable '{KEY_ENV}'"):
        _judge("http://127.0.0.1:9", gamed)


def _released(generator: str) -> tuple[list[float], list[str], list[str]]:
    rows = [
        row for row in csv.DictReader((RELEASED / "alpaca_eval_verdicts.csv").open()) if row["generator"] == generator
    ]
    # The GLM reads the outputs only through their character lengths.
    return (
        [float(row["preference"]) for row in rows],
        ["x" * int(row["answer_length"]) for row in rows],
        ["x" * int(row["reference_length"]) for row in rows],
    )


def _published() -> dict[str, dict]:
    return {row[""]: row for row in csv.DictReader((RELEASED / "alpaca_eval_leaderboard.csv").open())}


def test_the_package_metrics_of_the_released_verdicts_are_the_published_ones(key, tmp_path):
    """ExPO's released AlpacaEval verdicts, handed to the judge's metrics in AlpacaEval's own
    encoding, give the published win rate, standard error, discrete win rate, wins, draws
    and average length (the length-controlled figure needs AlpacaEval's own df_gamed.csv:
    the next test)."""
    judge = _judge("http://127.0.0.1:9", _gamed_source(tmp_path / "gamed", 805))
    for generator, figures in _published().items():
        preferences, answers, references = _released(generator)
        result = judge.metrics(list(range(805)), preferences, answers, references)
        assert result["win_rate"] == pytest.approx(float(figures["win_rate"]), abs=1e-9)
        assert result["standard_error"] == pytest.approx(float(figures["standard_error"]), abs=1e-9)
        assert result["discrete_win_rate"] == pytest.approx(float(figures["discrete_win_rate"]), abs=1e-9)
        assert (result["n_wins"], result["n_draws"]) == (int(figures["n_wins"]), int(figures["n_draws"]))
        assert int(result["mean_length"]) == int(figures["avg_length"])


GAMED_FILE = os.environ.get("REPROLM_ALPACA_EVAL_GAMED_CSV")


@pytest.mark.skipif(
    not GAMED_FILE,
    reason="needs AlpacaEval's df_gamed.csv (hub dataset tatsu-lab/alpaca_eval, "
    "unreachable here): set REPROLM_ALPACA_EVAL_GAMED_CSV to its path",
)
def test_the_released_verdicts_give_the_published_length_controlled_win_rates(key, tmp_path):
    """With AlpacaEval's own gamed-baseline data read as paper.yaml's source reads it, the
    released verdicts give the published LC win rates (8.673 for zephyr-7b-sft-full)."""
    folder = tmp_path / "alpaca_eval_gamed"
    write_source(
        {
            "name": "alpaca_eval_gamed",
            "schema": "alpaca_eval_gamed",
            "hub": {"path": "csv", "data_files": {"train": GAMED_FILE}, "split": "train"},
        },
        folder,
    )
    judge = _judge("http://127.0.0.1:9", str(folder))
    for generator, figures in _published().items():
        result = judge.metrics(list(range(805)), *_released(generator))
        assert result["lc_win_rate"] == pytest.approx(float(figures["length_controlled_winrate"]), abs=1e-6)
    assert not math.isnan(result["lc_standard_error"])


def test_the_config_names_a_gamed_source_and_never_grades_with_alpaca_eval():

    from reprolm.checks import check_config
    from reprolm.errors import ConfigError

    repo = Path(__file__).resolve().parents[1]
    schema = repo / "workflow/schemas/config.schema.yaml"
    config = overlays.load(repo / "config/config.yaml", repo)
    judge = {
        "kind": "alpaca_eval",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key_env": KEY_ENV,
        "length_control": "alpaca_eval",
    }
    config["judges"]["ae2"] = judge
    with pytest.raises(
        ConfigError,
        match="judges.ae2.length_control: source 'alpaca_eval' has schema 'alpaca_eval'; "
        "AlpacaEval's length control \\(its df_gamed.csv\\) reads schema 'alpaca_eval_gamed'",
    ):
        check_config(config, schema)
    config["sources"]["gamed"] = {"schema": "alpaca_eval_gamed", "fixture": {"n": 20, "seed": 0}}
    judge["length_control"] = "gamed"
    config["expo"]["benchmark_judge"] = "ae2"
    # The benchmark judge also grades MT-Bench unless a single-grade judge is named.
    with pytest.raises(
        ConfigError,
        match=r"expo.benchmark_judge \(MT-Bench's single-answer grades\): judge 'ae2' "
        r"\(alpaca_eval\) only compares two answers",
    ):
        check_config(config, schema)
    config["expo"]["single_grade_judge"] = "tiny_rm"
    check_config(config, schema)
    config["expo"]["judge"] = "ae2"
    with pytest.raises(ConfigError, match="expo.judge: judge 'ae2' .* judges that grade: .*'tiny_rm'"):
        check_config(config, schema)


def test_paper_yaml_reads_alpaca_evals_files_through_the_loaders_it_names(tmp_path):
    """paper.yaml's two AlpacaEval sources are plain files (a JSON list, a CSV) read by
    `datasets`' json and csv loaders. Local stand-ins in the same formats, at paths in place
    of the pinned URLs, load through those loaders and pass the schema checks: the CSV's
    true/false column becomes the boolean the check asks for, its index an integer."""
    import json

    import pandas as pd
    import yaml

    from reprolm.data.sources import read_source
    from reprolm.data.upstream import make_fixture

    paper = yaml.safe_load((Path(__file__).resolve().parents[1] / "config/paper.yaml").read_text())
    files = {"alpaca_eval": tmp_path / "alpaca_eval_gpt4_baseline.json", "alpaca_eval_gamed": tmp_path / "df_gamed.csv"}
    files["alpaca_eval"].write_text(json.dumps(make_fixture("alpaca_eval", n=6, seed=1)))
    pd.DataFrame(make_fixture("alpaca_eval_gamed", n=6, seed=1)).to_csv(files["alpaca_eval_gamed"], index=False)
    for name, path in files.items():
        spec = paper["sources"][name]
        ((split, url),) = spec["hub"]["data_files"].items()
        assert url.startswith(
            "https://huggingface.co/datasets/tatsu-lab/alpaca_eval/resolve/2edc6fad8be6b14ea7230aabfd08188da6b8b814/"
        )
        assert url.endswith(path.name)
        local = {**spec, "name": name, "hub": {**spec["hub"], "data_files": {split: str(path)}}}
        counts = write_source(local, tmp_path / "raw" / name)
        assert counts == {split: 6 if name == "alpaca_eval" else 12}
        records = read_source(tmp_path / "raw" / name, spec["schema"], split)
        assert len(records) == counts[split]
    gamed = read_source(tmp_path / "raw/alpaca_eval_gamed", "alpaca_eval_gamed")
    assert gamed[0]["not_gamed_baseline"] is False and isinstance(gamed[0]["index"], int)
