"""Intervals of the ExPO and FLR tables' judged figures: win rates (length-controlled ones
refitted per draw), grades, pair accuracy and the reward-model correlations, each the score's
own figure with a bootstrap over its prompts, pairs, items or models."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from reprolm.aggregate.judged import Units, as_scored, grade_estimate, win_rate_estimates
from reprolm.aggregate.tables import Score
from reprolm.aggregate.uncertainty import RESAMPLES, Estimate, difference, unit_draws
from reprolm.io import write_table
from reprolm.paths import expo_name
from reprolm.score.judging import length_controlled_win_rate, pair_accuracy, win_rates
from reprolm.studies.expo import choose_alpha
from reprolm.studies.expo.tables import alpha_table, judge_table, plot_alpha_curves, single_grade_table, win_rate_table
from reprolm.studies.flr.tables import alignment_table, plot_ranking, ranking_table, reward_model_table


def _win_rate_score(preferences, answer_lengths, reference_lengths, ids=None) -> dict:
    """A win-rate score file's content, as ``judge_win_rate`` writes it for a plain judge."""
    ids = list(range(len(preferences))) if ids is None else ids
    return {"protocol": "test", "judge": "rm", "ids": ids, **win_rates(preferences, answer_lengths, reference_lengths)}


def _verdicts(n=60, seed=0, longer_wins=0.3):
    rng = np.random.default_rng(seed)
    answer_lengths = rng.integers(100, 900, n)
    reference_lengths = rng.integers(100, 900, n)
    preferences = np.clip(
        0.5 + longer_wins * np.sign(answer_lengths - reference_lengths) + rng.normal(0, 0.2, n), 0, 1
    ).tolist()
    return preferences, answer_lengths.tolist(), reference_lengths.tolist()


def test_win_rate_estimates_are_the_scores_figures_with_intervals_over_prompts():
    preferences, answer_lengths, reference_lengths = _verdicts()
    preferences[4] = math.nan  # unparsed: left out of the figure and of every draw
    score = _win_rate_score(preferences, answer_lengths, reference_lengths)
    estimates = win_rate_estimates(score, "win_rate.json")
    for name in ("win_rate", "lc_win_rate", "mean_length"):
        assert estimates[name].value == score[name]
        assert estimates[name].low <= estimates[name].value <= estimates[name].high
        assert estimates[name].replicates.shape == (RESAMPLES,)
    # The win rate's replicates by hand: each draw's mean preference over its parsed verdicts.
    p = np.array(preferences)
    draws = unit_draws(score["ids"])
    by_hand = [100 * np.nanmean(p[draw]) for draw in draws[:20]]
    assert estimates["win_rate"].replicates[:20] == pytest.approx(by_hand, rel=1e-12)
    # Replicate 0-style check of the per-draw refit: on all prompts, the refitted figure is
    # length_controlled_win_rate on the parsed verdicts; on a draw, on the drawn ones.
    kept = [i for i in range(len(p)) if not math.isnan(p[i])]
    prompts = Units(score["ids"])

    def refit(rows):
        rows = [r for r in prompts.rows_of(rows) if not math.isnan(p[r])]
        return length_controlled_win_rate(p[rows], np.array(answer_lengths)[rows], np.array(reference_lengths)[rows])[
            "lc_win_rate"
        ]

    everything = length_controlled_win_rate(
        p[kept], [answer_lengths[i] for i in kept], [reference_lengths[i] for i in kept]
    )["lc_win_rate"]
    assert refit(np.arange(len(p))) == everything == score["lc_win_rate"]
    assert estimates["lc_win_rate"].replicates[:5] == pytest.approx([refit(draw) for draw in draws[:5]], rel=1e-12)


def test_a_prompts_samples_are_drawn_together():
    # Prompt 7 has two samples (preferences 1 and 1), prompt 8 one (0): a draw takes both
    # samples of 7 or none, so the replicates are 0 (8 twice), 2/3 (7 and 8) and 1 (7 twice).
    score = _win_rate_score([1.0, 0.0, 1.0], [10, 10, 10], [10, 10, 10], ids=[7, 8, 7])
    estimate = win_rate_estimates(score, "win_rate.json")["win_rate"]
    assert estimate.value == pytest.approx(200 / 3)
    assert set(np.round(estimate.replicates, 9)) == {0.0, round(200 / 3, 9), 100.0}


def test_identical_verdicts_before_and_after_expo_differ_by_exactly_zero():
    preferences, answer_lengths, reference_lengths = _verdicts(n=40, seed=1)
    before = win_rate_estimates(_win_rate_score(preferences, answer_lengths, reference_lengths), "ori")
    after = win_rate_estimates(
        _win_rate_score(list(preferences), list(answer_lengths), list(reference_lengths)), "expo"
    )
    for name in ("win_rate", "lc_win_rate", "mean_length"):
        paired = difference(after[name], before[name])
        assert paired.paired and (paired.value, paired.low, paired.high) == (0.0, 0.0, 0.0)
        assert not paired.significant


def test_a_better_extrapolation_on_the_same_prompts_is_a_paired_effect():
    preferences, answer_lengths, reference_lengths = _verdicts(n=80, seed=2)
    better = [min(1.0, p + 0.05) for p in preferences]
    before = win_rate_estimates(_win_rate_score(preferences, answer_lengths, reference_lengths), "ori")
    after = win_rate_estimates(_win_rate_score(better, answer_lengths, reference_lengths), "expo")
    paired = difference(after["win_rate"], before["win_rate"])
    unpaired_width = (after["win_rate"].high - after["win_rate"].low) + (
        before["win_rate"].high - before["win_rate"].low
    )
    assert paired.value == pytest.approx(after["win_rate"].value - before["win_rate"].value)
    assert 0 < paired.low <= paired.value <= paired.high
    assert paired.high - paired.low < unpaired_width / 5


def test_the_packages_length_control_keeps_its_replicates_from_scoring():
    preferences, answer_lengths, reference_lengths = _verdicts(n=10)
    score = {
        **_win_rate_score(preferences, answer_lengths, reference_lengths),
        "lc_win_rate": 40.0,
        "lc_win_rate_replicates": list(np.linspace(30, 50, RESAMPLES)),
    }
    lc = win_rate_estimates(score, "ae2.json")["lc_win_rate"]
    assert lc.value == 40.0 and lc.low == pytest.approx(30.5, abs=0.01) and lc.high == pytest.approx(49.5, abs=0.01)


def test_a_score_whose_verdicts_do_not_give_its_figure_is_refused():
    score = _win_rate_score([1.0, 0.0, 1.0], [1, 2, 3], [1, 1, 1])
    with pytest.raises(ValueError, match=r"old.json win_rate: the per-prompt verdicts give 66.66"):
        win_rate_estimates({**score, "win_rate": 50.0}, "old.json")
    assert math.isnan(as_scored(Estimate(math.nan), math.nan, "x").value)


def test_grade_estimate_pools_turns_and_samples_by_prompt():
    # Prompt a: one sample graded 1 and 1 over two turns; prompt b: two samples graded 3 and
    # 5 (and an unparsed turn). Mean of all parsed turns: (1 + 1 + 3 + 5) / 4 = 2.5.
    ids, grades = ["a", "b", "b"], [[1.0, 1.0], [3.0, math.nan], [5.0]]
    estimate = grade_estimate(ids, grades, 2.5, "grade.json")
    assert estimate.value == 2.5
    # Draws {a, a}: 1; {a, b}: 2.5; {b, b}: 4. Nothing else: a prompt's turns go together.
    assert set(np.unique(estimate.replicates)) == {1.0, 2.5, 4.0}
    assert (estimate.low, estimate.high) == (1.0, 4.0)


def test_pair_accuracy_is_the_cores_mean_over_pairs():
    class LengthJudge:
        def score(self, conversations):
            return [float(len(c[-1]["content"])) for c in conversations]

    pairs = [
        {
            "prompt": [{"role": "user", "content": "q"}],
            "chosen": [{"role": "assistant", "content": "x" * (5 if i % 4 else 1)}],
            "rejected": [{"role": "assistant", "content": "xx"}],
        }
        for i in range(40)
    ]
    result = pair_accuracy(LengthJudge(), pairs)
    assert result["correct"] == [0.0 if i % 4 == 0 else 1.0 for i in range(40)]
    assert result["ids"] == list(range(40)) and result["accuracy"] == 75.0
    assert result["ci_low"] < 75.0 < result["ci_high"] and result["confidence"] == 0.95
    # The interval of a 75% accuracy on 40 pairs: about +- 1.96 sqrt(.75 .25 / 40) = 13.4 points.
    assert result["ci_high"] - result["ci_low"] == pytest.approx(2 * 13.4, abs=5)
    table = judge_table(
        [Score("pair_accuracy", "", "", "", {**result, "judge": "len", "dataset": "prefs", "split": "test"})]
    )
    cell = table.loc[0, "accuracy"]
    assert (cell.value, cell.low, cell.high) == (75.0, result["ci_low"], result["ci_high"])


def _grade_score(ids, grades) -> dict:
    parsed = [g for row in grades for g in row if not math.isnan(g)]
    return {
        "ids": ids,
        "grades": grades,
        "mean": float(np.mean(parsed)),
        "judge": "rm",
        "judge_scale": "reward",
        "protocol": "test",
    }


def test_expo_tables_carry_intervals_and_write_lo_hi_columns(tmp_path):
    rng = np.random.default_rng(4)
    ids = list(range(30))
    scores = []
    searched = {}
    for alpha in (0.0, 0.1, 0.3):
        graded = _grade_score(ids, [[float(g)] for g in rng.normal(alpha * 10, 1, 30)])
        searched[alpha] = graded
        model = "dpo" if alpha == 0 else expo_name("dpo", alpha)
        scores.append(Score("grade_rm", "tiny", model, "mt_bench", graded))
    search = choose_alpha(searched)
    assert search["best_alpha"] == 0.3 and search["curve"][1]["ids"] == ids
    scores.append(Score("alpha_search", "tiny", "dpo", "search", {"metric": "alpha_search", **search}))
    for model, shift in (("dpo", 0.0), (expo_name("dpo", 0.3), 0.1)):
        preferences, answer_lengths, reference_lengths = _verdicts(n=30, seed=5)
        preferences = [min(1.0, p + shift) for p in preferences]
        scores.append(
            Score(
                "win_rate_rm",
                "tiny",
                model,
                "alpaca_eval",
                {**_win_rate_score(preferences, answer_lengths, reference_lengths), "lc_method": "regression"},
            )
        )

    alphas = alpha_table(scores, {"tiny/dpo": 0.1})
    assert [e.value for e in alphas["mean_grade"]] == [searched[a]["mean"] for a in (0.0, 0.1, 0.3)]
    assert alphas["chosen"].tolist() == [False, False, True]
    assert alphas["model card"].tolist() == [False, True, False]
    # Each alpha's mean of 30 grades of sd 1: an interval about +- 1.96 / sqrt(30) = 0.36 wide.
    assert [e.high - e.low for e in alphas["mean_grade"]] == pytest.approx([0.72] * 3, abs=0.25)
    plot_alpha_curves(alphas, tmp_path / "alpha_search.png")
    assert (tmp_path / "alpha_search.png").stat().st_size > 0
    wins = win_rate_table(scores)
    win = wins.iloc[0]
    assert win["Win Rate (Ori)"].value == scores[-2].data["win_rate"]
    assert win["LC Win Rate (+ ExPO)"].value == scores[-1].data["lc_win_rate"]
    assert win["Length (Ori)"].value == win["Length (+ ExPO)"].value == scores[-2].data["mean_length"]
    assert difference(win["Win Rate (+ ExPO)"], win["Win Rate (Ori)"]).low > 0
    grades = single_grade_table(scores, "mt_bench").iloc[0]
    assert grades["Original"].value == searched[0.0]["mean"] and grades["+ ExPO"].value == searched[0.3]["mean"]

    write_table(wins, tmp_path, "alpaca_eval")
    written = pd.read_csv(tmp_path / "alpaca_eval.csv").iloc[0]
    for column in ("Win Rate (Ori)", "LC Win Rate (+ ExPO)", "Length (Ori)"):
        assert written[f"{column} lo"] <= written[column] <= written[f"{column} hi"]
    assert len(pd.read_parquet(tmp_path / "alpaca_eval.replicates.parquet")) == 6


def test_flr_correlations_are_refitted_on_draws_of_items_and_of_models(tmp_path):
    rng = np.random.default_rng(6)
    ratings = rng.integers(1, 6, 50).astype(float)
    judged = (ratings + rng.normal(0, 1, 50)).tolist()
    rated = {
        "judge": "rm",
        "dataset": "helpsteer",
        "scores": judged,
        "ratings": ratings.tolist(),
        "ids": list(range(50)),
        "pearson": stats.pearsonr(judged, ratings)[0],
        "spearman": stats.spearmanr(judged, ratings)[0],
        "kendall": stats.kendalltau(judged, ratings)[0],
    }
    models = [f"m{k}" for k in range(6)]
    elo = {m: 1000.0 + 40 * k for k, m in enumerate(models)}
    answer_models = [m for m in models for _ in range(5)]
    answer_scores = [0.01 * elo[m] + float(rng.normal(0, 1.5)) for m in answer_models]
    answer_scores[3] = math.nan  # unscored: left out of m0's mean
    means = {m: float(np.nanmean([s for s, a in zip(answer_scores, answer_models) if a == m])) for m in models}
    ranked = {
        "judge": "rm",
        "dataset": "wildbench",
        "elo": elo,
        "mean_score": means,
        "ids": list(range(30)),
        "answer_models": answer_models,
        "scores": answer_scores,
        **{
            name: float(function([means[m] for m in models], list(elo.values()))[0])
            for name, function in (
                ("pearson", stats.pearsonr),
                ("spearman", stats.spearmanr),
                ("kendall", stats.kendalltau),
            )
        },
    }
    scores = [Score("rating_agreement", "", "", "", rated), Score("model_ranking", "", "", "", ranked)]
    row = reward_model_table(scores, ["rm"]).iloc[0]
    for dataset, data in (("helpsteer", rated), ("wildbench", ranked)):
        for name in ("pearson", "spearman", "kendall"):
            cell = row[f"{dataset} {name}"]
            assert cell.value == data[name] and cell.low <= cell.value <= cell.high
    # The rating correlation's replicates by hand; the ranking's draw the models.
    draws = unit_draws(list(range(50)))
    assert row["helpsteer spearman"].replicates[:10] == pytest.approx(
        [stats.spearmanr(np.array(judged)[d], ratings[d])[0] for d in draws[:10]], rel=1e-12
    )
    model_draw = unit_draws(models)[0]
    by_hand = stats.pearsonr([means[models[k]] for k in model_draw], [elo[models[k]] for k in model_draw])[0]
    assert row["wildbench pearson"].replicates[0] == pytest.approx(by_hand, rel=1e-12)
    ranking = ranking_table(scores)
    assert [e.value for e in ranking["rm"]] == [means[m] for m in reversed(models)]
    m0 = ranking.set_index("model").loc["m0", "rm"]
    assert m0.low <= means["m0"] <= m0.high and m0.replicates.size == RESAMPLES
    plot_ranking(ranking, ["rm"], tmp_path / "model_ranking.png")
    assert (tmp_path / "model_ranking.png").stat().st_size > 0


def test_flr_alignment_rows_carry_win_rate_and_grade_intervals():
    preferences, answer_lengths, reference_lengths = _verdicts(n=20, seed=7)
    ids = [k // 2 for k in range(20)]  # two samples per prompt
    grades = [[float(k % 5)] for k in range(20)]
    scores = [
        Score(
            "win_rate_rm",
            "tiny",
            "flr_dpo",
            "flr_eval",
            _win_rate_score(preferences, answer_lengths, reference_lengths, ids=ids),
        ),
        Score("grade_flr", "tiny", "flr_dpo", "flr_eval", _grade_score(ids, grades)),
        Score("grade_flr", "tiny", "vanilla", "flr_eval", _grade_score(ids, grades)),
    ]
    table = alignment_table(
        scores, {"promptset": "flr_eval", "bases": ["tiny"], "start": "vanilla", "recipes": ["flr_dpo"]}
    ).set_index("model")
    aligned = table.loc["tiny/flr_dpo"]
    assert aligned["win rate vs start"].value == scores[0].data["win_rate"]
    assert aligned["LC win rate vs start"].value == scores[0].data["lc_win_rate"]
    assert aligned["flr grade"].value == 2.0
    same = difference(aligned["flr grade"], table.loc["tiny/vanilla", "flr grade"])
    assert (same.low, same.high) == (0.0, 0.0)
