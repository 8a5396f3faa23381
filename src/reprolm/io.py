"""Writing outputs: atomically (no partial output is ever visible under its final name), and
in the stable forms results are compared by (sorted JSON; CSV with a markdown rendering)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import uuid
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from reprolm.stats.estimate import Estimate

# libyaml's loader where PyYAML has it (its wheels do): the pure-Python loader takes about a
# second over the config schema, and every Snakemake invocation (each cluster job's too) reads it.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """A temporary sibling path that replaces ``target`` only if the body succeeds.

    Works for files and folders; on failure the temporary is removed and ``target`` is
    left as it was, so no partial output is ever visible under the final name. The
    temporary is a sibling in ``target``'s own folder, so the final rename never crosses
    file systems, whatever is mounted or symlinked above that folder; moving something
    from elsewhere into the temporary is the caller's, with ``shutil.move``, which copies
    across file systems.
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


# A hard link refused where a copy does instead: another file system (EXDEV), one that has
# no hard links (EPERM on some network and FUSE file systems, ENOTSUP), or a file's link
# count at its limit (EMLINK).
LINK_REFUSED = frozenset({errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK})


def link_or_copy(source: str | os.PathLike, target: str | os.PathLike) -> str | os.PathLike:
    """Hard-link ``source`` as ``target``, or copy it (content and times) where the link is
    refused (``LINK_REFUSED``): the same bytes either way. Returns ``target``, so that it
    serves as ``shutil.copytree``'s ``copy_function``."""
    try:
        os.link(source, target)
    except OSError as error:
        if error.errno not in LINK_REFUSED:
            raise
        shutil.copy2(source, target)
    return target


def link_or_copy_tree(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """The folder ``source`` as ``target``, each file hard-linked or, where refused, copied."""
    shutil.copytree(source, target, copy_function=link_or_copy)


def write_json(result: Mapping, output: str | os.PathLike) -> None:
    """Scores as stable, sorted JSON, written atomically."""
    with atomic_path(output) as tmp:
        tmp.write_text(json.dumps(result, indent=2, sort_keys=True, allow_nan=True) + "\n")


@dataclass(frozen=True)
class CollectedTable:
    """A table :func:`write_table` was asked to write while :func:`collected_tables` held it back."""

    folder: Path
    name: str
    frame: Any
    decimals: int | None
    markdown: bool

    def write(self) -> Path:
        return write_table(self.frame, self.folder, self.name, self.decimals, self.markdown)


_COLLECTING: ContextVar[list[CollectedTable] | None] = ContextVar("collected tables", default=None)


@contextlib.contextmanager
def collected_tables() -> Iterator[list[CollectedTable]]:
    """Within the block, :func:`write_table` keeps each table in the yielded list instead of
    writing it (a study's tables over replicate seeds are pooled before they are written)."""
    collected: list[CollectedTable] = []
    token = _COLLECTING.set(collected)
    try:
        yield collected
    finally:
        _COLLECTING.reset(token)


def write_table(frame, folder: str | os.PathLike, name: str, decimals: int | None = 2, markdown: bool = True) -> Path:
    """A pandas frame as ``{name}.csv``. ``decimals=None`` keeps full precision (p-values).
    ``markdown``: also a ``.md`` rendering beside the CSV, which only a rule whose output is
    the whole folder may write. A cell holding an :class:`reprolm.stats.estimate.Estimate`
    becomes its figure, with ``{column} lo`` and ``{column} hi`` columns for its interval
    (and ``{column} seeds`` / ``{column} seed sd`` where it pools replicate seeds); the
    bootstrap replicates go to ``{name}.replicates.parquet``."""
    folder = Path(folder)
    collecting = _COLLECTING.get()
    if collecting is not None:
        collecting.append(CollectedTable(folder, name, frame, decimals, markdown))
        return folder / f"{name}.csv"
    folder.mkdir(parents=True, exist_ok=True)
    frame, replicates = split_estimates(frame)
    if replicates is not None:
        with atomic_path(folder / f"{name}.replicates.parquet") as tmp:
            replicates.to_parquet(tmp, index=False)
    rounded = frame if decimals is None else frame.round(decimals)
    csv_path = folder / f"{name}.csv"
    with atomic_path(csv_path) as tmp:
        rounded.to_csv(tmp, index=False)
    if markdown:
        with atomic_path(folder / f"{name}.md") as tmp:
            tmp.write_text(rounded.to_markdown(index=False) + "\n")
    return csv_path


def split_estimates(frame):
    """``frame`` with each column that holds estimates spread into figure and interval
    columns, and the replicates behind them as a long frame (row, column, replicates), or
    None where no cell is an estimate."""
    import pandas as pd

    columns = [c for c in frame.columns if frame[c].map(lambda v: isinstance(v, Estimate)).any()]
    if not columns:
        return frame, None
    out = frame.copy()
    kept = []
    for column in columns:
        cells = frame[column]
        pooled = cells.map(lambda v: isinstance(v, Estimate) and v.seeds > 1).any()
        out[column] = [v.value if isinstance(v, Estimate) else v for v in cells]
        extra = {
            f"{column} lo": [v.low if isinstance(v, Estimate) else None for v in cells],
            f"{column} hi": [v.high if isinstance(v, Estimate) else None for v in cells],
        }
        if pooled:
            extra[f"{column} seeds"] = [v.seeds if isinstance(v, Estimate) else None for v in cells]
            extra[f"{column} seed sd"] = [v.seed_sd if isinstance(v, Estimate) else None for v in cells]
        at = list(out.columns).index(column) + 1
        for offset, (key, values) in enumerate(extra.items()):
            out.insert(at + offset, key, pd.array(values, dtype="Float64" if "seeds" not in key else "Int64"))
        kept += [
            {
                "row": row,
                "column": column,
                "replicates": [float(x) for x in v.replicates],
                "units": v.units,
                "seeds": v.seeds,
            }
            for row, v in enumerate(cells)
            if isinstance(v, Estimate) and v.replicates.size
        ]
    # Figures with only a standard error have no replicates to keep.
    return out, pd.DataFrame(kept, columns=REPLICATE_COLUMNS) if kept else None


# What ``{table}.replicates.parquet`` keeps of each cell: its bootstrap replicates, the number
# of units they draw and of replicate seeds they pool (the paper comparison's claims report both).
REPLICATE_COLUMNS = ["row", "column", "replicates", "units", "seeds"]


def read_yaml(path: str | Path) -> Any:
    """A YAML file's content, read as ``yaml.safe_load`` reads it; a parse error's position
    names the file (``in "config/base.yaml", line 183, column 1``)."""
    with Path(path).open(encoding="utf-8") as stream:
        return yaml.load(stream, Loader=YAML_LOADER)
