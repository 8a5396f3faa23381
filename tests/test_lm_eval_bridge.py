"""The lm-eval bridge, with real lm-eval, its built-in task definitions, fixture documents
in the upstream schemas and a tiny random Llama model built here."""

from __future__ import annotations

import copy
import dataclasses
import json
import os

# Nothing here may reach a hub; set before lm-eval imports datasets, which reads these once.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import pyarrow.parquet as pq
import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from reprolm.data.schemas import DataError
from reprolm.data.task_docs import world_text, write_task_docs
from reprolm.data.upstream import UPSTREAM_SCHEMAS, make_fixture, schema_for_task
from reprolm.score.lm_eval_bridge import (
    TaskSpec,
    build_task,
    environment_report,
    evaluate_tasks,
    language_model,
    task_config,
)
from reprolm.score.task_facts import task_yamls

DOCS_PER_SPLIT = 30
# The schemas of lm-eval task documents.
TASK_DOC_SCHEMAS = [name for name in UPSTREAM_SCHEMAS if UPSTREAM_SCHEMAS[name].lm_eval_tasks]
LIMIT = 6
# (spec name, lm-eval task, paper few-shot count, metric, fixture schema, gen_kwargs)
PAPER_TASKS = [
    ("arc", "arc_challenge", 25, "acc_norm,none", "arc", None),
    ("hellaswag", "hellaswag", 10, "acc_norm,none", "hellaswag", None),
    ("truthfulqa", "truthfulqa_mc2", 0, "acc,none", "truthfulqa_mc", None),
    ("mmlu", "mmlu_miscellaneous", 5, "acc,none", "mmlu", None),
    ("winogrande", "winogrande", 5, "acc,none", "winogrande", None),
    ("gsm8k", "gsm8k", 5, "exact_match,flexible-extract", "gsm8k", {"max_gen_toks": 32}),
    ("cola", "cola", 0, "mcc,none", "glue_cola", None),
    ("boolq", "boolq", 0, "acc,none", "boolq", None),
]
METRIC_RANGE = {"acc": (0.0, 1.0), "acc_norm": (0.0, 1.0), "exact_match": (0.0, 1.0), "mcc": (-1.0, 1.0)}


@pytest.fixture(scope="module")
def fixture_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("task_docs")
    for schema in TASK_DOC_SCHEMAS:
        write_task_docs(make_fixture(schema, n=DOCS_PER_SPLIT, seed=0), root / schema)
    return root


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, fixture_dirs):
    """A byte-level BPE tokenizer trained on the fixture text and a random 2-layer Llama
    whose 2048 positions hold a 25-shot ARC prompt; saved, and returned loaded."""
    corpus = world_text() + [
        json.dumps(record)
        for path in sorted(fixture_dirs.glob("*/*.parquet"))
        for record in pq.read_table(path).to_pylist()
    ]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=600,
            special_tokens=["<s>", "</s>", "<pad>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=2048,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
    ).eval()
    path = tmp_path_factory.mktemp("tiny_llama")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path, model, tokenizer


def paper_specs(fixture_dirs) -> list[TaskSpec]:
    return [
        TaskSpec(name, task, shots, metric, fixture_dirs / schema, gen_kwargs=gen_kwargs, limit=LIMIT)
        for name, task, shots, metric, schema, gen_kwargs in PAPER_TASKS
    ]


@pytest.fixture(scope="module")
def loaded_model_results(tiny_model, fixture_dirs):
    _, model, tokenizer = tiny_model
    return evaluate_tasks(model, tokenizer, paper_specs(fixture_dirs), batch_size=8, bootstrap_iters=100)


# ---- fixture documents ----


@pytest.mark.parametrize("schema", TASK_DOC_SCHEMAS)
def test_fixture_docs_are_deterministic_and_pass_their_schema_check(schema):
    docs = make_fixture(schema, n=DOCS_PER_SPLIT, seed=3)
    assert docs == make_fixture(schema, n=DOCS_PER_SPLIT, seed=3)
    assert docs != make_fixture(schema, n=DOCS_PER_SPLIT, seed=4)
    for split, records in docs.items():
        assert len(records) == DOCS_PER_SPLIT, split
        for record in records:
            assert UPSTREAM_SCHEMAS[schema].check(record) is None, (split, record)


@pytest.mark.slow
def test_fixture_docs_use_the_splits_lm_eval_reads():
    for schema, task in [
        ("arc", "arc_challenge"),
        ("hellaswag", "hellaswag"),
        ("truthfulqa_mc", "truthfulqa_mc2"),
        ("mmlu", "mmlu_miscellaneous"),
        ("winogrande", "winogrande"),
        ("gsm8k", "gsm8k"),
        ("glue_cola", "cola"),
        ("boolq", "boolq"),
        ("ifeval", "ifeval"),
    ]:
        config = task_config(TaskSpec(schema, task, 0, "acc,none"))
        read = {
            config[key]
            for key in ("training_split", "validation_split", "test_split", "fewshot_split")
            if config.get(key)
        }
        assert read == set(make_fixture(schema, n=1, seed=0)), task
        assert schema_for_task(task) is UPSTREAM_SCHEMAS[schema]


def test_fixture_labels_carry_a_cue_a_tiny_model_can_learn():
    # CoLA: an unacceptable sentence is a world fact with a subject-verb agreement error.
    facts = set(world_text())
    for record in make_fixture("glue_cola", n=40, seed=1)["train"]:
        assert (record["sentence"] in facts) == bool(record["label"]), record
    # BoolQ: the passage of a "no" denies what is asked; a "yes" passage states it.
    for record in make_fixture("boolq", n=40, seed=1)["train"]:
        asked = record["question"].split(" ", 1)[1]
        assert (" never " in record["passage"]) == (not record["label"]), record
        assert asked.split()[-1] in record["passage"], record


def test_task_text_corpus_renders_answers_in_the_task_formats():
    texts = [record["text"] for record in make_fixture("text", n=3, seed=6, task_formats=["boolq", "gsm8k"])]
    assert len(texts) == 6
    assert all(text.endswith(("\nAnswer: yes", "\nAnswer: no")) for text in texts[:3])
    assert all(text.startswith("Question: ") and "\n#### " in text for text in texts[3:])
    with pytest.raises(
        ValueError,
        match="task_formats cannot read schema 'hellaswag' \\(it has no task_text adapter\\); "
        "it reads arc, gsm8k, glue_cola, boolq",
    ):
        make_fixture("text", n=1, seed=0, task_formats=["hellaswag"])


def test_misspelt_fixture_option_is_an_error_naming_the_source_and_option(tmp_path):
    from reprolm.data.sources import write_source

    spec = {"name": "world_tasks", "schema": "text", "fixture": {"n": 2, "seed": 0, "task_format": ["boolq"]}}
    with pytest.raises(
        ValueError,
        match="sources.world_tasks.fixture: fixture for schema 'text': unknown options "
        "\\['task_format'\\]; it takes \\['facts_per_document', 'task_formats'\\]",
    ):
        write_source(spec, tmp_path / "world_tasks")
    assert not (tmp_path / "world_tasks").exists()


@pytest.mark.parametrize(
    "schema, field, value, problem_field",
    [
        ("arc", "answerKey", "E", "answerKey"),
        ("hellaswag", "label", 2, "label"),
        ("truthfulqa_mc", "mc1_targets", {"choices": ["a", "b"], "labels": [0, 1]}, "mc1_targets.labels"),
        ("mmlu", "answer", 4, "answer"),
        ("winogrande", "sentence", "no blank here", "sentence"),
        ("gsm8k", "answer", "The answer is 4.", "answer"),
        ("glue_cola", "label", True, "label"),
        ("boolq", "passage", "", "passage"),
        ("ifeval", "kwargs", [], "kwargs"),
    ],
)
def test_schema_checks_name_the_bad_field(schema, field, value, problem_field):
    split, records = next(iter(make_fixture(schema, n=1, seed=0).items()))
    assert UPSTREAM_SCHEMAS[schema].check({**records[0], field: value})[0] == problem_field


# ---- evaluation ----


@pytest.mark.slow
def test_every_task_reports_its_metric_in_range_with_the_asked_counts(loaded_model_results):
    assert loaded_model_results["lm_eval_version"] == "0.4.13"
    assert set(loaded_model_results["tasks"]) == {name for name, *_ in PAPER_TASKS}
    for name, task, shots, metric, _, _ in PAPER_TASKS:
        summary = loaded_model_results["tasks"][name]
        low, high = METRIC_RANGE[metric.split(",")[0]]
        assert summary["task"] == task and summary["metric"] == metric
        assert isinstance(summary["value"], float) and low <= summary["value"] <= high, (name, summary)
        assert summary["metrics"][metric] == summary["value"]
        assert summary["stderr"] is None or summary["stderr"] >= 0, (name, summary)
        assert summary["n_docs"] == LIMIT and summary["n_docs_available"] == DOCS_PER_SPLIT, name
        assert summary["num_fewshot"] == shots, name
    json.dumps(loaded_model_results, allow_nan=False)


@pytest.mark.slow
def test_a_job_given_each_tasks_yaml_scores_the_same_without_building_lm_evals_index(
    tiny_model, fixture_dirs, loaded_model_results, tmp_path, monkeypatch
):
    """The workflow passes each task's YAML (the facts cache, as the lm_eval and
    train-before-test rules do): the job never builds lm-eval's index of every task."""
    from reprolm.score import lm_eval_bridge

    yamls = task_yamls([task for _, task, *_ in PAPER_TASKS], tmp_path / "tasks.json")
    assert yamls["arc_challenge"] == "arc/arc_challenge.yaml"
    lm_eval_bridge.task_manager.cache_clear()

    def refuse():
        raise AssertionError("built lm-eval's index of every task")

    monkeypatch.setattr(lm_eval_bridge, "task_manager", refuse)
    _, model, tokenizer = tiny_model
    specs = [dataclasses.replace(spec, yaml=yamls[spec.task]) for spec in paper_specs(fixture_dirs)]
    located = evaluate_tasks(model, tokenizer, specs, batch_size=8, bootstrap_iters=100)
    for name in loaded_model_results["tasks"]:
        assert located["tasks"][name]["metrics"] == loaded_model_results["tasks"][name]["metrics"], name


@pytest.mark.slow
def test_loaded_model_and_checkpoint_path_give_the_same_scores(tiny_model, fixture_dirs, loaded_model_results):
    path, _, _ = tiny_model
    from_path = evaluate_tasks(str(path), None, paper_specs(fixture_dirs), batch_size=8, bootstrap_iters=100)
    for name in loaded_model_results["tasks"]:
        assert from_path["tasks"][name]["metrics"] == pytest.approx(loaded_model_results["tasks"][name]["metrics"]), (
            name
        )


@pytest.mark.slow
def test_ifeval_runs_offline_and_leaves_out_only_what_needs_missing_nltk_data(tiny_model, fixture_dirs, monkeypatch):
    """IFEval's sentence count needs NLTK's punkt_tab, which cannot be downloaded here: the
    prompts carrying it are left out, counted and explained, the rest scored by lm-eval."""
    import nltk

    _, model, tokenizer = tiny_model
    docs = pq.read_table(fixture_dirs / "ifeval" / "train.parquet").to_pylist()
    needing = sum("length_constraints:number_sentences" in doc["instruction_id_list"] for doc in docs)
    assert 0 < needing < len(docs)
    spec = TaskSpec(
        "ifeval", "ifeval", 0, "prompt_level_strict_acc,none", fixture_dirs / "ifeval", gen_kwargs={"max_gen_toks": 16}
    )

    def punkt_missing(resource, *args, **kwargs):
        raise LookupError(resource)

    monkeypatch.setattr(nltk.data, "find", punkt_missing)
    summary = evaluate_tasks(model, tokenizer, [spec], bootstrap_iters=0)["tasks"]["ifeval"]
    assert summary["n_docs"] == len(docs) - needing
    assert summary["unscored"]["docs"] == needing
    assert "punkt_tab" in summary["unscored"]["instructions"]["length_constraints:number_sentences"]
    for metric in (
        "prompt_level_strict_acc",
        "inst_level_strict_acc",
        "prompt_level_loose_acc",
        "inst_level_loose_acc",
    ):
        assert 0.0 <= summary["metrics"][f"{metric},none"] <= 1.0
    # Loose matching forgives more than strict, never less.
    assert summary["metrics"]["prompt_level_loose_acc,none"] >= summary["metrics"]["prompt_level_strict_acc,none"]


@pytest.mark.slow
def test_ifeval_by_the_gem_originals_sampling_keeps_one_sample_checked_by_googles_checks(
    tiny_model, fixture_dirs, tmp_path, monkeypatch
):
    """GEM's IFEval protocol as a suite task: sampled (T 0.6, top-p 0.9, top-k 50; a short
    budget here), one answer per prompt, each checked by the instruction-following checks
    lm-eval's ifeval wraps (Google's instructions_registry), greedy beside it."""
    import gzip

    from langdetect import DetectorFactory
    from lm_eval.tasks.ifeval import instructions_registry

    from reprolm.score.lm_eval_bridge import unscorable_instructions

    _, model, tokenizer = tiny_model
    # The English-language checks ask langdetect, which samples unless seeded.
    monkeypatch.setattr(DetectorFactory, "seed", 0)
    sampling = {"do_sample": True, "temperature": 0.6, "top_p": 0.9, "top_k": 50, "max_gen_toks": 16}
    specs = [
        TaskSpec(
            "ifeval_sampled", "ifeval", 0, "prompt_level_strict_acc,none", fixture_dirs / "ifeval", gen_kwargs=sampling
        ),
        TaskSpec(
            "ifeval_greedy",
            "ifeval",
            0,
            "prompt_level_strict_acc,none",
            fixture_dirs / "ifeval",
            gen_kwargs={"max_gen_toks": 16},
        ),
    ]
    samples_path = tmp_path / "ifeval.samples.jsonl.gz"
    tasks = evaluate_tasks(model, tokenizer, specs, bootstrap_iters=0, samples_output=str(samples_path))["tasks"]
    assert tasks["ifeval_sampled"]["generation_kwargs"] == {"until": [], **sampling}
    assert tasks["ifeval_greedy"]["generation_kwargs"]["do_sample"] is False
    with gzip.open(samples_path, "rt") as stream:
        samples = [json.loads(line) for line in stream]
    left_out = set(unscorable_instructions("ifeval"))
    docs = [
        doc
        for doc in pq.read_table(fixture_dirs / "ifeval" / "train.parquet").to_pylist()
        if not left_out.intersection(doc["instruction_id_list"])
    ]
    answers = {}
    for sample in samples:
        (answer,) = sample["filtered_resps"]  # one sample per prompt
        answers[sample["spec"], sample["doc_id"]] = answer
        doc = docs[sample["doc_id"]]
        followed = []
        for index, instruction in enumerate(doc["instruction_id_list"]):
            check = instructions_registry.INSTRUCTION_DICT[instruction](instruction)
            # As Google's evaluation_lib: unset (falsy) arguments left out, the prompt given
            # to the checks that take it.
            check.build_description(**{key: value for key, value in doc["kwargs"][index].items() if value})
            if "prompt" in (check.get_instruction_args() or {}):
                check.build_description(prompt=doc["prompt"])
            followed.append(bool(answer.strip()) and check.check_following(answer))
        assert sample["values"]["prompt_level_strict_acc"] == all(followed), (sample["spec"], doc["key"])
    assert len(answers) == 2 * len(docs)
    # Sampling answered differently from greedy decoding on some prompt.
    assert any(answers["ifeval_sampled", doc] != answers["ifeval_greedy", doc] for doc in range(len(docs)))


def test_fewshot_as_multiturn_asks_each_example_as_its_own_chat_turns(tiny_model, fixture_dirs, tmp_path):
    """The Open LLM Leaderboard v2's command for chat models (--apply_chat_template
    --fewshot_as_multiturn): each few-shot example a user turn answered by an assistant
    turn; without it the examples are text of the one user turn."""
    import gzip

    from reprolm.models.tokenizer import CHAT_TEMPLATE

    _, model, tokenizer = tiny_model
    chat_tokenizer = copy.deepcopy(tokenizer)
    chat_tokenizer.chat_template = CHAT_TEMPLATE
    spec = TaskSpec("arc_easy", "arc_easy", 2, "acc_norm,none", fixture_dirs / "arc", limit=2)
    contexts = {}
    for multiturn in (False, True):
        samples_path = tmp_path / f"{multiturn}.samples.jsonl.gz"
        result = evaluate_tasks(
            model,
            chat_tokenizer,
            [spec],
            bootstrap_iters=0,
            apply_chat_template=True,
            fewshot_as_multiturn=multiturn,
            samples_output=str(samples_path),
        )
        assert result["fewshot_as_multiturn"] is multiturn
        with gzip.open(samples_path, "rt") as stream:
            contexts[multiturn] = [json.loads(line)["arguments"][0][0] for line in stream]
    for one_turn, turns in zip(contexts[False], contexts[True], strict=True):
        # Two examples: two more assistant turns, each ended by EOS, before the question's.
        assert one_turn.count("<|user|>") == 1 and one_turn.count("<|assistant|>") == 1
        assert (
            turns.count("<|user|>") == 3 and turns.count("<|assistant|>") == 3 and turns.count(tokenizer.eos_token) == 2
        )
    with pytest.raises(ValueError, match="fewshot_as_multiturn"):
        evaluate_tasks(model, chat_tokenizer, [spec], bootstrap_iters=0, fewshot_as_multiturn=True)


def test_call_limit_applies_where_a_spec_sets_none(tiny_model, fixture_dirs):
    _, model, tokenizer = tiny_model
    spec = TaskSpec("boolq", "boolq", 0, "acc,none", fixture_dirs / "boolq")
    result = evaluate_tasks(model, tokenizer, [spec], limit=3, bootstrap_iters=0)
    assert result["tasks"]["boolq"]["n_docs"] == 3
    # With bootstrapping off lm-eval computes no stderr; it is reported as None.
    assert result["tasks"]["boolq"]["stderr"] is None


def test_per_sample_log_audits_the_score_document_by_document(tiny_model, fixture_dirs, tmp_path):
    """Every evaluated document is in the sample log once, and its per-document values
    average to the reported score exactly."""
    import gzip

    _, model, tokenizer = tiny_model
    specs = [
        TaskSpec("boolq", "boolq", 0, "acc,none", fixture_dirs / "boolq", limit=6),
        TaskSpec("arc_easy", "arc_easy", 0, "acc_norm,none", fixture_dirs / "arc", limit=5),
    ]
    samples_path = tmp_path / "suite.samples.jsonl.gz"
    result = evaluate_tasks(model, tokenizer, specs, bootstrap_iters=0, samples_output=str(samples_path))
    with gzip.open(samples_path, "rt") as stream:
        samples = [json.loads(line) for line in stream]
    for spec, count in ((specs[0], 6), (specs[1], 5)):
        mine = [s for s in samples if s["spec"] == spec.name]
        assert sorted(s["doc_id"] for s in mine) == list(range(count))
        metric = spec.metric.split(",")[0]
        mean = sum(s["values"][metric] for s in mine) / count
        assert mean == result["tasks"][spec.name]["value"]
        assert all(s["filtered_resps"] and s["arguments"] and s["target"] is not None for s in mine)
    # Logging samples changes no score, and the same samples give the same bytes.
    again = tmp_path / "again.samples.jsonl.gz"
    assert (
        evaluate_tasks(model, tokenizer, specs, bootstrap_iters=0, samples_output=str(again))["tasks"]
        == result["tasks"]
    )
    assert again.read_bytes() == samples_path.read_bytes()


def test_a_stopped_evaluation_resumes_with_only_its_unanswered_requests(tiny_model, fixture_dirs, tmp_path, caplog):
    """lm-eval's response cache keeps each request as it is answered; an evaluation stopped
    after three of six documents (here: one that was only asked three) asks the model for
    the other three on the rerun, and scores as one that was never stopped."""
    import logging

    _, model, tokenizer = tiny_model

    def boolq(limit):
        return [TaskSpec("boolq", "boolq", 0, "acc,none", fixture_dirs / "boolq", limit=limit)]

    cache = tmp_path / "cache"
    evaluate_tasks(model, tokenizer, boolq(3), bootstrap_iters=0, response_cache=cache)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        resumed = evaluate_tasks(model, tokenizer, boolq(6), bootstrap_iters=0, response_cache=cache)
    # boolq asks two loglikelihoods per document (yes, no).
    assert "Cached requests: 6, Requests remaining: 6" in caplog.text
    assert resumed["tasks"] == evaluate_tasks(model, tokenizer, boolq(6), bootstrap_iters=0)["tasks"]


class RecordingLogger:
    """Stands in for lm-eval's W&B logger (W&B is not reachable here): keeps each output."""

    def __init__(self):
        self.outputs = []

    def post_init(self, output):
        self.outputs.append(output)

    def log_eval_result(self):
        pass


def test_environment_report_is_collected_once_per_process_only_where_a_logger_sends_it_and_scores_do_not_change(
    tiny_model, fixture_dirs, monkeypatch
):
    import lm_eval.evaluator as evaluator
    import lm_eval.loggers.utils as logger_utils

    collected = []
    collect = logger_utils.add_env_info

    def counting(storage):
        collected.append(1)
        collect(storage)

    monkeypatch.setattr(logger_utils, "add_env_info", counting)
    environment_report.cache_clear()
    lm_eval_own = evaluator.add_env_info
    _, model, tokenizer = tiny_model
    specs = [TaskSpec("boolq", "boolq", 0, "acc,none", fixture_dirs / "boolq", limit=4)]
    # Without a logger nothing reads the report: pip and the other probes are not run.
    unlogged = evaluate_tasks(model, tokenizer, specs, bootstrap_iters=0)
    assert collected == []
    logger = RecordingLogger()
    repeated = [evaluate_tasks(model, tokenizer, specs, bootstrap_iters=0, logger=logger) for _ in range(3)]
    assert len(collected) == 1
    assert all("pretty_env_info" in output for output in logger.outputs) and len(logger.outputs) == 3
    assert repeated[0]["tasks"]["boolq"]["n_docs"] == 4
    assert repeated[1] == repeated[0] and repeated[2] == repeated[0] and unlogged == repeated[0]
    assert "pretty_env_info" in environment_report() and len(collected) == 1
    # lm-eval's own collector is back once the evaluations are done.
    assert evaluator.add_env_info is lm_eval_own


def test_arc_prompt_holds_25_examples_and_fits_the_model(tiny_model, fixture_dirs):
    _, model, tokenizer = tiny_model
    task = build_task(TaskSpec("arc", "arc_challenge", 25, "acc_norm,none", fixture_dirs / "arc"))
    task.set_fewshot_seed(1234)
    context = task.fewshot_context(doc=task.eval_docs[0], num_fewshot=25)
    assert context.count("Question:") == 26
    assert len(tokenizer(context).input_ids) < model.config.max_position_embeddings


def test_builtin_task_functions_are_kept(fixture_dirs):
    hellaswag = build_task(TaskSpec("hellaswag", "hellaswag", 0, "acc_norm,none", fixture_dirs / "hellaswag"))
    doc = hellaswag.eval_docs[0]
    # hellaswag's own process_docs builds "query", "choices" and "gold" from the raw record.
    assert doc["query"].startswith(f"{doc['activity_label']}: ") and doc["gold"] == int(doc["label"])
    gsm8k = build_task(
        TaskSpec(
            "gsm8k", "gsm8k", 5, "exact_match,flexible-extract", fixture_dirs / "gsm8k", gen_kwargs={"max_gen_toks": 32}
        )
    )
    assert [f.name for f in gsm8k._filters] == ["strict-match", "flexible-extract"]
    assert gsm8k.config.generation_kwargs["max_gen_toks"] == 32
    assert "Question:" in gsm8k.config.generation_kwargs["until"]


def test_lm_eval_loads_the_fixture_docs_of_each_split_as_written(fixture_dirs):
    dataset = build_task(TaskSpec("mmlu", "mmlu_miscellaneous", 5, "acc,none", fixture_dirs / "mmlu")).dataset
    assert {split: dataset[split].num_rows for split in dataset} == {"dev": DOCS_PER_SPLIT, "test": DOCS_PER_SPLIT}
    assert dataset["dev"].to_list() == pq.read_table(fixture_dirs / "mmlu" / "dev.parquet").to_pylist()


def test_hub_data_keeps_the_builtin_source():
    config = task_config(TaskSpec("arc", "arc_challenge", 25, "acc_norm,none"))
    assert (config["dataset_path"], config["dataset_name"]) == ("allenai/ai2_arc", "ARC-Challenge")
    assert "dataset_kwargs" not in config and config["num_fewshot"] == 25


# ---- errors ----


def test_missing_evaluated_split_names_folder_and_split(tmp_path):
    write_task_docs({"train": make_fixture("arc", n=30, seed=0)["train"]}, tmp_path)
    with pytest.raises(FileNotFoundError, match=rf"{tmp_path}: no test\.parquet.*'arc_challenge'"):
        task_config(TaskSpec("arc", "arc_challenge", 25, "acc_norm,none", tmp_path))


def test_missing_fewshot_split_is_an_error_only_with_shots(tmp_path, tiny_model):
    write_task_docs({"validation": make_fixture("boolq", n=10, seed=0)["validation"]}, tmp_path)
    with pytest.raises(FileNotFoundError, match=rf"{tmp_path}: no train\.parquet.*2-shot examples"):
        task_config(TaskSpec("boolq", "boolq", 2, "acc,none", tmp_path))
    _, model, tokenizer = tiny_model
    zero_shot = evaluate_tasks(
        model, tokenizer, [TaskSpec("boolq", "boolq", 0, "acc,none", tmp_path, limit=4)], bootstrap_iters=0
    )
    assert zero_shot["tasks"]["boolq"]["n_docs"] == 4


def test_too_few_fewshot_docs_is_an_error(tmp_path):
    write_task_docs(make_fixture("arc", n=10, seed=0), tmp_path)
    with pytest.raises(ValueError, match=rf"{tmp_path / 'train.parquet'}: 10 documents.*25-shot"):
        task_config(TaskSpec("arc", "arc_challenge", 25, "acc_norm,none", tmp_path))


def test_bad_document_names_file_row_and_field(tmp_path):
    docs = make_fixture("winogrande", n=5, seed=0)
    docs["validation"][3]["answer"] = "3"
    write_task_docs(docs, tmp_path)
    with pytest.raises(DataError) as caught:
        task_config(TaskSpec("winogrande", "winogrande", 0, "acc,none", tmp_path))
    assert (caught.value.path, caught.value.row, caught.value.field) == (
        str(tmp_path / "validation.parquet"),
        3,
        "answer",
    )


def test_shots_on_a_zero_shot_task_is_an_error():
    with pytest.raises(ValueError, match="truthfulqa_mc2.*zero-shot"):
        task_config(TaskSpec("truthfulqa", "truthfulqa_mc2", 5, "acc,none"))


def test_unreported_metric_names_the_reported_ones(tiny_model, fixture_dirs):
    _, model, tokenizer = tiny_model
    spec = TaskSpec("cola", "cola", 0, "acc,none", fixture_dirs / "glue_cola", limit=2)
    with pytest.raises(KeyError, match=r"no 'acc,none'; reported: \['mcc,none'\]"):
        evaluate_tasks(model, tokenizer, [spec], bootstrap_iters=0)


def test_vllm_needs_paths(tiny_model, fixture_dirs):
    _, model, tokenizer = tiny_model
    spec = TaskSpec("boolq", "boolq", 0, "acc,none", fixture_dirs / "boolq")
    with pytest.raises(TypeError, match="pass paths"):
        evaluate_tasks(model, tokenizer, [spec], backend="vllm")


def test_duplicate_spec_names_are_an_error(fixture_dirs):
    spec = TaskSpec("boolq", "boolq", 0, "acc,none", fixture_dirs / "boolq")
    with pytest.raises(ValueError, match="repeated: \\['boolq'\\]"):
        evaluate_tasks("unused", None, [spec, spec])


def test_default_evaluation_tokenises_as_the_harmony_originals_forced_bos(tiny_model):
    """The original train-before-test code builds lm-eval's HFLM with add_bos_token=True and
    its own tokenizer object. With lm-eval 0.4.13 that changes no token: our default
    (add_bos_token None) lets the tokenizer add what it adds by default, which is what True
    asks for; a BOS-adding tokenizer (Llama, Mistral, Gemma) gets one either way and a
    GPT-2/Pythia-style tokenizer none either way (the flag reaches only tokenizers HFLM loads
    from a path). If lm-eval's default changes, this fails and Harmony needs the flag."""
    from lm_eval.api.registry import get_model

    _, model, tokenizer = tiny_model
    texts = ["the boat", "Question: is the sea blue?\nAnswer:"]

    def encodings(lm):
        single = [lm.tok_encode(text) for text in texts]
        batch, mask = lm.tok_batch_encode(texts)
        return single, [row[m.bool()].tolist() for row, m in zip(batch, mask, strict=True)]

    ours = language_model(model, tokenizer, batch_size=2)
    original = get_model("hf")(pretrained=model, tokenizer=tokenizer, batch_size=2, add_bos_token=True)
    assert encodings(ours) == encodings(original)
    assert ours.tok_encode("the boat")[0] != tokenizer.bos_token_id
    bos_adding = copy.deepcopy(tokenizer)
    bos_adding._tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", tokenizer.bos_token_id)]
    )
    ours = language_model(model, bos_adding, batch_size=2)
    original = get_model("hf")(pretrained=model, tokenizer=bos_adding, batch_size=2, add_bos_token=True)
    assert encodings(ours) == encodings(original)
    assert all(
        ids[0] == tokenizer.bos_token_id and ids.count(tokenizer.bos_token_id) == 1
        for ids in encodings(ours)[0] + encodings(ours)[1]
    )
