"""Sources that load: the researcher's own files under split names of their choosing, loading
scripts refused with a message naming the source, and paper.yaml's file-based ELI5."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from reprolm.checks import check_config
from reprolm.config import overlays
from reprolm.config.schema import validate_config
from reprolm.data.fixtures import ultrafeedback_binarized
from reprolm.data.schemas import DataError
from reprolm.data.sources import read_all_splits, read_source, write_source
from reprolm.data.upstream import make_fixture
from reprolm.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
SCHEMA_FILE = REPO / "workflow/schemas/config.schema.yaml"


def _write_jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record) + "\n" for record in records))


def _write_parquet(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(records), path)


@pytest.fixture
def preference_files(tmp_path, monkeypatch):
    """UltraFeedback-style records in the working directory: train_prefs over two parquet
    files, test_prefs in one JSON-lines file."""
    monkeypatch.chdir(tmp_path)
    records = ultrafeedback_binarized(n=6, seed=0)
    _write_parquet(Path("prefs/train-0.parquet"), records["train_prefs"][:4])
    _write_parquet(Path("prefs/train-1.parquet"), records["train_prefs"][4:])
    _write_jsonl(Path("prefs/test.jsonl"), records["test_prefs"])
    files = {"train_prefs": ["prefs/train-0.parquet", "prefs/train-1.parquet"], "test_prefs": "prefs/test.jsonl"}
    return records, files


def test_files_source_keeps_the_split_names_it_declares(preference_files):
    records, files = preference_files
    spec = {"name": "my_prefs", "schema": "ultrafeedback_binarized", "files": files}
    assert write_source(spec, "raw/my_prefs") == {"train_prefs": 6, "test_prefs": 6}
    assert json.loads(Path("raw/my_prefs/splits.json").read_text()) == ["train_prefs", "test_prefs"]
    for split in ("train_prefs", "test_prefs"):
        assert read_source("raw/my_prefs", "ultrafeedback_binarized", split) == records[split]


def test_files_source_bad_row_names_the_researchers_file(preference_files):
    records, files = preference_files
    broken = [dict(records["test_prefs"][0]), {**records["test_prefs"][1], "prompt": ""}]
    _write_jsonl(Path("prefs/test.jsonl"), broken)
    spec = {"name": "my_prefs", "schema": "ultrafeedback_binarized", "files": files}
    with pytest.raises(
        DataError,
        match=r"sources\.my_prefs\.files\.test_prefs \(prefs/test\.jsonl\): "
        r"row 1: field 'prompt': empty string",
    ):
        write_source(spec, "raw/my_prefs")
    assert not Path("raw/my_prefs").exists()


def test_missing_or_unknown_file_is_refused_naming_source_and_path(preference_files):
    _, files = preference_files
    missing = {
        "name": "my_prefs",
        "schema": "ultrafeedback_binarized",
        "files": {**files, "test_prefs": ["prefs/test.jsonl", "prefs/gone.parquet"]},
    }
    with pytest.raises(
        FileNotFoundError,
        match=r"sources\.my_prefs\.files\.test_prefs: prefs/gone\.parquet: "
        r"no such file",
    ):
        write_source(missing, "raw/my_prefs")
    Path("prefs/test.tsv").write_text("prompt\n")
    unknown = {"name": "my_prefs", "schema": "ultrafeedback_binarized", "files": {"test_prefs": "prefs/test.tsv"}}
    with pytest.raises(
        ValueError,
        match=r"sources\.my_prefs\.files\.test_prefs: prefs/test\.tsv: unknown file "
        r"type '\.tsv'; known: \['\.csv', '\.json', '\.jsonl', '\.parquet'\]",
    ):
        write_source(unknown, "raw/my_prefs")
    mixed = {
        "name": "my_prefs",
        "schema": "ultrafeedback_binarized",
        "files": {"train_prefs": ["prefs/train-0.parquet", "prefs/test.jsonl"]},
    }
    with pytest.raises(
        ValueError,
        match=r"sources\.my_prefs\.files\.train_prefs: a split's files must share "
        r"one format; got \['json', 'parquet'\]",
    ):
        write_source(mixed, "raw/my_prefs")
    assert not Path("raw").exists()


def test_config_check_refuses_a_missing_file_before_any_job(preference_files):
    _, files = preference_files
    config = overlays.load(REPO / "config/config.yaml", REPO)
    # This test works in a folder of its own, where the project's files are not.
    config["harmony"]["reference_results"] = str(REPO / config["harmony"]["reference_results"])
    config["sources"]["my_prefs"] = {"schema": "ultrafeedback_binarized", "files": files}
    check_config(config, SCHEMA_FILE)
    config["sources"]["my_prefs"]["files"]["test_prefs"] = "prefs/test_prefs.jsonl"
    with pytest.raises(
        ConfigError,
        match=r"sources\.my_prefs\.files\.test_prefs: prefs/test_prefs\.jsonl: "
        r"no such file \(paths are relative to the working directory",
    ):
        check_config(config, SCHEMA_FILE)


@pytest.mark.parametrize(
    "source, accepted",
    [
        ({"schema": "eli5", "files": {"train_eli5": "eli5/train.parquet"}}, True),
        ({"schema": "eli5", "files": {"train_eli5": ["a.parquet", "b.parquet"], "test_eli5": "t.jsonl"}}, True),
        ({"schema": "eli5", "files": {}}, False),
        ({"schema": "eli5", "files": {"train_eli5": []}}, False),
        ({"schema": "eli5", "files": {"train-eli5": "eli5/train.parquet"}}, False),
        ({"schema": "eli5", "files": {"train_eli5": "x.parquet"}, "hub": {"path": "parquet"}}, False),
        ({"schema": "eli5", "hub": {"path": "parquet", "data_files": {"train_eli5": "x.parquet"}}}, True),
    ],
)
def test_config_schema_takes_exactly_one_of_fixture_hub_files(source, accepted):
    config = overlays.load(REPO / "config/config.yaml", REPO)
    config["sources"]["mine"] = source
    if accepted:
        validate_config(config, SCHEMA_FILE)
    else:
        with pytest.raises(ConfigError, match="^sources.mine"):
            validate_config(config, SCHEMA_FILE)


def test_loading_script_is_refused_naming_the_source(tmp_path):
    """A local dataset folder holding its loading script, as `datasets` finds one on the hub:
    `datasets` itself refuses it, and the message says which source and what to write instead."""
    script_dataset = tmp_path / "old_eli5"
    script_dataset.mkdir()
    (script_dataset / "old_eli5.py").write_text("import datasets\n")
    # What the raw_source job passes: the config entry with its name (the rule's wildcard).
    spec = {"name": "eli5", "schema": "eli5", "hub": {"path": str(script_dataset), "splits": ["train_eli5"]}}
    with pytest.raises(ValueError) as refused:
        write_source(spec, tmp_path / "raw/eli5")
    message = str(refused.value)
    assert message.startswith(f"sources.eli5.hub.path {str(script_dataset)!r} is a dataset loading script")
    assert "Dataset scripts are no longer supported, but found old_eli5.py" in message
    assert "hub: {path: parquet|json|csv, data_files: {split: URL}}" in message
    assert "files: {split: path}" in message
    assert not (tmp_path / "raw").exists()


@pytest.mark.workflow
def test_raw_source_reruns_when_its_file_changes(tmp_path):
    """The files are the job's inputs: one edited after the source was written reruns it."""
    from workflow_helpers import scratch_copy, snakemake

    work = scratch_copy(tmp_path)
    config = overlays.load(work / "config/config.yaml", work)
    config["sources"]["my_prefs"] = {
        "schema": "ultrafeedback_binarized",
        "files": {"train_prefs": "prefs/train.parquet"},
    }
    (work / "files.yaml").write_text(yaml.safe_dump(config))
    _write_parquet(work / "prefs/train.parquet", ultrafeedback_binarized(n=2, seed=0)["train_prefs"])
    written = work / "resources/raw/my_prefs"
    written.mkdir(parents=True)
    edited = written.stat().st_mtime + 60
    os.utime(work / "prefs/train.parquet", (edited, edited))
    result = snakemake(work, "-n", "resources/raw/my_prefs", "--configfile", "files.yaml")
    output = result.stdout + result.stderr
    assert "rule raw_source:\n    input: prefs/train.parquet\n    output: resources/raw/my_prefs" in output
    assert "Updated input files: prefs/train.parquet" in output


def test_paper_eli5_loads_through_its_parquet_files_into_ruler_splits(tmp_path):
    """paper.yaml's ELI5 is the parquet export of a mirror at one revision, read by
    `datasets`' parquet loader under Ruler's split names. Local stand-ins in the mirror's
    layout, at paths in place of the pinned URLs, load into the eli5 schema, and the splits
    keep the order Ruler's training build reads them in (train, test, validation)."""
    paper = yaml.safe_load((REPO / "config/paper.yaml").read_text())
    spec = paper["sources"]["eli5"]
    assert "eli5" in paper["datasets"]["ruler_train"]["sources"] and spec["schema"] == "eli5"
    hub = spec["hub"]
    ruler_splits = ["train_eli5", "test_eli5", "validation_eli5"]
    assert hub["path"] == "parquet" and hub["splits"] == ruler_splits and list(hub["data_files"]) == ruler_splits
    pinned = "https://huggingface.co/datasets/vblagoje/lfqa/resolve/8a7747b35988010dd5b6534d85442de71be63cd0/"
    records = make_fixture("eli5", n=9, seed=3, bin_centres=[10, 30], max_words=60)
    local, counts = {}, {}
    for split, urls in hub["data_files"].items():
        urls = [urls] if isinstance(urls, str) else urls
        local[split] = []
        for url in urls:
            assert url.startswith(pinned)
            path = tmp_path / "mirror" / url.removeprefix(pinned)
            _write_parquet(path, records[:3])
            local[split].append(str(path))
        counts[split] = 3 * len(urls)
    stand_in = {**spec, "name": "eli5", "hub": {**hub, "data_files": local}}
    assert write_source(stand_in, tmp_path / "raw/eli5") == counts
    assert json.loads((tmp_path / "raw/eli5/splits.json").read_text()) == ruler_splits
    loaded = read_all_splits(tmp_path / "raw/eli5", "eli5")
    assert len(loaded) == sum(counts.values())
    assert loaded[0]["title"] == records[0]["title"] and loaded[0]["answers"]["text"] == records[0]["answers"]["text"]
