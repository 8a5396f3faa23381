"""Study tables over replicate seeds.

A recipe with ``seeds`` is finetuned once per seed (``{recipe}-seed{n}``, the default seed
keeping the plain name); a prompt set with ``seeds`` is sampled once per seed
(``{promptset}-seed{n}``). A study's writer knows nothing of that: it runs once per replicate
set, each set naming its replicates by the plain recipe, with its tables collected instead
of written, and the sets' tables are then pooled cell by cell (:func:`pool_tables`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from reprolm.aggregate.tables import Score
from reprolm.aggregate.uncertainty import Estimate, pool_seeds
from reprolm.io import CollectedTable
from reprolm.paths import split_seed


def _order(seed: int | None) -> tuple[bool, int]:
    return seed is not None, seed or 0


def replicate_sets(scores: Sequence[Score]) -> list[list[Score]]:
    """The scores as one list per replicate: set ``r`` holds each model's ``r``-th replicate
    (a recipe seed with a sampling seed; the default seeds' first, then by seed), renamed to
    the plain recipe and prompt set; a score with fewer replicates than the most has its
    default seeds' in the further sets, where pooling counts it once."""
    groups: dict[tuple, list[tuple[tuple, Score]]] = {}
    for score in scores:
        recipe, recipe_seed = split_seed(score.recipe)
        name, sampling_seed = split_seed(score.name)
        groups.setdefault((score.metric, score.base, recipe, name), []).append(
            ((*_order(recipe_seed), *_order(sampling_seed)), dataclasses.replace(score, recipe=recipe, name=name))
        )
    ordered = [[entry[1] for entry in sorted(group, key=lambda entry: entry[0])] for group in groups.values()]
    count = max((len(members) for members in ordered), default=1)
    return [[members[r] if r < len(members) else members[0] for members in ordered] for r in range(count)]


def _distinct_estimates(cells: list[Estimate]) -> list[Estimate]:
    distinct: dict[tuple, Estimate] = {}
    for cell in cells:
        distinct.setdefault((cell.value, cell.replicates.tobytes()), cell)
    return list(distinct.values())


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _pool_cell(cells: list):
    if all(isinstance(cell, Estimate) for cell in cells):
        return pool_seeds(_distinct_estimates(cells))
    if all(_is_number(cell) for cell in cells):
        finite = [float(cell) for cell in cells if not math.isnan(float(cell))]
        if len(set(finite)) <= 1:
            return cells[0]
        # A number without an interval (a count, a test statistic): the mean over seeds.
        return float(np.mean(finite))
    return cells[0]


def pool_tables(runs: Sequence[Sequence[CollectedTable]]) -> list[CollectedTable]:
    """Each table of the first replicate set with every cell pooled over the sets: estimates
    by :func:`reprolm.aggregate.uncertainty.pool_seeds` over their distinct values, other
    numbers by their mean, anything else as the first set has it. The sets must have made the
    same tables with the same rows and columns."""
    first = runs[0]
    for index, run in enumerate(runs[1:], start=1):
        if [table.name for table in run] != [table.name for table in first]:
            raise ValueError(
                f"replicate set {index} made tables {[t.name for t in run]}, the first made {[t.name for t in first]}"
            )
    pooled = []
    for position, table in enumerate(first):
        frames = [run[position].frame for run in runs]
        for index, frame in enumerate(frames[1:], start=1):
            if frame.shape != table.frame.shape or list(frame.columns) != list(table.frame.columns):
                raise ValueError(
                    f"table {table.name!r}: replicate set {index} has shape {frame.shape} and columns "
                    f"{list(frame.columns)}, the first {table.frame.shape} and {list(table.frame.columns)}"
                )
        cells = {
            column: [_pool_cell([frame[column].iloc[row] for frame in frames]) for row in range(len(table.frame))]
            for column in table.frame.columns
        }
        pooled.append(dataclasses.replace(table, frame=pd.DataFrame(cells, columns=table.frame.columns)))
    return pooled
