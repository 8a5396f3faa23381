"""The bootstrap behind every table interval and effect claim, checked by hand and against
scipy on small fixtures."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from reprolm.aggregate import uncertainty as u
from reprolm.io import write_table


def test_two_units_interval_is_the_enumerable_one():
    # Resampling two units gives means 0, 0.5, 1 with chances 1/4, 1/2, 1/4: the central 95%
    # spans both extremes, and about half the replicates are 0.5.
    estimate = u.mean_of([0.0, 1.0], ["a", "b"])
    assert estimate.value == 0.5
    assert (estimate.low, estimate.high) == (0.0, 1.0)
    assert set(np.unique(estimate.replicates)) == {0.0, 0.5, 1.0}
    assert abs((estimate.replicates == 0.5).mean() - 0.5) < 0.05


def test_mean_interval_agrees_with_scipy_percentile_bootstrap():
    rng = np.random.default_rng(3)
    values = rng.normal(10, 4, size=300)
    ids = [f"doc{i}" for i in range(300)]
    ours = u.mean_of(values, ids)
    theirs = stats.bootstrap(
        (values,), np.mean, method="percentile", n_resamples=20000, random_state=0
    ).confidence_interval
    assert ours.value == pytest.approx(values.mean())
    # Monte-Carlo error of a 2.5% quantile from 1000 draws is about 0.05 here.
    assert ours.low == pytest.approx(theirs.low, abs=0.15)
    assert ours.high == pytest.approx(theirs.high, abs=0.15)
    # ... and both are close to the normal interval, mean +- 1.96 SE.
    se = values.std(ddof=1) / math.sqrt(len(values))
    assert ours.high - ours.low == pytest.approx(2 * 1.96 * se, rel=0.1)


def test_draws_depend_on_the_unit_ids_not_their_order():
    ids = [f"p{i}" for i in range(50)]
    shuffled = list(reversed(ids))
    first, second = u.unit_draws(ids, 20), u.unit_draws(shuffled, 20)
    chosen_first = np.array(ids)[first]
    chosen_second = np.array(shuffled)[second]
    assert (chosen_first == chosen_second).all()
    assert not (u.unit_draws([f"q{i}" for i in range(50)], 20) == first).all()
    with pytest.raises(ValueError, match="distinct"):
        u.unit_draws(["a", "b", "a"])


def test_ratio_of_sums_pools_counts():
    # Four outputs of one level, three inside the window: 75%, not a mean of per-target rates.
    estimate = u.ratio_of_sums([1, 1, 1, 0, 0], [1, 1, 1, 1, 0], list("abcde"), scale=100)
    assert estimate.value == 75.0
    assert 0 <= estimate.low <= estimate.value <= estimate.high <= 100


def test_identical_models_are_not_a_significant_effect():
    values = np.random.default_rng(0).integers(0, 2, size=40).astype(float)
    ids = [str(i) for i in range(40)]
    result = u.difference(u.mean_of(values, ids), u.mean_of(values[::-1], list(reversed(ids))))
    assert result.value == 0 and (result.low, result.high) == (0.0, 0.0)
    assert result.p == 1.0 and not result.significant and result.paired


def test_pairing_finds_a_small_consistent_effect():
    # Prompts vary much more than the models differ: unpaired the shift is lost in the
    # prompt noise; paired over the same prompts it is plain.
    rng = np.random.default_rng(1)
    base = rng.normal(0, 5, size=60)
    ids = [f"q{i}" for i in range(60)]
    better, worse = u.mean_of(base + 0.5, ids), u.mean_of(base, ids)
    paired = u.difference(better, worse)
    assert paired.value == pytest.approx(0.5)
    assert paired.significant and paired.p < 0.01
    # Every draw favours the better model: p is at the resolution of 1000 draws, never 0.
    assert paired.p == pytest.approx(2 / 1001)
    independent = u.mean_of(base, [f"other{i}" for i in range(60)])
    unpaired = u.difference(better, independent)
    assert not unpaired.significant


def test_difference_from_a_constant_is_the_estimate_interval_shifted():
    estimate = u.mean_of([1, 1, 1, 0] * 10, [str(i) for i in range(40)], scale=100)
    result = u.difference(estimate, 50.0)
    assert result.value == pytest.approx(25.0)
    assert (result.low, result.high) == pytest.approx((estimate.low - 50, estimate.high - 50))
    assert not result.paired
    with pytest.raises(ValueError, match="two constants"):
        u.difference(1.0, 2.0)


def test_holm_by_hand():
    # Sorted 0.01, 0.03, 0.04 times 3, 2, 1 -> 0.03, 0.06, 0.04, made monotone: 0.06.
    assert u.holm([0.01, 0.04, 0.03, math.nan]) == pytest.approx([0.03, 0.06, 0.06, math.nan], nan_ok=True)
    assert u.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_pooled_seeds_widen_the_interval_and_report_their_spread():
    ids = [str(i) for i in range(200)]
    rng = np.random.default_rng(5)
    noise = rng.normal(0, 1, size=200)
    seeds = [u.mean_of(noise + shift, ids) for shift in (0.0, 1.0, 2.0)]
    pooled = u.pool_seeds(seeds)
    assert pooled.value == pytest.approx(np.mean([s.value for s in seeds]))
    assert pooled.seeds == 3 and pooled.seed_sd == pytest.approx(1.0)
    assert pooled.high - pooled.low > 2 * (seeds[0].high - seeds[0].low)
    assert u.pool_seeds(seeds[:1]) is seeds[0]


def test_within_standard_error():
    assert u.within_standard_error(0.52, 0.50, 0.03)
    assert not u.within_standard_error(0.60, 0.50, 0.03)
    assert u.within_standard_error(math.nan, 0.5, 0.1) is None


def test_table_cells_holding_estimates_are_written_with_bounds_and_replicates(tmp_path):
    ids = [str(i) for i in range(30)]
    frame = pd.DataFrame(
        [
            {"model": "a", "accuracy": u.mean_of([1.0] * 20 + [0.0] * 10, ids, scale=100), "n": 30},
            {"model": "b", "accuracy": u.mean_of([1.0] * 10 + [0.0] * 20, ids, scale=100), "n": 30},
        ]
    )
    write_table(frame, tmp_path, "t")
    written = pd.read_csv(tmp_path / "t.csv")
    assert list(written.columns) == ["model", "accuracy", "accuracy lo", "accuracy hi", "n"]
    assert written["accuracy"].tolist() == pytest.approx([66.67, 33.33])
    assert (written["accuracy lo"] < written["accuracy"]).all() and (written["accuracy"] < written["accuracy hi"]).all()
    replicates = pd.read_parquet(tmp_path / "t.replicates.parquet")
    assert replicates[["row", "column"]].values.tolist() == [[0, "accuracy"], [1, "accuracy"]]
    assert len(replicates["replicates"][0]) == u.RESAMPLES
    assert "[" not in (tmp_path / "t.md").read_text().splitlines()[0]


def test_a_figure_with_only_a_standard_error_has_the_normal_interval():
    estimate = u.Estimate(0.6, standard_error=0.05)
    assert estimate.interval == pytest.approx((0.6 - 1.959964 * 0.05, 0.6 + 1.959964 * 0.05))
    assert estimate.scaled(100).interval == pytest.approx((60 - 1.959964 * 5, 60 + 1.959964 * 5))
    assert math.isnan(u.Estimate(0.6).low)  # neither replicates nor a standard error


def test_a_figure_most_draws_leave_undefined_has_no_interval():
    # Defined in 9 draws of 10: the surviving draws' interval would understate the spread.
    replicates = np.array([1.0, 2.0, 3.0] * 300 + [math.nan] * 100)
    assert all(math.isnan(x) for x in u.percentile_interval(replicates))
    assert not math.isnan(u.percentile_interval(replicates[:940])[0])  # 900 of 940 defined: 95.7%
    estimate = u.Estimate(2.0, replicates)
    result = u.difference(estimate, 0.0)
    assert math.isnan(result.low) and math.isnan(result.p) and not result.significant
