"""Intervals of what a judge's verdicts add up to (win rates and their length-controlled
form, mean grades, accuracy on preference pairs), from the per-prompt verdicts their score
files keep.

The bootstrap units are the prompts: a prompt's samples (and a grade's turns) are drawn
together, and two models judged on the same prompts are drawn alike, so the difference of
their replicates is a paired bootstrap. A table shows the score file's own figure; the
figure recomputed from the verdicts it keeps must agree with it (else the file is not of
this format, and its interval would be of something else)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from reprolm.aggregate.uncertainty import Estimate, each_draw, mean_of, ratio_of_sums
from reprolm.score.judging import length_controlled_win_rate


class Units:
    """Bootstrap units (prompts, a model's answers) by id, and the rows (samples, turns) each
    holds: a unit's rows are drawn together."""

    def __init__(self, ids: Sequence):
        rows_by_id: dict = {}
        for row, unit in enumerate(ids):
            rows_by_id.setdefault(unit, []).append(row)
        self.ids = list(rows_by_id)
        self.rows = [np.array(rows) for rows in rows_by_id.values()]
        # The rows unit by unit, and where each unit's rows start: a draw's rows in one gather.
        self._grouped = np.concatenate(self.rows) if self.rows else np.empty(0, dtype=int)
        self._sizes = np.array([len(rows) for rows in self.rows])
        self._starts = np.cumsum(self._sizes) - self._sizes

    def rows_of(self, draw: np.ndarray) -> np.ndarray:
        """The rows of the drawn units (a unit drawn twice, twice), in file order: all of
        them, as they are, for the draw of every unit once."""
        sizes = self._sizes[draw]
        within = np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        return np.sort(self._grouped[np.repeat(self._starts[draw], sizes) + within])

    def mean(self, values: Sequence[float], scale: float = 1.0) -> Estimate:
        """The mean of the rows' values, nan ones left out, times ``scale``."""
        values = np.asarray(values, dtype=float)
        usable = ~np.isnan(values)
        sums = [values[rows][usable[rows]].sum() for rows in self.rows]
        counts = [usable[rows].sum() for rows in self.rows]
        return ratio_of_sums(sums, counts, self.ids, scale)


def as_scored(estimate: Estimate, figure: float, what: str) -> Estimate:
    """The score file's ``figure`` with the replicates of ``estimate``, its recomputation."""
    if not (
        math.isclose(estimate.value, figure, rel_tol=1e-9, abs_tol=1e-9)
        or (math.isnan(estimate.value) and math.isnan(figure))
    ):
        raise ValueError(f"{what}: the per-prompt verdicts give {estimate.value!r}, the score file {figure!r}")
    return Estimate(float(figure), estimate.replicates, units=estimate.units)


def win_rate_estimates(data: Mapping, what: str) -> dict[str, Estimate]:
    """``win_rate``, ``lc_win_rate`` and ``mean_length`` of a win-rate score with their
    intervals over its prompts. Unparsed verdicts are left out of every draw, as
    :func:`reprolm.score.judging.win_rates` leaves them out. The project's length control is
    refitted on each draw; the ``alpaca_eval`` package's was refitted when it was scored (its
    GLM needs the length-control data) and its replicates kept."""
    prompts = Units(data["ids"])
    preferences = np.asarray(data["preferences"], dtype=float)
    usable = ~np.isnan(preferences)
    answer_lengths = np.asarray(data["answer_lengths"], dtype=float)
    reference_lengths = np.asarray(data["reference_lengths"], dtype=float)

    def length_controlled(draw: np.ndarray) -> float:
        rows = prompts.rows_of(draw)
        rows = rows[usable[rows]]
        if rows.size == 0:
            return math.nan
        fit = length_controlled_win_rate(preferences[rows], answer_lengths[rows], reference_lengths[rows])
        return fit["lc_win_rate"]

    estimates = {
        "win_rate": as_scored(prompts.mean(preferences, scale=100), data["win_rate"], f"{what} win_rate"),
        "mean_length": as_scored(
            prompts.mean(np.where(usable, answer_lengths, np.nan)), data["mean_length"], f"{what} mean_length"
        ),
    }
    if "lc_win_rate_replicates" in data:
        estimates["lc_win_rate"] = Estimate(
            float(data["lc_win_rate"]),
            np.asarray(data["lc_win_rate_replicates"], dtype=float),
            units=len(prompts.ids),
        )
    else:
        estimates["lc_win_rate"] = as_scored(
            each_draw(prompts.ids, length_controlled), data["lc_win_rate"], f"{what} lc_win_rate"
        )
    return estimates


def grade_estimate(ids: Sequence, grades: Sequence[Sequence[float]], figure: float, what: str) -> Estimate:
    """The mean grade over all graded turns (unparsed ones left out), with its interval over
    the prompts: ``ids`` and ``grades`` are a grade score's, a row's grades those of its turns."""
    turn_ids = [prompt for prompt, row in zip(ids, grades, strict=True) for _ in row]
    return as_scored(Units(turn_ids).mean([grade for row in grades for grade in row]), figure, what)


def pair_accuracy_estimate(data: Mapping, what: str) -> Estimate:
    """A pair-accuracy score's accuracy (%) with its interval over the pairs."""
    return as_scored(mean_of(data["correct"], data["ids"], scale=100), data["accuracy"], what)


def source_of(score) -> str:
    """How an error names a :class:`reprolm.aggregate.tables.Score`: its file, else what it is."""
    return str(score.path) if score.path else f"{score.metric} of {score.model} on {score.name}"
