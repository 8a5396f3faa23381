"""Generation through an OpenAI-compatible chat endpoint (closed models' APIs, a researcher's
own vLLM or TGI server), against the local recording stand-in (tests/chat_endpoint_standin.py;
no real endpoint is reachable here): what requests went out (model, the prompt set's
messages, sampling), what the generation file holds, retries, errors, and that the API key
reaches neither logs, errors nor artifacts."""

from __future__ import annotations

import json
import logging
import re
import time
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from snakemake.iocontainers import Namedlist

from chat_endpoint_standin import ChatEndpointStandIn
from reprolm.config import overlays
from reprolm.generate import SamplingParams
from reprolm.generate.endpoint_backend import ChatEndpointBackend, EndpointError
from reprolm.generate.run import generate_promptset
from reprolm.length import TargetSet

KEY_ENV = "REPROLM_ENDPOINT_GENERATION_KEY"
SECRET = "sk-reprolm-endpoint-generation-" + "7f3a2b"
TLG_ROWS = [
    {"id": 0, "Instruction": "Describe a cat.", "TargetLength": "10", "Level": 0},
    {"id": 1, "Instruction": "Describe a dog.", "TargetLength": "30", "Level": 0},
    {"id": 2, "Instruction": "Describe a bird.", "TargetLength": ">800", "Level": 2},
]


@pytest.fixture()
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)


def _endpoint(base_url: str, **settings) -> dict:
    return {"name": "closed", "base_url": base_url, "model": "gpt-stand-in", "api_key_env": KEY_ENV, **settings}


def _tlg_file(tmp_path, rows=TLG_ROWS):
    path = tmp_path / "tlg.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    return str(path)


def _generate(tmp_path, endpoint: dict, sampling: dict, rows=TLG_ROWS, prompt="target_length", **options) -> list:
    output = tmp_path / "generations.parquet"
    generate_promptset(
        model_path=None,
        dataset_file=_tlg_file(tmp_path, rows),
        promptset={"prompt": prompt, "sampling": sampling},
        length_prompt="instruction",
        targets=TargetSet.from_config("paper"),
        backend="transformers",
        backend_options={},
        seed=7,
        output=str(output),
        endpoint=endpoint,
        **options,
    )
    return pq.read_table(output).to_pylist()


def test_an_endpoint_model_is_sent_the_prompt_sets_messages_and_sampling(chat_endpoint, key, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    sampling = {"max_new_tokens": 20, "temperature": 0.7, "top_p": 0.9, "n": 2}
    records = _generate(tmp_path, _endpoint(chat_endpoint, max_concurrency=2), sampling)

    # The original Ruler's prompt to its closed models (run_exp_api.py), as the user's turn.
    asked = {
        "Describe a cat.\nThe response should have a word count of 10 words.",
        "Describe a dog.\nThe response should have a word count of 30 words.",
        "Describe a bird.\nThe response should have a word count of more than 800 words.",
    }
    seen = ChatEndpointStandIn.seen
    assert len(seen) == 3 and {s["path"] for s in seen} == {"/v1/chat/completions"}
    assert {s["authorization"] for s in seen} == {f"Bearer {SECRET}"}
    assert {s["body"]["messages"][0]["content"] for s in seen} == asked
    for request in seen:
        body = request["body"]
        assert body["messages"] == [{"role": "user", "content": body["messages"][0]["content"]}]
        assert {k: v for k, v in body.items() if k != "messages"} == {
            "model": "gpt-stand-in",
            "temperature": 0.7,
            "top_p": 0.9,
            "max_tokens": 20,
            "n": 2,
            "seed": 7,  # the job's seed plus the shard's first row
        }

    # Two samples per row, in row order whatever order the answers came in; the stand-in
    # answers with the words asked for, cut at max_tokens.
    assert [(r["id"], r["sample"]) for r in records] == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    assert [len(r["text"].split()) for r in records] == [10, 10, 20, 20, 20, 20]
    # The replies' finish reasons: "stop" for the 10 words asked, "length" where cut at 20.
    assert [r["hit_max_new_tokens"] for r in records] == [False, False, True, True, True, True]
    assert [r["text"].split()[0] for r in records] == ["s0", "s1"] * 3
    assert {r["Instruction"] for r in records} == {row["Instruction"] for row in TLG_ROWS}
    assert json.loads(records[0]["prompt"]) == [{"role": "user", "content": sorted(asked)[1]}]
    assert SECRET not in caplog.text
    assert SECRET.encode() not in (tmp_path / "generations.parquet").read_bytes()


def test_shards_number_their_seed_by_row_and_an_endpoints_sampling_replaces_the_prompt_sets(
    chat_endpoint, key, tmp_path
):
    endpoint = _endpoint(chat_endpoint, sampling={"temperature": 1.0})
    sampling = {"max_new_tokens": 2048, "top_k": 50, "presence_penalty": 0.1}
    _generate(tmp_path, endpoint, sampling, shard_size=2, progress_root=str(tmp_path / "progress"))
    bodies = sorted((s["body"] for s in ChatEndpointStandIn.seen), key=lambda b: b["messages"][0]["content"])
    assert [b["seed"] for b in bodies] == [9, 7, 7]  # bird (row 2: second shard), cat, dog
    for body in bodies:
        # top_k travels as a top-level field, as vLLM's and TGI's servers read it.
        assert (body["temperature"], body["top_k"], body["presence_penalty"]) == (1.0, 50, 0.1)
        assert "frequency_penalty" not in body and "stop" not in body
    assert list((tmp_path / "progress").iterdir()) == []  # the finished shards, removed


def test_stop_strings_and_multi_turn_conversations_are_sent_as_messages(chat_endpoint, key, tmp_path):
    backend = ChatEndpointBackend(**_endpoint(chat_endpoint))
    texts = backend.chat(
        [[{"role": "user", "content": "one two three"}]], SamplingParams(max_new_tokens=5), stop=["<|end|>"]
    )
    assert texts == [["s0 s0 s0"]]
    assert ChatEndpointStandIn.seen[0]["body"]["stop"] == ["<|end|>"]

    ChatEndpointStandIn.seen = []
    rows = [{"id": 0, "turns": ["Hello there.", "And again?"]}, {"id": 1, "turns": ["Only one."]}]
    records = _generate(tmp_path, _endpoint(chat_endpoint), {"max_new_tokens": 8}, rows=rows, prompt="multi_turn")
    second_turn = [s["body"]["messages"] for s in ChatEndpointStandIn.seen if len(s["body"]["messages"]) == 3]
    assert second_turn == [
        [
            {"role": "user", "content": "Hello there."},
            {"role": "assistant", "content": "s0 s0"},
            {"role": "user", "content": "And again?"},
        ]
    ]
    assert len(ChatEndpointStandIn.seen) == 3
    assert [r["text"] for r in records] == ["s0 s0", "s0 s0"]
    assert [len(r["conversation"]) for r in records] == [4, 2]


def test_a_conversations_record_says_whether_its_last_answer_ran_to_max_new_tokens(chat_endpoint, key, tmp_path):
    """The stand-in answers a turn with as many words as it has, cut at max_tokens with finish
    reason "length": the first row's first answer stops and its last is cut, the second
    row's answers are cut then stop; the record flags the last answer's."""
    rows = [
        {"id": 0, "turns": ["Hello there.", "Say it once more please."]},
        {"id": 1, "turns": ["One two three four five.", "Only one."]},
    ]
    records = _generate(tmp_path, _endpoint(chat_endpoint), {"max_new_tokens": 3}, rows=rows, prompt="multi_turn")
    assert [[len(turn["content"].split()) for turn in r["conversation"][1::2]] for r in records] == [[2, 3], [3, 2]]
    assert [r["hit_max_new_tokens"] for r in records] == [True, False]
    backend = ChatEndpointBackend(**_endpoint(chat_endpoint))
    asked = [[{"role": "user", "content": "a b"}], [{"role": "user", "content": "a b c d e f"}]]
    assert backend.chat_with_limits(asked, SamplingParams(max_new_tokens=4, n=2)) == (
        [["s0 s0", "s1 s1"], ["s0 s0 s0 s0", "s1 s1 s1 s1"]],
        [[False, False], [True, True]],
    )


def test_transient_failures_are_retried_with_backoff(chat_endpoint, key, tmp_path):
    backend = ChatEndpointBackend(**_endpoint(chat_endpoint))
    ChatEndpointStandIn.failures = [429, 503]
    started = time.monotonic()
    assert backend.chat([[{"role": "user", "content": "a b"}]], SamplingParams(max_new_tokens=5)) == [["s0 s0"]]
    # The 429's Retry-After (20 ms), then the client's backoff after the 503 (about 0.4-1 s).
    assert 0.3 < time.monotonic() - started < 3
    assert len(ChatEndpointStandIn.seen) == 3


def test_errors_name_the_model_endpoint_status_and_request_never_the_key(chat_endpoint, key, tmp_path, monkeypatch):
    where = f"base model 'closed' ('gpt-stand-in' at {chat_endpoint})"
    source = _tlg_file(tmp_path)
    ChatEndpointStandIn.failures = [401]
    with pytest.raises(EndpointError) as refused:
        _generate(tmp_path, _endpoint(chat_endpoint, max_concurrency=1), {"max_new_tokens": 5})
    message = str(refused.value)
    assert message.startswith(f"{where}: the request for {source} row 0 ('Describe a cat.")
    assert "(not retried): HTTP 401: " in message and "incorrect API key provided: ***" in message
    assert SECRET not in message and refused.value.__cause__ is None

    ChatEndpointStandIn.seen, ChatEndpointStandIn.failures = [], [500, 500]
    backend = ChatEndpointBackend(**_endpoint(chat_endpoint, max_retries=1))
    with pytest.raises(
        EndpointError, match=re.escape(f"{where}: the request for prompt 0 ('q') failed after 1 retries: HTTP 500")
    ):
        backend.chat([[{"role": "user", "content": "q"}]], SamplingParams(max_new_tokens=5))
    assert len(ChatEndpointStandIn.seen) == 2

    ChatEndpointStandIn.replies = [{"id": "x", "object": "chat.completion", "model": "gpt-stand-in"}]
    with pytest.raises(
        EndpointError, match=re.escape(f"{where}: the reply to the request for prompt 0 ('q') has no 'choices'")
    ):
        backend.chat([[{"role": "user", "content": "q"}]], SamplingParams(max_new_tokens=5))

    ChatEndpointStandIn.replies = [{"id": "x", "object": "chat.completion", "model": "m", "choices": []}]
    with pytest.raises(EndpointError, match="has no 'choices'"):
        backend.chat([[{"role": "user", "content": "q"}]], SamplingParams(max_new_tokens=5))

    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(
        EndpointError, match=re.escape(f"{where}: environment variable '{KEY_ENV}' (its API key) is not set")
    ):
        ChatEndpointBackend(**_endpoint(chat_endpoint))


def test_prompts_that_start_the_assistants_turn_are_refused_for_an_endpoint(chat_endpoint, key, tmp_path):
    with pytest.raises(ValueError, match=r"row 0: the prompt starts the assistant's turn \(an MLT\)"):
        generate_promptset(
            model_path=None,
            dataset_file=_tlg_file(tmp_path),
            promptset={"prompt": "target_length", "sampling": {"max_new_tokens": 5}},
            length_prompt="mlt",
            targets=TargetSet.from_config("paper"),
            backend="transformers",
            backend_options={},
            seed=0,
            output=str(tmp_path / "out.parquet"),
            endpoint=_endpoint(chat_endpoint),
        )
    assert ChatEndpointStandIn.seen == [] and not (tmp_path / "out.parquet").exists()


def test_an_endpoint_model_is_a_baseline_of_generated_evaluations_only():
    """Config: an endpoint entry is valid with its three keys; a study scores an endpoint
    baseline on the evaluations that allow it and never with its lm-eval suite; an endpoint
    model among a study's bases (to be finetuned) is refused naming the key."""
    import copy

    from reprolm.checks import check_config
    from reprolm.config.schema import validate_config
    from reprolm.errors import ConfigError
    from reprolm.studies import STUDIES
    from workflow_helpers import REPO

    schema = REPO / "workflow/schemas/config.schema.yaml"
    config = overlays.load(REPO / "config/config.yaml", REPO)
    config["base_models"]["closed"] = {
        "endpoint": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": KEY_ENV}
    }
    config["ruler"]["baselines"] = ["closed"]
    config["ruler"]["evaluations"][1]["endpoint_models"] = False  # multi_mlt: the open models only
    validate_config(copy.deepcopy(config), schema)
    check_config(config, schema)
    assert sorted(p for p in STUDIES["ruler"].score_paths(config) if "/closed/" in p) == [
        "results/scores/length_levels/closed/pretrained/tlg.json"
    ]

    keyless = copy.deepcopy(config)
    del keyless["base_models"]["closed"]["endpoint"]["api_key_env"]
    with pytest.raises(ConfigError, match="^base_models.closed.endpoint: 'api_key_env' is a required property"):
        validate_config(keyless, schema)

    config["ruler"]["bases"].append("closed")
    with pytest.raises(
        ConfigError, match=r"ruler.bases: 'closed' is asked through an endpoint .* name it in ruler.baselines"
    ):
        check_config(config, schema)


def test_the_generate_api_script_writes_generations_and_provenance_naming_the_endpoint_not_the_key(
    chat_endpoint, key, tmp_path, monkeypatch
):
    """The rule's script under a Snakemake job object as generate_api gives it (its params:
    the endpoint settings, no backend): the generations and their provenance record."""
    import runpy
    import signal

    from snakemake.iocontainers import InputFiles, Log, OutputFiles, Params, ResourceList, Wildcards
    from snakemake.script import Snakemake

    from reprolm.provenance.records import provenance_path
    from reprolm.stopping import STOP_SIGNALS
    from workflow_helpers import REPO

    monkeypatch.chdir(tmp_path)
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.setenv(variable, "1")
    output = "results/generations/closed/pretrained/tlg.parquet"
    endpoint = {"base_url": chat_endpoint, "model": "gpt-stand-in", "api_key_env": KEY_ENV, "max_concurrency": 2}
    params = {
        "promptset": {"prompt": "target_length", "sampling": {"max_new_tokens": 2048}},
        "length_prompt": "instruction",
        "length_targets": "paper",
        "shard_size": 512,
        "progress_root": "results/checkpoints/generate/closed/pretrained/tlg",
        "seed": 7,
        "endpoint": endpoint,
    }
    job = Snakemake(
        InputFiles(fromdict={"prompts": _tlg_file(tmp_path)}),
        OutputFiles([output]),
        Params(fromdict=params),
        Wildcards(fromdict={"base": "closed", "recipe": "pretrained", "promptset": "tlg"}),
        1,
        ResourceList(fromdict={"api_requests": 1}),
        Log(["logs/generate/closed/pretrained/tlg.log"]),
        {},
        "generate_api",
        None,
    )
    handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    try:
        runpy.run_path(str(REPO / "workflow/scripts/generate.py"), init_globals={"snakemake": job})
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)

    records = pq.read_table(output).to_pylist()
    assert [r["id"] for r in records] == [0, 1, 2] and [len(r["text"].split()) for r in records] == [10, 30, 800]
    assert {s["body"]["model"] for s in ChatEndpointStandIn.seen} == {"gpt-stand-in"}
    record = json.loads(open(provenance_path(output)).read())
    assert record["rule"] == "generate_api" and record["wildcards"]["base"] == "closed"
    recorded = record["params"]["endpoint"]
    # The key's variable is named (it says where the key is kept), the key never.
    assert (recorded["base_url"], recorded["model"], recorded["api_key_env"]) == (
        chat_endpoint,
        "gpt-stand-in",
        KEY_ENV,
    )
    # The word-count prompt adds no stop; the endpoint ends a turn by its own model's rules.
    assert record["generation"] == {"max_new_tokens": 2048, "stop": []}
    # What the API said it served: the configured model (the stand-in sends no fingerprint).
    assert record["endpoint"] == {
        "configured_model": "gpt-stand-in",
        "served": [{"model": "gpt-stand-in", "system_fingerprint": None, "replies": 3}],
    }
    log = (tmp_path / "logs/generate/closed/pretrained/tlg.log").read_text()
    assert "gpt-stand-in" in log and "3 samples" in log
    for path in (output, provenance_path(output), "logs/generate/closed/pretrained/tlg.log"):
        assert SECRET.encode() not in (tmp_path / path).read_bytes(), path


def test_a_table_naming_an_api_model_flags_a_served_model_other_than_the_configured_snapshot(
    chat_endpoint, key, tmp_path
):
    """An alias the API resolves to another snapshot: each generation's record keeps the
    served model id and system fingerprint, and a table page naming the model says so."""
    from reprolm.aggregate.report_pages import served_model_notes, write_table_pages
    from reprolm.provenance.records import tracked_step

    folder = tmp_path / "results/generations/closed/pretrained"
    folder.mkdir(parents=True)
    output = folder / "tlg.parquet"

    def generate_recorded() -> None:
        """The generation as a recorded step (the record keeps what the API served)."""
        job = SimpleNamespace(
            rule="generate_api",
            input=Namedlist(fromdict={}),
            output=Namedlist([str(output)]),
            params=Namedlist(fromdict={}),
            wildcards=Namedlist(fromdict={}),
            log=[str(tmp_path / "generate.log")],
            threads=1,
            resources=Namedlist(fromdict={}),
            config={"seed": 7},
        )
        with tracked_step(job):
            generate_promptset(
                model_path=None,
                dataset_file=_tlg_file(tmp_path),
                promptset={"prompt": "target_length", "sampling": {"max_new_tokens": 64}},
                length_prompt="instruction",
                targets=TargetSet.from_config("paper"),
                backend="transformers",
                backend_options={},
                seed=7,
                output=str(output),
                endpoint=_endpoint(chat_endpoint),
            )

    ChatEndpointStandIn.served_as = {"model": "gpt-stand-in-2025-01-01", "system_fingerprint": "fp_51e2"}
    generate_recorded()
    record = json.loads((folder / "tlg.parquet.provenance.json").read_text())
    assert record["endpoint"] == {
        "configured_model": "gpt-stand-in",
        "served": [{"model": "gpt-stand-in-2025-01-01", "system_fingerprint": "fp_51e2", "replies": 3}],
    }
    notes = served_model_notes({"closed": tmp_path / "results/generations/closed"})
    assert notes == {
        "closed": "closed: configured as gpt-stand-in, but the API served gpt-stand-in-2025-01-01 "
        "(system fingerprint fp_51e2): not the configured snapshot."
    }
    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "lengths.csv").write_text("model,words\nclosed,10\n")
    (tables / "other.csv").write_text("model,words\nmine,10\n")
    write_table_pages(tables, tmp_path / "pages", "ruler", served=notes)
    assert notes["closed"] in (tmp_path / "pages/lengths.html").read_text()
    assert "the API served" not in (tmp_path / "pages/other.html").read_text()
    # Served as configured (and fingerprinted): no note.
    ChatEndpointStandIn.served_as = {"system_fingerprint": "fp_51e2"}
    generate_recorded()
    assert json.loads((folder / "tlg.parquet.provenance.json").read_text())["endpoint"]["served"][0]["model"] == (
        "gpt-stand-in"
    )
    assert served_model_notes({"closed": tmp_path / "results/generations/closed"}) == {}
