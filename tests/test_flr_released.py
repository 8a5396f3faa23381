"""FLR's FLASK and MT-Bench single-score benchmarks converted from the files their makers
released (kaistAI/FLASK's GPT-4 reviews; FastChat's MT-Bench questions, model answers and
GPT-4 single-answer grades): values per row, a malformed row named by file, row and field, a
missing file refused with its path and URL, the download rule's checksums, and paper.yaml's
declared files downloaded by the real ``released_file`` rule and converted by ``raw_source``.

The files are written here in the released formats (their field names, our own rows) and
served by a local HTTP server, a stand-in for the public URLs (no internet here).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
import shutil
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from reprolm.checks import check_config
from reprolm.config import overlays
from reprolm.data.released_ratings import (
    FASTCHAT_MT_BENCH_URL,
    FLASK_REVIEW_BLOBS,
    KNOWN_CHECKSUMS,
    download_released_file,
    released_files,
)
from reprolm.data.schemas import DataError
from reprolm.data.sources import read_source, write_source
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


def test_a_missing_file_is_refused_with_its_path_and_url(tmp_path):
    files = write_mt_bench(tmp_path)
    Path(files["answers"][1]).unlink()
    with pytest.raises(FileNotFoundError) as refused:
        write_source({"name": "mt_bench_single", **released("mt_bench_single", files)}, tmp_path / "raw/mt")
    assert str(refused.value) == (
        "sources.mt_bench_single: 1 released file(s) are not downloaded yet:\n"
        f"sources.mt_bench_single.released.files.answers: {files['answers'][1]}: no such file; download "
        f"{MT_BENCH_URL}model_answer/llama-13b.jsonl (one model's MT-Bench answers) to that path "
        "(relative to the working directory)"
    )
    assert not (tmp_path / "raw").exists()


@pytest.fixture
def file_server(tmp_path):
    """A local HTTP server of the folder it returns, standing in for the released files'
    public URLs; ``url`` is its address."""
    folder = tmp_path / "served"
    folder.mkdir()
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


REFERENCE_QUESTIONS = REPO / "config/reference/fastchat/mt_bench/question.jsonl"


def test_a_download_is_checked_against_its_published_checksum_or_records_its_own(tmp_path, file_server, caplog):
    served, url = file_server
    shutil.copy(REFERENCE_QUESTIONS, served / "question.jsonl")
    write_mt_bench(served / "mt")
    files = {
        "questions": str(tmp_path / "q/question.jsonl"),
        "answers": [str(tmp_path / "a/gpt-4.jsonl")],
        "judgments": str(tmp_path / "j/gpt-4_single.jsonl"),
    }
    spec = released("mt_bench_single", files)
    spec["released"]["urls"] = {"questions": url, "answers": url + "mt/model_answer", "judgments": url + "nowhere/"}
    questions, answers, judgments = released_files("mt_bench_single", spec)
    # The checksum is the public URL's, whoever serves the file.
    assert questions.url == url + "question.jsonl"
    assert questions.checksum == KNOWN_CHECKSUMS[FASTCHAT_MT_BENCH_URL + "question.jsonl"]
    assert questions.checksum == "sha256:119565adbab82227089cefdb44c8d7e2cf04dc0a0ec233634c82e7d4e2a944f7"
    assert answers.url == url + "mt/model_answer/gpt-4.jsonl" and answers.checksum is None
    with caplog.at_level(logging.INFO):
        download_released_file(questions)
        download_released_file(answers)
    assert Path(files["questions"]).read_bytes() == REFERENCE_QUESTIONS.read_bytes()
    assert f"matches its published checksum {questions.checksum}" in caplog.text
    assert Path(files["answers"][0]).read_bytes() == (served / "mt/model_answer/gpt-4.jsonl").read_bytes()
    assert "has no published checksum; this download's is sha256:" in caplog.text

    # Other bytes than the published file's: refused, naming both checksums, nothing left.
    Path(files["questions"]).unlink()
    (served / "question.jsonl").write_bytes(REFERENCE_QUESTIONS.read_bytes().replace(b"81", b"18", 1))
    with pytest.raises(ValueError, match=r"download's checksum is sha256:[0-9a-f]{64}, the published one sha256:1195"):
        download_released_file(questions)
    # A URL that answers 404, then a host that cannot be reached: the URL and the path to copy to.
    with pytest.raises(OSError, match=r"nowhere/gpt-4_single\.jsonl could not be downloaded \(File not found\); "):
        download_released_file(judgments)
    spec["released"]["urls"]["judgments"] = "http://127.0.0.1:9/"
    unreachable = released_files("mt_bench_single", spec)[2]
    with pytest.raises(OSError, match=rf"copy it to {files['judgments']} \(relative to the working directory\)"):
        download_released_file(unreachable)
    # No file, nor a partial one, where the refused downloads were to go.
    assert [list((tmp_path / folder).iterdir()) for folder in ("q", "j")] == [[], []]


def test_flask_reviews_are_checked_against_their_git_blobs_at_the_pinned_commit(tmp_path, file_server):
    served, url = file_server
    write_jsonl(served / "gpt4_review.jsonl", [flask_review(1, "q", "a", {"readability": 4})])
    spec = released("flask_reviews", {"reviews": [str(tmp_path / "gpt4_review.jsonl")]})
    [public] = released_files("flask", spec)
    assert public.url == FLASK_URL + "gpt4_review.jsonl"
    assert public.checksum == "git-blob:41412f1b7131710a193ab899d5bc4e25c8fd40da"
    spec["released"]["urls"] = {"reviews": url}
    [mirrored] = released_files("flask", spec)
    with pytest.raises(ValueError, match=r"checksum is git-blob:[0-9a-f]{40}, the published one git-blob:41412f1b"):
        download_released_file(mirrored)
    assert not (tmp_path / "gpt4_review.jsonl").exists()


def test_config_check_refuses_a_released_source_that_does_not_fit_its_format():
    config = overlays.load(REPO / "config/config.yaml", REPO)
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
def test_paper_config_downloads_its_declared_files_and_converts_them(tmp_path, file_server):
    """paper.yaml's FLASK and MT-Bench sources, fetched by the real ``released_file`` rule from
    a mirror of their URLs (``urls``; the stand-in for the public ones) and converted by
    ``raw_source``: MT-Bench's question file matches its published checksum, the Space's files
    have none and are taken; FLASK's stand-in reviews are not FLASK's bytes, so their
    downloads fail naming both checksums, and the same files copied by hand are used as they
    are."""
    served, url = file_server
    work = scratch_copy(tmp_path / "work")
    sources = yaml.safe_load((work / "config/paper.yaml").read_text())["sources"]
    reviews = sources["flask"]["released"]["files"]["reviews"]
    for path in reviews:
        row = flask_review(1, "Rewrite this.", f"{Path(path).stem} rewrites.", {"readability": 3})
        write_jsonl(served / "flask" / Path(path).name, [row])
    mt_files = sources["mt_bench_single"]["released"]["files"]
    models = [Path(path).stem for path in mt_files["answers"]]
    shutil.copy(REFERENCE_QUESTIONS, served / "question.jsonl")
    for model in models:
        write_jsonl(served / "model_answer" / f"{model}.jsonl", [mt_bench_answer(81, model)])
    write_jsonl(served / "model_judgment/gpt-4_single.jsonl", [mt_bench_grade(81, model, 2, 6) for model in models])
    mirror = {
        "extends": "config/paper.yaml",
        # The released files' stand-in server serves no lock's content: read unpinned.
        "allow_unpinned": True,
        "sources": {
            "flask": {"released": {"urls": {"reviews": url + "flask/"}}},
            "mt_bench_single": {
                "released": {
                    "urls": {"questions": url, "answers": url + "model_answer/", "judgments": url + "model_judgment/"}
                }
            },
        },
    }
    (work / "mirror.yaml").write_text(yaml.safe_dump(mirror))
    paper = ["--configfile", "mirror.yaml", "--"]
    snakemake(work, *paper, "resources/raw/mt_bench_single")
    log = (work / "logs/released_file" / mt_files["questions"]).with_suffix(".jsonl.log").read_text()
    assert "matches its published checksum sha256:119565ad" in log
    judgments_log = (work / "logs/released_file" / f"{mt_files['judgments']}.log").read_text()
    assert "has no published checksum; this download's is sha256:" in judgments_log
    record = json.loads((work / f"{mt_files['judgments']}.provenance.json").read_text())
    [output] = record["outputs"]
    assert output["sha256"] == hashlib.sha256((served / "model_judgment/gpt-4_single.jsonl").read_bytes()).hexdigest()

    refused = snakemake(work, *paper, "resources/raw/flask", check=False)
    assert refused.returncode != 0
    # Snakemake stops after the first failed downloads; each one's log ends with its refusal.
    tried = [path for path in reviews if (work / "logs/released_file" / f"{path}.log").exists()]
    assert tried
    for path in tried:
        name = Path(path).name
        flask_log = (work / "logs/released_file" / f"{path}.log").read_text()
        assert re.search(
            rf"sources\.flask\.released\.files\.reviews: \S+/flask/{re.escape(name)}: the download's checksum is "
            rf"git-blob:[0-9a-f]{{40}}, the published one git-blob:{FLASK_REVIEW_BLOBS[name]}",
            flask_log.strip().splitlines()[-1],
        ), flask_log[-2000:]
    assert not any((work / path).exists() for path in reviews) and not (work / "resources/raw/flask").exists()
    # Copied by hand: no download, the files as they are.
    (work / reviews[0]).parent.mkdir(parents=True, exist_ok=True)
    for path in reviews:
        shutil.copy(served / "flask" / Path(path).name, work / path)
    snakemake(work, *paper, "resources/raw/flask")

    flask = read_source(work / "resources/raw/flask", "rated_utterances")
    assert [row["model"] for row in flask] == [Path(path).stem.removesuffix("_review") for path in reviews]
    assert {row["score"] for row in flask} == {3.0} and flask[5]["conversation"] == [
        "Rewrite this.",
        "gpt4_review rewrites.",
    ]
    mt_bench = read_source(work / "resources/raw/mt_bench_single", "rated_utterances")
    assert len(mt_bench) == 31 and [row["model"] for row in mt_bench] == models
    # MT-Bench's own question 81, downloaded, with the stand-in answers.
    hawaii = json.loads(REFERENCE_QUESTIONS.read_text().splitlines()[0])["turns"]
    assert mt_bench[9]["conversation"] == [hawaii[0], "gpt-4 answers 81.", hawaii[1], "gpt-4 follows up 81."]
    assert {row["score"] for row in mt_bench} == {6.0}
