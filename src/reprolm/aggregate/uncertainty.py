"""Intervals and significance for the study tables.

Every figure in a study table is computed from units (prompts, documents, preference pairs,
models). Its interval is a percentile bootstrap over those units: the units are drawn with
replacement :data:`RESAMPLES` times and the figure recomputed on each draw. The draws are
seeded by the units' ids alone, so two figures computed over the same units (two models on
one prompt set, one model before and after ExPO) are resampled identically: the difference
of their replicates is a *paired* bootstrap of the difference, which is what the effect
claims test. Replicate seeds (a recipe trained several times) add a second level: each
replicate draws seeds with replacement as well (:func:`pool_seeds`).

A table cell that holds an :class:`Estimate` is written by :func:`reprolm.io.write_table` as
the figure and its ``{column} lo`` / ``{column} hi`` bounds, and its replicates are kept in
``{table}.replicates.parquet`` beside the CSV, where the paper comparison reads them.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

RESAMPLES = 1000
LEVEL = 0.95


@dataclass(frozen=True, eq=False)
class Estimate:
    """A figure, its two-sided :data:`LEVEL` percentile interval and the bootstrap replicates
    the interval comes from. A figure whose units are not at hand (a score file that keeps
    only lm-eval's standard error) has no replicates but a ``standard_error``: its interval
    is the normal one, value +- z x SE, and it pairs with nothing."""

    value: float
    replicates: np.ndarray = field(default_factory=lambda: np.empty(0))
    seeds: int = 1
    # Standard deviation of the figure across replicate seeds (nan for one seed).
    seed_sd: float = math.nan
    standard_error: float = math.nan
    # How many units (prompts, pairs, models) the figure was drawn over; 0 where not counted.
    units: int = 0

    @property
    def interval(self) -> tuple[float, float]:
        if self.replicates.size == 0 and math.isfinite(self.standard_error):
            z = NormalDist().inv_cdf(0.5 + LEVEL / 2)
            return self.value - z * self.standard_error, self.value + z * self.standard_error
        return percentile_interval(self.replicates)

    @property
    def low(self) -> float:
        return self.interval[0]

    @property
    def high(self) -> float:
        return self.interval[1]

    def scaled(self, factor: float) -> Estimate:
        return Estimate(
            self.value * factor,
            self.replicates * factor,
            self.seeds,
            self.seed_sd * abs(factor),
            self.standard_error * abs(factor),
            self.units,
        )


# The share of draws that must define a figure for its interval to be given. A draw can
# leave a figure undefined (too few distinct models for a Kendall tau, no prompt of a level);
# the percentile interval of the remaining draws would describe only draws that happen to be
# well-behaved, narrower than the truth (four models drawn with replacement are four
# distinct ones in 9% of draws).
DEFINED_SHARE = 0.95


def percentile_interval(replicates: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The central ``level`` interval of the replicates; (nan, nan) when fewer than
    :data:`DEFINED_SHARE` of them are finite."""
    replicates = np.asarray(replicates, dtype=float)
    finite = replicates[np.isfinite(replicates)]
    if finite.size == 0 or finite.size < DEFINED_SHARE * replicates.size:
        return math.nan, math.nan
    tail = (1 - level) / 2
    low, high = np.quantile(finite, [tail, 1 - tail])
    return float(low), float(high)


def unit_draws(units: Sequence, resamples: int = RESAMPLES) -> np.ndarray:
    """A (resamples, n) matrix of indices into ``units``, drawn with replacement.

    The generator is seeded by the sorted unit ids and draws over the sorted order, so any
    two calls with the same set of ids (in whatever order) select the same ids in every
    replicate."""
    keys = [str(unit) for unit in units]
    if len(set(keys)) != len(keys):
        duplicated = sorted({k for k in keys if keys.count(k) > 1})[:5]
        raise ValueError(f"bootstrap units must be distinct; repeated: {duplicated}")
    order = np.argsort(keys, kind="stable")
    digest = hashlib.sha256("\x1f".join(sorted(keys)).encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    draws = rng.integers(0, len(keys), size=(resamples, len(keys)))
    return order[draws]


BatchStatistic = Callable[[np.ndarray], np.ndarray]


def bootstrap(units: Sequence, statistic: BatchStatistic, resamples: int = RESAMPLES) -> Estimate:
    """The figure ``statistic`` gives on all units, with its replicates. ``statistic`` takes a
    (k, n) index matrix into ``units`` and returns the k figures (row 0 of the first call is
    the units as they are)."""
    n = len(units)
    if n == 0:
        return Estimate(math.nan)
    value = float(np.asarray(statistic(np.arange(n)[None, :]))[0])
    replicates = np.asarray(statistic(unit_draws(units, resamples)), dtype=float)
    return Estimate(value, replicates, units=n)


def mean_of(values: Sequence[float], units: Sequence, scale: float = 1.0) -> Estimate:
    """The mean of per-unit values (an accuracy from 0/1 values), times ``scale``."""
    array = np.asarray(values, dtype=float) * scale
    return bootstrap(units, lambda draws: array[draws].mean(axis=1))


def ratio_of_sums(
    numerators: Sequence[float], denominators: Sequence[float], units: Sequence, scale: float = 1.0
) -> Estimate:
    """sum(numerators) / sum(denominators) x ``scale`` over the drawn units: a pooled
    percentage (Ruler's level scores: outputs in window over outputs of the level); nan in a
    replicate that draws no unit of the denominator."""
    top = np.asarray(numerators, dtype=float)
    bottom = np.asarray(denominators, dtype=float)

    def statistic(draws):
        total = bottom[draws].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(total > 0, scale * top[draws].sum(axis=1) / np.where(total > 0, total, 1), np.nan)

    return bootstrap(units, statistic)


def mean_of_estimates(estimates: Sequence[Estimate]) -> Estimate:
    """The plain mean of figures over the same units (an average of columns): their draws
    are the same, so each replicate is the mean of the figures' replicates of that draw."""
    return Estimate(
        sum(e.value for e in estimates) / len(estimates),
        np.stack([e.replicates for e in estimates]).mean(axis=0),
        units=min(e.units for e in estimates),
    )


def each_draw(units: Sequence, figure: Callable[[np.ndarray], float], resamples: int = RESAMPLES) -> Estimate:
    """For figures with no batched form (a regression refitted on each draw): ``figure``
    takes one index array into ``units``."""
    return bootstrap(units, lambda draws: np.array([figure(row) for row in draws]), resamples)


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
