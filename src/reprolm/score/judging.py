"""What a judge's verdicts add up to: single-answer grades, (length-controlled) win rates,
and a reward model's accuracy on held-out preference pairs."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from reprolm.score.judges import conversation_of
from reprolm.stats.bootstrap import mean_of
from reprolm.stats.estimate import LEVEL


def _nanmean(values) -> float:
    values = [v for v in values if not math.isnan(v)]
    return float(np.mean(values)) if values else math.nan


def grade_generations(judge, rows: Sequence[Mapping]) -> dict:
    """Every assistant turn graded in the context of the conversation up to it (MT-Bench's
    single-answer grading: a two-turn prompt gets two grades). ``mean`` averages all turns.
    A judge with a protocol of its own for whole records (FastChat's, which reads each row's
    category and reference answers) grades them itself."""
    if hasattr(judge, "grade_records"):
        grades = judge.grade_records(rows)
    else:
        grades = _turn_grades(judge, rows)
    turns = max(map(len, grades))
    return {
        "judge_scale": judge.scale,
        "protocol": judge.protocol,
        "mean": _nanmean([g for row in grades for g in row]),
        "turn_means": [_nanmean([row[t] for row in grades if t < len(row)]) for t in range(turns)],
        "unparsed": sum(math.isnan(g) for row in grades for g in row),
        "grades": grades,
        "ids": [row["id"] for row in rows],
        "samples": [row.get("sample", 0) for row in rows],
    }


def _turn_grades(judge, rows) -> list[list[float]]:
    """Every assistant turn scored by the judge in the context of the conversation up to it."""
    conversations = [conversation_of(row) for row in rows]
    prefixes, owners = [], []
    for index, conversation in enumerate(conversations):
        for end, turn in enumerate(conversation):
            if turn["role"] == "assistant":
                prefixes.append(conversation[: end + 1])
                owners.append(index)
    grades: list[list[float]] = [[] for _ in rows]
    for owner, grade in zip(owners, judge.score(prefixes), strict=True):
        grades[owner].append(grade)
    return grades


def length_controlled_win_rate(
    preferences: Sequence[float], answer_lengths: Sequence[int], reference_lengths: Sequence[int], l2: float = 1e-3
) -> dict:
    """AlpacaEval 2.0's length control, without its per-instruction difficulty term (which
    needs many models' verdicts on the same instructions).

    Fit  P(answer preferred) = sigmoid(theta + phi * tanh(d / sd(d))),  d = len(answer) -
    len(reference) in characters, by maximum likelihood on the (possibly soft) preferences,
    with a small L2 penalty so that a judge that always prefers one side still gives finite
    weights. The length-controlled win rate is the fitted preference with no length
    difference: LC = 100 * sigmoid(theta).
    """
    p = np.asarray(preferences, dtype=float)
    d = np.asarray(answer_lengths, dtype=float) - np.asarray(reference_lengths, dtype=float)
    spread = d.std()
    x = np.tanh(d / spread) if spread > 0 else np.zeros_like(d)

    from scipy import optimize, special

    def loss(weights):
        logits = weights[0] + weights[1] * x
        # log(1 + e^z) computed stably.
        return float(np.mean(np.logaddexp(0, logits) - p * logits) + l2 * weights @ weights)

    def gradient(weights):
        # The logistic loss's own gradient: BFGS's finite differences cost three losses each
        # (a bootstrap interval fits this a thousand times).
        residual = special.expit(weights[0] + weights[1] * x) - p
        return np.array([residual.mean(), (residual * x).mean()]) + 2 * l2 * weights

    fit = optimize.minimize(loss, np.zeros(2), jac=gradient, method="BFGS")
    theta, phi = fit.x
    return {"lc_win_rate": float(100 / (1 + math.exp(-theta))), "theta": float(theta), "phi": float(phi)}


def win_rates(preferences: Sequence[float], answer_lengths: Sequence[int], reference_lengths: Sequence[int]) -> dict:
    """Win rate (mean preference for the answer over the reference, in %), its standard
    error, the discrete win rate (wins, and draws as halves) and the length-controlled win
    rate, with AlpacaEval's leaderboard columns' definitions; lengths in characters.
    Verdicts the judge gave no parseable answer for are left out."""
    kept = [i for i, p in enumerate(preferences) if not math.isnan(p)]
    if not kept:
        raise ValueError("the judge gave no usable verdict on any pair")
    p = np.array([preferences[i] for i in kept], dtype=float)
    kept_answer_lengths = [answer_lengths[i] for i in kept]
    kept_reference_lengths = [reference_lengths[i] for i in kept]
    wins, draws = int((p > 0.5).sum()), int((p == 0.5).sum())
    return {
        "win_rate": float(100 * p.mean()),
        "standard_error": float(100 * p.std(ddof=1) / math.sqrt(len(p))) if len(p) > 1 else math.nan,
        "discrete_win_rate": float(100 * (wins + draws / 2) / len(p)),
        "n_wins": wins,
        "n_draws": draws,
        **length_controlled_win_rate(p, kept_answer_lengths, kept_reference_lengths),
        "lc_method": "AlpacaEval 2.0's length-control regression without its instruction-difficulty term",
        "n": len(kept),
        "unparsed": len(preferences) - len(kept),
        "mean_length": float(np.mean(kept_answer_lengths)),
        "mean_reference_length": float(np.mean(kept_reference_lengths)),
        # Per pair, unparsed ones included: the tables refit all of the above on bootstrap draws.
        "preferences": list(map(float, preferences)),
        "answer_lengths": [int(n) for n in answer_lengths],
        "reference_lengths": [int(n) for n in reference_lengths],
    }


def pair_accuracy(judge, pairs: Sequence[Mapping]) -> dict:
    """Share of pairs whose chosen answer scores strictly higher than the rejected one (%),
    with its percentile bootstrap interval over the pairs (:mod:`reprolm.stats.bootstrap`).
    ``pairs`` hold TRL's conversational ``prompt``/``chosen``/``rejected`` turns; a pair's id
    is its position (preference pairs carry no id of their own)."""
    chosen = judge.score([list(pair["prompt"]) + list(pair["chosen"]) for pair in pairs])
    rejected = judge.score([list(pair["prompt"]) + list(pair["rejected"]) for pair in pairs])
    correct = [float(c > r) for c, r in zip(chosen, rejected, strict=True)]
    pair_ids = list(range(len(pairs)))
    accuracy = mean_of(correct, pair_ids, scale=100)
    return {
        "accuracy": accuracy.value,
        "ci_low": accuracy.low,
        "ci_high": accuracy.high,
        "confidence": LEVEL,
        "n": len(pairs),
        "margins": [c - r for c, r in zip(chosen, rejected)],
        "correct": correct,
        "ids": pair_ids,
    }


def reference_answers(
    rows: Sequence[Mapping], answers_file: str, reference_rows: Sequence[Mapping] | None, reference_file: str | None
) -> list[str]:
    """The reference answer to each prompt: the benchmark's own (``reference`` column, e.g.
    AlpacaEval's GPT-4 Turbo outputs) or a reference model's generation of the same prompt id."""
    if reference_rows is None:
        for index, row in enumerate(rows):
            if not isinstance(row.get("reference"), str):
                raise KeyError(
                    f"{answers_file}: row {index}: no 'reference' answer; give the prompt set a "
                    "source with reference outputs or a reference model"
                )
        return [row["reference"] for row in rows]
    by_id = {row["id"]: row["text"] for row in reference_rows}
    missing = [row["id"] for row in rows if row["id"] not in by_id]
    if missing:
        raise KeyError(f"{reference_file}: no reference answer for prompt ids {missing[:5]}")
    return [by_id[row["id"]] for row in rows]


def judge_win_rate(judge, answers_file: str, reference_file: str | None = None) -> dict:
    """Win rates of the answers in a generations file against the benchmark's reference
    answers, or against a reference model's generations of the same prompts: the judge's
    protocol's own metrics where it has them, else :func:`win_rates` of its preferences."""
    import pyarrow.parquet as pq

    rows = pq.read_table(answers_file).to_pylist()
    reference_rows = pq.read_table(reference_file).to_pylist() if reference_file else None
    references = reference_answers(rows, answers_file, reference_rows, reference_file)
    answers = [row["text"] for row in rows]
    instructions = [row["instruction"] for row in rows]
    ids = [row["id"] for row in rows]
    if hasattr(judge, "win_rates"):  # a protocol with metrics of its own (AlpacaEval's package)
        return {
            "protocol": judge.protocol,
            "ids": ids,
            **judge.win_rates(ids, instructions, answers, references, answers_file),
        }
    preferences = judge.prefer(instructions, answers, references)
    return {
        "protocol": judge.protocol,
        "ids": ids,
        **win_rates(preferences, [len(a) for a in answers], [len(r) for r in references]),
    }


def judge_released_items(judge, items: Sequence[Mapping]) -> list[float]:
    """A judge's preference for the answer over the reference on each released item (the
    items of :func:`reprolm.aggregate.judge_agreement.released_items`), NaN where it gave none."""
    return judge.prefer(
        [item["instruction"] for item in items],
        [item["answer"] for item in items],
        [item["reference"] for item in items],
    )


def grade_released_answers(judge, records: Sequence[Mapping], questions: Sequence[Mapping]) -> list[float]:
    """A judge's grade of each released graded turn (``records``: a retired judge's
    single-answer grades as the ``mt_bench_single`` source reads them: ``question_id``,
    ``turn`` and ``conversation``, the question's turns up to the graded one with the
    model's answers between them), graded as the judge grades a generation, the question's
    ``category`` and ``reference_answers`` (``questions``, by ``id``) in view: the grade of
    the record's own turn, NaN where the judge gave none."""
    by_id = {question["id"]: question for question in questions}
    rows = []
    for index, record in enumerate(records):
        if record["question_id"] not in by_id:
            raise KeyError(f"released grade {index}: question {record['question_id']!r} is not among the questions")
        question = by_id[record["question_id"]]
        texts = list(record["conversation"])
        rows.append(
            {
                "id": index,
                "conversation": [
                    {"role": "user" if turn % 2 == 0 else "assistant", "content": text}
                    for turn, text in enumerate(texts)
                ],
                "category": question.get("category"),
                "reference_answers": list(question.get("reference_answers") or []),
            }
        )
    return [grades[-1] for grades in grade_generations(judge, rows)["grades"]]
