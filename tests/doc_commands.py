"""The commands README.md and docs/ print in their fenced shell blocks, and running one exactly
as printed.

A test that runs a printed command carries ``@pytest.mark.doc_command("the command")`` and
takes the text from :func:`doc_command`, which fails once no page prints it;
tests/test_doc_commands.py checks that every printed command has such a test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from workflow_helpers import REPO, snakemake_env

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
SHELL_LANGUAGES = {"bash", "sh", "shell", "console", "zsh"}
FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w-]*)")
PROMPT = re.compile(r"^\$\s+")
# The console scripts (reprolm, snakemake) of the environment running the tests.
VENV_BIN = Path(sys.executable).parent


class PrintedCommand(NamedTuple):
    page: str
    line: int
    command: str


def without_comment(line: str) -> str:
    """The line up to a ``#`` that starts a word outside quotes (the shell's comment)."""
    quote = None
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].rstrip()
    return line.rstrip()


def _relative(page: Path) -> str:
    return page.relative_to(REPO).as_posix() if page.is_relative_to(REPO) else str(page)


def printed_commands(pages: list[Path] = PAGES) -> list[PrintedCommand]:
    """Every command line of every fenced bash/sh/console block of ``pages``: a ``$ `` prompt
    and a trailing comment are not part of it, a line ending in ``\\`` goes on in the next."""
    found: list[PrintedCommand] = []
    for page in pages:
        fence, language, pending, start = None, "", "", 0
        for number, line in enumerate(page.read_text().splitlines(), 1):
            opening = FENCE.match(line)
            if fence is None:
                if opening:
                    fence, language = opening.group(1), opening.group(2).lower()
                continue
            if line.strip().startswith(fence):
                fence = None
                continue
            if language not in SHELL_LANGUAGES:
                continue
            text = without_comment(PROMPT.sub("", line.strip()) if not pending else line.strip())
            if not pending:
                start = number
            if text.endswith("\\"):
                pending += text[:-1].rstrip() + " "
                continue
            command = (pending + text).strip()
            pending = ""
            if command:
                found.append(PrintedCommand(_relative(page), start, command))
    return found


def doc_command(command: str) -> str:
    """``command`` as README.md or a docs page prints it; the test fails once none does."""
    if command not in {printed.command for printed in printed_commands()}:
        pytest.fail(f"no fenced shell block of README.md or docs/ prints `{command}` any more")
    return command


def run_printed(command: str, cwd: Path, env: dict | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    """``command`` (from :func:`doc_command`) run as typed, by bash in ``cwd``, with the test
    environment's ``reprolm`` and ``snakemake`` first on PATH and the hubs offline as in every
    workflow test; ``env`` adds variables."""
    # As a researcher's shell has it: no make of the suite's own around the command.
    run_env = {
        name: value
        for name, value in {**snakemake_env(cwd), **(env or {})}.items()
        if name not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")
    }
    run_env["PATH"] = f"{VENV_BIN}{os.pathsep}{run_env['PATH']}"
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", doc_command(command)],
        cwd=cwd,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
