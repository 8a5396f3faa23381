"""FLR's FLASK and MT-Bench single-score benchmarks converted from the files their makers
released (kaistAI/FLASK's GPT-4 reviews; FastChat's MT-Bench questions, model answers and
GPT-4 single-answer grades): values per row, a malformed row named by file, row and field, a
missing file refused with its path and URL, and paper.yaml's declared files through the real
``raw_source`` rule.

The files are written here in the released formats (their field names, our own rows).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from reprolm.checks import check_config
from reprolm.data.schemas import DataError
from reprolm.data.sources import read_source, source_inputs, write_source
from reprolm.errors import ConfigError
from workflow_helpers import REPO, scratch_copy, snakemake

SCHEMA_FILE = REPO / "workflow/schemas/config.schema.yaml"
FLASK_URL = (
    "https://raw.githubusercontent.com/kaistAI/FLASK/3b4e22bc34aa9dc15ea0c51be3cbf5f3c8b1b5e5/gpt_review/outputs/"
)
MT_BENCH_URL = "https://huggingface.co/spaces/lmsys/mt-bench/resolve/main/data/mt_bench/"


def write_jsonl(path: Path, records: list) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return str(path)


def flask_review(question_id: int, text: str, answer: str, score: dict) -> dict:
    """A row of FLASK's gpt_review/outputs: the evaluation-set record, the model's answer
    (``target_txt``), GPT-4's review and its parsed skill scores."""
    return {
        "question_id": question_id,
        "text": text,
        "task": "Self-instruct",
        "answer": "a reference answer",
        "metrics": [skill.title() for skill in score],
        "target_txt": answer,
        "review": "The response ... {" + ", ".join(f"'{k}': {v!r}" for k, v in score.items()) + "}",
        "score": score,
        "total_tokens_step4": 900,
    }


def write_flask(folder: Path, model: str, offset: int = 0) -> list[str]:
    """One model's review file: two scored answers and one review GPT-4 left unparsable."""
    rows = [
        flask_review(
            offset + 1,
            f"Rewrite this sentence ({model}).",
            f"A rewrite by {model}.",
            {"readability": 4, "logical correctness": 3, "conciseness": 5},
        ),
        flask_review(
            offset + 2,
            f"Name a prime ({model}).",
            f"Seven, says {model}.",
            {"factuality": 2, "harmlessness": "N/A", "comprehension": 5},
        ),
        flask_review(offset + 3, "Say hello.", "Hello.", {}),
    ]
    return [write_jsonl(folder / f"{model}_review.jsonl", rows)]


def mt_bench_question(question_id: int) -> dict:
    return {
        "question_id": question_id,
        "category": "writing",
        "turns": [f"First question {question_id}?", f"Follow-up to {question_id}?"],
    }


def mt_bench_answer(question_id: int, model: str) -> dict:
    return {
        "question_id": question_id,
        "answer_id": f"{model}-{question_id}",
        "model_id": model,
        "choices": [{"index": 0, "turns": [f"{model} answers {question_id}.", f"{model} follows up {question_id}."]}],
        "tstamp": 1687000000.0,
    }


def mt_bench_grade(question_id: int, model: str, turn: int, score: float) -> dict:
    prompt = "single-v1" if turn == 1 else "single-v1-multi-turn"
    return {
        "question_id": question_id,
        "model": model,
        "judge": ["gpt-4", prompt],
        "user_prompt": "[Instruction] ...",
        "judgment": f"... Rating: [[{score}]]",
        "score": score,
        "turn": turn,
        "tstamp": 1687000001.0,
    }


GRADES = [
    (81, "gpt-4", 1, 9),
    (81, "gpt-4", 2, 8.5),
    (82, "llama-13b", 1, 2),
    (82, "llama-13b", 1, 3),  # a repeated grade of one answer: the first counts
    (82, "llama-13b", 2, -1),  # FastChat's unrated judgment
    (81, "vicuna-13b-v1.3", 1, 7),  # a model whose answers are not given
]


def write_mt_bench(folder: Path, models=("gpt-4", "llama-13b"), grades=GRADES) -> dict:
    """FastChat's data/mt_bench layout: question.jsonl, model_answer/{model}.jsonl,
    model_judgment/gpt-4_single.jsonl."""
    return {
        "questions": write_jsonl(folder / "question.jsonl", [mt_bench_question(81), mt_bench_question(82)]),
        "answers": [
            write_jsonl(
                folder / "model_answer" / f"{model}.jsonl", [mt_bench_answer(81, model), mt_bench_answer(82, model)]
            )
            for model in models
        ],
        "judgments": write_jsonl(
            folder / "model_judgment" / "gpt-4_single.jsonl", [mt_bench_grade(*grade) for grade in grades]
        ),
    }


def released(format_name: str, files: dict) -> dict:
    return {"schema": "rated_utterances", "released": {"format": format_name, "files": files}}


def test_flask_reviews_become_rated_answers_scored_by_their_skill_mean(tmp_path, caplog):
    files = {"reviews": write_flask(tmp_path, "chatgpt") + write_flask(tmp_path, "vicuna_13b", offset=10)}
    spec = {"name": "flask", **released("flask_reviews", files)}
    with caplog.at_level("INFO"):
        assert write_source(spec, tmp_path / "raw/flask") == {"train": 4}
    rows = read_source(tmp_path / "raw/flask", "rated_utterances")
    assert [(row["model"], row["question_id"], row["conversation"], row["score"]) for row in rows] == [
        ("chatgpt", 1, ["Rewrite this sentence (chatgpt).", "A rewrite by chatgpt."], 4.0),
        ("chatgpt", 2, ["Name a prime (chatgpt).", "Seven, says chatgpt."], 3.5),
        ("vicuna_13b", 11, ["Rewrite this sentence (vicuna_13b).", "A rewrite by vicuna_13b."], 4.0),
        ("vicuna_13b", 12, ["Name a prime (vicuna_13b).", "Seven, says vicuna_13b."], 3.5),
    ]
    assert "chatgpt_review.jsonl: 1 review(s) without a skill score left out" in caplog.text


def test_mt_bench_grades_become_the_graded_turns_with_their_scores(tmp_path, caplog):
    spec = {"name": "mt_bench_single", **released("mt_bench_single", write_mt_bench(tmp_path))}
    with caplog.at_level("INFO"):
        assert write_source(spec, tmp_path / "raw/mt") == {"train": 3}
    rows = read_source(tmp_path / "raw/mt", "rated_utterances")
    assert [(row["model"], row["question_id"], row["turn"], row["judge"], row["score"]) for row in rows] == [
        ("gpt-4", 81, 1, "gpt-4/single-v1", 9.0),
        ("gpt-4", 81, 2, "gpt-4/single-v1-multi-turn", 8.5),
        ("llama-13b", 82, 1, "gpt-4/single-v1", 2.0),
    ]
    assert rows[0]["conversation"] == ["First question 81?", "gpt-4 answers 81."]
    assert rows[1]["conversation"] == [
        "First question 81?",
        "gpt-4 answers 81.",
        "Follow-up to 81?",
        "gpt-4 follows up 81.",
    ]
    for reason in (
        "1 grades of models without an answer file",
        "1 unrated judgments (score -1)",
        "1 repeated grades of one answer",
    ):
        assert f"gpt-4_single.jsonl: {reason} left out" in caplog.text


@pytest.mark.parametrize(
    "fmt, break_file, expected",
    [
        (
            "mt_bench_single",
            lambda files: write_jsonl(
                Path(files["judgments"]),
                [mt_bench_grade(81, "gpt-4", 1, 9), {**mt_bench_grade(82, "gpt-4", 1, 5), "score": "eight"}],
            ),
            r"gpt-4_single\.jsonl: row 1: field 'score': expected a score from 1 to 10, got 'eight'",
        ),
        (
            "mt_bench_single",
            lambda files: write_jsonl(Path(files["judgments"]), [mt_bench_grade(83, "gpt-4", 1, 9)]),
            r"gpt-4_single\.jsonl: row 0: field 'question_id': question 83 is not in .*question\.jsonl",
        ),
        (
            "flask_reviews",
            lambda files: write_jsonl(
                Path(files["reviews"][0]),
                [{**flask_review(1, "q", "a", {"readability": 4}), "target_txt": ""}],
            ),
            r"chatgpt_review\.jsonl: row 0: field 'target_txt': expected a non-empty string",
        ),
        (
            "flask_reviews",
            lambda files: write_jsonl(Path(files["reviews"][0]), [flask_review(1, "q", "a", {"readability": 7})]),
            r"chatgpt_review\.jsonl: row 0: field 'score\.readability': score 7 is outside 1-5",
        ),
    ],
)
def test_a_malformed_row_names_its_file_row_and_field_and_writes_nothing(tmp_path, fmt, break_file, expected):
    files = write_mt_bench(tmp_path) if fmt == "mt_bench_single" else {"reviews": write_flask(tmp_path, "chatgpt")}
    break_file(files)
    with pytest.raises(DataError, match=expected):
        write_source({"name": "bench", **released(fmt, files)}, tmp_path / "raw/bench")
    assert not (tmp_path / "raw").exists()


def test_a_missing_file_is_refused_with_its_path_and_url_and_a_dry_run_warns(tmp_path):
    files = write_mt_bench(tmp_path)
    Path(files["answers"][1]).unlink()
    spec = released("mt_bench_single", files)
    with pytest.raises(FileNotFoundError) as refused:
        source_inputs("mt_bench_single", spec, dry_run=False, warn=print)
    assert str(refused.value) == (
        "sources.mt_bench_single: 1 released file(s) are not downloaded yet:\n"
        f"sources.mt_bench_single.released.files.answers: {files['answers'][1]}: no such file; download "
        f"{MT_BENCH_URL}model_answer/llama-13b.jsonl (one model's MT-Bench answers) to that path "
        "(relative to the working directory)"
    )
    warnings = []
    assert source_inputs("mt_bench_single", spec, dry_run=True, warn=warnings.append) == [
        files["questions"],
        files["answers"][0],
        files["judgments"],
    ]
    assert warnings == [f"{refused.value}\n(a dry run leaves them out; a real run is refused until they are there)"]


def test_config_check_refuses_a_released_source_that_does_not_fit_its_format():
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config["harmony"]["reference_results"] = str(REPO / config["harmony"]["reference_results"])
    files = {"questions": "q.jsonl", "answers": ["a.jsonl"], "judgments": "j.jsonl"}
    # Files need not be there yet: a dry run shows the DAG before they are downloaded.
    config["sources"]["mine"] = released("mt_bench_single", files)
    check_config(config, SCHEMA_FILE)
    config["sources"]["mine"] = released("mt_bench_single", {**files, "judgments": ["j1.jsonl", "j2.jsonl"]})
    with pytest.raises(ConfigError, match=r"sources\.mine\.released\.files\.judgments: one file"):
        check_config(config, SCHEMA_FILE)
    config["sources"]["mine"] = released("mt_bench_single", {"reviews": ["r.jsonl"]})
    with pytest.raises(
        ConfigError,
        match=r"sources\.mine\.released\.files: format 'mt_bench_single' reads files \['answers', 'judgments', "
        r"'questions'\]; missing \['answers', 'judgments', 'questions'\], unknown \['reviews'\]",
    ):
        check_config(config, SCHEMA_FILE)
    config["sources"]["mine"] = released("mt_bench_singel", files)
    with pytest.raises(
        ConfigError, match=r"sources\.mine\.released\.format: unknown released format 'mt_bench_singel'"
    ):
        check_config(config, SCHEMA_FILE)
    config["sources"]["mine"] = {**released("flask_reviews", {"reviews": "r.jsonl"}), "schema": "helpsteer"}
    with pytest.raises(ConfigError, match=r"sources\.mine\.schema: format 'flask_reviews' makes 'rated_utterances'"):
        check_config(config, SCHEMA_FILE)


@pytest.mark.workflow
def test_paper_config_converts_its_declared_files_through_the_raw_source_rule(tmp_path):
    """paper.yaml's FLASK and MT-Bench sources: a real run without the files is refused before
    any job, naming each path and URL; with stand-in files at the declared paths the real
    rule converts them."""
    work = scratch_copy(tmp_path)
    paper = ["--configfile", "config/paper.yaml", "--"]
    refused = snakemake(work, *paper, "resources/raw/flask", check=False)
    assert refused.returncode != 0
    assert "sources.flask: 15 released file(s) are not downloaded yet" in refused.stderr
    assert (
        "sources.flask.released.files.reviews: resources/manual/flr/flask/gpt4_review.jsonl: no such file; "
        f"download {FLASK_URL}gpt4_review.jsonl" in refused.stderr
    )
    assert not (work / "resources/raw").exists() and not (work / "logs/raw_source").exists()

    sources = yaml.safe_load((work / "config/paper.yaml").read_text())["sources"]
    reviews = sources["flask"]["released"]["files"]["reviews"]
    for path in reviews:
        write_jsonl(work / path, [flask_review(1, "Rewrite this.", f"{Path(path).stem} rewrites.", {"readability": 3})])
    mt_files = sources["mt_bench_single"]["released"]["files"]
    models = [Path(path).stem for path in mt_files["answers"]]
    write_jsonl(work / mt_files["questions"], [mt_bench_question(81)])
    for path, model in zip(mt_files["answers"], models):
        write_jsonl(work / path, [mt_bench_answer(81, model)])
    write_jsonl(work / mt_files["judgments"], [mt_bench_grade(81, model, 2, 6) for model in models])
    snakemake(work, *paper, "resources/raw/flask", "resources/raw/mt_bench_single")

    flask = read_source(work / "resources/raw/flask", "rated_utterances")
    assert [row["model"] for row in flask] == [Path(path).stem.removesuffix("_review") for path in reviews]
    assert {row["score"] for row in flask} == {3.0} and flask[5]["conversation"] == [
        "Rewrite this.",
        "gpt4_review rewrites.",
    ]
    mt_bench = read_source(work / "resources/raw/mt_bench_single", "rated_utterances")
    assert len(mt_bench) == 31 and [row["model"] for row in mt_bench] == models
    assert mt_bench[9]["conversation"] == [
        "First question 81?",
        "gpt-4 answers 81.",
        "Follow-up to 81?",
        "gpt-4 follows up 81.",
    ]
    assert {row["score"] for row in mt_bench} == {6.0}
