"""Record checks of the upstream schemas (bound to their schemas in :mod:`.upstream`): each
returns ``(field, problem)`` for a record's first problem, or None."""

from __future__ import annotations

from collections.abc import Callable

Problem = tuple[str, str] | None


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


def check_turns(record: dict, field: str, keys: tuple[str, ...]) -> Problem:
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


def fields(*names: str, allow_empty=()) -> Callable[[dict], Problem]:
    def check(record):
        for name in names:
            problem = _require_str(record, name, allow_empty=name in allow_empty)
            if problem:
                return name, problem
        return None

    return check


def check_eli5(record):
    problem = _require_str(record, "title")
    if problem:
        return "title", problem
    answers = record.get("answers")
    if not isinstance(answers, dict) or not isinstance(answers.get("text"), list):
        return "answers.text", "expected a list of answer strings"
    if not all(isinstance(a, str) for a in answers["text"]):
        return "answers.text", "expected a list of answer strings"
    return None


def check_preference(record):
    problem = _require_str(record, "prompt")
    if problem:
        return "prompt", problem
    for field in ("chosen", "rejected"):
        problem = check_turns(record, field, ("role", "content"))
        if problem:
            return problem
        if record[field][-1]["role"] != "assistant":
            return f"{field}[-1].role", f"the last turn must be the assistant's, got {record[field][-1]['role']!r}"
    for field in ("score_chosen", "score_rejected"):
        if not isinstance(record.get(field), (int, float)):
            return field, f"expected a number, got {type(record.get(field)).__name__}"
    return None


def check_string_list(record, field: str):
    values = record.get(field)
    if not isinstance(values, list) or not values:
        return field, "expected a non-empty list of strings"
    for index, value in enumerate(values):
        problem = _require_str({"value": value}, "value")
        if problem:
            return f"{field}[{index}]", problem
    return None


def check_helpsteer(record):
    problem = fields("prompt", "response")(record)
    if problem:
        return problem
    for field in ("helpfulness", "correctness", "coherence", "complexity", "verbosity"):
        if not isinstance(record.get(field), (int, float)):
            return field, f"expected a number, got {type(record.get(field)).__name__}"
    return None


def check_feedback(record):
    problem = fields("orig_instruction", "orig_response", "orig_score")(record)
    if problem:
        return problem
    try:
        float(record["orig_score"])
    except ValueError:
        return "orig_score", f"expected a number, got {record['orig_score']!r}"
    return None


def check_rated_utterances(record):
    problem = check_string_list(record, "conversation")
    if problem:
        return problem
    if len(record["conversation"]) % 2:
        return "conversation", "expected user and assistant utterances in turn, ending with the rated answer"
    if not isinstance(record.get("score"), (int, float)):
        return "score", f"expected a number, got {type(record.get('score')).__name__}"
    return None


def check_gamed_annotation(record):
    """A row of AlpacaEval's ``df_gamed.csv``: a gamed baseline's verdict on one instruction."""
    problem = _require_str(record, "model")
    if problem:
        return "model", problem
    if not isinstance(record.get("index"), int) or isinstance(record.get("index"), bool):
        return "index", f"expected an instruction index, got {type(record.get('index')).__name__}"
    for field in ("preference", "std_delta_len", "instruction_difficulty"):
        if not isinstance(record.get(field), (int, float)) or isinstance(record.get(field), bool):
            return field, f"expected a number, got {type(record.get(field)).__name__}"
    if not isinstance(record.get("not_gamed_baseline"), bool):
        return "not_gamed_baseline", f"expected true or false, got {type(record.get('not_gamed_baseline')).__name__}"
    return None


def check_wildbench(record):
    for field in ("chat_history", "output"):
        problem = check_string_list(record, field)
        if problem:
            return problem
    return fields("session_id", "generator")(record)


def _messages_problem(value, field: str) -> Problem:
    """A list of chat messages with string roles and contents, or what is wrong with it."""
    return check_turns({field: value}, field, ("role", "content"))


def _text_or_messages(record: dict, field: str, kind: type) -> Problem:
    """``field`` is of ``kind``: a non-empty string (TRL's standard form) or a list of
    messages (its conversational form)."""
    if kind is str:
        problem = _require_str(record, field)
        return (field, problem) if problem else None
    return _messages_problem(record.get(field), field)


def _form(record: dict, field: str) -> type | None:
    value = record.get(field)
    return str if isinstance(value, str) else list if isinstance(value, list) else None


def _ends_with_answer(record: dict, field: str) -> Problem:
    role = record[field][-1]["role"]
    if role != "assistant":
        return f"{field}[-1].role", f"the last turn must be the assistant's, got {role!r}"
    return None


def check_trl_preference(record):
    """TRL's preference format: ``prompt``, ``chosen`` and ``rejected`` all strings
    (standard) or all message lists (conversational); or, with the prompt implicit,
    ``chosen`` and ``rejected`` whole conversations that differ only in the last turn."""
    if "prompt" not in record or record["prompt"] is None:
        for field in ("chosen", "rejected"):
            problem = _messages_problem(record.get(field), field) or _ends_with_answer(record, field)
            if problem:
                if isinstance(record.get(field), str):
                    return field, "a string with no prompt field: add a prompt, or give whole conversations"
                return problem
        if record["chosen"][:-1] != record["rejected"][:-1]:
            return "rejected", "with an implicit prompt, chosen and rejected must share every turn before the last"
        return None
    kind = _form(record, "prompt")
    if kind is None:
        return "prompt", f"expected a string or a list of messages, got {type(record['prompt']).__name__}"
    problem = _text_or_messages(record, "prompt", kind)
    if problem:
        return problem
    for field in ("chosen", "rejected"):
        if _form(record, field) is not kind:
            expected = "a string" if kind is str else "a list of messages"
            return field, f"expected {expected} like the prompt, got {type(record.get(field)).__name__}"
        problem = _text_or_messages(record, field, kind)
        if problem:
            return problem
    if kind is list:
        return _ends_with_answer(record, "chosen") or _ends_with_answer(record, "rejected")
    return None


def check_trl_prompt_completion(record):
    """TRL's prompt-completion format: ``prompt`` and ``completion`` both strings (standard)
    or both message lists (conversational)."""
    kind = _form(record, "prompt")
    if kind is None:
        return "prompt", f"expected a string or a list of messages, got {type(record.get('prompt')).__name__}"
    if _form(record, "completion") is not kind:
        expected = "a string" if kind is str else "a list of messages"
        return "completion", f"expected {expected} like the prompt, got {type(record.get('completion')).__name__}"
    return _text_or_messages(record, "prompt", kind) or _text_or_messages(record, "completion", kind)
