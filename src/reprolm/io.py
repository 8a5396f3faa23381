"""Writing outputs: atomically (no partial output is ever visible under its final name), and
in the stable forms results are compared by (sorted JSON; CSV with a markdown rendering)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """A temporary sibling path that replaces ``target`` only if the body succeeds.

    Works for files and folders; on failure the temporary is removed and ``target`` is
    left as it was, so no partial output is ever visible under the final name.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        yield tmp
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp.exists():
            tmp.unlink()


def write_json(result: Mapping, output: str | os.PathLike) -> None:
    """Scores as stable, sorted JSON, written atomically."""
    with atomic_path(output) as tmp:
        tmp.write_text(json.dumps(result, indent=2, sort_keys=True, allow_nan=True) + "\n")


def write_table(frame, folder: str | os.PathLike, name: str, decimals: int | None = 2, markdown: bool = True) -> Path:
    """A pandas frame as ``{name}.csv``. ``decimals=None`` keeps full precision (p-values).
    ``markdown``: also a ``.md`` rendering beside the CSV, which only a rule whose output is
    the whole folder may write."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rounded = frame if decimals is None else frame.round(decimals)
    csv_path = folder / f"{name}.csv"
    with atomic_path(csv_path) as tmp:
        rounded.to_csv(tmp, index=False)
    if markdown:
        with atomic_path(folder / f"{name}.md") as tmp:
            tmp.write_text(rounded.to_markdown(index=False) + "\n")
    return csv_path
