"""LM-Harmony aggregation: PC1 leaderboard and cross-task ranking consistency (docs/studies/harmony.md).

Conventions were pinned against the authors' published numbers (tests/test_harmony_aggregate.py):

* Score matrices are models x tasks, one column per lm-eval task, in the paper's task order
  (``PAPER_TASKS``; the order matters for the PC1 sign, see ``pc1_scores``).
* The paper's analysis uses the 24 downstream tasks only; ``all_results.json`` also carries three
  bits-per-byte perplexity tasks (``*_2025``, lower is better, missing for the 8 Gemma models) that
  the paper analyses separately, so they are not part of ``PAPER_TASKS``.
* PCA runs on the models with a score on every task; Kendall tau runs on the models common to
  each pair of tasks.

Intervals (issue 19): the consistency figures are bootstrapped over models (the units of a
ranking); a per-model task score's interval comes from its standard error over the task's
test documents; :func:`reference_comparison` sets a run's scores beside the paper's and their
standard errors.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import kendalltau
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

from reprolm.aggregate.uncertainty import RESAMPLES, Estimate, unit_draws, within_standard_error

# The paper's 24 tasks, in the order of its analysis notebook and of the README leaderboard.
PAPER_TASKS: tuple[str, ...] = (
    "mnli", "qqp", "medmcqa", "qnli", "nq_open", "sst2", "winogrande", "hellaswag",
    "social_iqa", "mathqa", "anli_r1", "piqa", "sciq", "commonsense_qa", "boolq", "cola",
    "gsm8k", "wic", "openbookqa", "mrpc", "headqa_en", "rte", "arc_easy", "arc_challenge",
)  # fmt: skip

# lm-eval task -> the metric the paper reports for it (docs/studies/harmony.md), as lm-eval's
# "{metric},{filter}" result key; a run's score is set beside the paper's only in this metric.
PAPER_METRICS: dict[str, str] = {
    "cola": "mcc,none",
    **{
        task: "acc,none"
        for task in (
            "mnli",
            "qnli",
            "rte",
            "mrpc",
            "qqp",
            "sst2",
            "boolq",
            "wic",
            "anli_r1",
            "commonsense_qa",
            "social_iqa",
            "winogrande",
        )
    },
    **{
        task: "acc_norm,none"
        for task in (
            "openbookqa",
            "hellaswag",
            "arc_easy",
            "arc_challenge",
            "headqa_en",
            "mathqa",
            "medmcqa",
            "piqa",
            "sciq",
        )
    },
    "nq_open": "exact_match,remove_whitespace",
    "gsm8k": "exact_match,flexible-extract",
}

# lm-eval task name -> column header of the README leaderboard.
TASK_LABELS: dict[str, str] = {
    "mnli": "MNLI", "qqp": "QQP", "medmcqa": "MedMCQA", "qnli": "QNLI", "nq_open": "NQ-Open",
    "sst2": "SST-2", "winogrande": "Winogrande", "hellaswag": "HellaSwag",
    "social_iqa": "Social-IQA", "mathqa": "MathQA", "anli_r1": "ANLI", "piqa": "PIQA",
    "sciq": "SciQ", "commonsense_qa": "CommonsenseQA", "boolq": "BoolQ", "cola": "CoLA",
    "gsm8k": "GSM8K", "wic": "WiC", "openbookqa": "OpenBookQA", "mrpc": "MRPC",
    "headqa_en": "HeadQA", "rte": "RTE", "arc_easy": "ARC-Easy", "arc_challenge": "ARC-Challenge",
}  # fmt: skip


def score_matrix(scores: Mapping[str, Mapping[str, object]], tasks: Sequence[str] | None = None) -> pd.DataFrame:
    """Models x tasks from a nested ``task -> model -> score`` mapping (the layout of ``all_results.json``).

    ``tasks`` selects and orders the columns (default: the mapping's order). A model missing from a
    task, and a non-numeric entry (the stderr tables hold ``"N/A"``), becomes NaN.
    """
    tasks = list(scores) if tasks is None else list(tasks)
    missing = [task for task in tasks if task not in scores]
    if missing:
        raise KeyError(f"tasks not in the scores: {missing}")
    frame = pd.DataFrame({task: pd.Series(scores[task], dtype=object) for task in tasks})
    frame = frame.apply(pd.to_numeric, errors="coerce").astype(float)
    frame.index.name = "model"
    frame.columns.name = "task"
    return frame


def load_harmony_results(path: str | Path, tasks: Sequence[str] | None = PAPER_TASKS) -> dict[str, pd.DataFrame]:
    """Every table of an ``all_results.json`` (``direct_eval``, ``train_before_test``, their
    ``*_stderr``) as a score matrix; ``tasks=None`` keeps all tasks the file has."""
    tables = json.loads(Path(path).read_text())
    return {name: score_matrix(table, tasks) for name, table in tables.items()}


def complete_models(matrix: pd.DataFrame) -> pd.DataFrame:
    """The models with a score on every task (what PCA needs)."""
    return matrix.dropna(axis=0, how="any")


@dataclass(frozen=True)
class PC1:
    scores: pd.Series  # per model; the README leaderboard prints 100 x this
    loadings: pd.Series  # per task: the unit-length PC1 direction in standardised space
    explained_variance_ratio: np.ndarray  # of every component, PC1 first


def pc1_scores(matrix: pd.DataFrame) -> PC1:
    """First principal component of the standardised score matrix.

    Each task column is centred and divided by its population standard deviation (ddof=0:
    scikit-learn's ``StandardScaler``, as in the authors' notebook); PC1 is the first component of
    scikit-learn's ``PCA`` of that matrix and a model's score is its projection on it (not divided
    by the singular value, as ``PCA.transform``). The sign is fixed so that the loading of the
    *first column* is positive (the notebook's ``if pca.components_[0][0] < 0: pc1 = -pc1``, whose
    first column is MNLI); for the paper's matrices every loading is positive, so this is the same
    as "higher scores, higher PC1".

    The README leaderboard's PC1 column is 100 x ``scores`` rounded to 2 decimals, whether the
    inputs are fractions or percentages: standardising removes the scale, so the x100 is purely
    cosmetic. Its Rank is the order of PC1, descending. With the sample standard deviation (ddof=1)
    every score would shrink by sqrt((n-1)/n), which misses the leaderboard by up to 11 points.
    """
    if matrix.isna().to_numpy().any():
        incomplete = matrix.index[matrix.isna().any(axis=1)].tolist()
        raise ValueError(f"PCA needs a score on every task; use complete_models(). Incomplete: {incomplete}")
    values = matrix.to_numpy(dtype=float)
    spread = values.std(axis=0, ddof=0)
    if (spread == 0).any():
        raise ValueError(
            f"tasks with one score for every model cannot be standardised: {matrix.columns[spread == 0].tolist()}"
        )
    standardised = StandardScaler().fit_transform(values)
    # The exact SVD (what the authors' PCA() picks at their sizes; "auto" may pick the
    # covariance's eigendecomposition for a tall matrix).
    pca = PCA(svd_solver="full")
    projected = pca.fit_transform(standardised)
    sign = 1.0 if pca.components_[0, 0] >= 0 else -1.0
    return PC1(
        scores=pd.Series(sign * projected[:, 0], index=matrix.index, name="PC1"),
        loadings=pd.Series(sign * pca.components_[0], index=matrix.columns, name="PC1"),
        explained_variance_ratio=pca.explained_variance_ratio_,
    )


def pc1_score_estimates(matrix: pd.DataFrame) -> dict[str, Estimate]:
    """Each model's PC1 score (x100, as the leaderboard shows it) with an interval over the
    TASKS: each draw takes the tasks with replacement and recomputes PC1 on those columns.
    Drawing models instead would leave a model's score undefined in every draw it is not
    in. A draw's component is signed to agree with the one on all tasks (its scores correlate
    positively with theirs), since which column comes first in a draw is chance."""
    full = pc1_scores(matrix)
    values = matrix.to_numpy(dtype=float)
    standardised = (values - values.mean(axis=0)) / values.std(axis=0, ddof=0)
    reference = full.scores.to_numpy()

    def scores_on(columns: np.ndarray) -> np.ndarray:
        # NumPy's SVD per draw, as in _drawn_pc1_share (scikit-learn's PCA per draw is slower).
        drawn = standardised[:, columns]
        _, _, right = np.linalg.svd(drawn, full_matrices=False)
        scores = drawn @ right[0]
        return scores if scores @ reference >= 0 else -scores

    draws = unit_draws(list(matrix.columns), RESAMPLES)
    replicates = np.stack([scores_on(row) for row in draws])  # (draws, models)
    return {
        model: Estimate(100 * float(full.scores[model]), 100 * replicates[:, index], units=len(matrix.columns))
        for index, model in enumerate(matrix.index)
    }


def leaderboard(matrix: pd.DataFrame, decimals: int | None = 2, pc1_tasks: list[str] | None = None) -> pd.DataFrame:
    """The README leaderboard: Rank, PC1 (x100), then the task scores, sorted by PC1 descending.

    ``pc1_tasks`` (default: every column) are the columns PC1 is computed from; the others
    are still shown.

    Scores are printed as percentages: a matrix whose values all lie in [-1, 1] is taken to hold
    fractions and is multiplied by 100 ([-1, 1] rather than [0, 1] because CoLA's MCC can be
    negative); anything else is taken as percentages already. Ranks come from the unrounded PC1.
    """
    pc1 = pc1_scores(matrix if pc1_tasks is None else matrix[pc1_tasks])
    fractions = bool((matrix.abs() <= 1).to_numpy().all())
    table = (matrix * 100 if fractions else matrix.copy()).astype(float)
    table.insert(0, "PC1", 100 * pc1.scores)
    table = table.sort_values("PC1", ascending=False, kind="stable")
    table.insert(0, "Rank", np.arange(1, len(table) + 1))
    table.columns.name = None
    return table if decimals is None else table.round(decimals)


@dataclass(frozen=True)
class Consistency:
    tau: pd.DataFrame  # task x task Kendall tau-b; NaN on the diagonal and for skipped pairs
    mean: float  # over all ordered pairs of distinct tasks that have a tau
    per_task: pd.Series  # each task's mean tau with every other task


def ranking_consistency(matrix: pd.DataFrame, min_models: int = 5) -> Consistency:
    """Kendall tau-b between the model rankings of every pair of tasks.

    Each pair uses the models scored on both tasks and is skipped (NaN) when fewer than
    ``min_models`` remain (the authors' threshold is 5). Tau-b, SciPy's default, corrects for tied
    scores (e.g. several models at CoLA MCC 0). tau(a, b) = tau(b, a), so the mean over ordered
    pairs equals the mean over unordered ones. A pair whose tau is undefined (one task constant
    over the common models) is left out of the means, like skipped pairs. The authors round each
    tau to 3 decimals before averaging; this does not, which moves the paper's means by < 3e-5.
    """
    tasks = list(matrix.columns)
    tau = pd.DataFrame(np.nan, index=tasks, columns=tasks)
    for first, second in itertools.combinations(tasks, 2):
        both = matrix[[first, second]].dropna()
        if len(both) < min_models:
            continue
        value = kendalltau(both[first], both[second], variant="b").statistic
        tau.loc[first, second] = tau.loc[second, first] = value
    off_diagonal = tau.to_numpy()[~np.eye(len(tasks), dtype=bool)]
    mean = float(np.nanmean(off_diagonal)) if np.isfinite(off_diagonal).any() else float("nan")
    return Consistency(tau=tau, mean=mean, per_task=tau.mean(axis=1, skipna=True).rename("mean_tau"))


def drawn_kendall_taus(matrix: pd.DataFrame, draws: np.ndarray, min_models: int = 5) -> np.ndarray:
    """Kendall tau-b between every pair of tasks on each draw of models, as
    :func:`ranking_consistency` computes it on the drawn rows: ``draws`` is a (resamples, k)
    matrix of row indices into ``matrix`` (repeats allowed); the result is
    (resamples, tasks, tasks), NaN on the diagonal, where a pair has fewer than ``min_models``
    distinct drawn models in common, and where tau is undefined.

    SciPy's tau-b on the drawn multiset of rows, vectorised (a loop of SciPy calls takes about
    a minute for the paper's 61 models x 24 tasks x 1000 draws): with c_i the times model i
    was drawn and s_t(i, j) the sign of model i's score minus model j's on task t (0 where
    either has none), the concordant minus discordant pairs of tasks a and b are
    1/2 sum_ij c_i c_j s_a(i, j) s_b(i, j), and a's untied pairs among the models scored on
    both are 1/2 sum_ij c_i c_j s_a(i, j)^2 [i and j scored on b]. A model drawn twice ties
    with itself on every task; tau-b leaves a pair tied on both tasks out of its numerator
    and both denominators, so the copy weighs the model's pairs with the other models twice
    and adds nothing else.
    """
    values = matrix.to_numpy(dtype=float).T  # tasks x models
    tasks, models = values.shape
    scored = np.isfinite(values)
    both_scored = scored[:, :, None] & scored[:, None, :]
    signs = np.where(both_scored, np.sign(values[:, :, None] - values[:, None, :]), 0.0).reshape(tasks, -1)
    concordance = (signs[:, None, :] * signs[None, :, :]).reshape(tasks * tasks, -1)
    # [a, b]: the pairs a tells apart among the models scored on b.
    untied = (signs[:, None, :] ** 2 * both_scored.reshape(tasks, -1)[None, :, :]).reshape(tasks * tasks, -1)
    common = (scored[:, None, :] & scored[None, :, :]).reshape(tasks * tasks, models).astype(float)
    taus = np.empty((len(draws), tasks, tasks))
    block = max(1, 2_000_000 // (models * models))  # bounds the (draws, models^2) weights
    for start in range(0, len(draws), block):
        rows = np.asarray(draws[start : start + block])
        counts = np.zeros((len(rows), models))
        np.add.at(counts, (np.arange(len(rows))[:, None], rows), 1.0)
        weights = (counts[:, :, None] * counts[:, None, :]).reshape(len(rows), -1)
        numerator = (weights @ concordance.T).reshape(-1, tasks, tasks)
        told_apart = (weights @ untied.T).reshape(-1, tasks, tasks)
        denominator = np.sqrt(told_apart * told_apart.transpose(0, 2, 1))
        distinct_common = ((counts > 0) @ common.T).reshape(-1, tasks, tasks)
        with np.errstate(invalid="ignore", divide="ignore"):
            tau = numerator / denominator
        tau[(denominator == 0) | (distinct_common < min_models)] = np.nan
        taus[start : start + block] = tau
    taus[:, np.arange(tasks), np.arange(tasks)] = np.nan
    return taus


def _mean_of_finite(values: np.ndarray) -> np.ndarray:
    """The mean over the last axis of the finite entries (NaN where there is none)."""
    finite = np.isfinite(values)
    count = finite.sum(axis=-1)
    total = np.where(finite, values, 0.0).sum(axis=-1)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


@dataclass(frozen=True)
class ConsistencyEstimates:
    consistency: Consistency  # the figures themselves
    mean: Estimate
    per_task: dict[str, Estimate]


def consistency_estimates(
    matrix: pd.DataFrame, min_models: int = 5, resamples: int = RESAMPLES
) -> ConsistencyEstimates:
    """:func:`ranking_consistency`'s figures with a bootstrap over models, the units a ranking
    is made of: each replicate draws the models with replacement and recomputes every tau on
    the drawn multiset (:func:`drawn_kendall_taus`). The draws are seeded by the model names,
    so matrices over the same models (direct and train-before-test) are drawn alike and their
    difference is paired. Drawing with replacement rather than a jackknife or a subsample
    keeps the percentile intervals and the pairing of every other table; a model drawn twice
    ties with itself, which tau-b leaves out of the pair's counts (see
    :func:`drawn_kendall_taus`)."""
    point = ranking_consistency(matrix, min_models=min_models)
    taus = drawn_kendall_taus(matrix, unit_draws(list(matrix.index), resamples), min_models=min_models)
    over_pairs = _mean_of_finite(taus.reshape(len(taus), -1))
    per_task = _mean_of_finite(taus)
    return ConsistencyEstimates(
        consistency=point,
        mean=Estimate(point.mean, over_pairs, units=len(matrix)),
        per_task={
            task: Estimate(float(point.per_task[task]), per_task[:, k], units=len(matrix))
            for k, task in enumerate(matrix.columns)
        },
    )


def informative_tasks(matrix: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """PCA cannot standardise a task on which every model scores the same; such tasks are
    left out of PC1 (and listed), as tiny models often all score 0 on generative tasks."""
    complete = matrix.dropna(axis=0, how="any")
    constant = [task for task in complete.columns if complete[task].nunique() <= 1]
    return complete.drop(columns=constant), constant


def pc1_share(matrix: pd.DataFrame) -> float:
    """The share of variance PC1 explains over the informative tasks; NaN without two
    models and a task."""
    usable, _ = informative_tasks(matrix)
    if len(usable.columns) < 1 or len(usable) < 2:
        return math.nan
    return float(pc1_scores(usable).explained_variance_ratio[0])


def _drawn_pc1_share(values: np.ndarray) -> float:
    """:func:`pc1_share` of a models x tasks array, in NumPy: the same shares as scikit-learn's
    scaler and PCA in :func:`pc1_scores` (to 1e-15), which per draw would make the bootstrap some
    fifteen times slower (3 s against 0.2 s for 1000 draws of 61 models x 24 tasks)."""
    complete = values[np.isfinite(values).all(axis=1)]
    varying = complete[:, np.ptp(complete, axis=0) > 0] if len(complete) else complete
    if varying.shape[1] < 1 or len(varying) < 2:
        return math.nan
    standardised = (varying - varying.mean(axis=0)) / varying.std(axis=0, ddof=0)
    variance = np.linalg.svd(standardised, compute_uv=False) ** 2
    return float(variance[0] / variance.sum())


def pc1_share_estimate(matrix: pd.DataFrame, resamples: int = RESAMPLES) -> Estimate:
    """:func:`pc1_share` bootstrapped over models, drawn as in :func:`consistency_estimates`
    (the same draws for the same models): each replicate reruns the procedure on the drawn
    models, tasks they all score alike left out."""
    values = matrix.to_numpy(dtype=float)
    draws = unit_draws(list(matrix.index), resamples)
    return Estimate(pc1_share(matrix), np.array([_drawn_pc1_share(values[rows]) for rows in draws]), units=len(matrix))


# lm-eval metrics whose per-document values are 0 or 1, so that a score's standard error
# follows from the score and the number of documents.
BINARY_METRICS = ("acc", "acc_norm", "exact_match")


def binary_standard_error(score: float, documents: int, metric: str) -> float:
    """lm-eval's standard error of a mean of 0/1 values (the sample standard deviation over
    sqrt(n), i.e. sqrt(p (1 - p) / (n - 1))), the paper's ``*_stderr`` for every metric but
    CoLA's MCC; NaN for other metrics (MCC's needs the per-document predictions, which the
    score files do not keep) and for fewer than two documents."""
    if metric.partition(",")[0] not in BINARY_METRICS or documents < 2 or not math.isfinite(score):
        return math.nan
    return math.sqrt(score * (1 - score) / (documents - 1))


COMPARISON_COLUMNS = [
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


def reference_comparison(run: pd.DataFrame, reference: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """A run's scores beside the paper's. ``run`` has one row per model, task and evaluation:
    ``model``, ``hub id``, ``task`` (lm-eval's name), ``metric``, ``evaluation`` (``direct_eval``
    or ``train_before_test``), ``this run`` and ``this run stderr`` (fractions, NaN where
    unknown); ``reference`` is :func:`load_harmony_results`' tables. Rows whose model, task or
    metric the paper does not report are left out. Scores are x100. The difference's standard
    error combines both sides' in quadrature (the paper's alone where the run has none), and
    ``within k stderr`` says whether the run's score lies within k of them of the paper's."""
    rows = []
    for entry in run.to_dict("records"):
        scores, errors = reference[entry["evaluation"]], reference[f"{entry['evaluation']}_stderr"]
        if (
            PAPER_METRICS.get(entry["task"]) != entry["metric"]
            or entry["task"] not in scores.columns
            or entry["hub id"] not in scores.index
            or not math.isfinite(scores.loc[entry["hub id"], entry["task"]])
        ):
            continue
        paper, paper_error = scores.loc[entry["hub id"], entry["task"]], errors.loc[entry["hub id"], entry["task"]]
        ours, our_error = entry["this run"], entry["this run stderr"]
        combined = math.hypot(paper_error, our_error) if math.isfinite(our_error) else paper_error
        rows.append(
            {
                **{key: entry[key] for key in ("model", "hub id", "task", "metric", "evaluation")},
                "this run": 100 * ours,
                "this run stderr": 100 * our_error,
                "paper": 100 * paper,
                "paper stderr": 100 * paper_error,
                "difference": 100 * (ours - paper),
                "stderr of difference": 100 * combined,
                "within 1 stderr": within_standard_error(ours, paper, combined, 1),
                "within 2 stderr": within_standard_error(ours, paper, combined, 2),
            }
        )
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def _figure(width: float, height: float):
    # A bare Figure on the Agg canvas: no pyplot global state, no dependence on the session backend.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height))
    FigureCanvasAgg(figure)
    return figure


def tau_limits(*values) -> tuple[float, float]:
    """The axis or colour range of Kendall taus: 0..1, or -1..1 (symmetric about no
    agreement) as soon as any of ``values`` (figures, interval ends) is negative, so that a
    negative tau is drawn rather than cut off at the axis."""
    finite = np.concatenate([np.ravel(np.asarray(v, dtype=float)) for v in values])
    finite = finite[np.isfinite(finite)]
    return (-1.0, 1.0) if finite.size and finite.min() < 0 else (0.0, 1.0)


def tau_heatmap(tau_matrix: pd.DataFrame, title: str | None = None):
    """Task x task Kendall tau heatmap, annotated, on a fixed colour scale (:func:`tau_limits`)
    so that direct and train-before-test heatmaps compare at a glance."""
    values = tau_matrix.to_numpy(dtype=float)
    size = max(4.0, 0.45 * len(tau_matrix.columns))
    figure = _figure(size + 1.5, size)
    axis = figure.add_subplot()
    low, high = tau_limits(values)
    # A diverging map where taus can be negative: no agreement is its neutral middle.
    image = axis.imshow(values, cmap="YlGnBu_r" if low == 0 else "RdBu", vmin=low, vmax=high)
    for (row, column), value in np.ndenumerate(values):
        if np.isfinite(value):
            axis.text(column, row, f"{value:.2f}", ha="center", va="center", fontsize=6)
    column_labels = [TASK_LABELS.get(task, task) for task in tau_matrix.columns]
    row_labels = [TASK_LABELS.get(task, task) for task in tau_matrix.index]
    axis.set_xticks(range(len(column_labels)), column_labels, rotation=45, ha="right", fontsize=8)
    axis.set_yticks(range(len(row_labels)), row_labels, fontsize=8)
    figure.colorbar(image, ax=axis, label="Kendall's $\\tau$")
    if title:
        axis.set_title(title)
    figure.tight_layout()
    return figure


def plot_tau_heatmap(tau_matrix: pd.DataFrame, path: str | Path, title: str | None = None) -> Path:
    """:func:`tau_heatmap` saved as ``path``."""
    return _save(tau_heatmap(tau_matrix, title), path)


def _save(figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # "tight" keeps rotated task names and long axis labels inside the image.
    figure.savefig(path, dpi=100, bbox_inches="tight")
    return path


def _bars(per_task: pd.Series, tasks) -> tuple[np.ndarray, np.ndarray]:
    """Heights and matplotlib's (2, n) error distances of per-task figures that may be
    estimates (no bar where a figure has no interval)."""
    cells = [per_task.get(task) for task in tasks]
    values = np.array(
        [c.value if isinstance(c, Estimate) else (np.nan if c is None else c) for c in cells], dtype=float
    )
    low = np.array([c.low if isinstance(c, Estimate) else np.nan for c in cells], dtype=float)
    high = np.array([c.high if isinstance(c, Estimate) else np.nan for c in cells], dtype=float)
    return values, np.nan_to_num(np.stack([values - low, high - values]))


def consistency_figure(direct_per_task: pd.Series, tbt_per_task: pd.Series):
    """Per task, mean Kendall tau with the other tasks under direct evaluation and under
    train-before-test, tasks ordered by their direct-evaluation value (the paper's figure);
    figures that are estimates get their intervals as error bars, and the axis reaches below
    zero where a tau or an interval does (:func:`tau_limits`)."""
    direct, _ = _bars(direct_per_task, direct_per_task.index)
    tasks = direct_per_task.index[np.argsort(direct, kind="stable")]
    direct, direct_errors = _bars(direct_per_task, tasks)
    tbt, tbt_errors = _bars(tbt_per_task, tasks)
    positions = np.arange(len(tasks))
    figure = _figure(max(6.0, 0.4 * len(tasks)), 3.5)
    axis = figure.add_subplot()
    axis.bar(positions - 0.2, direct, width=0.4, yerr=direct_errors, label="Direct evaluation")
    axis.bar(positions + 0.2, tbt, width=0.4, yerr=tbt_errors, label="Train-before-test")
    axis.set_xticks(positions, [TASK_LABELS.get(task, task) for task in tasks], rotation=45, ha="right")
    axis.set_ylim(*tau_limits(direct - direct_errors[0], tbt - tbt_errors[0], direct, tbt))
    axis.axhline(0, color="black", linewidth=0.8)
    axis.set_ylabel("Mean Kendall $\\tau$")
    axis.set_axisbelow(True)
    axis.grid(True, axis="y", linestyle="--", alpha=0.7)
    axis.legend(ncols=2, frameon=False, loc="upper left")
    figure.tight_layout()
    return figure


def plot_consistency(direct_per_task: pd.Series, tbt_per_task: pd.Series, path: str | Path) -> Path:
    """:func:`consistency_figure` saved as ``path``."""
    return _save(consistency_figure(direct_per_task, tbt_per_task), path)
