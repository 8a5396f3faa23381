"""Judges and what their verdicts add up to: a reward model trained through the shared
finetune stage, an OpenAI-compatible endpoint (a local stand-in server, since no real
endpoint is reachable here), length-controlled win rates and the alpha choice."""

from __future__ import annotations

import math
import re

import numpy as np
import pyarrow.parquet as pq
import pytest

from chat_endpoint_standin import ChatEndpointStandIn
from default_config import DEFAULT, read_json
from reprolm.config import overlays
from reprolm.score.judges import ChatEndpointJudge, RewardModelJudge, make_judge
from reprolm.score.judging import (
    grade_generations,
    length_controlled_win_rate,
    pair_accuracy,
    reference_answers,
    win_rates,
)
from reprolm.studies.expo import choose_alpha

# The default config's reward-model judge, its recipe and the preference pairs it learns from.
REWARD_JUDGE = "tiny_rm"
REWARD_RECIPE = DEFAULT["recipes"]["reward"]
PAIRS = REWARD_RECIPE["dataset"]


@pytest.fixture(scope="module")
def reward_model(default_run):
    """The default run's reward model (the ``reward`` recipe, trained by the finetune stage
    under Snakemake) and the held-out pairs of the dataset it was trained on."""
    assert DEFAULT["judges"][REWARD_JUDGE]["model"].endswith("/reward")
    folder = default_run / "results" / "models" / DEFAULT["judges"][REWARD_JUDGE]["model"]
    return folder, pq.read_table(default_run / "results" / "datasets" / PAIRS / "test.parquet").to_pylist()


@pytest.mark.workflow
def test_reward_model_trained_by_the_finetune_stage_ranks_held_out_pairs(default_run, reward_model):
    folder, test_pairs = reward_model
    assert REWARD_RECIPE["objective"] == "reward"
    judge = make_judge(DEFAULT["judges"][REWARD_JUDGE], {"judge_model": str(folder)})
    result = pair_accuracy(judge, test_pairs)
    n = DEFAULT["sources"][PAIRS]["fixture"]["n"]
    assert result["n"] == len(test_pairs) == n
    assert result["accuracy"] >= 85 and result["accuracy"] == 100 * sum(result["correct"]) / n
    assert result["ci_low"] <= result["accuracy"] <= result["ci_high"]
    assert result["ci_high"] - result["ci_low"] < 20
    # The workflow's own pair-accuracy job scored the same pairs with the same judge.
    stored = read_json(default_run, f"results/scores/pair_accuracy/{REWARD_JUDGE}/{PAIRS}/test.json")
    assert (stored["n"], stored["correct"]) == (n, result["correct"])
    assert stored["accuracy"] == pytest.approx(result["accuracy"])
    # The score is the head's output at the conversation's end, the same in any batch.
    conversation = list(test_pairs[0]["prompt"]) + list(test_pairs[0]["chosen"])
    alone = judge.score([conversation])[0]
    batched = RewardModelJudge(str(folder), batch_size=4).score(
        [list(p["prompt"]) + list(p["rejected"]) for p in test_pairs[:3]] + [conversation]
    )[-1]
    assert alone == pytest.approx(batched, abs=1e-4)


@pytest.mark.workflow
def test_reward_model_preference_is_bradley_terry(reward_model):
    folder, test_pairs = reward_model
    judge = RewardModelJudge(str(folder))
    pair = test_pairs[0]
    instruction = pair["prompt"][0]["content"]
    chosen, rejected = pair["chosen"][0]["content"], pair["rejected"][0]["content"]
    scores = judge.score([[pair["prompt"][0], {"role": "assistant", "content": text}] for text in (chosen, rejected)])
    (preference,) = judge.prefer([instruction], [chosen], [rejected])
    assert preference == pytest.approx(1 / (1 + math.exp(scores[1] - scores[0])))


@pytest.mark.workflow
def test_grades_cover_every_assistant_turn(reward_model):
    folder, _ = reward_model
    judge = RewardModelJudge(str(folder))
    rows = [
        {
            "id": 0,
            "conversation": [
                {"role": "user", "content": "Describe the blue door."},
                {"role": "assistant", "content": "The miller repairs the blue door."},
                {"role": "user", "content": "Say it shorter."},
                {"role": "assistant", "content": "Door repaired."},
            ],
        },
        {"id": 1, "instruction": "Describe the old piano.", "text": "The teacher opens the old piano."},
    ]
    result = grade_generations(judge, rows)
    assert [len(g) for g in result["grades"]] == [2, 1]
    first_turn = judge.score([rows[0]["conversation"][:2]])[0]
    assert result["grades"][0][0] == pytest.approx(first_turn, abs=1e-4)
    assert result["turn_means"][1] == pytest.approx(result["grades"][0][1])
    assert result["mean"] == pytest.approx(np.mean(result["grades"][0] + result["grades"][1]))


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_length_controlled_win_rate_recovers_the_length_free_preference():
    rng = np.random.default_rng(0)
    reference_lengths = rng.integers(100, 400, size=400)
    answer_lengths = reference_lengths + rng.integers(-300, 300, size=400)
    d = answer_lengths - reference_lengths
    theta, phi = -0.8, 2.0
    preferences = _sigmoid(theta + phi * np.tanh(d / d.std()))
    result = length_controlled_win_rate(preferences, answer_lengths, reference_lengths)
    assert result["theta"] == pytest.approx(theta, abs=0.05)
    assert result["phi"] == pytest.approx(phi, abs=0.1)
    assert result["lc_win_rate"] == pytest.approx(100 * _sigmoid(theta), abs=1.0)


def test_the_length_controlled_fit_is_the_penalised_maximum_likelihood():
    """The fitted weights are where the penalised logistic loss is flat (its gradient by finite
    differences vanishes there), a judge that always prefers the answer included (only the
    penalty keeps its weights finite); with equal lengths theta solves
    sigmoid(theta) - mean(p) + 2 * l2 * theta = 0 and phi is 0."""
    from scipy import optimize, special

    rng = np.random.default_rng(3)
    for case in range(6):
        n = int(rng.integers(8, 300))
        preferences = np.ones(n) if case == 0 else rng.random(n) if case % 2 else (rng.random(n) > 0.4).astype(float)
        answer_lengths, reference_lengths = rng.integers(10, 2000, n), rng.integers(10, 2000, n)
        result = length_controlled_win_rate(preferences, answer_lengths, reference_lengths)
        d = (answer_lengths - reference_lengths).astype(float)
        x = np.tanh(d / d.std())

        def loss(weights, x=x, p=preferences):
            logits = weights[0] + weights[1] * x
            return np.mean(np.logaddexp(0, logits) - p * logits) + 1e-3 * weights @ weights

        fitted = np.array([result["theta"], result["phi"]])
        assert np.abs(optimize.approx_fprime(fitted, loss, 1e-7)).max() < 2e-5, (case, fitted)
        assert result["lc_win_rate"] == pytest.approx(100 * special.expit(result["theta"]))
    preferences = rng.random(50)
    result = length_controlled_win_rate(preferences, [100] * 50, [100] * 50)
    theta = optimize.brentq(lambda t: special.expit(t) - preferences.mean() + 2e-3 * t, -20, 20)
    assert result["theta"] == pytest.approx(theta, abs=1e-5) and result["phi"] == pytest.approx(0, abs=1e-6)


def test_a_judge_that_only_likes_length_wins_raw_but_not_length_controlled():
    answers = ["word " * 80] * 30 + ["word " * 5] * 10  # three quarters longer than the reference
    references = ["word " * 40] * 40
    preferences = [1.0 if len(a) > len(r) else 0.0 for a, r in zip(answers, references)]
    result = win_rates(preferences, [len(a) for a in answers], [len(r) for r in references])
    assert result["win_rate"] == pytest.approx(75.0)
    assert 40 < result["lc_win_rate"] < 60
    assert result["phi"] > 1


def test_unparsed_verdicts_are_counted_and_left_out():
    result = win_rates([1.0, math.nan, 0.0, 1.0], [1, 2, 3, 2], [1, 1, 1, 1])
    assert (result["n"], result["unparsed"]) == (3, 1)
    assert result["win_rate"] == pytest.approx(200 / 3) and result["mean_length"] == pytest.approx(2.0)  # 1, 3, 2 kept
    with pytest.raises(ValueError, match="no usable verdict"):
        win_rates([math.nan], [1], [1])


def test_reference_answers_come_from_the_dataset_or_a_model_by_prompt_id():
    rows = [{"id": 1, "reference": "r1"}, {"id": 0, "reference": "r0"}]
    assert reference_answers(rows, "answers.parquet", None, None) == ["r1", "r0"]
    model_rows = [{"id": 0, "text": "m0"}, {"id": 1, "text": "m1"}]
    assert reference_answers(rows, "answers.parquet", model_rows, "ref.parquet") == ["m1", "m0"]
    with pytest.raises(KeyError, match="ref.parquet: no reference answer for prompt ids \\[1\\]"):
        reference_answers(rows, "answers.parquet", model_rows[:1], "ref.parquet")
    with pytest.raises(KeyError, match="answers.parquet: row 0: no 'reference' answer"):
        reference_answers([{"id": 0}], "answers.parquet", None, None)


def _graded(mean: float) -> dict:
    return {"mean": mean, "ids": [0, 1], "grades": [[mean], [mean]]}


def test_alpha_choice_is_the_best_extrapolation_not_the_original():
    grades = {0.0: _graded(5.0), 0.1: _graded(1.0), 0.3: _graded(3.0), 0.5: _graded(math.nan)}
    chosen = choose_alpha(grades)
    assert chosen["best_alpha"] == 0.3
    assert [p["alpha"] for p in chosen["curve"]] == [0.0, 0.1, 0.3, 0.5]
    assert chosen["curve"][2] == {"alpha": 0.3, "mean_grade": 3.0, "ids": [0, 1], "grades": [[3.0], [3.0]]}
    with pytest.raises(ValueError, match="no alpha above 0"):
        choose_alpha({0.0: _graded(1.0), 0.5: _graded(math.nan)})


def test_chat_endpoint_judge_grades_and_compares_with_the_key_from_the_environment(chat_endpoint, monkeypatch):
    monkeypatch.setenv("REPROLM_JUDGE_KEY", "sk-test-secret-123")
    judge = ChatEndpointJudge(chat_endpoint, "judge-model", "REPROLM_JUDGE_KEY", seed=3)
    grades = judge.score(
        [
            [{"role": "user", "content": "q"}, {"role": "assistant", "content": "one two three"}],
            [{"role": "user", "content": "UNPARSEABLE"}, {"role": "assistant", "content": "x"}],
        ]
    )
    assert grades[0] == 3.0 and math.isnan(grades[1])
    long, short = "a long and careful answer", "short"
    preferences = judge.prefer(["i"] * 6, [long, short] * 3, [short, long] * 3)
    assert preferences == [1.0, 0.0] * 3  # whichever position the answer was shown in
    pairwise = [s for s in ChatEndpointStandIn.seen if "Answer (a):" in s["body"]["messages"][0]["content"]]
    shown_first = {s["body"]["messages"][0]["content"].split("Answer (a):\n")[1].split("\n")[0] for s in pairwise}
    assert shown_first == {long, short}  # the order was shuffled
    assert all(s["authorization"] == "Bearer sk-test-secret-123" for s in ChatEndpointStandIn.seen)
    assert all(s["body"]["model"] == "judge-model" and s["body"]["temperature"] == 0 for s in ChatEndpointStandIn.seen)


def test_chat_endpoint_judge_without_its_key_fails_naming_the_variable(monkeypatch):
    monkeypatch.delenv("REPROLM_JUDGE_KEY", raising=False)
    with pytest.raises(ValueError, match=re.escape("environment variable 'REPROLM_JUDGE_KEY'")):
        make_judge(
            {
                "kind": "chat_endpoint",
                "base_url": "http://127.0.0.1:9/v1",
                "model": "m",
                "api_key_env": "REPROLM_JUDGE_KEY",
            }
        )


def test_the_authors_released_alpaca_eval_verdicts_give_the_published_figures():
    """ExPO's repository publishes AlpacaEval 2.0's GPT-4 Turbo verdicts per instruction and
    the resulting leaderboard (tests/data/expo, numbers only). Our aggregation of those
    verdicts gives the published win rate, standard error, discrete win rate, wins, draws and
    average length to the printed precision. The LC win rate does not match: AlpacaEval's
    regression also has a per-instruction difficulty term, fitted on its hub data."""
    import csv
    from pathlib import Path

    data = Path(__file__).parent / "data" / "expo"
    verdicts = list(csv.DictReader((data / "alpaca_eval_verdicts.csv").open()))
    published = {row[""]: row for row in csv.DictReader((data / "alpaca_eval_leaderboard.csv").open())}
    assert len(published) == 4
    for generator, figures in published.items():
        rows = [row for row in verdicts if row["generator"] == generator]
        assert len(rows) == int(figures["n_total"]) == 805
        # AlpacaEval's preference is 1 (reference preferred) to 2 (the model's answer).
        result = win_rates(
            [float(row["preference"]) - 1 for row in rows],
            [int(row["answer_length"]) for row in rows],
            [int(row["reference_length"]) for row in rows],
        )
        assert result["win_rate"] == pytest.approx(float(figures["win_rate"]), abs=1e-8)
        assert result["standard_error"] == pytest.approx(float(figures["standard_error"]), abs=1e-8)
        assert result["discrete_win_rate"] == pytest.approx(float(figures["discrete_win_rate"]), abs=1e-9)
        assert (result["n_wins"], result["n_draws"]) == (int(figures["n_wins"]), int(figures["n_draws"]))
        assert int(result["mean_length"]) == int(figures["avg_length"])
    sft = [row for row in verdicts if row["generator"] == "zephyr-7b-sft-full"]
    ours = win_rates(
        [float(row["preference"]) - 1 for row in sft],
        [int(row["answer_length"]) for row in sft],
        [int(row["reference_length"]) for row in sft],
    )
    assert float(published["zephyr-7b-sft-full"]["length_controlled_winrate"]) == pytest.approx(8.673, abs=1e-3)
    assert ours["lc_win_rate"] == pytest.approx(14.55, abs=0.01)


def _fastchat_prompts_source(tmp_path):
    from reprolm.data.sources import write_source

    folder = tmp_path / "judge_prompts"
    write_source({"name": "judge_prompts", "schema": "fastchat_judge_prompts", "fixture": {"n": 4, "seed": 0}}, folder)
    return str(folder)


def test_fastchat_mt_bench_grading_sends_its_prompts_with_reference_answers(chat_endpoint, monkeypatch, tmp_path):
    """FastChat's protocol: turn 1 by ``single-v1`` (``single-math-v1`` with the reference for
    math, reasoning and coding), turn 2 by the multi-turn forms with both turns in view; the
    prompt's system message; temperature 0; ``[[rating]]``, else ``[rating]``."""
    monkeypatch.setenv("REPROLM_JUDGE_KEY", "sk-test-secret-123")
    spec = {
        "kind": "chat_endpoint",
        "base_url": chat_endpoint,
        "model": "gpt-4",
        "api_key_env": "REPROLM_JUDGE_KEY",
        "judge_prompts": "judge_prompts",
    }
    judge = make_judge(spec, {"judge_prompts": _fastchat_prompts_source(tmp_path)})
    assert judge.protocol.startswith("FastChat MT-Bench")

    def conversation(first, second):
        return [
            {"role": "user", "content": "Q1?"},
            {"role": "assistant", "content": first},
            {"role": "user", "content": "Q2?"},
            {"role": "assistant", "content": second},
        ]

    rows = [
        {"id": 0, "category": "writing", "conversation": conversation("one two", "one two three four")},
        {
            "id": 1,
            "category": "math",
            "reference_answers": ["R1", "R2"],
            "conversation": conversation("a b c", "UNPARSEABLE"),
        },
    ]
    result = grade_generations(judge, rows)
    assert result["grades"][0] == [2.0, 4.0]  # the second from FastChat's backup pattern [4]
    assert result["grades"][1][0] == 3.0 and math.isnan(result["grades"][1][1])
    assert result["protocol"] == judge.protocol and result["unparsed"] == 1
    requests = [seen["body"] for seen in ChatEndpointStandIn.seen]
    assert len(requests) == 4 and all(r["temperature"] == 0 and r["max_tokens"] == 2048 for r in requests)
    assert all(
        r["messages"][0] == {"role": "system", "content": "You grade answers of AI assistants."} for r in requests
    )
    prompts = [r["messages"][1]["content"] for r in requests]
    assert prompts[0].startswith("Question:\nQ1?") and "Reference" not in prompts[0]
    assert "### User:\nQ2?\n\n### Assistant A:\none two three four" in prompts[1] and "Reference" not in prompts[1]
    assert "[The Start of Reference Answer]\nR1\n" in prompts[2]
    assert "(turn 1):\nR1" in prompts[3] and "(turn 2):\nR2" in prompts[3]
    with pytest.raises(
        KeyError, match="prompt 2: category 'coding' is graded against reference answers, and the row has 0 for 2 turns"
    ):
        grade_generations(judge, [{"id": 2, "category": "coding", "conversation": conversation("x", "y")}])


def test_a_fastchat_judge_needs_its_prompts_source(chat_endpoint, monkeypatch):
    monkeypatch.setenv("REPROLM_JUDGE_KEY", "k")
    spec = {
        "kind": "chat_endpoint",
        "base_url": chat_endpoint,
        "model": "gpt-4",
        "api_key_env": "REPROLM_JUDGE_KEY",
        "judge_prompts": "fastchat_prompts",
    }
    with pytest.raises(ValueError, match="grades with FastChat's prompts: it needs the 'fastchat_prompts' source"):
        make_judge(spec, {})


def test_a_judges_prompts_must_be_a_fastchat_judge_prompts_source():
    from pathlib import Path

    from reprolm.checks import check_config
    from reprolm.errors import ConfigError

    repo = Path(__file__).resolve().parents[1]
    config = overlays.load(repo / "config/config.yaml", repo)
    judge = {
        "kind": "chat_endpoint",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "api_key_env": "K",
        "judge_prompts": "mt_bench",
    }
    config["judges"]["mt_judge"] = judge
    with pytest.raises(
        ConfigError,
        match="judges.mt_judge.judge_prompts: source 'mt_bench' has schema "
        "'mt_bench_prompts'; FastChat's MT-Bench grading reads schema",
    ):
        check_config(config, repo / "workflow/schemas/config.schema.yaml")
    judge["judge_prompts"] = "fastchat_prompts"
    with pytest.raises(ConfigError, match="judges.mt_judge.judge_prompts: 'fastchat_prompts' is not declared"):
        check_config(config, repo / "workflow/schemas/config.schema.yaml")
    config["sources"]["fastchat_prompts"] = {"schema": "fastchat_judge_prompts", "fixture": {"n": 4, "seed": 0}}
    check_config(config, repo / "workflow/schemas/config.schema.yaml")


def test_fastchat_prompts_missing_one_are_refused_naming_the_source(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from reprolm.data.sources import write_source
    from reprolm.data.upstream import make_fixture
    from reprolm.score.judges import read_judge_prompts

    folder = tmp_path / "partial"
    prompts = [p for p in make_fixture("fastchat_judge_prompts", n=4, seed=0) if p["name"] != "single-math-v1"]
    folder.mkdir()
    pq.write_table(pa.Table.from_pylist(prompts), folder / "train.parquet")
    with pytest.raises(KeyError, match=rf"{folder}: judge prompts lack \['single-math-v1'\]"):
        read_judge_prompts(str(folder))
    write_source(
        {"name": "full", "schema": "fastchat_judge_prompts", "fixture": {"n": 4, "seed": 0}}, tmp_path / "full"
    )
    assert sorted(read_judge_prompts(str(tmp_path / "full"))) == [
        "single-math-v1",
        "single-math-v1-multi-turn",
        "single-v1",
        "single-v1-multi-turn",
    ]


def test_mt_bench_rows_keep_their_reference_answers_for_the_judge():
    from reprolm.data.upstream import UPSTREAM_SCHEMAS

    instruction = UPSTREAM_SCHEMAS["mt_bench_prompts"].instruction
    row = instruction({"prompt": ["Q1?", "Q2?"], "prompt_id": 7, "category": "math", "reference": ["R1", "R2"]})
    assert (row["category"], row["reference_answers"], row["turns"]) == ("math", ["R1", "R2"], ["Q1?", "Q2?"])
    assert instruction({"prompt": ["Q"], "category": "writing", "reference": None})["reference_answers"] == []
