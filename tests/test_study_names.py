"""Shared code names no study: what one study needs lives in its folder
(src/reprolm/studies/<name>/), and the workflow, the config code, the plan, provenance and
the shared table code take what the registered studies declare. Read from the source's
tokens: identifiers and strings, comments and docstrings left out."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STUDY_NAMES = ("ruler", "flr", "harmony", "gem", "expo")
# A study's name as a word of an identifier (`split_expo`) or of a string (`"+expo{alpha}"`,
# `config["flr"]`), never inside another word (`gemma`).
NAMED = re.compile(rf"(?<![a-z])({'|'.join(STUDY_NAMES)})(?![a-z])", re.IGNORECASE)
# Every file of the workflow and the package outside the studies' folders.
SHARED = [
    "workflow/Snakefile",
    "workflow/rules/*.smk",
    "workflow/scripts/*.py",
    "src/reprolm/**/*.py",
]
STUDIES_FOLDER = REPO / "src/reprolm/studies"
# Shared files still naming a study, by (file, study), each with why; an entry that no
# longer occurs fails the test, so that the list only shrinks.
EXTRAPOLATION = (
    "ExPO's extrapolation is a stage any study's models use (DESIGN: merge): `{recipe}+expo{alpha}` "
    "names an extrapolated model wherever a recipe is named (the method's name, as the paper's "
    "models are named); what it extrapolates from is the shared `extrapolation` section's"
)
# Methods named after the paper that introduced them, which any study may use.
GEM_LOSS = "the `gem` loss (train.losses): a training objective any recipe may name"
FLR_JUDGE = "the `flr` judge kind (score.flr, score.judges): a judge any study may name"
UPSTREAM_DESCRIPTION = "an upstream schema's description names the paper whose released data it reads"
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("src/reprolm/checks.py", "expo"): EXTRAPOLATION,
    ("src/reprolm/config/lookups.py", "expo"): EXTRAPOLATION,
    ("src/reprolm/config/references.py", "expo"): EXTRAPOLATION,
    ("src/reprolm/paths.py", "expo"): EXTRAPOLATION,
    ("workflow/rules/common.smk", "expo"): EXTRAPOLATION,
    ("workflow/rules/extrapolate.smk", "expo"): EXTRAPOLATION,
    ("src/reprolm/train/losses.py", "gem"): GEM_LOSS,
    ("src/reprolm/score/flr.py", "flr"): FLR_JUDGE,
    ("src/reprolm/score/judges.py", "flr"): FLR_JUDGE,
    ("src/reprolm/data/upstream.py", "flr"): UPSTREAM_DESCRIPTION,
    ("src/reprolm/data/upstream.py", "gem"): UPSTREAM_DESCRIPTION,
}


def _is_docstring(tokens: list[tokenize.TokenInfo], index: int) -> bool:
    """A string that is a statement of its own (a docstring, wherever it stands)."""
    skip = {tokenize.NL, tokenize.COMMENT}
    before = next((t for t in reversed(tokens[:index]) if t.type not in skip), None)
    after = next((t for t in tokens[index + 1 :] if t.type not in skip), None)
    starts = before is None or before.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
    return starts and after is not None and after.type in (tokenize.NEWLINE, tokenize.ENDMARKER)


def study_names(text: str) -> list[str]:
    """The identifiers and strings of ``text`` (Python or a Snakemake file) that name a study."""
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    found = []
    for index, token in enumerate(tokens):
        if token.type == tokenize.NAME and NAMED.search(token.string.replace("_", " ")):
            found.append(token.string)
        elif token.type == tokenize.STRING and not _is_docstring(tokens, index) and NAMED.search(token.string):
            found.append(token.string)
        elif token.type == getattr(tokenize, "FSTRING_MIDDLE", None) and NAMED.search(token.string):
            found.append(token.string)
    return found


def shared_files() -> list[Path]:
    files = sorted(
        {path for pattern in SHARED for path in REPO.glob(pattern) if not path.is_relative_to(STUDIES_FOLDER)}
    )
    assert len(files) > 120, len(files)
    return files


def test_the_reader_sees_identifiers_and_strings_but_not_comments_or_docstrings():
    text = '''def f(config):
    """Reads the expo section."""
    # the Ruler targets
    return split_expo(config["flr"]), "{recipe}+expo{alpha}", gemma, "GEM's"
'''
    assert study_names(text) == ["split_expo", '"flr"', '"{recipe}+expo{alpha}"', '"GEM\'s"']


def test_the_names_are_the_package_studies_folders():
    folders = [path.parent.name for path in (REPO / "src/reprolm/studies").glob("*/__init__.py")]
    assert sorted(folders) == sorted(STUDY_NAMES)


def test_shared_code_names_no_study():
    named: dict[tuple[str, str], list[str]] = {}
    for path in shared_files():
        where = str(path.relative_to(REPO))
        for name in study_names(path.read_text()):
            for study in {match.lower() for match in NAMED.findall(name.replace("_", " "))}:
                named.setdefault((where, study), []).append(name)
    unexplained = sorted(key for key in named if key not in EXCEPTIONS)
    assert not unexplained, (
        "shared code names a study (move it into the study's folder, or have the study declare it): "
        + "; ".join(f"{where} names {study}: {sorted(set(named[(where, study)]))}" for where, study in unexplained)
    )
    stale = sorted(key for key in EXCEPTIONS if key not in named)
    assert not stale, f"no longer named, drop from EXCEPTIONS: {stale}"
