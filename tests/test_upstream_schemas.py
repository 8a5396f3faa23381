"""Each upstream schema is defined once (reprolm.data.upstream): its check passes its own
fixture, and the builders and corpora read records only through its adapters."""

from __future__ import annotations

import pytest
import yaml

from reprolm.config import overlays
from reprolm.data.builders import BuildContext, build_chat_sft, build_instructions, build_rated_responses
from reprolm.data.corpus import plain_texts
from reprolm.data.sources import write_source
from reprolm.data.upstream import (
    UPSTREAM_SCHEMAS,
    gsm8k_stated_answer,
    make_fixture,
    schema_entries,
    schema_for_task,
    schemas_read,
    task_schemas,
)
from workflow_helpers import REPO

DEFAULT = overlays.load(REPO / "config/config.yaml", REPO)
PAPER = yaml.safe_load((REPO / "config/paper.yaml").read_text())


@pytest.mark.parametrize("name", [name for name in UPSTREAM_SCHEMAS if UPSTREAM_SCHEMAS[name].fixture])
def test_every_fixture_passes_its_own_schema_check(name):
    schema = UPSTREAM_SCHEMAS[name]
    # The options the default config gives the schema's fixture (some have required ones).
    options = next(
        (
            {k: v for k, v in spec["fixture"].items() if k not in ("n", "seed")}
            for spec in DEFAULT["sources"].values()
            if spec["schema"] == name
        ),
        {},
    )
    made = make_fixture(name, n=4, seed=1, **options)
    splits = made if isinstance(made, dict) else {"train": made}
    assert splits and all(records for records in splits.values())
    for records in splits.values():
        for record in records:
            assert schema.check(record) is None, (name, record)


def test_every_configured_source_names_a_defined_schema():
    for config in (DEFAULT, PAPER):
        for name, spec in config["sources"].items():
            assert spec["schema"] in UPSTREAM_SCHEMAS, name


def test_each_lm_eval_task_of_the_configs_reads_at_most_one_schema():
    import fnmatch

    tasks = {
        spec["task"]
        for config in (DEFAULT, PAPER)
        for suite in config.get("lm_eval_suites", {}).values()
        for spec in suite["tasks"]
    }
    assert len(tasks) >= 8
    for task in tasks:
        readers = [
            name
            for name in UPSTREAM_SCHEMAS
            if any(fnmatch.fnmatchcase(task, pattern) for pattern in UPSTREAM_SCHEMAS[name].lm_eval_tasks)
        ]
        assert len(readers) <= 1, (task, readers)
    assert schema_for_task("mmlu_high_school_physics") is UPSTREAM_SCHEMAS["mmlu"]
    assert schema_for_task("arc_challenge") is UPSTREAM_SCHEMAS["arc"]
    assert schema_for_task("not_a_task") is None


def _source(tmp_path, name, schema, n=3, **fixture):
    folder = tmp_path / name
    write_source({"name": name, "schema": schema, "fixture": {"n": n, "seed": 0, **fixture}}, folder)
    return folder


def test_builders_read_each_schema_through_its_adapter(tmp_path):
    prompts = _source(tmp_path, "mt", "mt_bench_prompts")
    built = build_instructions(BuildContext({"mt": prompts}, {"mt": "mt_bench_prompts"}, {}))["test"]
    assert [row["id"] for row in built] == [0, 1, 2]
    assert all(row["turns"][0] == row["instruction"] and len(row["turns"]) >= 1 for row in built)

    gsm8k = _source(tmp_path, "gsm8k", "gsm8k")
    chats = build_chat_sft(
        BuildContext(
            {"gsm8k": gsm8k},
            {"gsm8k": "gsm8k"},
            {"splits": {"train": "train"}, "question_template": "Q: {instruction}"},
        )
    )
    first = chats["train"][0]["messages"]
    assert first[0]["role"] == "user" and first[0]["content"].startswith("Q: ")
    assert first[1]["content"].endswith("The answer is: " + first[1]["content"].rsplit(": ", 1)[1])


def test_numina_cot_records_are_the_chats_gems_sft_trains_on(tmp_path):
    numina = _source(tmp_path, "numina", "numina_cot", splits=["train", "test"])
    chats = build_chat_sft(
        BuildContext({"numina": numina}, {"numina": "numina_cot"}, {"splits": {"train": "train", "test": "test"}})
    )
    assert {split: len(rows) for split, rows in chats.items()} == {"train": 3, "test": 3}
    first = chats["train"][0]["messages"]
    assert [turn["role"] for turn in first] == ["user", "assistant"]
    assert first[1]["content"].endswith("}$.") and "The answer is $\\boxed{" in first[1]["content"]


def test_a_schema_without_the_adapter_a_builder_needs_is_refused_naming_those_that_have_it(tmp_path):
    longform = _source(tmp_path, "longform", "longform", bin_centres=[10], max_words=20)
    with pytest.raises(
        ValueError,
        match="the instructions builder cannot read schema 'longform' \\(it has no "
        "instruction adapter\\); it reads arena_question, ultrafeedback_binarized, "
        "alpaca_eval, mt_bench_prompts, writing_prompts, trl_preference, trl_prompt_completion, gsm8k",
    ):
        build_instructions(BuildContext({"longform": longform}, {"longform": "longform"}, {}))
    with pytest.raises(
        ValueError,
        match="rated_responses cannot read schema 'longform'.*it reads helpsteer, "
        "feedback_bench, feedback_collection, rated_utterances",
    ):
        build_rated_responses(BuildContext({"longform": longform}, {"longform": "longform"}, {}))
    prompts = _source(tmp_path, "alpaca", "alpaca_eval")
    with pytest.raises(ValueError, match="a tokenizer corpus \\(source 'alpaca'\\) cannot read schema 'alpaca_eval'"):
        list(plain_texts({"alpaca": str(prompts)}, {"alpaca": "alpaca_eval"}))


def test_gsm8k_solutions_become_stated_answers_without_calculator_annotations():
    solution = "She has 3 + 4 = <<3+4=7>>7 apples.\n#### 7"
    assert gsm8k_stated_answer(solution) == "She has 3 + 4 = 7 apples.\nThe answer is: 7"


def test_a_jobs_fingerprint_names_the_schemas_its_sources_and_tasks_are_read_by():
    world_tasks = DEFAULT["sources"]["world_tasks"]
    assert schemas_read({"world_tasks": world_tasks}) == sorted({"text", *world_tasks["fixture"]["task_formats"]})
    assert schema_entries(["gsm8k", "arc", "gsm8k"]) == [
        ("reprolm.data.upstream", "ARC"),
        ("reprolm.data.upstream", "GSM8K"),
    ]
    assert task_schemas(["arc_challenge", "mmlu_miscellaneous", "truthfulqa_mc2", "not_a_task"]) == [
        "arc",
        "mmlu",
        "truthfulqa_mc",
    ]
    with pytest.raises(KeyError, match="unknown upstream schema 'gsm8'"):
        schema_entries(["gsm8"])


def test_the_nltk_data_of_a_tasks_checks_is_declared_on_the_schema_of_its_documents():
    """What the nltk_data rule fetches for a suite, and what the lm-eval bridge looks for
    before a task runs, is read from the entry that describes the task's documents."""
    from reprolm.config.lookups import nltk_data
    from reprolm.data.upstream import nltk_data_needed
    from reprolm.paths import nltk_data_dir

    assert nltk_data_needed("ifeval") == {"length_constraints:number_sentences": "tokenizers/punkt_tab"}
    assert nltk_data_needed("boolq") == {} and nltk_data_needed("not_a_task") == {}
    suite = {"tasks": [{"task": "ifeval"}, {"task": "boolq"}]}
    assert nltk_data(suite) == [nltk_data_dir("punkt_tab")]
    assert nltk_data({**suite, "nltk_data": []}) == []
