"""The run's figures beside the papers' headline numbers, and whether the papers' effects
show in what the run made (config/paper_headlines.yaml says where each figure lives, and a
study may declare its own: :attr:`reprolm.studies.Study.headlines`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd
import yaml


class HeadlineError(ValueError):
    pass


def _cell(tables: Path, study: str, table: str, where: Mapping, column: str, entry: str) -> float | None:
    """The value at ``column`` of the one row matching ``where``; None when the run did not
    make that table or row (a paper model in the tiny default)."""
    path = Path(tables) / study / f"{table}.csv"
    if not path.is_file():
        return None
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
        return None
    value = float(rows.iloc[0][column])
    return None if math.isnan(value) else value


# Where entries come from, each as (the name an error gives it: the headline file or a study,
# its ``headlines`` and ``directions``): the file first, then each enabled study's own.
Sources = list[tuple[str, Mapping]]


def headline_table(sources: Sources, tables: Path, studies: list[str]) -> pd.DataFrame:
    rows = []
    for source, spec in sources:
        for index, item in enumerate(spec.get("headlines", [])):
            if item["study"] not in studies:
                continue
            value = _cell(tables, item["study"], item["table"], item["where"], item["column"],
                          f"{source}: headlines[{index}]")
            rows.append({"study": item["study"], "figure": item["figure"], "model": item["model"],
                         "paper": item["paper"], "this run": value,
                         "difference": None if value is None else value - item["paper"]})
    return pd.DataFrame(rows, columns=["study", "figure", "model", "paper", "this run", "difference"])


def direction_table(sources: Sources, tables: Path, studies: list[str]) -> pd.DataFrame:
    """Each effect: the two figures compared (a number stands for itself) and whether the
    first is higher, as the paper found; empty figures where the run did not make them."""
    rows = []
    for source, spec in sources:
        for index, item in enumerate(spec.get("directions", [])):
            if item["study"] not in studies:
                continue
            columns = item["column"] if isinstance(item["column"], list) else [item["column"]] * 2
            values = []
            for side, column in zip(("higher", "lower"), columns, strict=True):
                where = item[side]
                values.append(float(where) if isinstance(where, (int, float)) else
                              _cell(tables, item["study"], item["table"], where, column,
                                    f"{source}: directions[{index}].{side}"))
            higher, lower = values
            shown = None if higher is None or lower is None else higher > lower
            rows.append({"study": item["study"], "claim": item["claim"], "expected higher": higher,
                         "expected lower": lower, "shown": shown})
    return pd.DataFrame(rows, columns=["study", "claim", "expected higher", "expected lower", "shown"])


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
        declared[study.name] = {section: [{"study": study.name, **entry} for entry in entries]
                                for section, entries in spec.items()}
    return declared


def write_paper_comparison(headlines_file: str, declared: Mapping[str, Mapping], tables: str, studies: list[str],
                           headline_csv: str, direction_csv: str) -> None:
    """The headline file's entries and the studies' own (``declared``, from
    :func:`study_headlines`), looked up in the enabled ``studies``' tables."""
    from reprolm.io import write_table

    sources = [(str(headlines_file), load_headlines(headlines_file))]
    sources += [(f"study {name!r}", spec) for name, spec in declared.items()]
    headline = headline_table(sources, Path(tables), studies)
    direction = direction_table(sources, Path(tables), studies)
    for frame, path in ((headline, headline_csv), (direction, direction_csv)):
        write_table(frame, Path(path).parent, Path(path).stem, decimals=3, markdown=False)
