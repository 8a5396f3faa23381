"""The code fingerprint of a job (reprolm.provenance.fingerprint), unit-tested on edited copies
of the library: a job's fingerprint follows exactly the definitions its script reaches."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workflow_helpers import REPO

SCRIPT = """\
from reprolm.score.length import level_scores
"""


@pytest.fixture()
def library(tmp_path) -> Path:
    shutil.copytree(REPO / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    (tmp_path / "job.py").write_text(SCRIPT)
    return tmp_path


def _edit(library: Path, relative: str, old: str, new: str) -> None:
    path = library / "src" / "reprolm" / relative
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


def _fingerprint(library: Path, *entries: tuple[str, str]) -> str:
    code = (
        "import sys; from reprolm.provenance.fingerprint import job_code; "
        f"print(job_code(sys.argv[1], *{list(entries)!r}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(library / "job.py")],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(library / "src")},
        check=True,
    )
    return result.stdout.strip()


def test_a_jobs_fingerprint_follows_what_its_script_reaches_and_nothing_else(library):
    original = _fingerprint(library)
    assert len(original) == 64
    # A docstring or a comment is not code.
    _edit(
        library, "score/length.py", '"""Rows ``Level:0`` .. and ``All``', '"""Per-level rows ``Level:0`` .. and ``All``'
    )
    _edit(library, "score/length.py", "def _percent(", "# a comment\ndef _percent(")
    assert _fingerprint(library) == original
    # A function the script does not reach (the t-test) changes nothing.
    _edit(library, "score/length.py", "equal_var=test.equal_var)", "equal_var=bool(test.equal_var))")
    assert _fingerprint(library) == original
    # A helper that level_scores calls, in the same module, does.
    _edit(
        library,
        "score/length.py",
        '    rows.append(_score_row("All", counts.values()))',
        '    rows.append(_score_row("All", list(counts.values())))',
    )
    changed = _fingerprint(library)
    assert changed != original
    # So does a definition in another module that the chain reaches (the length targets).
    _edit(
        library,
        "length.py",
        '        return self.name.replace(">", "more than ")',
        '        return self.name.replace(">", "over ")',
    )
    assert _fingerprint(library) not in (original, changed)


def test_a_registry_is_followed_by_the_entry_the_job_names_not_as_a_whole(library):
    (library / "job.py").write_text("from reprolm.score.metrics import compute\n")
    voting = ("reprolm.score.metrics", "answer_voting")
    accuracy = ("reprolm.score.metrics", "answer_accuracy")
    before = {entry: _fingerprint(library, entry) for entry in (voting, accuracy)}
    assert before[voting] != before[accuracy]
    _edit(
        library,
        "score/metrics.py",
        '"samples_per_prompt": samples,',
        '"samples_per_prompt": int(samples),',
    )
    assert _fingerprint(library, voting) != before[voting]
    assert _fingerprint(library, accuracy) == before[accuracy]


def test_a_job_reading_sources_depends_on_their_schemas_only(library):
    """Editing one upstream schema's adapter reruns the datasets that read that schema, not
    every job that reads some source."""
    (library / "job.py").write_text("from reprolm.data.builders import build_split\n")
    gsm8k, arc = ("reprolm.data.upstream", "GSM8K"), ("reprolm.data.upstream", "ARC")
    before_gsm8k, before_arc = _fingerprint(library, gsm8k), _fingerprint(library, arc)
    _edit(
        library,
        "data/upstream.py",
        'template.replace("{instruction}", r["question"]), gsm8k_stated_answer',
        'template.replace("{instruction}", r["question"].strip()), gsm8k_stated_answer',
    )
    assert _fingerprint(library, gsm8k) != before_gsm8k
    assert _fingerprint(library, arc) == before_arc
    # A schema's fixture and check are followed into their own modules.
    before = _fingerprint(library, arc)
    _edit(
        library,
        "data/task_docs.py",
        "def check_arc(record: dict) -> Problem:\n",
        "def check_arc(record: dict) -> Problem:\n    record = dict(record)\n",
    )
    assert _fingerprint(library, arc) != before
