"""Harmony's plots show negative Kendall taus instead of cutting them off at zero."""

from __future__ import annotations

import pandas as pd
import pytest

from reprolm.aggregate.uncertainty import Estimate
from reprolm.studies.harmony.rankings import consistency_figure, tau_heatmap, tau_limits


def test_tau_limits_are_symmetric_as_soon_as_a_tau_or_an_interval_end_is_negative():
    assert tau_limits([0.2, 0.9]) == (0.0, 1.0)
    assert tau_limits([0.2, -0.498]) == (-1.0, 1.0)
    assert tau_limits([0.2, float("nan")], [-0.1]) == (-1.0, 1.0)


def test_a_negative_mean_tau_is_a_bar_inside_the_axis_below_zero():
    # BoolQ's tau of -0.498 was an empty bar on an axis fixed at 0..1.
    direct = pd.Series({"boolq": -0.498, "arc": 0.4, "mmlu": 0.6})
    tbt = pd.Series({"boolq": Estimate(0.1, standard_error=0.2), "arc": 0.5, "mmlu": 0.7})
    axis = consistency_figure(direct, tbt).axes[0]
    low, high = axis.get_ylim()
    assert (low, high) == pytest.approx((-1.0, 1.0))
    heights = sorted(bar.get_height() for bar in axis.patches)
    assert heights[0] == pytest.approx(-0.498) and low < heights[0]


def test_the_heatmap_colour_scale_reaches_a_negative_tau():
    taus = pd.DataFrame([[1.0, -0.498], [-0.498, 1.0]], index=["boolq", "arc"], columns=["boolq", "arc"])
    image = tau_heatmap(taus).axes[0].images[0]
    assert image.get_clim() == (-1.0, 1.0)
