"""The run's figures beside the papers' headline numbers, and whether the papers' effects
show in what the run made (config/paper_headlines.yaml says where each figure lives, and a
study may declare its own: :attr:`reprolm.studies.Study.headlines`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import yaml

from reprolm.aggregate.uncertainty import Difference, Estimate, difference, holm


class HeadlineError(ValueError):
    pass


class Cell(NamedTuple):
    """A table cell the comparison reads: its figure, its interval bounds where the table
    gives them, and the bootstrap replicates behind them (None for a figure without)."""

    value: float | None
    low: float | None = None
    high: float | None = None
    replicates: np.ndarray | None = None

    def estimate(self) -> Estimate | float:
        return Estimate(self.value, self.replicates) if self.replicates is not None else self.value


def _number(value) -> float | None:
    value = float(value)
    return None if math.isnan(value) else value


def _cell(tables: Path, study: str, table: str, where: Mapping, column: str, entry: str) -> Cell:
    """The cell at ``column`` of the one row matching ``where``; an empty cell when the run
    did not make that table or row (a paper model in the tiny default)."""
    path = Path(tables) / study / f"{table}.csv"
    if not path.is_file():
        return Cell(None)
    frame = pd.read_csv(path)
    missing = sorted({column, *where} - set(frame.columns))
    if missing:
        raise HeadlineError(f"{entry}: {path} has no column(s) {missing}; it has {list(frame.columns)}")
    rows = frame
    for key, value in where.items():
        rows = rows[rows[key].astype(str) == str(value)]
    if len(rows) > 1:
        raise HeadlineError(f"{entry}: {len(rows)} rows of {path} match {dict(where)}; the row must be unique")
    if rows.empty:
        return Cell(None)
    row = rows.iloc[0]
    value = _number(row[column])
    if value is None:
        return Cell(None)
    bounds = [
        _number(row[f"{column} {side}"]) if f"{column} {side}" in frame.columns else None for side in ("lo", "hi")
    ]
    return Cell(value, *bounds, _replicates(path, int(rows.index[0]), column))


def _replicates(table: Path, row: int, column: str) -> np.ndarray | None:
    """The bootstrap replicates of one cell, kept beside its table (``write_table``)."""
    path = table.with_name(f"{table.stem}.replicates.parquet")
    if not path.is_file():
        return None
    kept = pd.read_parquet(path)
    match = kept[(kept["row"] == row) & (kept["column"] == column)]
    return None if match.empty else np.asarray(match.iloc[0]["replicates"], dtype=float)


# Where entries come from, each as (the name an error gives it: the headline file or a study,
# its ``headlines`` and ``directions``): the file first, then each enabled study's own.
Sources = list[tuple[str, Mapping]]

HEADLINE_COLUMNS = ["study", "figure", "model", "paper", "this run", "this run lo", "this run hi", "difference"]


def headline_table(sources: Sources, tables: Path, studies: list[str]) -> pd.DataFrame:
    rows = []
    for source, spec in sources:
        for index, item in enumerate(spec.get("headlines", [])):
            if item["study"] not in studies:
                continue
            cell = _cell(
                tables, item["study"], item["table"], item["where"], item["column"], f"{source}: headlines[{index}]"
            )
            rows.append(
                {
                    "study": item["study"],
                    "figure": item["figure"],
                    "model": item["model"],
                    "paper": item["paper"],
                    "this run": cell.value,
                    "this run lo": cell.low,
                    "this run hi": cell.high,
                    "difference": None if cell.value is None else cell.value - item["paper"],
                }
            )
    return pd.DataFrame(rows, columns=HEADLINE_COLUMNS)


# The level of the per-claim test; the Holm-adjusted p-values hold the family of claims to it.
ALPHA = 0.05
DIRECTION_COLUMNS = [
    "study",
    "claim",
    "expected higher",
    "expected lower",
    "difference",
    "difference lo",
    "difference hi",
    "p",
    "p (Holm)",
    "paired",
    "verdict",
    "shown",
    "shown after Holm",
]


def _verdict(result: Difference | None) -> str:
    if result is None:
        return "not made"
    if math.isnan(result.low):
        return "no interval"
    if result.significant:
        return "shown" if result.value > 0 else "reversed"
    return "not significant"


def direction_table(sources: Sources, tables: Path, studies: list[str]) -> pd.DataFrame:
    """Each effect: the two figures compared (a number stands for itself, such as chance),
    their difference with the 95% interval of its bootstrap replicates (paired when both
    figures were drawn over the same units) and a two-sided p-value. ``verdict``: shown (the
    interval lies above zero), reversed (below), not significant (it holds zero), no interval
    (neither figure has replicates) or not made (the run lacks a figure). ``p (Holm)`` adjusts
    for the number of claims tested, and ``shown after Holm`` asks it to be under 0.05 too."""
    rows = []
    for source, spec in sources:
        for index, item in enumerate(spec.get("directions", [])):
            if item["study"] not in studies:
                continue
            columns = item["column"] if isinstance(item["column"], list) else [item["column"]] * 2
            cells = []
            for side, column in zip(("higher", "lower"), columns, strict=True):
                where = item[side]
                cells.append(
                    Cell(float(where))
                    if isinstance(where, (int, float))
                    else _cell(
                        tables, item["study"], item["table"], where, column, f"{source}: directions[{index}].{side}"
                    )
                )
            higher, lower = cells
            result = None
            if higher.value is not None and lower.value is not None:
                if higher.replicates is None and lower.replicates is None:
                    result = Difference(higher.value - lower.value, math.nan, math.nan, math.nan, False)
                else:
                    result = difference(higher.estimate(), lower.estimate())
            rows.append(
                {
                    "study": item["study"],
                    "claim": item["claim"],
                    "expected higher": higher.value,
                    "expected lower": lower.value,
                    "difference": None if result is None else result.value,
                    "difference lo": None if result is None else result.low,
                    "difference hi": None if result is None else result.high,
                    "p": None if result is None else result.p,
                    "paired": None if result is None else result.paired,
                    "verdict": _verdict(result),
                }
            )
    adjusted = holm([math.nan if row["p"] is None else row["p"] for row in rows])
    for row, p_holm in zip(rows, adjusted, strict=True):
        row["p (Holm)"] = None if math.isnan(p_holm) else p_holm
        made = row["verdict"] != "not made"
        row["shown"] = row["verdict"] == "shown" if made else None
        row["shown after Holm"] = (row["shown"] and p_holm < ALPHA) if made else None
    return pd.DataFrame(rows, columns=DIRECTION_COLUMNS)


HEADLINE_KEYS = {"study", "figure", "model", "paper", "table", "where", "column"}
DIRECTION_KEYS = {"study", "claim", "table", "column", "higher", "lower"}


def check_entries(spec: Mapping, source: str, implied: frozenset[str] = frozenset()) -> None:
    """Every entry of ``headlines`` and ``directions`` has exactly its keys (less those
    ``implied``) and a headline's paper figure is a number; errors name ``source``."""
    for section, keys in (("headlines", HEADLINE_KEYS - implied), ("directions", DIRECTION_KEYS - implied)):
        for index, entry in enumerate(spec.get(section, [])):
            if not isinstance(entry, Mapping):
                raise HeadlineError(f"{source}: {section}[{index}] is not a mapping")
            missing, extra = sorted(keys - set(entry)), sorted(set(entry) - keys)
            if missing or extra:
                raise HeadlineError(f"{source}: {section}[{index}]: missing keys {missing}, unknown keys {extra}")
            if section == "headlines" and not isinstance(entry["paper"], (int, float)):
                raise HeadlineError(f"{source}: headlines[{index}].paper: expected a number, got {entry['paper']!r}")


def load_headlines(path: str | Path) -> dict:
    """The headline file, every entry checked for its keys before any table is read."""
    spec = yaml.safe_load(Path(path).read_text()) or {}
    unknown = sorted(set(spec) - {"headlines", "directions"})
    if unknown:
        raise HeadlineError(f"{path}: unknown sections {unknown}; expected 'headlines' and 'directions'")
    check_entries(spec, str(path))
    return spec


def study_headlines(studies: Iterable) -> dict[str, dict]:
    """Each study's own headlines and directions (:class:`reprolm.studies.Study`), checked as
    the file's are, each entry given its ``study``; studies that declare none are left out."""
    declared = {}
    for study in studies:
        if not (study.headlines or study.directions):
            continue
        spec = {"headlines": list(study.headlines), "directions": list(study.directions)}
        # The study is implied: an entry naming one would be compared under another's tables.
        check_entries(spec, f"study {study.name!r}", implied=frozenset({"study"}))
        declared[study.name] = {
            section: [{"study": study.name, **entry} for entry in entries] for section, entries in spec.items()
        }
    return declared


def write_paper_comparison(
    headlines_file: str,
    declared: Mapping[str, Mapping],
    tables: str,
    studies: list[str],
    headline_csv: str,
    direction_csv: str,
) -> None:
    """The headline file's entries and the studies' own (``declared``, from
    :func:`study_headlines`), looked up in the enabled ``studies``' tables."""
    from reprolm.io import write_table

    sources = [(str(headlines_file), load_headlines(headlines_file))]
    sources += [(f"study {name!r}", spec) for name, spec in declared.items()]
    headline = headline_table(sources, Path(tables), studies)
    direction = direction_table(sources, Path(tables), studies)
    write_table(headline, Path(headline_csv).parent, Path(headline_csv).stem, decimals=3, markdown=False)
    # p-values keep their precision: a rounded 0.000 says less than the replicates do.
    write_table(
        direction.round(
            {c: 3 for c in ("expected higher", "expected lower", "difference", "difference lo", "difference hi")}
        ),
        Path(direction_csv).parent,
        Path(direction_csv).stem,
        decimals=None,
        markdown=False,
    )
