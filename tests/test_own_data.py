"""The researcher's own data and checkpoints as they have them: TRL's dataset formats as
source schemas, a ``columns:`` map for other field names, files that cannot be read named
in their errors, repeated ids refused, and a local checkpoint folder as a base model."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reprolm.data.builders import BuildContext, build_chat_sft, build_preference_pairs
from reprolm.data.schemas import DataError
from reprolm.data.sources import write_source


def _write_jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record) + "\n" for record in records))


def _pairs(source_spec: dict, **params) -> dict[str, list[dict]]:
    """The preference_pairs builder's splits from one source written as the workflow does."""
    write_source({"name": "mine", **source_spec}, "raw/mine")
    ctx = BuildContext({"mine": Path("raw/mine")}, {"mine": source_spec["schema"]}, params)
    return build_preference_pairs(ctx)


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def test_trl_standard_preference_strings_become_conversational_pairs():
    _write_jsonl(
        Path("prefs/train.jsonl"),
        [
            {"prompt": "The sky is", "chosen": " blue.", "rejected": " green."},
            {"prompt": "Two plus two?", "chosen": "Four.", "rejected": "Five."},
        ],
    )
    _write_jsonl(Path("prefs/test.jsonl"), [{"prompt": "Capital of France?", "chosen": "Paris.", "rejected": "Rome."}])
    spec = {"schema": "trl_preference", "files": {"train": "prefs/train.jsonl", "test": "prefs/test.jsonl"}}
    # No ``splits`` param: a file source's own split names are the dataset's.
    assert _pairs(spec) == {
        "train": [
            {"prompt": [user("The sky is")], "chosen": [assistant(" blue.")], "rejected": [assistant(" green.")]},
            {"prompt": [user("Two plus two?")], "chosen": [assistant("Four.")], "rejected": [assistant("Five.")]},
        ],
        "test": [
            {"prompt": [user("Capital of France?")], "chosen": [assistant("Paris.")], "rejected": [assistant("Rome.")]}
        ],
    }


def test_trl_conversational_preference_explicit_and_implicit_prompt():
    system = {"role": "system", "content": "Be brief."}
    explicit = {
        "prompt": [system, user("What color is the sky?")],
        "chosen": [assistant("Blue.")],
        "rejected": [assistant("Green.")],
    }
    implicit = {
        "chosen": [user("What color is grass?"), assistant("Green.")],
        "rejected": [user("What color is grass?"), assistant("Purple.")],
    }
    pq.write_table(pa.Table.from_pylist([explicit]), "explicit.parquet")
    _write_jsonl(Path("implicit.jsonl"), [implicit])
    assert _pairs({"schema": "trl_preference", "files": {"train": "explicit.parquet"}}) == {"train": [explicit]}
    assert _pairs({"schema": "trl_preference", "files": {"train": "implicit.jsonl"}}) == {
        "train": [
            {
                "prompt": [user("What color is grass?")],
                "chosen": [assistant("Green.")],
                "rejected": [assistant("Purple.")],
            }
        ]
    }


@pytest.mark.parametrize(
    "record, field, problem",
    [
        ({"prompt": "Q", "chosen": "A", "rejected": [assistant("B")]}, "rejected", "expected a string like the prompt"),
        ({"prompt": [user("Q")], "chosen": [user("A")], "rejected": [assistant("B")]}, "chosen[-1].role", "assistant"),
        ({"chosen": "A", "rejected": "B"}, "chosen", "a string with no prompt field"),
        (
            {"chosen": [user("Q"), assistant("A")], "rejected": [user("R"), assistant("B")]},
            "rejected",
            "share every turn before the last",
        ),
        ({"prompt": "Q", "chosen": "", "rejected": "B"}, "chosen", "empty string"),
        (
            {"prompt": [user("Q")], "chosen": [assistant("A")], "rejected": [assistant("B")]},
            "prompt",
            "conversational, but row 0 is standard: a split keeps one form",
        ),
    ],
)
def test_trl_preference_bad_row_names_file_row_and_field(record, field, problem):
    good = {"prompt": "Q", "chosen": "A", "rejected": "B"}
    _write_jsonl(Path("prefs.jsonl"), [good, record])
    with pytest.raises(DataError, match=r"prefs\.jsonl\): row 1: field ") as caught:
        write_source({"name": "mine", "schema": "trl_preference", "files": {"train": "prefs.jsonl"}}, "raw/mine")
    assert (caught.value.row, caught.value.field) == (1, field)
    assert problem in caught.value.problem
    assert not Path("raw/mine").exists()


def test_columns_map_names_other_fields_and_a_missing_column_is_named():
    _write_jsonl(Path("qa.jsonl"), [{"question": "Q1", "good": "A1", "bad": "B1", "prompt": "ignored", "extra": 1}])
    spec = {
        "schema": "trl_preference",
        "files": {"train": "qa.jsonl"},
        "columns": {"prompt": "question", "chosen": "good", "rejected": "bad"},
    }
    assert _pairs(spec) == {
        "train": [{"prompt": [user("Q1")], "chosen": [assistant("A1")], "rejected": [assistant("B1")]}]
    }
    misspelt = {**spec, "columns": {"prompt": "question", "chosen": "goood", "rejected": "bad"}}
    with pytest.raises(
        DataError, match=r"qa\.jsonl\): row 0: field 'goood': no such column \(columns\.chosen names it\)"
    ):
        write_source({"name": "mine", **misspelt}, "raw/mine2")
    assert not Path("raw/mine2").exists()


def test_trl_prompt_completion_and_conversational_as_sft_chats():
    _write_jsonl(
        Path("pc.jsonl"),
        [
            {"prompt": [user("Say hi.")], "completion": [assistant("Hi!")]},
            {"prompt": [user("Count.")], "completion": [assistant("1 2 3")]},
        ],
    )
    chat = [user("Hello"), assistant("Hi"), user("Bye"), assistant("Bye!")]
    _write_jsonl(Path("chats.jsonl"), [{"id": "c1", "messages": chat}])
    write_source({"name": "pc", "schema": "trl_prompt_completion", "files": {"train": "pc.jsonl"}}, "raw/pc")
    write_source({"name": "chats", "schema": "trl_conversational", "files": {"train": "chats.jsonl"}}, "raw/chats")
    ctx = BuildContext(
        {"pc": Path("raw/pc"), "chats": Path("raw/chats")},
        {"pc": "trl_prompt_completion", "chats": "trl_conversational"},
        {"splits": {"train": "train"}},
    )
    assert build_chat_sft(ctx) == {
        "train": [
            {"id": 0, "messages": [user("Say hi."), assistant("Hi!")]},
            {"id": 1, "messages": [user("Count."), assistant("1 2 3")]},
            {"id": 2, "messages": chat},
        ]
    }


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", r"data\.jsonl: the file is empty"),
        (b" \n\n", r"data\.jsonl: the file is empty \(whitespace only\)"),
        (
            b'{"text": "a"}\n\x00\x01\x02',
            r"data\.jsonl: a binary file, not UTF-8 text \(a NUL byte at byte offset 14, line 2\)",
        ),
        (
            '{"text": "caf\u00e9"}\n{"text": "na'.encode() + '\u00efve"}\n'.encode("latin-1"),
            r"data\.jsonl: not UTF-8 text: byte 0xef at byte offset 30, line 2",
        ),
    ],
)
def test_unreadable_file_is_named_with_where(content, message):
    Path("data.jsonl").write_bytes(content)
    with pytest.raises(ValueError, match=r"sources\.mine\.files\.train: " + message):
        write_source({"name": "mine", "schema": "trl_language_modeling", "files": {"train": "data.jsonl"}}, "raw/mine")
    assert not Path("raw/mine").exists()


def test_a_file_named_parquet_that_is_not_is_named():
    Path("data.parquet").write_text('{"text": "a"}\n')
    with pytest.raises(ValueError, match=r"sources\.mine\.files\.train: data\.parquet: not a parquet file"):
        write_source(
            {"name": "mine", "schema": "trl_language_modeling", "files": {"train": "data.parquet"}}, "raw/mine"
        )


def test_repeated_id_is_refused_naming_both_rows():
    from reprolm.data.fixtures import ultrafeedback_binarized

    records = ultrafeedback_binarized(n=3, seed=0)["train_prefs"]
    records[2] = {**records[2], "prompt_id": records[0]["prompt_id"]}
    _write_jsonl(Path("prefs.jsonl"), records)
    spec = {"name": "mine", "schema": "ultrafeedback_binarized", "files": {"train_prefs": "prefs.jsonl"}}
    with pytest.raises(DataError, match=r"prefs\.jsonl\): row 2: field 'prompt_id': .* repeats row 0's id"):
        write_source(spec, "raw/mine")
    _write_jsonl(Path("trl.jsonl"), [{"id": 7, "text": "a"}, {"id": 8, "text": "b"}, {"id": 7, "text": "c"}])
    with pytest.raises(DataError, match=r"trl\.jsonl\): row 2: field 'id': 7 repeats row 0's id"):
        write_source({"name": "mine", "schema": "trl_language_modeling", "files": {"train": "trl.jsonl"}}, "raw/mine")
    assert not Path("raw/mine").exists()
