"""Train-before-test: splits as the study's code makes them, training text from lm-eval's own
templates, the best-epoch rule, the refusal of tasks without training data, and one real
LoRA run on a tiny model with lm-eval after every epoch."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from reprolm.data import fixture_world
from reprolm.data.task_docs import write_task_docs
from reprolm.data.upstream import make_fixture
from reprolm.models.tiny import build_tiny_model
from reprolm.models.tokenizer import train_bpe_tokenizer
from reprolm.score.lm_eval_bridge import TaskSpec
from reprolm.score.task_facts import refuse_metrics_not_reported, refuse_tasks_without_training_split, task_facts
from reprolm.studies.harmony import train_before_test as tbt

# Runs in the SLURM tests' process (scripts/run-tests.sh), which waits on the cluster.
pytestmark = pytest.mark.beside_slurm


@pytest.fixture(scope="module")
def docs_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("docs")
    for schema, n in (("arc", 30), ("winogrande", 12), ("glue_cola", 30), ("boolq", 10)):
        write_task_docs(make_fixture(schema, n=n, seed=3), root / schema)
    return root


def test_eighty_twenty_split_with_numpy_seed_when_no_separate_test(docs_dir):
    # cola has train and validation only: train docs are split 80/20, validation is the test set.
    splits = tbt.harmony_splits(TaskSpec("cola", "cola", 0, "mcc,none", docs_dir / "glue_cola"), {})
    raw_train = splits.task.dataset["train"]
    np.random.seed(0)
    order = np.random.permutation(len(raw_train))
    assert splits.sizes() == {"train": 24, "valid": 6, "test": 30}
    assert splits.train["idx"] == [raw_train[int(i)]["idx"] for i in order[:24]]
    assert splits.valid["idx"] == [raw_train[int(i)]["idx"] for i in order[24:30]]
    assert splits.test["idx"] == splits.task.dataset["validation"]["idx"]


def test_task_with_validation_and_test_uses_them_and_caps_by_permutation(docs_dir):
    spec = TaskSpec("arc_easy", "arc_easy", 0, "acc_norm,none", docs_dir / "arc")
    splits = tbt.harmony_splits(spec, {"max_num_train": 10, "max_num_valid": 5, "max_num_test": None})
    assert splits.sizes() == {"train": 10, "valid": 5, "test": 30}
    np.random.seed(0)
    expected = np.random.permutation(30)[:10]
    assert splits.train["id"] == [splits.task.dataset["train"][int(i)]["id"] for i in expected]
    assert splits.test["id"] == splits.task.dataset["test"]["id"]


def test_training_text_maps_target_index_through_choices(docs_dir):
    splits = tbt.harmony_splits(TaskSpec("arc_easy", "arc_easy", 0, "acc_norm,none", docs_dir / "arc"), {})
    doc = tbt.processed(splits.task, splits.train)[0]
    question, target = tbt.training_example(splits.task, doc)
    assert question.startswith("Question: ") and question.endswith("Answer:")
    assert target == doc["choices"]["text"][doc["choices"]["label"].index(doc["answerKey"])]
    record = tbt.training_records(splits.task, splits.train.select([0]), chat_template=False, completion_only=False)[0]
    assert record == {"text": question + " " + target}
    split_record = tbt.training_records(
        splits.task, splits.train.select([0]), chat_template=False, completion_only=True
    )[0]
    assert split_record == {"prompt": question, "completion": " " + target}


def test_winogrande_trains_on_the_correct_filled_in_prefix(docs_dir):
    splits = tbt.harmony_splits(TaskSpec("winogrande", "winogrande", 0, "acc,none", docs_dir / "winogrande"), {})
    doc = tbt.processed(splits.task, splits.train)[0]
    prefix, continuation = tbt.training_example(splits.task, doc)
    blank = doc["sentence"].index("_")
    correct = doc["option1"] if doc["answer"] == "1" else doc["option2"]
    assert prefix == doc["sentence"][:blank] + correct
    assert continuation == doc["sentence"][blank + 1 :].strip()


def test_best_epoch_is_highest_validation_then_earliest():
    epochs = [
        {"epoch": 1, "valid": 0.5, "test": 0.1},
        {"epoch": 2, "valid": 0.7, "test": 0.2},
        {"epoch": 3, "valid": 0.7, "test": 0.9},
    ]
    assert tbt.best_epoch(epochs)["epoch"] == 2


def test_a_resume_from_a_stop_inside_an_epoch_keeps_only_the_finished_epochs(tmp_path):
    """A stop signal checkpoints the step it arrives in (epoch 2.6 here): epochs 1 and 2 were
    evaluated, epoch 3 was not (its evaluation, saved before a kill, is dropped)."""
    from reprolm.studies.harmony.train_before_test import EpochProgress

    progress = EpochProgress(tmp_path)
    progress.direct = {"valid": 0.1, "test": 0.1}
    progress.epochs = [{"epoch": e, "valid": e / 10, "test": e / 10} for e in (1, 2, 3)]
    progress.save()
    checkpoint = tmp_path / "checkpoint-26"
    checkpoint.mkdir()
    (checkpoint / "trainer_state.json").write_text(json.dumps({"epoch": 2.6, "global_step": 26}))
    resumed = EpochProgress(tmp_path)
    resumed.resume_at(str(checkpoint))
    assert [e["epoch"] for e in resumed.epochs] == [1, 2]
    assert resumed.direct == {"valid": 0.1, "test": 0.1}


def test_tasks_without_training_split_are_refused(tmp_path):
    cache = tmp_path / "tasks.json"
    facts = task_facts(["arc_easy", "truthfulqa_mc2"], cache)
    assert {task: f["training_split"] for task, f in facts.items()} == {"arc_easy": True, "truthfulqa_mc2": False}
    assert "truthfulqa_mc2" in json.loads(cache.read_text()).popitem()[1]
    tasks = [{"name": "arc", "task": "arc_easy"}, {"name": "tqa", "task": "truthfulqa_mc2"}]
    with pytest.raises(ValueError, match=r"harmony.tasks: .*\['tqa'\]; configured tasks that have one: \['arc'\]"):
        refuse_tasks_without_training_split(tasks, cache, "harmony.tasks")


def test_a_tasks_facts_are_read_without_importing_its_code(tmp_path, monkeypatch):
    """The workflow asks the facts while it parses: importing IFEval's module would try an
    NLTK download there."""
    import lm_eval.utils

    def refuse(*args, **kwargs):
        raise AssertionError(f"imported a task's code: {args}")

    monkeypatch.setattr(lm_eval.utils, "import_function", refuse)
    facts = task_facts(["ifeval"], tmp_path / "tasks.json")
    assert facts["ifeval"] == {
        "training_split": False,
        "metrics": [
            "prompt_level_strict_acc,none",
            "inst_level_strict_acc,none",
            "prompt_level_loose_acc,none",
            "inst_level_loose_acc,none",
        ],
        "yaml": "ifeval/ifeval.yaml",
    }


def test_a_metric_the_task_does_not_report_is_refused_before_it_runs(tmp_path):
    cache = tmp_path / "tasks.json"
    facts = task_facts(["arc_easy", "gsm8k", "cola"], cache)
    assert facts["arc_easy"]["metrics"] == ["acc,none", "acc_norm,none"]
    assert facts["gsm8k"]["metrics"] == ["exact_match,strict-match", "exact_match,flexible-extract"]
    assert facts["cola"]["metrics"] == ["mcc,none"]
    configured = {
        "lm_eval_suites.general.tasks[0]": {"task": "gsm8k", "metric": "exact_match,flexible-extract"},
        "harmony.tasks[2]": {"task": "cola", "metric": "acc,none"},
    }
    with pytest.raises(ValueError) as error:
        refuse_metrics_not_reported(configured, cache)
    assert str(error.value) == (
        "harmony.tasks[2].metric: lm-eval's task 'cola' does not report 'acc,none'; it reports ['mcc,none']"
    )
    del configured["harmony.tasks[2]"]
    refuse_metrics_not_reported(configured, cache)


RESUME_TIMEOUT_S = 120


def tiny_harmony_run(root: Path, docs: Path, name: str) -> dict:
    """Keyword arguments of one LoRA train-before-test run of a tiny Llama on boolq."""
    if not (root / "model").exists():
        rng = random.Random(0)
        tokenizer = train_bpe_tokenizer([fixture_world.passage(rng, 30) for _ in range(200)], 500)
        model = build_tiny_model(
            {
                "architecture": "llama",
                "hidden_size": 32,
                "num_layers": 1,
                "num_heads": 2,
                "intermediate_size": 64,
                "max_positions": 512,
            },
            tokenizer,
            seed=0,
        )
        model.save_pretrained(root / "model")
        tokenizer.save_pretrained(root / "model")
    recipe = {
        "lora": {"r": 8, "alpha": 32, "dropout": 0.1},
        "learning_rate": 1e-3,
        "num_train_epochs": 3,
        "per_device_train_batch_size": 4,
        "max_length": 128,
        "max_num_valid": 8,
        "max_num_test": 8,
    }
    return {
        "model_path": str(root / "model"),
        "spec": TaskSpec("boolq", "boolq", 0, "acc,none", str(docs / "boolq")),
        "recipe": recipe,
        "seed": 0,
        "output": str(root / f"{name}.json"),
        "checkpoint_root": str(root / "checkpoints" / name),
    }


KILLED_RUN = """
import json, sys
from reprolm.score.lm_eval_bridge import TaskSpec
from reprolm.studies.harmony.train_before_test import train_before_test
run = json.loads(sys.argv[1])
train_before_test(**{**run, "spec": TaskSpec(**run["spec"])})
"""


@pytest.mark.slow
def test_killed_lora_train_before_test_resumes_at_its_last_epoch_to_the_same_scores(docs_dir, tmp_path):
    """A run SIGKILLed once its first epoch's checkpoint is complete is rerun: it keeps the
    direct and epoch-1 scores it had saved, trains epochs 2-3 only, and reports what an
    uninterrupted run reports; its checkpoints are gone once the result is written."""
    import dataclasses
    import os
    import signal
    import subprocess
    import sys
    import time

    from reprolm.train.finetune import latest_checkpoint

    whole, killed = tiny_harmony_run(tmp_path, docs_dir, "whole"), tiny_harmony_run(tmp_path, docs_dir, "killed")
    payload = json.dumps({**killed, "spec": dataclasses.asdict(killed["spec"])})
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, payload],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    reference = tbt.train_before_test(**whole)
    run_dir = Path(killed["checkpoint_root"]) / tbt.run_key(killed["model_path"], killed["spec"], killed["recipe"], 0)
    deadline = time.monotonic() + RESUME_TIMEOUT_S
    while latest_checkpoint(run_dir) is None:
        assert process.poll() is None, process.stderr.read()[-3000:]
        assert time.monotonic() < deadline, "no checkpoint in time"
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait(RESUME_TIMEOUT_S)
    saved = json.loads((run_dir / tbt.PROGRESS_FILE).read_text())
    assert [e["epoch"] for e in saved["epochs"]][:1] == [1] and not Path(killed["output"]).exists()

    resumed = tbt.train_before_test(**killed)
    assert resumed == reference
    assert resumed["direct"] == saved["direct"] and resumed["epochs"][0] == saved["epochs"][0]
    assert [e["epoch"] for e in resumed["epochs"]] == [1, 2, 3]
    assert resumed["sizes"] == {"train": 8, "valid": 2, "test": 8}
    assert resumed["train_before_test"] == tbt.best_epoch(resumed["epochs"])["test"]
    assert resumed["direct_eval"] == resumed["direct"]["test"]
    assert json.loads(Path(killed["output"]).read_text()) == resumed
    assert not run_dir.exists()


def test_chat_template_training_records(docs_dir):
    splits = tbt.harmony_splits(TaskSpec("arc_easy", "arc_easy", 0, "acc_norm,none", docs_dir / "arc"), {})
    rng = random.Random(1)
    tokenizer = train_bpe_tokenizer([fixture_world.passage(rng, 20) for _ in range(50)], 400)
    doc = tbt.processed(splits.task, splits.train)[0]
    question, target = tbt.training_example(splits.task, doc)
    record = tbt.training_records(
        splits.task, splits.train.select([0]), chat_template=True, completion_only=True, tokenizer=tokenizer
    )[0]
    assert record["prompt"] == f"<|bos|><|user|>\n{question}\n<|assistant|>\n"
    assert record["completion"] == target + "<|eos|>"
