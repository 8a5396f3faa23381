"""The researcher's own data and checkpoints as they have them: TRL's dataset formats as
source schemas, a ``columns:`` map for other field names, files that cannot be read named
in their errors, repeated ids refused, and a local checkpoint folder as a base model."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from reprolm.data.builders import BuildContext, build_chat_sft, build_preference_pairs
from reprolm.data.schemas import DataError
from reprolm.data.sources import write_source
from reprolm.provenance.hashing import content_hash
from workflow_helpers import dry_run_jobs, scratch_copy, snakemake


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


@pytest.mark.parametrize(
    "name, content, message",
    [
        (
            "data.jsonl",
            b'{"text": "a"}\n{"text": "b"}\n{"text": "c',
            r"data\.jsonl: line 3: not valid JSON \(Unterminated string starting at: column 10\); it is the "
            r"file's last line and ends without a newline: the file looks cut short$",
        ),
        (
            "data.jsonl",
            b'{"text": "a"}\n\n{"text": "b" "id": 2}\n{"text": "c"}\n',
            r"data\.jsonl: line 3: not valid JSON \(Expecting ',' delimiter: column 14\)$",
        ),
        (
            "data.jsonl",
            b'{"text": "a"}\n["b"]\n',
            r"data\.jsonl: line 2: a JSON array, not an object \(JSON lines hold one record, an object, per line\)$",
        ),
        # A .json file: one document, or JSON lines.
        (
            "data.json",
            b'[{"text": "a"},\n {"text": "b"}\n',
            r"data\.json: line 3: not valid JSON \(Expecting ',' delimiter: column 1\); the file ends there: it looks "
            r"cut short$",
        ),
        (
            "data.json",
            b'{"text": "a"}\n{"text": "b}\n{"text": "c"}\n',
            r"data\.json: line 2: not valid JSON \(Invalid control character at: column 13\)$",
        ),
        # What the csv reader says of a row with more fields than the header, on its own.
        (
            "data.csv",
            b"text,id\na,1\nb,2,3\n",
            r"data\.csv: the csv reader failed: Error tokenizing data\. C error: Expected 2 fields in line 3, saw 3$",
        ),
    ],
)
def test_a_cut_or_malformed_line_is_named_by_file_line_and_key(name, content, message):
    Path(name).write_bytes(content)
    with pytest.raises(ValueError, match=r"^sources\.mine\.files\.train: " + message) as refused:
        write_source({"name": "mine", "schema": "trl_language_modeling", "files": {"train": name}}, "raw/mine")
    # Raised on its own: no chain of the readers' tracebacks above it.
    assert refused.value.__cause__ is None and (refused.value.__context__ is None or refused.value.__suppress_context__)
    assert not Path("raw/mine").exists()


ONE_RULE_SNAKEFILE = """
rule raw_source:
    output:
        directory("resources/raw/{{source}}"),
    log:
        "logs/raw_source/{{source}}.log",
    params:
        spec={{"schema": "trl_language_modeling", "files": {{"train": "mine/train.jsonl"}}}},
    script:
        "{script}"
"""


@pytest.mark.workflow
@pytest.mark.slow
def test_a_cut_jsonl_file_ends_its_jobs_log_named_by_key_file_and_line(tmp_path):
    """The workflow's own raw_source script in a one-rule Snakefile (the whole workflow takes
    half a minute to parse), reading a file whose last line a copy cut short."""
    import subprocess
    import sys

    from workflow_helpers import REPO

    (tmp_path / "Snakefile").write_text(ONE_RULE_SNAKEFILE.format(script=REPO / "workflow/scripts/raw_source.py"))
    _write_jsonl(tmp_path / "mine/train.jsonl", [{"text": f"line {i}"} for i in range(200)])
    whole = (tmp_path / "mine/train.jsonl").read_bytes()
    (tmp_path / "mine/train.jsonl").write_bytes(whole[: whole.rindex(b'"')])
    run = subprocess.run(
        [str(Path(sys.executable).with_name("snakemake")), "--cores", "1", "resources/raw/mine"],
        cwd=tmp_path,
        env={**os.environ, "REPROLM_FORKSERVER": "off", "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert run.returncode != 0
    assert not (tmp_path / "resources/raw/mine").exists()
    log = (tmp_path / "logs/raw_source/mine.log").read_text().rstrip().splitlines()
    assert log[-1] == (
        "ValueError: sources.mine.files.train: mine/train.jsonl: line 200: not valid JSON (Unterminated string "
        "starting at: column 10); it is the file's last line and ends without a newline: the file looks cut short"
    )
    trace = "\n".join(log[log.index(next(line for line in log if "ERROR rule raw_source failed" in line)) :])
    assert trace.count("Traceback") == 1 and "DatasetGenerationError" not in trace


def test_json_files_that_are_whole_are_read():
    Path("doc.json").write_text('[{"text": "a"},\n {"text": "b"}]\n')
    _write_jsonl(Path("lines.json"), [{"text": "c"}])
    Path("lines.jsonl").write_text('{"text": "d"}\n\n{"text": "e"}')
    spec = {"schema": "trl_language_modeling", "files": {"a": "doc.json", "b": "lines.json", "c": "lines.jsonl"}}
    assert write_source({"name": "mine", **spec}, "raw/mine") == {"a": 2, "b": 1, "c": 2}


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


def _checkpoint(folder: Path) -> Path:
    """A checkpoint folder as save_pretrained leaves it (the weights' bytes stand in)."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "llama"}\n')
    (folder / "tokenizer.json").write_text('{"version": "1.0"}\n')
    (folder / "model.safetensors").write_bytes(b"weights-v1")
    return folder


def _replace_with_older(path: Path, content: bytes) -> None:
    """New content under the same name, dated before anything was made from the old."""
    path.with_suffix(".new").write_bytes(content)
    os.utime(path.with_suffix(".new"), ns=(1_000_000_000, 1_000_000_000))
    os.replace(path.with_suffix(".new"), path)


def test_local_checkpoint_hash_reads_only_changed_files(monkeypatch):
    import reprolm.models.local as local

    folder = _checkpoint(Path("ckpt"))
    assert local.register_local_checkpoint(folder, "registered") == 3
    assert os.path.samefile("ckpt/model.safetensors", "registered/model.safetensors")
    # As the registering job records it.
    manifest = {
        rel: [item.stat().st_size, item.stat().st_mtime_ns, content_hash(item)]
        for rel, item in local.content_files(Path("registered"))
    }
    Path("registered/provenance.json").write_text(json.dumps({"outputs": [{"path": "registered", "files": manifest}]}))
    read = []
    monkeypatch.setattr(local, "file_sha256", lambda item: read.append(item.name) or content_hash(item))
    assert local.local_checkpoint_hash(folder, "registered") == content_hash("registered") and read == []
    # A touched file is read again, and its content is what it was.
    os.utime(folder / "config.json")
    assert local.local_checkpoint_hash(folder, "registered") == content_hash("registered")
    assert read == ["config.json"]
    read.clear()
    _replace_with_older(folder / "model.safetensors", b"weights-v2")
    assert local.local_checkpoint_hash(folder, "registered") == content_hash(folder) != content_hash("registered")
    # The touched file too: the record still has its old time.
    assert read == ["config.json", "model.safetensors"]


@pytest.mark.parametrize(
    "make, problem",
    [
        (shutil.rmtree, r"ckpt: no such folder"),
        (lambda folder: (folder / "config.json").unlink(), r"ckpt: no config\.json"),
        (lambda folder: (folder / "tokenizer.json").unlink(), r"ckpt: no tokenizer \(one of tokenizer\.json"),
        (
            lambda folder: (folder / "adapter_config.json").write_text("{}"),
            r"ckpt: adapter_config\.json names no base_model",
        ),
    ],
)
def test_config_refuses_a_checkpoint_folder_it_cannot_load(make, problem):
    from reprolm.checks import _check_base_models
    from reprolm.errors import ConfigError

    make(_checkpoint(Path("ckpt")))
    config = {"base_models": {"mine": {"path": "ckpt"}}}
    with pytest.raises(ConfigError, match=r"base_models\.mine\.path: " + problem):
        _check_base_models(config)


@pytest.mark.workflow
def test_local_checkpoint_registered_by_content_through_snakemake(tmp_path):
    work = scratch_copy(tmp_path / "work")
    folder = _checkpoint(work / "my_checkpoint")
    (work / "mine.yaml").write_text(yaml.safe_dump({"base_models": {"mine": {"path": "my_checkpoint"}}}))
    overlay = ("--configfile", "config/config.yaml", "mine.yaml")
    snakemake(work, "resources/models/mine", *overlay)
    registered = work / "resources/models/mine"
    assert os.path.samefile(folder / "model.safetensors", registered / "model.safetensors")
    record = json.loads((registered / "provenance.json").read_text())
    assert record["outputs"][0]["sha256"] == content_hash(folder)
    # New content, though dated before the registered copy: registered again.
    _replace_with_older(folder / "model.safetensors", b"weights-v2")
    assert dry_run_jobs(work, "resources/models/mine", *overlay) == [("local_base_model", {"base": "mine"})]
