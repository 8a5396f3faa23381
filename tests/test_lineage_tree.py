"""Lineage of any file: one inside a recorded folder resolves to the folder's record, and a
shared ancestor is described once. Records are written here as the workflow writes them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reprolm.cli import main
from reprolm.provenance import content_hash, provenance_path
from reprolm.provenance.query import lineage


def recorded(root: Path, path: str, rule: str, inputs: list[str], content: str | None = None) -> None:
    """An artifact (a file, or a folder holding ``table.csv``) and its provenance record."""
    target = root / path
    if content is None:
        target.mkdir(parents=True)
        (target / "table.csv").write_text(f"made by {rule}\n")
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    record = {
        "rule": rule,
        "wildcards": {},
        "params": {},
        "code": {"commit": "abc", "dirty": False},
        "execution": {"host": "here"},
        "finished": "now",
        "inputs": {"input": [{"path": p, "sha256": content_hash(root / p)} for p in inputs]},
        "outputs": [{"path": path, "sha256": content_hash(target)}],
    }
    provenance_path(target).write_text(json.dumps(record))


@pytest.fixture
def run(tmp_path) -> Path:
    """A table folder made from two datasets that share one raw source."""
    recorded(tmp_path, "resources/raw/world", "raw_source", [])
    recorded(tmp_path, "results/datasets/a/train.parquet", "dataset", ["resources/raw/world"], "a")
    recorded(tmp_path, "results/datasets/b/train.parquet", "dataset", ["resources/raw/world"], "b")
    recorded(
        tmp_path,
        "results/tables/study",
        "study_tables",
        ["results/datasets/a/train.parquet", "results/datasets/b/train.parquet"],
    )
    return tmp_path


def test_a_file_in_a_recorded_folder_resolves_to_the_folders_record(run, capsys):
    graph = lineage("results/tables/study/table.csv", root=run)
    assert graph["root"] == "results/tables/study"
    assert graph["requested"] == {
        "path": "results/tables/study/table.csv",
        "inside": "results/tables/study",
        "sha256": content_hash(run / "results/tables/study/table.csv"),
    }
    assert set(graph["artifacts"]) == {
        "results/tables/study",
        "results/datasets/a/train.parquet",
        "results/datasets/b/train.parquet",
        "resources/raw/world",
    }
    assert main(["--root", str(run), "lineage", "results/tables/study/table.csv"]) == 0
    tree = capsys.readouterr().out.splitlines()
    assert tree[0].startswith("results/tables/study/table.csv  sha256 ")
    assert tree[1].startswith("└── results/tables/study  [rule study_tables]")
    # A file that no record covers is still refused.
    (run / "stray.txt").write_text("x")
    assert main(["--root", str(run), "lineage", "stray.txt"]) == 2
    assert "no recorded folder holds it" in capsys.readouterr().err


def test_a_shared_ancestor_is_described_once_and_named_where_it_comes_again(run, capsys):
    assert main(["--root", str(run), "lineage", "results/tables/study"]) == 0
    tree = capsys.readouterr().out.splitlines()
    paths = [re.sub(r"^[│├└─ ]*", "", line).split("  ")[0] for line in tree]
    described = [path for path, line in zip(paths, tree) if "  [rule " in line]
    assert sorted(described) == sorted(set(described)) and len(described) == 4
    again = [path for path, line in zip(paths, tree) if line.endswith("(shown above)")]
    assert again == ["resources/raw/world"]


def test_lineage_and_verify_outside_a_run_folder_end_with_one_line_naming_what_is_missing(
    run, tmp_path_factory, capsys
):
    """Exit 2 and one line, not a traceback or "0 problems": outside a run folder, for a path
    given that is not there, for a folder without records."""
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    not_a_run = (
        f"{elsewhere} is not a run folder (no results/ or resources/ there): "
        "run reprolm where the workflow ran, or give --root"
    )
    assert main(["--root", str(elsewhere), "lineage", "results/tables/study"]) == 2
    assert capsys.readouterr().err == f"reprolm lineage: results/tables/study: {not_a_run}\n"
    assert main(["--root", str(elsewhere), "verify"]) == 2
    assert capsys.readouterr().err == f"reprolm verify: {not_a_run}\n"
    assert main(["--root", str(run), "verify", "results/tables/study", "results/tabels"]) == 2
    assert capsys.readouterr().err == f"reprolm verify: not in {run}: results/tabels\n"
    (run / "results" / "unrecorded").mkdir()
    assert main(["--root", str(run), "verify", "results/unrecorded"]) == 2
    assert capsys.readouterr().err == f"reprolm verify: no provenance records under results/unrecorded in {run}\n"
    # In the run folder, with the default paths: every record checked, none changed.
    assert main(["--root", str(run), "verify"]) == 0
    assert capsys.readouterr().err == "4 records checked, 0 problems\n"
