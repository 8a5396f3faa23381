"""Upstream record schemas, and loading raw sources with row-level validation.

A raw source is stored as ``resources/raw/{source}/data.parquet``, whether it was made
from a fixture or downloaded from the hub; the schema names the upstream format so the
same builders read both.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq


class DataError(ValueError):
    """A malformed record: names the file, the row (0-based) and the field."""

    def __init__(self, path, row: int, field: str, problem: str):
        super().__init__(f"{path}: row {row}: field {field!r}: {problem}")
        self.path, self.row, self.field, self.problem = str(path), row, field, problem


def _require_str(record: dict, field: str, *, allow_empty=False) -> str | None:
    value = record.get(field)
    if not isinstance(value, str):
        return f"expected a string, got {type(value).__name__}"
    if not allow_empty and not value.strip():
        return "empty string"
    return None


def _check_turns(record: dict, field: str, keys: tuple[str, ...]) -> tuple[str, str] | None:
    turns = record.get(field)
    if not isinstance(turns, list) or not turns:
        return field, "empty conversation" if isinstance(turns, list) else "expected a list of turns"
    for index, turn in enumerate(turns):
        if not isinstance(turn, dict):
            return f"{field}[{index}]", "expected a mapping"
        for key in keys:
            if not isinstance(turn.get(key), str):
                return f"{field}[{index}].{key}", f"expected a string, got {type(turn.get(key)).__name__}"
    return None


def _fields(*names: str, allow_empty=()) -> Callable[[dict], tuple[str, str] | None]:
    def check(record):
        for name in names:
            problem = _require_str(record, name, allow_empty=name in allow_empty)
            if problem:
                return name, problem
        return None

    return check


def _check_eli5(record):
    problem = _require_str(record, "title")
    if problem:
        return "title", problem
    answers = record.get("answers")
    if not isinstance(answers, dict) or not isinstance(answers.get("text"), list):
        return "answers.text", "expected a list of answer strings"
    if not all(isinstance(a, str) for a in answers["text"]):
        return "answers.text", "expected a list of answer strings"
    return None


def _check_preference(record):
    problem = _require_str(record, "prompt")
    if problem:
        return "prompt", problem
    for field in ("chosen", "rejected"):
        problem = _check_turns(record, field, ("role", "content"))
        if problem:
            return problem
        if record[field][-1]["role"] != "assistant":
            return f"{field}[-1].role", f"the last turn must be the assistant's, got {record[field][-1]['role']!r}"
    for field in ("score_chosen", "score_rejected"):
        if not isinstance(record.get(field), (int, float)):
            return field, f"expected a number, got {type(record.get(field)).__name__}"
    return None


def _check_string_list(record, field: str):
    values = record.get(field)
    if not isinstance(values, list) or not values:
        return field, "expected a non-empty list of strings"
    for index, value in enumerate(values):
        problem = _require_str({"value": value}, "value")
        if problem:
            return f"{field}[{index}]", problem
    return None


def _check_helpsteer(record):
    problem = _fields("prompt", "response")(record)
    if problem:
        return problem
    for field in ("helpfulness", "correctness", "coherence", "complexity", "verbosity"):
        if not isinstance(record.get(field), (int, float)):
            return field, f"expected a number, got {type(record.get(field)).__name__}"
    return None


def _check_feedback(record):
    problem = _fields("orig_instruction", "orig_response", "orig_score")(record)
    if problem:
        return problem
    try:
        float(record["orig_score"])
    except ValueError:
        return "orig_score", f"expected a number, got {record['orig_score']!r}"
    return None


def _check_rated_utterances(record):
    problem = _check_string_list(record, "conversation")
    if problem:
        return problem
    if len(record["conversation"]) % 2:
        return "conversation", "expected user and assistant utterances in turn, ending with the rated answer"
    if not isinstance(record.get("score"), (int, float)):
        return "score", f"expected a number, got {type(record.get('score')).__name__}"
    return None


def _check_wildbench(record):
    for field in ("chat_history", "output"):
        problem = _check_string_list(record, field)
        if problem:
            return problem
    return _fields("session_id", "generator")(record)


SCHEMAS: dict[str, Callable[[dict], tuple[str, str] | None]] = {
    # teknium/OpenHermes-2.5: {"conversations": [{"from", "value"}, ...], "source", ...}
    "openhermes_conversations": lambda r: _check_turns(r, "conversations", ("from", "value")),
    # akoksal/LongForm: {"input", "output", "source", "subset"}
    "longform": _fields("input", "output"),
    # eli5: {"q_id", "title", "selftext", "answers": {"text": [...], "score": [...]}}
    "eli5": _check_eli5,
    # arena-hard-v0.1 question.jsonl: {"question_id", "category", "turns": [{"content"}]}
    "arena_question": lambda r: _check_turns(r, "turns", ("content",)),
    # plain text corpus: {"text"}
    "text": _fields("text"),
    # HuggingFaceH4/ultrafeedback_binarized (train_prefs/test_prefs): {"prompt", "prompt_id",
    # "chosen"/"rejected": [{"role", "content"}, ...], "score_chosen", "score_rejected", ...}
    "ultrafeedback_binarized": _check_preference,
    # tatsu-lab/alpaca_eval (alpaca_eval_gpt4_baseline): {"instruction", "output" (the
    # reference model's answer), "generator", "dataset"}
    "alpaca_eval": _fields("instruction", "output"),
    # HuggingFaceH4/mt_bench_prompts: {"prompt": [turn, ...], "prompt_id", "category", "reference"}
    "mt_bench_prompts": lambda r: _check_string_list(r, "prompt"),
    # nvidia/HelpSteer: {"prompt", "response", "helpfulness", "correctness", "coherence",
    # "complexity", "verbosity"} (attributes 0-4)
    "helpsteer": _check_helpsteer,
    # prometheus-eval/Feedback-Bench and Feedback-Collection: {"orig_instruction",
    # "orig_response", "orig_feedback", "orig_score" (1-5, as text), "orig_criteria", ...}
    "feedback_bench": _check_feedback,
    "feedback_collection": _check_feedback,
    # allenai/WildBench-V2-Model-Outputs: {"session_id", "chat_history": [user, assistant, ...,
    # user], "output": [answer], "generator"}
    "wildbench_outputs": _check_wildbench,
    # FLR's released rating benchmarks (FLASK, MT-Bench single score): {"conversation": the
    # utterances, user first, the last being the rated answer; "score": the ground truth}
    "rated_utterances": _check_rated_utterances,
    # AI-MO/NuminaMath-CoT: {"source", "problem", "solution", "messages": [{"role", "content"}, ...]}
    "numina_cot": lambda r: _fields("problem", "solution")(r) or _check_turns(r, "messages", ("role", "content")),
    # GEM's creative-writing prompts (liziniu/GEM data/poem_generation, data/story_generation): {"instruction"}
    "writing_prompts": _fields("instruction"),
}


def validate_records(records: list[dict], schema: str, path) -> list[dict]:
    from reprolm.data.task_docs import TASK_DOC_CHECKS

    check = SCHEMAS.get(schema) or TASK_DOC_CHECKS.get(schema)
    if check is None:
        raise ValueError(f"unknown schema {schema!r}; known: {sorted(SCHEMAS) + sorted(TASK_DOC_CHECKS)}")
    for row, record in enumerate(records):
        if not isinstance(record, dict):
            raise DataError(path, row, "<record>", "expected a mapping")
        problem = check(record)
        if problem:
            raise DataError(path, row, *problem)
    return records


def load_records(path: str | Path, schema: str) -> list[dict]:
    """Read a raw parquet source and validate every row against ``schema``."""
    records = pq.read_table(path).to_pylist()
    return validate_records(records, schema, path)
