"""Benchmarks read from the files their makers released: FLR's rating benchmarks as
``rated_utterances`` records (``conversation``: the utterances, user first, the rated answer
last; ``score``), and MT-Bench's questions with the GPT-4 reference answers FastChat grades
against, as ``mt_bench_prompts`` records.

FLR's own copies of FLASK and MT-Bench single-score sit on its authors' Google Drive in no
documented format; the files they come from are public: FLASK's GPT-4 reviews of 15 models'
answers (kaistAI/FLASK ``gpt_review/outputs``) and MT-Bench's GPT-4 single-answer grades
with the questions and the graded models' answers (FastChat's ``llm_judge`` data). A source
names them as ``released: {format, files: {role: path | [paths]}}``; the download rule
``released_file`` fetches each missing one from its format's pinned public URL on the
submitting host, checked against its published checksum where one is known
(:data:`KNOWN_CHECKSUMS`); a site without internet on that host copies the files to their
paths by hand.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from reprolm.data.schemas import DataError
from reprolm.io import atomic_path
from reprolm.registry import Registry

LOG = logging.getLogger(__name__)

FLASK_REVIEWS_URL = (
    "https://raw.githubusercontent.com/kaistAI/FLASK/3b4e22bc34aa9dc15ea0c51be3cbf5f3c8b1b5e5/gpt_review/outputs/"
)
# FastChat's pregenerated answers and grades (download_mt_bench_pregenerated.py) live in a
# hub Space read at its main branch, as FastChat's own script reads it: no revision of the
# Space is published with them, so their checksums are not known beforehand.
MT_BENCH_URL = "https://huggingface.co/spaces/lmsys/mt-bench/resolve/main/data/mt_bench/"
# FastChat's llm_judge data at the commit whose copies config/reference/fastchat/ holds.
FASTCHAT_COMMIT = "0e6d3e4beaab66f4d3f93db72541a4abab8af28d"
FASTCHAT_MT_BENCH_URL = (
    f"https://raw.githubusercontent.com/lm-sys/FastChat/{FASTCHAT_COMMIT}/fastchat/llm_judge/data/mt_bench/"
)
# FLASK's per-skill scale, and MT-Bench's single-answer grade.
FLASK_SCORES = (1, 5)
MT_BENCH_SCORES = (1, 10)
# What FLASK's review parser writes for a skill GPT-4 judged not applicable.
NOT_APPLICABLE = "N/A"
# What FastChat writes as the score of a judgment it found no rating in.
MT_BENCH_UNRATED = -1


@dataclass(frozen=True)
class FileRole:
    """One kind of file a format reads: what it is, and the folder URL its file name is
    fetched from."""

    description: str
    url_folder: str
    many: bool = False


# Published checksums of the released files, by URL: ``git-blob:`` is git's SHA-1 of the file
# at the pinned commit (the repository's tree lists it; GitHub serves those bytes),
# ``sha256:`` the file's SHA-256. kaistAI/FLASK's reviews from its tree at the pinned commit;
# FastChat's MT-Bench files from the copies in config/reference/fastchat/, whose git blobs are
# the commit's. The Space's files have none (MT_BENCH_URL): their first download records its
# SHA-256 in the file's provenance record.
FLASK_REVIEW_BLOBS = {
    "alpaca_13b.jsonl": "9081b8e8c68db78e847efdb6ef0a1b4c9a2bb14c",
    "bard_review.jsonl": "db76da38a36a5b9d1a36132ca15b9ece5a3abfe5",
    "chatgpt_review.jsonl": "0e41154e5b27164475cfd79a6400900c8ad295fd",
    "claude_v1_review.jsonl": "35c8d5d9a5c3d338e1053532923b6b977b5d3c2b",
    "davinci_003_review.jsonl": "d0dc4c8cdad7fdfb32f22430964eca6f04c2bc97",
    "gpt4_review.jsonl": "41412f1b7131710a193ab899d5bc4e25c8fd40da",
    "llama2_chat_13b.jsonl": "51aacc2b844d71b7a351827eade784dc29422c6e",
    "llama2_chat_70b.jsonl": "49de4d464bb4b0c3c7dd8db9773a99437b7a719c",
    "tulu_13b_review.jsonl": "ba5db3fda103605d6ecae9d0a31c111deaf05981",
    "tulu_30b_review.jsonl": "21a013f4c79f36c77e657b37b133ee2d7669d2f2",
    "tulu_65b_review.jsonl": "df2ff330e9ae66d82993e022cc37a1f29236cce9",
    "tulu_7b_review.jsonl": "3a5624da72c4124ce1b0013edb26fb8d8ff48db0",
    "vicuna_13b.jsonl": "8b50e4c1262bda7680a03fbb0ab2d5f3057fe89b",
    "vicuna_33b.jsonl": "737fca5bd1b615a59d0cdf3b6de802bad7fc9788",
    "wizardlm_13b.jsonl": "1b2ec522bbea3468e1a4cd80ec1a043da107c85e",
}
KNOWN_CHECKSUMS = {
    **{FLASK_REVIEWS_URL + name: f"git-blob:{blob}" for name, blob in FLASK_REVIEW_BLOBS.items()},
    FASTCHAT_MT_BENCH_URL + "question.jsonl": "sha256:119565adbab82227089cefdb44c8d7e2cf04dc0a0ec233634c82e7d4e2a944f7",
    FASTCHAT_MT_BENCH_URL
    + "reference_answer/gpt-4.jsonl": "sha256:f957a5bc977badb66885ec970e6cd08527845780313f0995764260e5777b9b3f",
}
DOWNLOAD_TIMEOUT_S = 120


@dataclass(frozen=True)
class ReleasedFormat:
    name: str
    # The upstream schema of the records it makes, which the source must name.
    schema: str
    roles: dict[str, FileRole]
    # {role: [paths]} -> rated_utterances records
    convert: Callable[[dict[str, list[str]]], list[dict]]


RELEASED_FORMATS: Registry[ReleasedFormat] = Registry("released format")


def role_paths(files: dict) -> dict[str, list[str]]:
    return {role: [paths] if isinstance(paths, str) else list(paths) for role, paths in files.items()}


def check_released(source: str, spec: dict) -> ReleasedFormat:
    """The format is known, makes the source's schema, and the files name exactly its roles
    (one path for a single-file role); the files themselves are not looked at."""
    where, released = f"sources.{source}.released", spec["released"]
    released_format = RELEASED_FORMATS.get(released["format"], f"{where}.format")
    if spec["schema"] != released_format.schema:
        raise ValueError(
            f"sources.{source}.schema: format {released_format.name!r} makes {released_format.schema!r} records; "
            f"got {spec['schema']!r}"
        )
    files = role_paths(released["files"])
    missing, unknown = sorted(set(released_format.roles) - set(files)), sorted(set(files) - set(released_format.roles))
    if missing or unknown:
        raise ValueError(
            f"{where}.files: format {released_format.name!r} reads files {sorted(released_format.roles)}; "
            f"missing {missing}, unknown {unknown}"
        )
    for role, paths in files.items():
        if len(paths) > 1 and not released_format.roles[role].many:
            raise ValueError(f"{where}.files.{role}: one file ({released_format.roles[role].description}); got {paths}")
    unknown = sorted(set(released.get("urls", {})) - set(released_format.roles))
    if unknown:
        raise ValueError(
            f"{where}.urls: format {released_format.name!r} reads files {sorted(released_format.roles)}; unknown {unknown}"
        )
    return released_format


def released_paths(released: dict) -> list[str]:
    return [path for paths in role_paths(released["files"]).values() for path in paths]


@dataclass(frozen=True)
class ReleasedFile:
    """One file of a released source: its config key, where it goes, the URL it is fetched
    from and its published checksum (None where none is known)."""

    key: str
    path: str
    url: str
    checksum: str | None
    description: str


def released_files(source: str, spec: dict) -> list[ReleasedFile]:
    """Every file a released source reads, with its URL: the role's folder (the format's
    pinned public one, or the source's ``urls`` for that role, a mirror) and the file's name.
    A file's checksum is its public URL's, so a mirror must serve the same bytes."""
    released_format, released = check_released(source, spec), spec["released"]
    mirrors = released.get("urls", {})
    files = []
    for role, paths in role_paths(released["files"]).items():
        public = released_format.roles[role].url_folder
        folder = mirrors.get(role, public)
        folder = folder if folder.endswith("/") else folder + "/"
        for path in paths:
            name = Path(path).name
            files.append(
                ReleasedFile(
                    f"sources.{source}.released.files.{role}",
                    path,
                    folder + name,
                    KNOWN_CHECKSUMS.get(public + name),
                    released_format.roles[role].description,
                )
            )
    return files


def missing_released_files(source: str, spec: dict) -> list[str]:
    """One line per file not at its path: the key, the path, and the URL to download it from."""
    return [
        f"{file.key}: {file.path}: no such file; download {file.url} ({file.description}) "
        "to that path (relative to the working directory)"
        for file in released_files(source, spec)
        if not Path(file.path).is_file()
    ]


def file_checksum(path: str | Path, kind: str) -> str:
    """``kind:hex`` of a file: ``sha256``, or ``git-blob`` (git's SHA-1 of the file as a blob)."""
    data = Path(path).read_bytes()
    if kind == "git-blob":
        digest = hashlib.sha1(b"blob %d\0" % len(data) + data)
    else:
        digest = hashlib.sha256(data)
    return f"{kind}:{digest.hexdigest()}"


def unreachable(url: str, timeout: float = 30) -> str | None:
    """Why ``url`` cannot be fetched from this host (a HEAD request), or None if it can."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
        return str(getattr(error, "reason", error))


def download_released_file(file: ReleasedFile, log: logging.Logger = LOG) -> None:
    """``file`` fetched from its URL to its path, checked against its published checksum
    before it is put there (a mismatch leaves nothing and names both); without one, its
    SHA-256 is logged (and recorded with the file's provenance). A host that cannot reach the
    URL is told to copy the file there by hand."""
    with atomic_path(file.path) as tmp:
        try:
            with urllib.request.urlopen(file.url, timeout=DOWNLOAD_TIMEOUT_S) as response:
                tmp.write_bytes(response.read())
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            reason = getattr(error, "reason", error)
            raise OSError(
                f"{file.key}: {file.url} could not be downloaded ({reason}); on a host without internet, "
                f"download it elsewhere and copy it to {file.path} (relative to the working directory)"
            ) from None
        if file.checksum is not None:
            actual = file_checksum(tmp, file.checksum.split(":", 1)[0])
            if actual != file.checksum:
                raise ValueError(
                    f"{file.key}: {file.url}: the download's checksum is {actual}, the published one "
                    f"{file.checksum}: not the released file ({file.path} left as it was)"
                )
            log.info("%s: %s matches its published checksum %s", file.path, file.url, file.checksum)
        else:
            log.info(
                "%s: %s has no published checksum; this download's is %s",
                file.path,
                file.url,
                file_checksum(tmp, "sha256"),
            )


def not_downloaded(source: str, spec: dict) -> str | None:
    """What is missing of the source's files, with where to get each, or None."""
    missing = missing_released_files(source, spec)
    if not missing:
        return None
    return f"sources.{source}: {len(missing)} released file(s) are not downloaded yet:\n" + "\n".join(missing)


def refuse_missing_released_files(source: str, spec: dict) -> None:
    report = not_downloaded(source, spec)
    if report:
        raise FileNotFoundError(report)


def convert_released(source: str, spec: dict) -> list[dict]:
    """The source's records, every file checked to be there before any is read."""
    released_format = check_released(source, spec)
    refuse_missing_released_files(source, spec)
    return released_format.convert(role_paths(spec["released"]["files"]))


# ---- reading the released files ----


def json_lines(path: str) -> Iterator[tuple[int, dict]]:
    """(row, record) of a JSON-lines file; rows count lines from 0, blank ones included."""
    with open(path, "rb") as lines:
        for row, raw in enumerate(lines):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise DataError(path, row, "<line>", f"not UTF-8 text ({error})") from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise DataError(path, row, "<line>", f"not JSON ({error})") from None
            if not isinstance(record, dict):
                raise DataError(path, row, "<line>", f"expected a JSON object, got {type(record).__name__}")
            yield row, record


def text_field(path: str, row: int, record: dict, field: str) -> str:
    value = record.get(field)
    if not isinstance(value, str) or not value.strip():
        raise DataError(path, row, field, "expected a non-empty string" if field in record else "missing")
    return value


def integer_field(path: str, row: int, record: dict, field: str) -> int:
    value = record.get(field)
    if not isinstance(value, int) or isinstance(value, bool):
        raise DataError(path, row, field, f"expected an integer, got {type(value).__name__}")
    return value


def score_in(path: str, row: int, field: str, value, scale: tuple[int, int]) -> float:
    low, high = scale
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise DataError(path, row, field, f"expected a score from {low} to {high}, got {value!r}")
    if not low <= value <= high:
        raise DataError(path, row, field, f"score {value} is outside {low}-{high}")
    return float(value)


def text_list(path: str, row: int, values, field: str) -> list[str]:
    if not isinstance(values, list) or not values:
        raise DataError(path, row, field, "expected a non-empty list of strings")
    for index, value in enumerate(values):
        if not isinstance(value, str):
            raise DataError(path, row, f"{field}[{index}]", f"expected a string, got {type(value).__name__}")
    return values


# ---- FLASK ----


def flask_model(path: str) -> str:
    """The reviewed model, from the review file's name (``chatgpt_review.jsonl``; some files
    lack the suffix)."""
    return Path(path).stem.removesuffix("_review")


def flask_ratings(files: dict[str, list[str]]) -> list[dict]:
    """One record per reviewed answer: the instruction (``text``) and the model's answer
    (``target_txt``), scored by the mean of GPT-4's 1-5 scores of the instruction's skills
    (``score``: skill -> score or "N/A"). FLASK reports skills only; the mean is our overall
    score. A review whose scores GPT-4 left unparsable (an empty ``score``) or all "N/A" is
    left out, as FLASK's own aggregation leaves it out, and counted in the log."""
    records, unscored = [], Counter()
    for path in files["reviews"]:
        model = flask_model(path)
        for row, review in json_lines(path):
            question = text_field(path, row, review, "text")
            answer = text_field(path, row, review, "target_txt")
            skills = review.get("score")
            if not isinstance(skills, dict):
                raise DataError(path, row, "score", f"expected skill scores (a mapping), got {type(skills).__name__}")
            scores = [
                score_in(path, row, f"score.{skill}", value, FLASK_SCORES)
                for skill, value in skills.items()
                if value != NOT_APPLICABLE
            ]
            if not scores:
                unscored[path] += 1
                continue
            records.append(
                {
                    "conversation": [question, answer],
                    "score": sum(scores) / len(scores),
                    "model": model,
                    "question_id": integer_field(path, row, review, "question_id"),
                }
            )
    for path, count in unscored.items():
        LOG.info("%s: %d review(s) without a skill score left out", path, count)
    return records


RELEASED_FORMATS.register(
    "flask_reviews",
    ReleasedFormat(
        "flask_reviews",
        "rated_utterances",
        {"reviews": FileRole("FLASK's GPT-4 reviews of one model's answers", FLASK_REVIEWS_URL, many=True)},
        flask_ratings,
    ),
)


# ---- MT-Bench single-answer grades ----


def mt_bench_questions(path: str) -> dict[int, list[str]]:
    """question_id -> the question's user turns (FastChat's ``question.jsonl``)."""
    questions = {}
    for row, record in json_lines(path):
        questions[integer_field(path, row, record, "question_id")] = text_list(path, row, record.get("turns"), "turns")
    return questions


def mt_bench_answers(path: str) -> dict[int, list[str]]:
    """question_id -> the model's answer turns (``model_answer/{model}.jsonl``: the first of
    ``choices``, as FastChat's judging reads it)."""
    answers = {}
    for row, record in json_lines(path):
        question_id = integer_field(path, row, record, "question_id")
        choices = record.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise DataError(path, row, "choices", "expected a non-empty list of {index, turns}")
        answers[question_id] = text_list(path, row, choices[0].get("turns"), "choices[0].turns")
    return answers


def mt_bench_single_ratings(files: dict[str, list[str]]) -> list[dict]:
    """One record per GPT-4 single-answer grade (``model_judgment/gpt-4_single.jsonl``:
    question_id, model, judge, score 1-10, turn 1 or 2) of a model whose answers are given:
    the question's turns up to the graded one with the model's answers between them. A
    model is named by its answer file, as FastChat names it; grades of other models are
    left out (the answer files choose the models), as are FastChat's unrated judgments
    (score -1) and repeated grades of one answer, all counted in the log."""
    [questions_path], [judgments_path] = files["questions"], files["judgments"]
    questions = mt_bench_questions(questions_path)
    answers = {Path(path).stem: (path, mt_bench_answers(path)) for path in files["answers"]}
    records, seen, left_out = [], set(), Counter()
    for row, judgment in json_lines(judgments_path):
        model = text_field(judgments_path, row, judgment, "model")
        question_id = integer_field(judgments_path, row, judgment, "question_id")
        turn = integer_field(judgments_path, row, judgment, "turn")
        judge = judgment.get("judge")
        if not (isinstance(judge, list) and len(judge) == 2 and all(isinstance(part, str) for part in judge)):
            raise DataError(judgments_path, row, "judge", f"expected [judge model, prompt name], got {judge!r}")
        if model not in answers:
            left_out["grades of models without an answer file"] += 1
            continue
        if judgment.get("score") == MT_BENCH_UNRATED:
            left_out["unrated judgments (score -1)"] += 1
            continue
        score = score_in(judgments_path, row, "score", judgment.get("score"), MT_BENCH_SCORES)
        if (model, question_id, turn) in seen:
            left_out["repeated grades of one answer"] += 1
            continue
        seen.add((model, question_id, turn))
        if question_id not in questions:
            raise DataError(judgments_path, row, "question_id", f"question {question_id} is not in {questions_path}")
        answers_path, model_answers = answers[model]
        if question_id not in model_answers:
            raise DataError(judgments_path, row, "question_id", f"{answers_path} has no answer to {question_id}")
        user_turns, answer_turns = questions[question_id], model_answers[question_id]
        if turn not in (1, 2) or turn > min(len(user_turns), len(answer_turns)):
            raise DataError(
                judgments_path,
                row,
                "turn",
                f"turn {turn} of question {question_id}, which has {len(user_turns)} question turn(s) and "
                f"{len(answer_turns)} answer turn(s) in {answers_path}",
            )
        conversation = [text for pair in zip(user_turns[:turn], answer_turns[:turn]) for text in pair]
        records.append(
            {
                "conversation": conversation,
                "score": score,
                "model": model,
                "question_id": question_id,
                "turn": turn,
                "judge": "/".join(judge),
            }
        )
    for reason, count in left_out.items():
        LOG.info("%s: %d %s left out", judgments_path, count, reason)
    if not records:
        raise ValueError(
            f"{judgments_path}: no grade of the models whose answers are given ({sorted(answers)}); "
            "an answer file's name is the model's name in the judgments"
        )
    return records


RELEASED_FORMATS.register(
    "mt_bench_single",
    ReleasedFormat(
        "mt_bench_single",
        "rated_utterances",
        {
            "questions": FileRole("MT-Bench's 80 two-turn questions", FASTCHAT_MT_BENCH_URL),
            "answers": FileRole("one model's MT-Bench answers", MT_BENCH_URL + "model_answer/", many=True),
            "judgments": FileRole("GPT-4's single-answer grades", MT_BENCH_URL + "model_judgment/"),
        },
        mt_bench_single_ratings,
    ),
)


# ---- MT-Bench questions with FastChat's reference answers ----


def mt_bench_categories(path: str) -> dict[int, str]:
    """question_id -> the question's category (FastChat's ``question.jsonl``)."""
    return {
        integer_field(path, row, record, "question_id"): text_field(path, row, record, "category")
        for row, record in json_lines(path)
    }


def mt_bench_with_references(files: dict[str, list[str]]) -> list[dict]:
    """MT-Bench's questions in order, each with the reference answer turns FastChat's
    judging shows GPT-4 (``reference_answer/gpt-4.jsonl``: one per math, reasoning and coding
    question). The ``reference`` field of ``question.jsonl`` (short answers for some
    questions) is not what FastChat grades against, so it is not read."""
    [questions_path], [references_path] = files["questions"], files["reference_answers"]
    questions, categories = mt_bench_questions(questions_path), mt_bench_categories(questions_path)
    references = mt_bench_answers(references_path)
    unknown = sorted(set(references) - set(questions))
    if unknown:
        raise ValueError(f"{references_path}: reference answers to questions not in {questions_path}: {unknown}")
    return [
        {
            "prompt": turns,
            "prompt_id": question_id,
            "category": categories[question_id],
            "reference": references.get(question_id, []),
        }
        for question_id, turns in questions.items()
    ]


RELEASED_FORMATS.register(
    "fastchat_mt_bench",
    ReleasedFormat(
        "fastchat_mt_bench",
        "mt_bench_prompts",
        {
            "questions": FileRole("MT-Bench's 80 two-turn questions", FASTCHAT_MT_BENCH_URL),
            "reference_answers": FileRole(
                "GPT-4's reference answers FastChat grades math, reasoning and coding against",
                FASTCHAT_MT_BENCH_URL + "reference_answer/",
            ),
        },
        mt_bench_with_references,
    ),
)
