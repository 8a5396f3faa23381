"""Judges that only call an API: their verdicts cached so that a rerun never pays twice,
transient failures retried, refusals failing at once naming the judge (against the local
chat-endpoint stand-in, which counts requests), and their jobs run as local rules under a
concurrency resource."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from chat_endpoint_standin import ChatEndpointStandIn
from reprolm.config import overlays
from reprolm.data.sources import write_source
from reprolm.score.judges import make_judge, request_counts
from reprolm.score.judging import grade_generations

REPO = Path(__file__).resolve().parents[1]
KEY_ENV = "REPROLM_API_JUDGE_KEY"
SECRET = "sk-reprolm-api-judge-" + "5c1d9e"
STAGES = ("grade", "win_rate", "pair_accuracy", "rating_agreement", "model_ranking")


@pytest.fixture()
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)


def _endpoint_spec(base_url: str, **settings) -> dict:
    return {"kind": "chat_endpoint", "base_url": base_url, "model": "stand-in", "api_key_env": KEY_ENV, **settings}


def _rows(answers: list[str]) -> list[dict]:
    rows = [{"id": i, "instruction": f"Describe thing {i}.", "text": answer} for i, answer in enumerate(answers)]
    # A two-turn record: two requests, one per assistant turn.
    rows.append(
        {
            "id": len(rows),
            "conversation": [
                {"role": "user", "content": "Q1?"},
                {"role": "assistant", "content": "one two"},
                {"role": "user", "content": "Q2?"},
                {"role": "assistant", "content": "one two three four five"},
            ],
        }
    )
    return rows


def _sent_prompts() -> list[str]:
    return [seen["body"]["messages"][-1]["content"] for seen in ChatEndpointStandIn.seen]


def _cache_files(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file())


def test_a_rerun_sends_only_requests_not_answered_before(chat_endpoint, key, tmp_path):
    cache = tmp_path / "judge_cache" / "standin"
    spec = _endpoint_spec(chat_endpoint)
    rows = _rows(["a b c", "a b c d e f", "x"])
    first_judge = make_judge(spec, name="standin", cache_folder=cache)
    first = grade_generations(first_judge, rows)
    assert len(ChatEndpointStandIn.seen) == 5 and first["grades"] == [[3.0], [6.0], [1.0], [2.0, 5.0]]
    assert request_counts(first_judge) == {"verdicts": {"cached": 0, "requested": 5}}
    assert len(_cache_files(cache)) == 5

    # The same grading again, by a judge that retries differently: nothing is sent.
    ChatEndpointStandIn.seen = []
    again_judge = make_judge({**spec, "max_retries": 2}, name="standin", cache_folder=cache)
    assert grade_generations(again_judge, rows) == first
    assert ChatEndpointStandIn.seen == []
    assert request_counts(again_judge) == {"verdicts": {"cached": 5, "requested": 0}}

    # One changed answer: only its request goes out.
    changed = _rows(["a b c", "a b c d e f g h", "x"])
    changed_judge = make_judge(spec, name="standin", cache_folder=cache)
    result = grade_generations(changed_judge, changed)
    assert result["grades"] == [[3.0], [8.0], [1.0], [2.0, 5.0]]
    assert len(ChatEndpointStandIn.seen) == 1 and _sent_prompts()[0].endswith("a b c d e f g h")
    assert request_counts(changed_judge) == {"verdicts": {"cached": 4, "requested": 1}}

    # Another model or prompt is another request.
    ChatEndpointStandIn.seen = []
    grade_generations(make_judge({**spec, "model": "other"}, name="standin", cache_folder=cache), rows[:1])
    assert len(ChatEndpointStandIn.seen) == 1
    # The key is never written: the cache holds the replies, keyed by hashes.
    for path in _cache_files(cache):
        assert SECRET.encode() not in path.read_bytes(), path
        entry = json.loads(path.read_text())
        assert set(entry) == {"key", "verdict"} and path.stem == entry["key"]


def test_a_corrupt_or_misplaced_entry_is_asked_for_again(chat_endpoint, key, tmp_path):
    cache = tmp_path / "standin"
    spec = _endpoint_spec(chat_endpoint)
    rows = _rows(["a b c", "d e"])[:2]
    expected = grade_generations(make_judge(spec, name="standin", cache_folder=cache), rows)
    torn, moved = _cache_files(cache)
    torn.write_text(torn.read_text()[:10])  # a write cut short
    moved.write_text(json.dumps({"key": "0" * 64, "verdict": "Rating: [[9]]"}))  # not its key
    ChatEndpointStandIn.seen = []
    judge = make_judge(spec, name="standin", cache_folder=cache)
    assert grade_generations(judge, rows) == expected
    assert len(ChatEndpointStandIn.seen) == 2 and request_counts(judge)["verdicts"]["requested"] == 2
    assert all(json.loads(path.read_text())["key"] == path.stem for path in _cache_files(cache))


def test_pairwise_and_fastchat_verdicts_are_cached_by_both_answers(chat_endpoint, key, tmp_path):
    spec = _endpoint_spec(chat_endpoint)
    cache = tmp_path / "standin"
    answers, references = ["a long careful answer", "short", "mid size"], ["ref one", "a longer reference", "x"]
    instructions = ["i1", "i2", "i3"]
    first = make_judge(spec, name="standin", cache_folder=cache).prefer(instructions, answers, references)
    ChatEndpointStandIn.seen = []
    assert make_judge(spec, name="standin", cache_folder=cache).prefer(instructions, answers, references) == first
    assert ChatEndpointStandIn.seen == []
    references[2] = "a much longer reference"
    again = make_judge(spec, name="standin", cache_folder=cache).prefer(instructions, answers, references)
    assert again == first[:2] + [0.0] and len(ChatEndpointStandIn.seen) == 1

    write_source(
        {"name": "judge_prompts", "schema": "fastchat_judge_prompts", "fixture": {"n": 4, "seed": 0}},
        tmp_path / "judge_prompts",
    )
    fastchat = {**spec, "judge_prompts": "judge_prompts"}
    files = {"judge_prompts": str(tmp_path / "judge_prompts")}
    rows = [row for row in _rows([]) if "conversation" in row]
    ChatEndpointStandIn.seen = []
    graded = grade_generations(make_judge(fastchat, files, name="mt", cache_folder=tmp_path / "mt"), rows)
    assert len(ChatEndpointStandIn.seen) == 2
    ChatEndpointStandIn.seen = []
    assert grade_generations(make_judge(fastchat, files, name="mt", cache_folder=tmp_path / "mt"), rows) == graded
    assert ChatEndpointStandIn.seen == []


@pytest.mark.parametrize("status", [429, 500])
def test_transient_failures_are_retried_until_the_verdicts_come(chat_endpoint, key, tmp_path, status):
    ChatEndpointStandIn.failures = [status, status]
    judge = make_judge(_endpoint_spec(chat_endpoint), name="standin", cache_folder=tmp_path / "standin")
    started = time.monotonic()
    result = grade_generations(judge, _rows(["a b", "c d e"])[:2])
    elapsed = time.monotonic() - started
    assert result["grades"] == [[2.0], [3.0]] and len(ChatEndpointStandIn.seen) == 4
    assert request_counts(judge) == {"verdicts": {"cached": 0, "requested": 2}}
    if status == 429:  # the stand-in's Retry-After (20 ms), not the backoff (0.5 s, then 1 s)
        assert elapsed < 1.0
    else:
        assert elapsed > 0.6


def test_a_refused_request_fails_at_once_naming_the_judge_and_retries_are_bounded(chat_endpoint, key, tmp_path):
    ChatEndpointStandIn.failures = [400]
    judge = make_judge(_endpoint_spec(chat_endpoint), name="standin", cache_folder=tmp_path / "standin")
    with pytest.raises(
        RuntimeError,
        match=re.escape(
            f"judge 'standin' at {chat_endpoint}: request failed (not retried): Error code: 400 - stand-in answers 400"
        ),
    ):
        grade_generations(judge, _rows(["a b"])[:1])
    assert len(ChatEndpointStandIn.seen) == 1 and _cache_files(tmp_path) == []

    ChatEndpointStandIn.seen, ChatEndpointStandIn.failures = [], [503, 503, 503]
    judge = make_judge(_endpoint_spec(chat_endpoint, max_retries=1), name="standin")
    with pytest.raises(RuntimeError, match="judge 'standin' .* request failed after 1 retries: Error code: 503"):
        judge.score([[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]])
    assert len(ChatEndpointStandIn.seen) == 2


def _alpaca_eval(base_url: str, tmp_path: Path, cache: Path):
    gamed = tmp_path / "gamed"
    if not gamed.exists():
        write_source({"name": "gamed", "schema": "alpaca_eval_gamed", "fixture": {"n": 6, "seed": 0}}, gamed)
    return make_judge(
        # The GLM is refitted on each draw of the length-controlled win rate: a few.
        {
            "kind": "alpaca_eval",
            "base_url": base_url,
            "api_key_env": KEY_ENV,
            "length_control": "gamed",
            "lc_resamples": 5,
        },
        {"length_control": str(gamed)},
        name="ae2",
        cache_folder=cache,
    )


def test_alpaca_eval_verdicts_are_cached_per_pair_and_its_refusals_name_the_judge(chat_endpoint, key, tmp_path):
    cache = tmp_path / "judge_cache" / "ae2"
    instructions = [f"Explain topic {i}." for i in range(6)]
    answers = ["word " * (2 + 3 * i) for i in range(6)]
    references = ["word " * 9] * 6
    first_judge = _alpaca_eval(chat_endpoint, tmp_path, cache)
    first = first_judge.win_rates(list(range(6)), instructions, answers, references)
    assert len(ChatEndpointStandIn.seen) == 6 and request_counts(first_judge)["verdicts"]["requested"] == 6
    ChatEndpointStandIn.seen = []
    again_judge = _alpaca_eval(chat_endpoint, tmp_path, cache)
    assert again_judge.win_rates(list(range(6)), instructions, answers, references) == first
    assert ChatEndpointStandIn.seen == [] and request_counts(again_judge)["verdicts"] == {"cached": 6, "requested": 0}
    answers[4] = "w"
    changed = _alpaca_eval(chat_endpoint, tmp_path, cache).prefer(instructions, answers, references)
    assert len(ChatEndpointStandIn.seen) == 1 and changed[4] == pytest.approx(0.2)
    assert changed[:4] == first["preferences"][:4]
    for path in _cache_files(cache):
        assert SECRET.encode() not in path.read_bytes(), path

    ChatEndpointStandIn.seen, ChatEndpointStandIn.failures = [], [429, 500]
    answers[4] = "retried answer"
    assert len(_alpaca_eval(chat_endpoint, tmp_path, cache).prefer(instructions, answers, references)) == 6
    assert len(ChatEndpointStandIn.seen) == 3
    ChatEndpointStandIn.failures = [400]
    answers[4] = "refused answer"
    with pytest.raises(RuntimeError, match=r"judge 'ae2' at .*\(not retried\): Error code: 400"):
        _alpaca_eval(chat_endpoint, tmp_path, cache).prefer(instructions, answers, references)


def _parsed_rules(configfile: Path) -> dict:
    """The workflow's rules as Snakemake parses them under ``configfile``, and its local rules."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings, StorageSettings

    with SnakemakeApi(OutputSettings()) as api:
        workflow = api.workflow(
            resource_settings=ResourceSettings(cores=1),
            storage_settings=StorageSettings(),
            config_settings=ConfigSettings(configfiles=[configfile]),
            snakefile=REPO / "workflow" / "Snakefile",
            workdir=REPO,
        )
        workflow.dag()
        parsed = workflow._workflow
        return {"rules": {rule.name: rule for rule in parsed.rules}, "local": set(parsed._localrules)}


def test_api_judge_rules_are_local_hold_an_api_request_and_ask_for_no_gpu(tmp_path):
    from snakemake.io import strip_wildcard_constraints

    config = overlays.load(REPO / "config" / "config.yaml", REPO)
    config["judges"]["standin"] = _endpoint_spec("http://127.0.0.1:9/v1", max_retries=3)  # a valid setting
    configfile = tmp_path / "config.yaml"
    configfile.write_text(yaml.safe_dump(config))
    parsed = _parsed_rules(configfile)
    rules, local = parsed["rules"], parsed["local"]
    outputs = {
        "grade": "results/scores/grade_{}/tiny_llama/dpo/mt_bench.json",
        "win_rate": "results/scores/win_rate_{}/tiny_llama/dpo/alpaca_eval.json",
        "pair_accuracy": "results/scores/pair_accuracy/{}/prefs/test.json",
        "rating_agreement": "results/scores/rating_agreement/{}/helpsteer/test.json",
        "model_ranking": "results/scores/model_ranking/{}/wildbench/test.json",
    }
    for stage in STAGES:
        model_rule, api_rule = rules[stage], rules[f"{stage}_api"]
        assert f"{stage}_api" in local and stage not in local
        assert "api_requests" in api_rule.resources and "gpu" not in api_rule.resources
        assert "gpu" in model_rule.resources and "api_requests" not in model_rule.resources
        assert model_rule.script == api_rule.script
        assert strip_wildcard_constraints(model_rule.output[0]) == strip_wildcard_constraints(api_rule.output[0])
        # Each output is made by one rule of the pair.
        assert api_rule.is_producer(outputs[stage].format("standin"))
        assert not model_rule.is_producer(outputs[stage].format("standin"))
        assert model_rule.is_producer(outputs[stage].format("tiny_rm"))
        assert not api_rule.is_producer(outputs[stage].format("tiny_rm"))
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    assert profile["resources"]["api_requests"] >= 1


@pytest.mark.workflow
def test_paper_dag_runs_the_api_judge_on_the_submitting_host_submits_the_reward_model_and_measures_the_successor(
    tmp_path,
):
    """Snakemake 9 prints no ``localrule`` in dry runs ("we don't know how the user wants to
    execute"), so the dry run shows which rule each job is, and the parse which are local. The
    same dry run holds the judge agreement table of the retired GPT-4 Turbo judge, which its
    successor's verdicts on the released items measure (tests/test_judge_succession.py)."""
    from workflow_helpers import SNAKEMAKE, local_rules, scratch_copy, snakemake_env

    work = scratch_copy(tmp_path)
    api_target = "results/scores/win_rate_alpaca_eval_gpt4_turbo/starling_7b_beta/pretrained/alpaca_eval.json"
    model_target = "results/scores/grade_expo_rm/starling_7b_beta/pretrained/expo_search.json"
    agreement_target = "results/tables/judge_agreement/expo.csv"
    result = subprocess.run(
        [
            SNAKEMAKE,
            "-n",
            "--cores",
            "64",
            "--configfile",
            "config/paper.yaml",
            "--",
            api_target,
            model_target,
            agreement_target,
        ],
        cwd=work,
        env=snakemake_env(work),
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    # A packed job is listed indented, under its group job.
    jobs = dict(re.findall(r"^ *(?:local)?rule (\w+):\n(?: +.*\n)*? +output: (\S+)", output, re.M))
    assert jobs["win_rate_api"] == api_target and jobs["grade"] == model_target
    job = output.split("rule win_rate_api:", 1)[1].split("\n\n", 1)[0]
    assert "api_requests=1" in job and "gpu=" not in job
    local = local_rules(work / "config" / "paper.yaml")
    assert "win_rate_api" in local and "grade" not in local
    outputs = {path for line in re.findall(r"^\s+output: (.*)$", output, re.M) for path in line.split(", ")}
    assert "results/scores/judge_released/alpaca_eval_gpt4o_mini/alpaca_eval_gpt4_turbo.json" in outputs
    assert agreement_target in outputs
