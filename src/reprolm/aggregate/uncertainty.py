"""Intervals and significance for the study tables, built on :mod:`reprolm.stats`.

A figure and its interval (:class:`Estimate`) and the unit bootstrap that fills it
(:func:`unit_draws`, :func:`mean_of`, :func:`ratio_of_sums`, ...) are :mod:`reprolm.stats`'s,
which every layer may import; the tables read them from here with what only they need.
Replicate seeds (a recipe trained several times) add a second level: each replicate draws
seeds with replacement as well (:func:`pool_seeds`). Two figures computed over the same units
are resampled identically, so the difference of their replicates is a *paired* bootstrap of
the difference (:func:`difference`), which is what the effect claims test; a family of claims
is adjusted with :func:`holm`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from reprolm.stats.bootstrap import (
    BatchStatistic,
    bootstrap,
    each_draw,
    mean_of,
    mean_of_estimates,
    ratio_of_sums,
    unit_draws,
)
from reprolm.stats.estimate import DEFINED_SHARE, LEVEL, RESAMPLES, Estimate, percentile_interval

__all__ = [
    "DEFINED_SHARE",
    "LEVEL",
    "RESAMPLES",
    "BatchStatistic",
    "Difference",
    "Estimate",
    "bootstrap",
    "difference",
    "each_draw",
    "holm",
    "mean_of",
    "mean_of_estimates",
    "percentile_interval",
    "pool_seeds",
    "ratio_of_sums",
    "unit_draws",
    "within_standard_error",
]


def pool_seeds(per_seed: Sequence[Estimate]) -> Estimate:
    """One figure from replicate seeds: the mean of their figures; each bootstrap replicate
    draws the seeds with replacement and averages their replicates of that draw (a two-level
    bootstrap: seeds, then units), so the interval holds both sources of noise."""
    if len(per_seed) == 1:
        return per_seed[0]
    values = np.array([e.value for e in per_seed])
    stacked = np.stack([e.replicates for e in per_seed])  # (seeds, resamples)
    rng = np.random.default_rng(len(per_seed))
    picks = rng.integers(0, len(per_seed), size=(stacked.shape[1], len(per_seed)))
    replicates = stacked[picks, np.arange(stacked.shape[1])[:, None]].mean(axis=1)
    return Estimate(
        float(values.mean()),
        replicates,
        seeds=len(per_seed),
        seed_sd=float(values.std(ddof=1)),
        units=min(e.units for e in per_seed),
    )


@dataclass(frozen=True)
class Difference:
    """first - second, its interval and a two-sided bootstrap p-value."""

    value: float
    low: float
    high: float
    p: float
    paired: bool

    @property
    def significant(self) -> bool:
        """The interval excludes zero."""
        return bool(self.low > 0 or self.high < 0)


def difference(first: Estimate | float, second: Estimate | float, paired: bool = True) -> Difference:
    """``first - second`` with the interval of the replicates' differences. A plain number
    is a constant (chance level); two estimates are paired when they were computed over the
    same units. p = twice the smaller share of replicate differences on either side of zero
    (capped at 1), counted as (k + 1) / (B + 1) so that B draws never claim a p below their
    resolution: about the level at which the interval would first include zero."""
    first_value, first_reps = _parts(first)
    second_value, second_reps = _parts(second)
    if first_reps is None and second_reps is None:
        raise ValueError("a difference of two constants has no interval")
    if first_reps is not None and second_reps is not None and first_reps.size != second_reps.size:
        raise ValueError(f"replicates differ in number: {first_reps.size} vs {second_reps.size}")
    diffs = (first_reps if first_reps is not None else first_value) - (
        second_reps if second_reps is not None else second_value
    )
    low, high = percentile_interval(diffs)
    if math.isnan(low):
        p = math.nan
    else:
        diffs = diffs[np.isfinite(diffs)]
        tail = min((diffs <= 0).sum(), (diffs >= 0).sum())
        p = float(min(1.0, 2 * (tail + 1) / (diffs.size + 1)))
    return Difference(
        first_value - second_value, low, high, p, paired and first_reps is not None and second_reps is not None
    )


def _parts(side: Estimate | float) -> tuple[float, np.ndarray | None]:
    if isinstance(side, Estimate):
        return side.value, (side.replicates if side.replicates.size else None)
    return float(side), None


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (statsmodels' ``multipletests``);
    a nan (an untested claim) stays nan and is not counted in the family."""
    # statsmodels takes seconds to import; only the paper comparison adjusts.
    from statsmodels.stats.multitest import multipletests

    values = np.asarray(p_values, dtype=float)
    tested = ~np.isnan(values)
    adjusted = np.full(values.shape, math.nan)
    if tested.any():
        adjusted[tested] = multipletests(values[tested], method="holm")[1]
    return adjusted.tolist()


def within_standard_error(value: float, reference: float, standard_error: float, multiple: float = 1.0) -> bool | None:
    """Whether ``value`` lies within ``multiple`` standard errors of ``reference``."""
    if any(math.isnan(x) for x in (value, reference, standard_error)):
        return None
    return abs(value - reference) <= multiple * standard_error
