"""The unit bootstrap behind every interval.

The draws are seeded by the units' ids alone, so two figures computed over the same units
(two models on one prompt set, one model before and after its weights change) are resampled
identically: the difference of their replicates is a *paired* bootstrap of the difference,
which is what the effect claims test (:func:`reprolm.aggregate.uncertainty.difference`).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence

import numpy as np

from reprolm.stats.estimate import RESAMPLES, Estimate


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
    percentage (outputs in a length window over the outputs of a level); nan in a
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
