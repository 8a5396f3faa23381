"""A figure and its interval.

Every figure in a study table is computed from units (prompts, documents, preference pairs,
models). Its interval is a percentile bootstrap over those units (:mod:`reprolm.stats.bootstrap`):
the units are drawn with replacement :data:`RESAMPLES` times and the figure recomputed on each
draw. A table cell that holds an :class:`Estimate` is written by :func:`reprolm.io.write_table`
as the figure and its ``{column} lo`` / ``{column} hi`` bounds, and its replicates are kept in
``{table}.replicates.parquet`` beside the CSV, where the paper comparison reads them.

This module loads no heavy library when imported: :mod:`reprolm.io`, which the workflow reads
while it parses, tests cells for it. numpy is loaded by the first interval computed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

RESAMPLES = 1000
LEVEL = 0.95
# The share of draws that must define a figure for its interval to be given. A draw can
# leave a figure undefined (too few distinct models for a Kendall tau, no prompt of a level);
# the percentile interval of the remaining draws would describe only draws that happen to be
# well-behaved, narrower than the truth (four models drawn with replacement are four
# distinct ones in 9% of draws).
DEFINED_SHARE = 0.95


def _no_replicates() -> np.ndarray:
    import numpy as np

    return np.empty(0)


@dataclass(frozen=True, eq=False)
class Estimate:
    """A figure, its two-sided :data:`LEVEL` percentile interval and the bootstrap replicates
    the interval comes from. A figure whose units are not at hand (a score file that keeps
    only lm-eval's standard error) has no replicates but a ``standard_error``: its interval
    is the normal one, value +- z x SE, and it pairs with nothing."""

    value: float
    replicates: np.ndarray = field(default_factory=_no_replicates)
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


def percentile_interval(replicates: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The central ``level`` interval of the replicates; (nan, nan) when fewer than
    :data:`DEFINED_SHARE` of them are finite."""
    import numpy as np

    replicates = np.asarray(replicates, dtype=float)
    finite = replicates[np.isfinite(replicates)]
    if finite.size == 0 or finite.size < DEFINED_SHARE * replicates.size:
        return math.nan, math.nan
    tail = (1 - level) / 2
    low, high = np.quantile(finite, [tail, 1 - tail])
    return float(low), float(high)
