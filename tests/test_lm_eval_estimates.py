"""Intervals of lm-eval scores from the per-document log: each metric aggregated as lm-eval
aggregates it, checked on a hand-made log and on a real lm-eval run."""

from __future__ import annotations

import gzip
import json
import math
import warnings

import numpy as np
import pytest
from sklearn.metrics import matthews_corrcoef

from reprolm.aggregate import uncertainty as u
from reprolm.aggregate.lm_eval_estimates import SampleLogError, lm_eval_estimates
from reprolm.aggregate.tables import load_scores
from reprolm.io import write_json
from reprolm.paths import score_path
from reprolm.score.lm_eval_bridge import TaskSpec, evaluate_tasks

# The real lm-eval run reuses the bridge tests' fixture documents and tiny random Llama.
from test_lm_eval_bridge import fixture_dirs, tiny_model  # noqa: F401

BOOLQ = [True, False, True, True, False, True]
IFEVAL_PROMPT = [True, False, False, True]
IFEVAL_INSTRUCTIONS = [[True], [False, True, True], [False, False], [True, True]]
# (gold, prediction) per document: mcc over the corpus.
COLA = [[1, 1], [0, 0], [1, 0], [0, 0], [1, 1], [0, 1], [1, 1], [0, 0]]
GSM8K = {"strict-match": [0.0, 0.0, 1.0], "flexible-extract": [1.0, 0.0, 1.0]}


def _records() -> list[dict]:
    records = [
        {"spec": "boolq", "task": "boolq", "doc_id": i, "filter": "none", "values": {"acc": v}}
        for i, v in enumerate(BOOLQ)
    ]
    records += [
        {
            "spec": "ifeval",
            "task": "ifeval",
            "doc_id": i,
            "filter": "none",
            "values": {"prompt_level_strict_acc": prompt, "inst_level_strict_acc": checks},
        }
        for i, (prompt, checks) in enumerate(zip(IFEVAL_PROMPT, IFEVAL_INSTRUCTIONS, strict=True))
    ]
    records += [
        {"spec": "cola", "task": "cola", "doc_id": i, "filter": "none", "values": {"mcc": pair}}
        for i, pair in enumerate(COLA)
    ]
    records += [
        {"spec": "gsm8k", "task": "gsm8k", "doc_id": i, "filter": name, "values": {"exact_match": v}}
        for name, values in GSM8K.items()
        for i, v in enumerate(values)
    ]
    return records


def _summary(metric: str, metrics: dict, n_docs: int) -> dict:
    return {"metric": metric, "value": metrics[metric], "metrics": metrics, "n_docs": n_docs}


def _score_data() -> dict:
    golds, predictions = zip(*COLA)
    return {
        "metric": "lm_eval",
        "task_order": ["boolq", "ifeval", "cola", "gsm8k"],
        "tasks": {
            "boolq": _summary("acc,none", {"acc,none": 4 / 6, "acc_stderr,none": 0.2}, 6),
            "ifeval": _summary(
                "prompt_level_strict_acc,none",
                {"prompt_level_strict_acc,none": 0.5, "inst_level_strict_acc,none": 5 / 8},
                4,
            ),
            "cola": _summary("mcc,none", {"mcc,none": matthews_corrcoef(golds, predictions)}, 8),
            "gsm8k": _summary(
                "exact_match,flexible-extract",
                {"exact_match,strict-match": 1 / 3, "exact_match,flexible-extract": 2 / 3},
                3,
            ),
        },
    }


def _write_score(root, data: dict, records: list[dict] | None, name: str = "suite"):
    path = root / score_path("lm_eval", "base", "recipe", name)
    write_json(data, path)
    if records is not None:
        with gzip.open(path.with_name(f"{name}.samples.jsonl.gz"), "wt") as stream:
            stream.writelines(json.dumps(record) + "\n" for record in records)
    return load_scores([path])[0]


def _ids(task: str, n: int) -> list[str]:
    """The bootstrap units of a task's documents: each document is its task's (a group's
    member tasks number theirs each from 0)."""
    return [f"{task}/{i}" for i in range(n)]


@pytest.mark.slow
def test_each_metric_is_aggregated_as_lm_eval_aggregates_it(tmp_path):
    score = _write_score(tmp_path, _score_data(), _records())
    wanted = {
        "boolq": ["acc,none"],
        "ifeval": ["prompt_level_strict_acc,none", "inst_level_strict_acc,none"],
        "cola": ["mcc,none"],
        "gsm8k": ["exact_match,strict-match", "exact_match,flexible-extract"],
    }
    estimates = lm_eval_estimates(score, wanted)
    reported = {spec: score.data["tasks"][spec]["metrics"] for spec in wanted}
    for spec, keys in wanted.items():
        for key in keys:
            assert estimates[spec][key].value == reported[spec][key]
            assert estimates[spec][key].low <= estimates[spec][key].value <= estimates[spec][key].high

    # A mean metric: the mean of the drawn documents' values, drawn by document id.
    assert np.array_equal(estimates["boolq"]["acc,none"].replicates, u.mean_of(BOOLQ, _ids("boolq", 6)).replicates)
    # Instruction level pools the drawn documents' instructions: 5 of 8 overall, not the
    # mean of per-document rates (0.5 + 2/3 + 0 + 1) / 4.
    draws = u.unit_draws(_ids("ifeval", 4))
    pooled = [
        sum(sum(IFEVAL_INSTRUCTIONS[d]) for d in row) / sum(len(IFEVAL_INSTRUCTIONS[d]) for d in row) for row in draws
    ]
    assert np.allclose(estimates["ifeval"]["inst_level_strict_acc,none"].replicates, pooled)
    # mcc is recomputed on each draw's (gold, prediction) pairs.
    draws = u.unit_draws(_ids("cola", 8))
    cola = np.array(COLA)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # draws of one class only
        by_hand = [matthews_corrcoef(cola[row, 0], cola[row, 1]) for row in draws[:20]]
    assert np.allclose(estimates["cola"]["mcc,none"].replicates[:20], by_hand)
    # Each filter is its own set of documents.
    assert np.array_equal(
        estimates["gsm8k"]["exact_match,strict-match"].replicates,
        u.mean_of(GSM8K["strict-match"], _ids("gsm8k", 3)).replicates,
    )
    # By default each spec's reported metric, scaled as the tables scale it.
    default = lm_eval_estimates(score)
    assert sorted(default) == sorted(wanted) and list(default["gsm8k"]) == ["exact_match,flexible-extract"]
    assert default["boolq"]["acc,none"].scaled(100).value == 100.0 * (4 / 6)


def test_a_log_that_does_not_reproduce_the_score_is_an_error_naming_it(tmp_path):
    data = _score_data()
    data["tasks"]["boolq"]["metrics"]["acc,none"] = 0.5
    score = _write_score(tmp_path, data, _records())
    with pytest.raises(
        SampleLogError,
        match=r"suite\.samples\.jsonl\.gz: spec 'boolq', metric 'acc,none': .* "
        r"give 0\.666.* lm-eval reported 0\.5",
    ):
        lm_eval_estimates(score, {"boolq": ["acc,none"]})
    short = _write_score(tmp_path, _score_data(), _records()[1:], name="short")
    with pytest.raises(SampleLogError, match="5 documents logged, but lm-eval scored 6"):
        lm_eval_estimates(short, {"boolq": ["acc,none"]})
    missing = _write_score(tmp_path, _score_data(), None, name="missing")
    with pytest.raises(SampleLogError, match=r"missing\.samples\.jsonl\.gz: lm-eval's per-document log is missing"):
        lm_eval_estimates(missing)


@pytest.mark.slow
def test_a_real_lm_eval_run_is_reproduced_document_by_document(tiny_model, fixture_dirs, tmp_path):  # noqa: F811
    """The tiny model on boolq (a mean), cola (mcc over the corpus) and IFEval (pooled
    instructions); the log's aggregates equal what lm-eval reported."""
    _, model, tokenizer = tiny_model
    specs = [
        TaskSpec("boolq", "boolq", 0, "acc,none", fixture_dirs / "boolq", limit=8),
        TaskSpec("cola", "cola", 0, "mcc,none", fixture_dirs / "glue_cola", limit=8),
        TaskSpec(
            "ifeval",
            "ifeval",
            0,
            "prompt_level_strict_acc,none",
            fixture_dirs / "ifeval",
            gen_kwargs={"max_gen_toks": 8},
            limit=6,
        ),
    ]
    path = tmp_path / score_path("lm_eval", "tiny", "pretrained", "suite")
    samples = path.with_name("suite.samples.jsonl.gz")
    samples.parent.mkdir(parents=True)
    result = evaluate_tasks(model, tokenizer, specs, bootstrap_iters=0, samples_output=str(samples))
    write_json({"metric": "lm_eval", **result}, path)
    score = load_scores([path])[0]
    wanted = {
        "boolq": ["acc,none"],
        "cola": ["mcc,none"],
        "ifeval": ["prompt_level_strict_acc,none", "inst_level_strict_acc,none", "inst_level_loose_acc,none"],
    }
    estimates = lm_eval_estimates(score, wanted)
    for spec, keys in wanted.items():
        for key in keys:
            estimate = estimates[spec][key]
            assert estimate.value == result["tasks"][spec]["metrics"][key]
            assert estimate.replicates.size == u.RESAMPLES
            assert estimate.low <= estimate.value <= estimate.high
    # IFEval has more instructions than prompts: pooled, it is not the mean per prompt.
    log = [json.loads(line) for line in gzip.open(samples, "rt") if json.loads(line)["spec"] == "ifeval"]
    checks = [record["values"]["inst_level_strict_acc"] for record in log]
    assert sum(map(len, checks)) > len(checks)
    assert math.isclose(
        estimates["ifeval"]["inst_level_strict_acc,none"].value, sum(map(sum, checks)) / sum(map(len, checks))
    )
