"""LM-Harmony aggregation (docs/studies/harmony.md), pinned to the paper's published numbers."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

from reprolm.aggregate.paper_comparison import write_paper_comparison
from reprolm.aggregate.tables import Score
from reprolm.aggregate.uncertainty import RESAMPLES, difference, unit_draws
from reprolm.studies.harmony.rankings import (
    PAPER_METRICS,
    PAPER_TASKS,
    TASK_LABELS,
    binary_standard_error,
    complete_models,
    consistency_estimates,
    drawn_kendall_taus,
    leaderboard,
    load_harmony_results,
    pc1_scores,
    pc1_share_estimate,
    plot_consistency,
    plot_tau_heatmap,
    ranking_consistency,
    score_matrix,
)
from reprolm.studies.harmony.tables import write_harmony_tables

DATA = Path(__file__).parent / "data" / "harmony"
# The paper's published results, shipped with the config that compares a run against them.
REFERENCE = Path(__file__).resolve().parents[1] / "config" / "reference" / "lm-harmony"
HEADLINES = Path(__file__).resolve().parents[1] / "config" / "paper_headlines.yaml"

# The seed prints every task score rounded to 0.01 (percent) and PC1 to 0.01. Perturbing the
# seed's scores by uniform +-0.005 noise moves the worst of the 61 models' 100 x PC1 by 0.10 on
# average (0.14 at most over 300 draws); the observed worst residual is 0.081. 0.15 is that
# rounding envelope, and under 1/10000 of the PC1 range (-1344..591).
SEED_PC1_TOLERANCE = 0.15


@pytest.fixture(scope="module")
def seed():
    return pd.read_csv(DATA / "seed_leaderboard.csv", index_col="model")


@pytest.fixture(scope="module")
def seed_scores(seed):
    return seed.drop(columns=["Rank", "PC1"])


@pytest.fixture(scope="module")
def results():
    return load_harmony_results(REFERENCE / "all_results.json")


@pytest.fixture(scope="module")
def consistency(results):
    return {name: ranking_consistency(results[name]) for name in ("direct_eval", "train_before_test")}


# --- the README leaderboard (seed) ---------------------------------------------------------------


def test_seed_columns_are_the_paper_tasks(seed_scores):
    assert list(seed_scores.columns) == [TASK_LABELS[task] for task in PAPER_TASKS]
    assert seed_scores.shape == (61, 24) and not seed_scores.isna().any().any()


def test_seed_pc1_column_reproduced_within_input_rounding(seed, seed_scores):
    pc1 = pc1_scores(seed_scores)
    residual = (100 * pc1.scores - seed["PC1"]).abs()
    assert residual.max() <= SEED_PC1_TOLERANCE
    assert residual.mean() < 0.03  # no bias: rounding noise, not a different convention
    # The README's "accounts for 85% of the variance".
    assert round(pc1.explained_variance_ratio[0], 2) == 0.85
    assert (pc1.loadings > 0).all()


def test_sample_std_would_not_reproduce_the_seed(seed, seed_scores):
    # Dividing by the ddof=1 std shrinks every standardised score, hence every PC1 score, by
    # sqrt((n - 1) / n): far outside the rounding envelope at the top and bottom of the table.
    n = len(seed_scores)
    with_sample_std = 100 * pc1_scores(seed_scores).scores * math.sqrt((n - 1) / n)
    assert (with_sample_std - seed["PC1"]).abs().max() > 10


def test_seed_ranks_agree_except_one_pair_inside_the_rounding(seed, seed_scores):
    table = leaderboard(seed_scores)
    assert (seed["Rank"] == seed["PC1"].rank(ascending=False)).all()  # the seed ranks by PC1
    differing = table.index[table["Rank"] != seed.loc[table.index, "Rank"]]
    # Yi-1.5-6B-Chat 285.53 vs Yi-1.5-6B 285.49 in the seed: a 0.04 gap, below the rounding noise
    # (here 285.52 vs 285.55), so these two swap; every other model keeps its rank.
    assert sorted(differing) == ["01-ai/Yi-1.5-6B", "01-ai/Yi-1.5-6B-Chat"]
    gap = abs(seed.loc["01-ai/Yi-1.5-6B", "PC1"] - seed.loc["01-ai/Yi-1.5-6B-Chat", "PC1"])
    assert gap < SEED_PC1_TOLERANCE


def test_leaderboard_has_the_seed_format(seed, seed_scores):
    from_percent = leaderboard(seed_scores)
    from_fractions = leaderboard(seed_scores / 100)
    assert list(from_percent.columns) == list(seed.columns)
    assert from_percent["PC1"].is_monotonic_decreasing
    assert list(from_percent["Rank"]) == list(range(1, 62))
    pd.testing.assert_frame_equal(from_fractions, from_percent)
    tasks = list(seed_scores.columns)
    pd.testing.assert_frame_equal(from_percent[tasks], seed_scores.loc[from_percent.index], check_names=False)


# --- all_results.json: the paper's figures --------------------------------------------------------


def test_reference_matrices(results):
    for name in ("direct_eval", "train_before_test"):
        assert results[name].shape == (61, 24)
        assert not results[name].isna().any().any()
    # The full file: three bits-per-byte tasks without the 8 Gemma models, "N/A" stderrs.
    full = load_harmony_results(REFERENCE / "all_results.json", tasks=None)
    assert full["direct_eval"].shape == (61, 27)
    assert complete_models(full["direct_eval"]).shape == (53, 27)
    assert full["direct_eval_stderr"].isna().sum().sum() == 183


@pytest.mark.parametrize(("name", "paper"), [("direct_eval", 0.517), ("train_before_test", 0.755)])
def test_paper_mean_kendall_tau(consistency, name, paper):
    result = consistency[name]
    assert round(result.mean, 3) == paper
    # No pair was skipped, so the mean over pairs is also the mean of the per-task means.
    assert result.tau.notna().sum().sum() == 24 * 23
    assert result.per_task.mean() == pytest.approx(result.mean)


def test_paper_share_of_pairs_more_consistent_after_training(consistency):
    # The authors' notebook: "Ratio of task pairs with kendall train > eval: 0.993" (548 of 552).
    gain = consistency["train_before_test"].tau - consistency["direct_eval"].tau
    off_diagonal = gain.to_numpy()[~np.eye(24, dtype=bool)]
    assert (off_diagonal > 0).sum() == 548
    assert round((off_diagonal > 0).mean(), 3) == 0.993


@pytest.mark.parametrize(
    ("name", "paper", "notebook"),
    [
        ("direct_eval", 0.696, [0.69584915, 0.12618597, 0.0371142, 0.03035488, 0.02375368]),
        ("train_before_test", 0.864, [0.86359425, 0.0669933, 0.02393855, 0.01183042, 0.00739468]),
    ],
)
def test_paper_pc1_explained_variance(results, name, paper, notebook):
    ratios = pc1_scores(complete_models(results[name])).explained_variance_ratio
    assert round(ratios[0], 3) == paper
    # The first five ratios as printed by the authors' notebook (8 significant digits).
    np.testing.assert_allclose(ratios[:5], notebook, rtol=1e-6)


def test_pc1_matches_sklearn_standard_scaler_pca(results):
    # The authors' recipe: StandardScaler().fit_transform, PCA().fit_transform, flip on components_[0][0].
    preprocessing = pytest.importorskip("sklearn.preprocessing")
    decomposition = pytest.importorskip("sklearn.decomposition")
    matrix = results["train_before_test"]
    pca = decomposition.PCA()
    projected = pca.fit_transform(preprocessing.StandardScaler().fit_transform(matrix))
    sign = 1 if pca.components_[0][0] >= 0 else -1
    ours = pc1_scores(matrix)
    np.testing.assert_allclose(ours.scores, sign * projected[:, 0], atol=1e-10)
    np.testing.assert_allclose(ours.explained_variance_ratio, pca.explained_variance_ratio_, atol=1e-12)


# --- hand-made matrices ---------------------------------------------------------------------------


def test_pc1_population_std_by_hand():
    matrix = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [10.0, 20.0, 30.0]}, index=["x", "y", "z"])
    pc1 = pc1_scores(matrix)
    # z = (-sqrt(3/2), 0, sqrt(3/2)) on both tasks (ddof=0); direction (1, 1)/sqrt(2).
    np.testing.assert_allclose(pc1.scores, [-math.sqrt(3), 0, math.sqrt(3)], atol=1e-12)
    np.testing.assert_allclose(pc1.loadings, [1 / math.sqrt(2)] * 2, atol=1e-12)
    np.testing.assert_allclose(pc1.explained_variance_ratio, [1, 0], atol=1e-12)


def test_pc1_sign_follows_the_first_column():
    # Task "a" disagrees with "b" and "c": PC1 is still oriented so that a's loading is positive.
    matrix = pd.DataFrame(
        {"a": [4.0, 3.0, 2.0, 1.0], "b": [1.0, 2.0, 3.0, 4.5], "c": [1.0, 2.5, 3.0, 4.0]},
        index=["m1", "m2", "m3", "m4"],
    )
    pc1 = pc1_scores(matrix)
    assert pc1.loadings["a"] > 0 and pc1.loadings["b"] < 0 and pc1.loadings["c"] < 0
    assert pc1.scores.idxmax() == "m1"
    flipped = pc1_scores(matrix[["b", "a", "c"]])
    assert flipped.loadings["b"] > 0
    pd.testing.assert_series_equal(flipped.scores, -pc1.scores)
    assert pc1.scores.sum() == pytest.approx(0, abs=1e-12)


def test_pc1_is_scale_free_and_needs_complete_rows():
    matrix = pd.DataFrame({"a": [0.1, 0.5, 0.9], "b": [0.2, 0.3, 0.7]}, index=["x", "y", "z"])
    pd.testing.assert_series_equal(pc1_scores(100 * matrix).scores, pc1_scores(matrix).scores, atol=1e-12)
    with pytest.raises(ValueError, match="complete_models"):
        pc1_scores(matrix.mask(matrix > 0.8))
    with pytest.raises(ValueError, match="standardised"):
        pc1_scores(matrix.assign(b=0.5))


def test_leaderboard_shows_tasks_left_out_of_pc1():
    matrix = pd.DataFrame({"a": [0.1, 0.5, 0.9], "b": [0.2, 0.3, 0.7], "tied": [0.0, 0.0, 0.0]}, index=["x", "y", "z"])
    table = leaderboard(matrix, pc1_tasks=["a", "b"])
    assert list(table.columns) == ["Rank", "PC1", "a", "b", "tied"]
    assert list(table.index) == ["z", "y", "x"] and (table["tied"] == 0).all()
    expected = (100 * pc1_scores(matrix[["a", "b"]]).scores).round(2)
    pd.testing.assert_series_equal(table["PC1"], expected.loc[table.index])


def test_tau_b_corrects_for_ties():
    matrix = pd.DataFrame({"a": [1, 2, 2, 3, 4], "b": [1, 2, 3, 4, 5]}, dtype=float)
    tau = ranking_consistency(matrix).tau.loc["a", "b"]
    # 10 pairs: 9 concordant, 1 tied in a only -> tau-b = 9 / sqrt(9 * 10); tau-a would be 0.9.
    assert tau == pytest.approx(9 / math.sqrt(90))


def test_tau_uses_models_common_to_both_tasks_and_skips_small_pairs():
    nan = float("nan")
    matrix = pd.DataFrame(
        {
            "a": [1, 2, 3, 4, 5, 6],
            "b": [1, 2, 3, 4, 6, nan],  # agrees with a on the five models it has
            "c": [6, 5, 4, 3, nan, nan],  # only four models
        },
        index=list("uvwxyz"),
        dtype=float,
    )
    result = ranking_consistency(matrix, min_models=5)
    assert result.tau.loc["a", "b"] == result.tau.loc["b", "a"] == pytest.approx(1.0)
    assert result.tau["c"].isna().all() and result.tau.loc["c"].isna().all()
    assert np.isnan(result.tau.loc["a", "a"])
    assert result.mean == pytest.approx(1.0) and math.isnan(result.per_task["c"])
    relaxed = ranking_consistency(matrix, min_models=4)
    assert relaxed.tau.loc["a", "c"] == relaxed.tau.loc["b", "c"] == pytest.approx(-1.0)
    assert relaxed.mean == pytest.approx((1 + 1 - 1 - 1 - 1 - 1) / 6)
    assert relaxed.per_task.to_dict() == pytest.approx({"a": 0.0, "b": 0.0, "c": -1.0})


def test_score_matrix_from_nested_scores():
    nested = {"t2": {"m1": 0.5, "m2": "N/A"}, "t1": {"m1": 0.25, "m2": 0.75, "m3": 1.0}}
    matrix = score_matrix(nested, tasks=["t1", "t2"])
    assert list(matrix.columns) == ["t1", "t2"]
    assert matrix.loc["m1"].tolist() == [0.25, 0.5]
    assert matrix.loc[["m2", "m3"], "t2"].isna().all()
    assert list(complete_models(matrix).index) == ["m1"]
    with pytest.raises(KeyError, match="t3"):
        score_matrix(nested, tasks=["t3"])


def test_plots_write_pngs(tmp_path, consistency):
    direct, tbt = consistency["direct_eval"], consistency["train_before_test"]
    heatmap = plot_tau_heatmap(tbt.tau, tmp_path / "tau" / "train_before_test.png", title="Train-before-test")
    bars = plot_consistency(direct.per_task, tbt.per_task, tmp_path / "consistency.png")
    for path in (heatmap, bars):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


TEST_DOCUMENTS = 100


def _score(base: str, task: str, direct: float, trained: float, recipe: str = "pretrained") -> Score:
    """A train-before-test score file's content, as train_before_test writes it."""
    return Score(
        "train_before_test",
        base,
        recipe,
        task,
        {
            "direct_eval": direct,
            "train_before_test": trained,
            "metric": PAPER_METRICS[task],
            "sizes": {"train": 80, "valid": 20, "test": TEST_DOCUMENTS},
        },
    )


def _scores(models: list[str]) -> list[Score]:
    """Scores of ``models`` on three tasks, each model above the one before on every task."""
    return [
        _score(base, task, 0.1 * (rank + 1) + 0.01 * step, 0.2 * (rank + 1) + 0.02 * step)
        for rank, base in enumerate(models)
        for step, task in enumerate(["arc_easy", "boolq", "cola"])
    ]


def test_a_one_model_run_leaves_pc1_empty_and_the_paper_comparison_reads_it(tmp_path):
    study = {"tasks": [{"name": task} for task in ("arc_easy", "boolq", "cola")], "min_models": 4}
    tables, plots = tmp_path / "tables" / "harmony", tmp_path / "plots" / "harmony"
    plots.mkdir(parents=True)
    write_harmony_tables(_scores(["tiny_llama_small"]), study, {}, tables, plots)
    summary = pd.read_csv(tables / "consistency_summary.csv")
    assert summary["evaluation"].tolist() == ["direct", "train_before_test"]
    assert summary["models"].tolist() == [1, 1]
    assert summary["pc1_explained_variance"].isna().all() and summary["mean_kendall_tau"].isna().all()
    # The shipped headlines read that column: the figures are left empty, the report is made.
    report = tmp_path / "report"
    write_paper_comparison(
        str(HEADLINES),
        {},
        str(tmp_path / "tables"),
        ["harmony"],
        str(report / "paper_headlines.csv"),
        str(report / "effect_directions.csv"),
    )
    headlines = pd.read_csv(report / "paper_headlines.csv")
    assert headlines["figure"].tolist() == [
        "mean Kendall tau, direct",
        "mean Kendall tau, train-before-test",
        "PC1 explained variance, direct",
        "PC1 explained variance, train-before-test",
    ]
    assert headlines["this run"].isna().all()
    directions = pd.read_csv(report / "effect_directions.csv")
    assert directions["study"].tolist() == ["harmony"]
    assert directions[["expected higher", "expected lower", "shown"]].isna().all(axis=None)


def test_two_models_fill_pc1(tmp_path):
    study = {"tasks": [{"name": task} for task in ("arc_easy", "boolq", "cola")], "min_models": 2}
    (tmp_path / "plots").mkdir()
    write_harmony_tables(_scores(["a", "b"]), study, {}, tmp_path / "tables", tmp_path / "plots")
    summary = pd.read_csv(tmp_path / "tables" / "consistency_summary.csv")
    # Two models that every task ranks alike: one component explains everything.
    assert summary["pc1_explained_variance"].tolist() == [1.0, 1.0]
    assert summary["mean_kendall_tau"].tolist() == [1.0, 1.0]
    # No interval: half the draws of two models hold one model twice, where no tau is defined.
    assert summary[["mean_kendall_tau lo", "mean_kendall_tau hi"]].isna().all(axis=None)
    replicates = pd.read_parquet(tmp_path / "tables" / "consistency_summary.replicates.parquet")
    assert sorted(set(replicates["column"])) == ["mean_kendall_tau", "pc1_explained_variance"]
    assert all(len(draws) == RESAMPLES for draws in replicates["replicates"])


# --- intervals ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def estimates(results):
    return {name: consistency_estimates(results[name]) for name in ("direct_eval", "train_before_test")}


@pytest.mark.parametrize(("name", "paper"), [("direct_eval", 0.517), ("train_before_test", 0.755)])
def test_mean_tau_interval_over_models_holds_the_paper_figure(consistency, estimates, name, paper):
    estimate = estimates[name].mean
    assert estimate.value == consistency[name].mean  # the figure is SciPy's, untouched
    assert estimate.replicates.shape == (RESAMPLES,) and np.isfinite(estimate.replicates).all()
    assert estimate.low < paper < estimate.high
    # 61 models make the mean tau uncertain by about +-0.05-0.06 (measured: direct
    # 0.452..0.574, train-before-test 0.699..0.798).
    assert 0.08 < estimate.high - estimate.low < 0.15
    per_task = estimates[name].per_task
    assert list(per_task) == list(PAPER_TASKS)
    assert all(per_task[task].value == consistency[name].per_task[task] for task in PAPER_TASKS)
    assert all(per_task[task].low <= per_task[task].value <= per_task[task].high for task in PAPER_TASKS)


def test_train_before_test_raises_the_mean_tau_beyond_the_paired_interval(estimates):
    gain = difference(estimates["train_before_test"].mean, estimates["direct_eval"].mean)
    assert gain.paired and gain.value == pytest.approx(0.755 - 0.517, abs=1e-3)
    # Paired draws: the gain's interval (measured 0.198..0.284) is narrower than either
    # figure's own, and far from zero.
    assert 0.15 < gain.low < gain.value < gain.high < 0.35 and gain.p == pytest.approx(
        2 / 1001
    )  # no draw at or below 0
    assert gain.high - gain.low < estimates["direct_eval"].mean.high - estimates["direct_eval"].mean.low


@pytest.mark.parametrize(("name", "paper"), [("direct_eval", 0.696), ("train_before_test", 0.864)])
def test_pc1_share_interval_over_models_holds_the_paper_figure(results, name, paper):
    estimate = pc1_share_estimate(results[name])
    assert estimate.value == pc1_scores(results[name]).explained_variance_ratio[0]
    assert estimate.low < paper < estimate.high
    other = pc1_share_estimate(results["direct_eval" if name == "train_before_test" else "train_before_test"])
    # The same models drawn for both kinds: the replicates pair.
    assert difference(estimate, other).paired


def test_drawn_taus_are_scipys_tau_b_on_the_drawn_models():
    nan = float("nan")
    matrix = pd.DataFrame(
        {"a": [1, 2, 2, 3, 4, 5, 6], "b": [1, 3, 2, 5, 4, 6, nan], "c": [2, 2, 2, 1, 1, nan, 3]},
        index=[f"m{i}" for i in range(7)],
        dtype=float,
    )
    draws = unit_draws(list(matrix.index), 40)
    taus = drawn_kendall_taus(matrix, draws, min_models=3)
    checked = 0
    for draw, rows in zip(taus, draws):
        drawn = matrix.iloc[rows]
        for first, second in [("a", "b"), ("a", "c"), ("b", "c")]:
            both = drawn[[first, second]].dropna()
            i, j = list(matrix.columns).index(first), list(matrix.columns).index(second)
            if both.index.nunique() < 3:
                assert np.isnan(draw[i, j])
                continue
            expected = kendalltau(both[first], both[second], variant="b").statistic
            np.testing.assert_equal(draw[i, j], draw[j, i])
            assert draw[i, j] == pytest.approx(expected, abs=1e-12, nan_ok=True)
            checked += bool(np.isfinite(expected))
        assert np.isnan(np.diagonal(draw)).all()
    # Drawn multisets repeat models: at least one checked pair had a model twice.
    assert checked > 60 and any(len(set(rows)) < len(rows) for rows in draws)


def test_binary_standard_error_is_the_papers():
    reference = load_harmony_results(REFERENCE / "all_results.json")
    # Test documents per task (lm-eval's splits), e.g. MNLI's matched validation set.
    documents = {"mnli": 9815, "boolq": 3270, "arc_easy": 2376, "gsm8k": 1319, "nq_open": 3610, "hellaswag": 10000}
    for kind in ("direct_eval", "train_before_test"):
        for task, n in documents.items():
            metric = PAPER_METRICS[task]
            ours = reference[kind][task].map(lambda score, n=n, metric=metric: binary_standard_error(score, n, metric))
            np.testing.assert_allclose(ours, reference[f"{kind}_stderr"][task].reindex(ours.index), rtol=1e-9)
    assert math.isnan(binary_standard_error(0.3, 1000, "mcc,none"))
    assert math.isnan(binary_standard_error(0.3, 1, "acc,none"))


def test_score_tables_carry_a_normal_interval_from_the_standard_error(tmp_path):
    study = {"tasks": [{"name": task} for task in ("arc_easy", "boolq", "cola")], "min_models": 2}
    (tmp_path / "plots").mkdir()
    write_harmony_tables(_scores(["a", "b"]), study, {}, tmp_path / "tables", tmp_path / "plots")
    table = pd.read_csv(tmp_path / "tables" / "direct_scores.csv").set_index("model")
    assert list(table.columns) == [
        "arc_easy",
        "arc_easy lo",
        "arc_easy hi",
        "boolq",
        "boolq lo",
        "boolq hi",
        "cola",
        "cola lo",
        "cola hi",
    ]
    # Model a on arc_easy: 10% of 100 documents, standard error sqrt(0.1 x 0.9 / 99) = 3.015 points.
    half = 1.959964 * 100 * math.sqrt(0.1 * 0.9 / 99)
    assert table.loc["a/pretrained", "arc_easy"] == 10.0
    assert table.loc["a/pretrained", "arc_easy lo"] == round(10 - half, 2) == 4.09
    assert table.loc["a/pretrained", "arc_easy hi"] == round(10 + half, 2)
    # CoLA's MCC has no standard error in the score file: no interval.
    assert table[["cola lo", "cola hi"]].isna().all(axis=None)


# --- the paper's published scores -----------------------------------------------------------------

HUB_IDS = {"gpt2": "openai-community/gpt2", "llama_3_2_1b": "meta-llama/Llama-3.2-1B", "tiny_llama": None}


def test_reference_comparison_within_and_beyond_the_papers_standard_errors(tmp_path):
    reference = load_harmony_results(REFERENCE / "all_results.json")
    paper, paper_error = reference["direct_eval"], reference["direct_eval_stderr"]
    gpt2_boolq = paper.loc["openai-community/gpt2", "boolq"]
    llama = "meta-llama/Llama-3.2-1B"
    llama_cola, llama_cola_error = paper.loc[llama, "cola"], paper_error.loc[llama, "cola"]
    scores = [
        _score("gpt2", "boolq", direct=gpt2_boolq, trained=0.9),  # the paper's score exactly
        # MCC: no standard error of its own, so 3 of the paper's away is 3 of the difference's.
        _score("llama_3_2_1b", "cola", direct=llama_cola + 3 * llama_cola_error, trained=0.3),
        _score("gpt2", "boolq", direct=gpt2_boolq, trained=0.9, recipe="some_recipe"),  # not a hub checkpoint
        _score("tiny_llama", "boolq", direct=0.5, trained=0.6),  # not in the paper
    ]
    study = {"tasks": [{"name": "boolq", "task": "boolq"}, {"name": "cola", "task": "cola"}], "min_models": 2}
    settings = {
        "reference_results": str(REFERENCE / "all_results.json"),
        "hub_ids": {base: hub for base, hub in HUB_IDS.items() if hub},
    }
    (tmp_path / "plots").mkdir()
    write_harmony_tables(scores, study, settings, tmp_path / "tables", tmp_path / "plots")
    table = pd.read_csv(tmp_path / "tables" / "reference_comparison.csv")
    assert sorted(set(table["model"])) == ["gpt2/pretrained", "llama_3_2_1b/pretrained"]
    assert len(table) == 4  # two models x direct and train-before-test
    rows = table.set_index(["model", "evaluation"])
    same = rows.loc[("gpt2/pretrained", "direct_eval")]
    assert same["hub id"] == "openai-community/gpt2" and same["metric"] == "acc,none"
    assert same["difference"] == 0.0 and same["within 1 stderr"] and same["within 2 stderr"]
    # The run's own standard error (100 documents) and the paper's, in quadrature.
    ours = math.sqrt(gpt2_boolq * (1 - gpt2_boolq) / (TEST_DOCUMENTS - 1))
    assert same["this run stderr"] == round(100 * ours, 2)
    theirs = paper_error.loc["openai-community/gpt2", "boolq"]
    assert same["stderr of difference"] == round(100 * math.hypot(ours, theirs), 2)
    away = rows.loc[("llama_3_2_1b/pretrained", "direct_eval")]
    assert math.isnan(away["this run stderr"])
    assert away["stderr of difference"] == away["paper stderr"] == round(100 * llama_cola_error, 2)
    assert away["difference"] == round(300 * llama_cola_error, 2)
    assert not away["within 1 stderr"] and not away["within 2 stderr"]
    trained = rows.loc[("llama_3_2_1b/pretrained", "train_before_test")]
    # 0.3 against the paper's 0.332 +- 0.032: within one standard error.
    assert trained["paper"] == round(100 * reference["train_before_test"].loc["meta-llama/Llama-3.2-1B", "cola"], 2)
    assert trained["within 1 stderr"]


def test_reference_comparison_without_a_paper_model_has_columns_and_no_rows(tmp_path):
    study = {"tasks": [{"name": task, "task": task} for task in ("arc_easy", "boolq", "cola")], "min_models": 2}
    (tmp_path / "plots").mkdir()
    settings = {"reference_results": str(REFERENCE / "all_results.json"), "hub_ids": {}}
    write_harmony_tables(
        _scores(["tiny_llama", "tiny_qwen2"]), study, settings, tmp_path / "tables", tmp_path / "plots"
    )
    table = pd.read_csv(tmp_path / "tables" / "reference_comparison.csv")
    assert table.empty and list(table.columns) == [
        "model",
        "hub id",
        "task",
        "metric",
        "evaluation",
        "this run",
        "this run stderr",
        "paper",
        "paper stderr",
        "difference",
        "stderr of difference",
        "within 1 stderr",
        "within 2 stderr",
    ]
    # Without a configured reference file there is no comparison table.
    write_harmony_tables(_scores(["a", "b"]), study, {}, tmp_path / "other", tmp_path / "plots")
    assert not (tmp_path / "other" / "reference_comparison.csv").exists()


def test_leaderboard_pc1_scores_carry_an_interval_over_tasks(results):
    from reprolm.studies.harmony.rankings import pc1_score_estimates

    matrix = results["train_before_test"]
    estimates = pc1_score_estimates(matrix)
    scores = pc1_scores(matrix).scores
    assert list(estimates) == list(matrix.index)
    for model, estimate in estimates.items():
        assert estimate.value == pytest.approx(100 * scores[model])
        assert estimate.low <= estimate.value <= estimate.high
    # The best and the worst model are told apart in every draw of the tasks.
    best, worst = scores.idxmax(), scores.idxmin()
    assert (estimates[best].replicates > estimates[worst].replicates).all()


def test_the_seed_leaderboard_and_all_results_json_are_different_runs(seed_scores, results):
    """The README leaderboard (the seed's table, train-before-test) and the released
    ``all_results.json`` cover the same 61 models and 24 tasks, but their scores are not the
    same run: a quarter of the cells agree at the printed precision, half within half a point, and a
    few differ by tens of points. So the leaderboard pins use the seed's own matrix, and the
    tau and explained-variance pins use all_results.json (config/README.md, Headline cells)."""
    released = 100 * results["train_before_test"].rename(columns=TASK_LABELS)
    assert sorted(released.index) == sorted(seed_scores.index)
    assert sorted(released.columns) == sorted(seed_scores.columns)
    gap = (seed_scores - released.loc[seed_scores.index, seed_scores.columns]).abs().stack().dropna()
    assert len(gap) == 1464
    assert round((gap <= 0.005).mean(), 3) == 0.234
    assert round((gap <= 0.5).mean(), 3) == 0.484
    assert round(gap.median(), 2) == 0.55
    largest = gap.idxmax()
    assert largest == ("EleutherAI/pythia-6.9b-deduped", "CommonsenseQA") and round(gap.max(), 1) == 43.7
