"""The run's figures beside the papers' headline numbers, and whether the papers' effects
show in what the run made (config/paper_headlines.yaml says where each figure lives, and a
study may declare its own: :attr:`reprolm.studies.Study.headlines`).

An effect claim names its models through the config: ``for_each`` maps a placeholder to a
config key holding a list (``{base: ruler.bases}``), and the claim is made once for each value
(each combination, for several), the placeholder filled in its ``claim``, ``higher`` and
``lower``. A claim drawn over fewer than ``claims.min_units`` units or ``claims.min_seeds``
replicate seeds is a smoke check: it is reported, never shown.

A headline names the paper's model; a run without it (the tiny default) shows, beside the
paper's figure, the same figure of the models that stand in for it (the entry's
``stand_in``: its rows named through the config, as a claim's are)."""

from __future__ import annotations

import difflib
import itertools
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from reprolm.aggregate.uncertainty import Difference, Estimate, difference, holm
from reprolm.io import read_yaml, write_table


class HeadlineError(ValueError):
    pass


class Cell(NamedTuple):
    """A table cell the comparison reads: its figure, its interval bounds where the table
    gives them, and the bootstrap replicates behind them (None for a figure without), with
    the number of units they draw (0 where the table does not say) and of seeds they pool,
    and the judge that made it where its row names one (a judged table's ``judge`` column)."""

    value: float | None
    low: float | None = None
    high: float | None = None
    replicates: np.ndarray | None = None
    units: int = 0
    seeds: int = 1
    judge: str | None = None

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
    judge = str(row["judge"]) if "judge" in frame.columns and not pd.isna(row["judge"]) else None
    return Cell(value, *bounds, *_replicates(path, int(rows.index[0]), column), judge=judge)


def _replicates(table: Path, row: int, column: str) -> tuple[np.ndarray | None, int, int]:
    """The bootstrap replicates of one cell, kept beside its table (``write_table``), the
    number of units they draw and of seeds they pool ((None, 0, 1) for a cell without)."""
    path = table.with_name(f"{table.stem}.replicates.parquet")
    if not path.is_file():
        return None, 0, 1
    kept = pd.read_parquet(path)
    match = kept[(kept["row"] == row) & (kept["column"] == column)]
    if match.empty:
        return None, 0, 1
    cell = match.iloc[0]
    units = int(cell["units"]) if "units" in kept.columns else 0
    seeds = int(cell["seeds"]) if "seeds" in kept.columns else 1
    return np.asarray(cell["replicates"], dtype=float), units, seeds


# Where entries come from, each as (the name an error gives it: the headline file or a study,
# its ``headlines`` and ``directions``): the file first, then each enabled study's own.
Sources = list[tuple[str, Mapping]]

HEADLINE_COLUMNS = [
    "study",
    "figure",
    "model",
    "paper",
    "paper judge",
    "this run model",
    "this run judge",
    "this run",
    "this run lo",
    "this run hi",
    "difference",
]


def headline_table(
    sources: Sources, tables: Path, studies: list[str], lists: Mapping[str, list] | None = None
) -> pd.DataFrame:
    """Each headline: the paper's figure and this run's for the paper's model, with the run's
    interval and the difference run - paper. Where the run lacks that model, one row per model
    of the entry's ``stand_in`` that the run made (``this run model`` names it; no difference:
    a stand-in is not the paper's model), else one row with the run's figure empty.
    ``lists``: the config values of the stand-ins' ``for_each`` keys (:func:`claim_lists`)."""
    rows = []
    for source, spec in sources:
        for index, item in enumerate(spec.get("headlines", [])):
            if item["study"] not in studies:
                continue
            entry = f"{source}: headlines[{index}]"
            paper = {
                **{key: item[key] for key in ("study", "figure", "model", "paper")},
                "paper judge": item.get("judge"),
            }
            cell = _cell(tables, item["study"], item["table"], item["where"], item["column"], entry)
            if cell.value is not None or "stand_in" not in item:
                difference = None if cell.value is None else cell.value - item["paper"]
                rows.append(_headline_row(paper, item["model"], cell, difference))
                continue
            stand_ins = [
                (
                    stand_in["model"],
                    _cell(tables, item["study"], item["table"], stand_in["where"], item["column"], entry),
                )
                for stand_in in expand_for_each(item["stand_in"], lists or {}, f"{entry}.stand_in")
            ]
            made = [(model, cell) for model, cell in stand_ins if cell.value is not None]
            rows += [_headline_row(paper, model, cell, None) for model, cell in made] or [
                _headline_row(paper, None, Cell(None), None)
            ]
    return pd.DataFrame(rows, columns=HEADLINE_COLUMNS)


def _headline_row(paper: Mapping, model: str | None, cell: Cell, difference: float | None) -> dict:
    return {
        **paper,
        "this run model": model if cell.value is not None else None,
        "this run judge": cell.judge if cell.value is not None else None,
        "this run": cell.value,
        "this run lo": cell.low,
        "this run hi": cell.high,
        "difference": difference,
    }


# The level of the per-claim test; the Holm-adjusted p-values hold the family of claims to it.
ALPHA = 0.05
# Below these a claim is a smoke check (config ``claims``; the schema's defaults).
MIN_UNITS = 30
MIN_SEEDS = 2
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
    "units",
    "seeds",
    "interval",
    "verdict",
    "shown",
    "shown after Holm",
    "not expected here",
]
SMOKE_CHECK = "smoke check"


def _interval(result: Difference | None) -> str:
    """Where the difference's interval lies: above zero, below zero, holding zero, or none."""
    if result is None:
        return ""
    if math.isnan(result.low):
        return "none"
    if result.significant:
        return "above zero" if result.value > 0 else "below zero"
    return "holds zero"


VERDICTS = {"": "not made", "none": "no interval", "above zero": "shown", "below zero": "reversed"}


def _verdict(interval: str, units: int, seeds: int, min_units: int, min_seeds: int) -> str:
    """The claim's verdict: a smoke check below the units or seeds a claim needs (where the
    figures have replicates to count), else what its interval says."""
    if interval not in ("", "none") and (units < min_units or seeds < min_seeds):
        return SMOKE_CHECK
    return VERDICTS.get(interval, "not significant")


def _placeholders(value, filled: Mapping[str, str]):
    """``value`` (a string, number, list or mapping) with ``{name}`` replaced in its strings."""
    if isinstance(value, str):
        for name, text in filled.items():
            value = value.replace("{" + name + "}", str(text))
        return value
    if isinstance(value, Mapping):
        return {key: _placeholders(item, filled) for key, item in value.items()}
    if isinstance(value, list):
        return [_placeholders(item, filled) for item in value]
    return value


def config_value(config: Mapping, key: str):
    """The value at a dotted config key (``ruler.bases``); None where a part is missing."""
    value = config
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def expand_directions(entries: Iterable[Mapping], lists: Mapping[str, list], source: str) -> list[dict]:
    """Each claim once per value of its ``for_each`` config keys (every combination), the
    values filled into its placeholders; a claim without ``for_each`` as it is. ``lists``:
    each key's value in the config (None where the config lacks it: no claim is made)."""
    return [
        claim
        for index, entry in enumerate(entries)
        for claim in expand_for_each(entry, lists, f"{source}: directions[{index}]")
    ]


def expand_for_each(entry: Mapping, lists: Mapping[str, list], name: str) -> list[dict]:
    """An entry (a claim, a headline's stand-in) once per combination of the values of its
    ``for_each`` config keys, filled into its placeholders; errors name the entry ``name``."""
    for_each = entry.get("for_each") or {}
    names, keys = list(for_each), list(for_each.values())
    values = []
    for placeholder, key in zip(names, keys, strict=True):
        value = lists.get(key)
        if value is not None and not isinstance(value, list):
            raise HeadlineError(f"{name}.for_each.{placeholder}: config key {key!r} is not a list")
        values.append(value or [])
    body = {key: value for key, value in entry.items() if key != "for_each"}
    return [
        _placeholders(body, dict(zip(names, combination, strict=True))) for combination in itertools.product(*values)
    ]


def direction_table(
    sources: Sources,
    tables: Path,
    studies: list[str],
    lists: Mapping[str, list] | None = None,
    min_units: int = MIN_UNITS,
    min_seeds: int = MIN_SEEDS,
    not_expected: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Each effect: the two figures compared (a number stands for itself, such as chance),
    their difference with the 95% interval of its bootstrap replicates (paired when both
    figures were drawn over the same units) and a two-sided p-value; ``units`` and ``seeds``:
    the fewest units and replicate seeds behind either figure. ``interval``: above zero,
    below zero, holds zero, or none (neither figure has replicates). ``verdict``: smoke check
    (the figures rest on fewer than ``min_units`` units or ``min_seeds`` seeds: never shown,
    whatever the interval), else shown, reversed, not significant (the interval above,
    below, or holding zero), no interval, or not made (the run lacks a figure). ``p (Holm)``
    adjusts for the number of claims tested (smoke checks are not in the family), and
    ``shown after Holm`` asks it to be under 0.05 too. ``lists``: the config values of the
    claims' ``for_each`` keys (:func:`claim_lists`). ``not expected here``: the config's reason
    why this run is not expected to show the claim (``claims.not_expected``), else empty."""
    not_expected = not_expected or {}
    rows = []
    for source, spec in sources:
        directions = expand_directions(spec.get("directions", []), lists or {}, source)
        for index, item in enumerate(directions):
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
            drawn = [cell for cell in cells if cell.replicates is not None]
            units = min((cell.units for cell in drawn), default=None)
            seeds = min((cell.seeds for cell in drawn), default=None)
            interval = _interval(result)
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
                    "units": units,
                    "seeds": seeds,
                    "interval": interval,
                    "verdict": _verdict(interval, units or 0, seeds or 0, min_units, min_seeds),
                    "not expected here": not_expected.get(item["claim"]),
                }
            )
    # Only claims at the scale of a claim form the family Holm's adjustment counts.
    tested = [row["p"] is not None and row["verdict"] != SMOKE_CHECK for row in rows]
    adjusted = holm([row["p"] if counted else math.nan for row, counted in zip(rows, tested, strict=True)])
    for row, p_holm in zip(rows, adjusted, strict=True):
        row["p (Holm)"] = None if math.isnan(p_holm) else p_holm
        made = row["verdict"] != "not made"
        row["shown"] = row["verdict"] == "shown" if made else None
        row["shown after Holm"] = (row["shown"] and p_holm < ALPHA) if made else None
    return pd.DataFrame(rows, columns=DIRECTION_COLUMNS)


HEADLINE_KEYS = {"study", "figure", "model", "paper", "table", "where", "column"}
DIRECTION_KEYS = {"study", "claim", "table", "column", "higher", "lower"}
# Keys an entry may leave out.
OPTIONAL_KEYS = {"headlines": {"stand_in", "judge"}, "directions": {"for_each"}}
STAND_IN_KEYS = {"model", "where"}


def check_entries(spec: Mapping, source: str, implied: frozenset[str] = frozenset()) -> None:
    """Every entry of ``headlines`` and ``directions`` has exactly its keys (less those
    ``implied``, and the optional ``for_each`` of a claim: placeholder -> dotted config key),
    and a headline's paper figure is a number; errors name ``source``."""
    for section, keys in (("headlines", HEADLINE_KEYS - implied), ("directions", DIRECTION_KEYS - implied)):
        for index, entry in enumerate(spec.get(section, [])):
            if not isinstance(entry, Mapping):
                raise HeadlineError(f"{source}: {section}[{index}] is not a mapping")
            missing, extra = sorted(keys - set(entry)), sorted(set(entry) - keys - OPTIONAL_KEYS[section])
            if missing or extra:
                raise HeadlineError(f"{source}: {section}[{index}]: missing keys {missing}, unknown keys {extra}")
            if section == "headlines" and not isinstance(entry["paper"], (int, float)):
                raise HeadlineError(f"{source}: headlines[{index}].paper: expected a number, got {entry['paper']!r}")
            _check_for_each(entry.get("for_each", {}), f"{source}: {section}[{index}]")
            if "stand_in" in entry:
                _check_stand_in(entry["stand_in"], f"{source}: {section}[{index}].stand_in")


def _check_for_each(for_each, name: str) -> None:
    if not isinstance(for_each, Mapping) or not all(
        isinstance(placeholder, str) and isinstance(key, str) for placeholder, key in for_each.items()
    ):
        raise HeadlineError(
            f"{name}.for_each: expected placeholder -> dotted config key (e.g. {{base: <study>.bases}}), "
            f"got {for_each!r}"
        )


def _check_stand_in(stand_in, name: str) -> None:
    """A stand-in names its models (``model``, a label) and their rows (``where``), with
    placeholders filled ``for_each`` value of config lists, as a claim does."""
    if not isinstance(stand_in, Mapping):
        raise HeadlineError(
            f"{name}: expected a mapping with keys {sorted(STAND_IN_KEYS)} and for_each, got {stand_in!r}"
        )
    missing, extra = sorted(STAND_IN_KEYS - set(stand_in)), sorted(set(stand_in) - STAND_IN_KEYS - {"for_each"})
    if missing or extra:
        raise HeadlineError(f"{name}: missing keys {missing}, unknown keys {extra}")
    if not isinstance(stand_in["where"], Mapping):
        raise HeadlineError(f"{name}.where: expected column -> value, got {stand_in['where']!r}")
    _check_for_each(stand_in.get("for_each", {}), name)


def load_headlines(path: str | Path) -> dict:
    """The headline file, every entry checked for its keys before any table is read."""
    spec = read_yaml(path) or {}
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


def claim_lists(config: Mapping, specs: Iterable[Mapping]) -> dict[str, list | None]:
    """The config value of every ``for_each`` key the claims and the headlines' stand-ins of
    ``specs`` name (the headline file's and the studies' own): what the comparison job needs
    of the config, so that it reruns when one of them changes."""
    specs = list(specs)
    entries = [entry for spec in specs for entry in spec.get("directions", [])]
    entries += [entry["stand_in"] for spec in specs for entry in spec.get("headlines", []) if "stand_in" in entry]
    keys = {key for entry in entries for key in entry.get("for_each", {}).values()}
    return {key: config_value(config, key) for key in sorted(keys)}


def claim_settings(config: Mapping, headlines_file: str | Path, declared: Mapping[str, Mapping]) -> dict:
    """The comparison job's config: the ``claims`` thresholds, the ``for_each`` lists and the
    claims this run is not expected to show (``claims.not_expected``: claim as a run words it
    -> why), each of those checked to be worded as one of the claims is (its placeholders
    filled with anything: a smaller config that leaves the claim out keeps the entry)."""
    claims = config.get("claims", {})
    specs = [load_headlines(headlines_file), *declared.values()]
    not_expected = claims.get("not_expected", {})
    templates = [entry["claim"] for spec in specs for entry in spec.get("directions", [])]
    patterns = [re.compile(re.sub(r"\\\{\w+\\\}", ".+", re.escape(template))) for template in templates]
    for claim in not_expected:
        if not any(pattern.fullmatch(claim) for pattern in patterns):
            close = difflib.get_close_matches(claim, templates, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else f"; the claims: {templates}"
            raise HeadlineError(f"claims.not_expected: {claim!r} is not worded as any claim{hint}")
    return {
        "min_units": claims.get("min_units", MIN_UNITS),
        "min_seeds": claims.get("min_seeds", MIN_SEEDS),
        "lists": claim_lists(config, specs),
        "not_expected": dict(not_expected),
    }


def write_paper_comparison(
    headlines_file: str,
    declared: Mapping[str, Mapping],
    tables: str,
    studies: list[str],
    headline_csv: str,
    direction_csv: str,
    settings: Mapping | None = None,
) -> None:
    """The headline file's entries and the studies' own (``declared``, from
    :func:`study_headlines`), looked up in the enabled ``studies``' tables; ``settings``
    from :func:`claim_settings` (without: the default thresholds, and no ``for_each`` list)."""
    settings = settings or {}
    sources = [(str(headlines_file), load_headlines(headlines_file))]
    sources += [(f"study {name!r}", spec) for name, spec in declared.items()]
    headline = headline_table(sources, Path(tables), studies, settings.get("lists", {}))
    direction = direction_table(
        sources,
        Path(tables),
        studies,
        settings.get("lists", {}),
        settings.get("min_units", MIN_UNITS),
        settings.get("min_seeds", MIN_SEEDS),
        settings.get("not_expected", {}),
    )
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
