"""How far a successor judge agrees with the retired judge it replaces, on the retired
judge's released verdicts: the successor judges the same (instruction, output) items, and
the table sets both judges' verdicts side by side.

Released verdicts are read in AlpacaEval's ``annotations.json`` format (its repository's
``results/<model>/<annotator>/annotations.json``): ``instruction``, ``output_1`` (the
reference), ``output_2`` (the model's answer), ``generator_2`` (the model) and
``preference`` (1 the reference, 2 the answer, values in between from a weighted annotator).
Preferences are kept as the answer's share, ``preference - 1`` in [0, 1], the encoding of
every reprolm judge's ``prefer``.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import cohen_kappa_score

from reprolm.aggregate.judge_notes import ALL_MODELS
from reprolm.aggregate.uncertainty import LEVEL, Estimate, bootstrap, difference, ratio_of_sums
from reprolm.score.judges import judge_model

RELEASED_FIELDS = ("instruction", "output_1", "output_2", "generator_2", "preference")
# A verdict as a category: the answer preferred, the reference preferred, or neither.
ANSWER, REFERENCE, TIE = "answer", "reference", "tie"


def read_released_verdicts(path: str | Path) -> list[dict]:
    """The items of one released annotations file: model, instruction, reference, answer
    and the original judge's preference for the answer (NaN where it gave none)."""
    records = json.loads(Path(path).read_text())
    if not isinstance(records, list):
        raise ValueError(f"{path}: released verdicts are a JSON list of annotations, not a {type(records).__name__}")
    items = []
    for row, record in enumerate(records):
        for field in RELEASED_FIELDS:
            if field not in record:
                raise KeyError(
                    f"{path}: row {row}: no field {field!r} (AlpacaEval's annotations have {RELEASED_FIELDS})"
                )
        preference = record["preference"]
        if preference is not None and not 1.0 <= float(preference) <= 2.0:
            raise ValueError(f"{path}: row {row}: field 'preference' is {preference!r}; AlpacaEval's lie in [1, 2]")
        items.append(
            {
                "model": record["generator_2"],
                "instruction": record["instruction"],
                "reference": record["output_1"],
                "answer": record["output_2"],
                "original": math.nan if preference is None else float(preference) - 1.0,
            }
        )
    return items


def released_items(paths: Sequence[str | Path]) -> list[dict]:
    """The items of several released files; a (model, instruction) pair appears once."""
    items = [item for path in paths for item in read_released_verdicts(path)]
    seen = set()
    for item in items:
        key = (item["model"], item["instruction"])
        if key in seen:
            raise ValueError(
                f"{list(map(str, paths))}: model {key[0]!r} is judged twice on instruction {key[1][:60]!r}"
            )
        seen.add(key)
    return items


def verdict(preference: float) -> str:
    """A preference for the answer as a category."""
    return ANSWER if preference > 0.5 else REFERENCE if preference < 0.5 else TIE


def agreement(original: Sequence[float], successor: Sequence[float]) -> dict:
    """Raw agreement (share of items with the same verdict) and Cohen's kappa of two judges'
    preferences on the same items, items either judge gave no verdict on left out."""
    kept = [(o, s) for o, s in zip(original, successor, strict=True) if not (math.isnan(o) or math.isnan(s))]
    first = [verdict(o) for o, _ in kept]
    second = [verdict(s) for _, s in kept]
    same = sum(a == b for a, b in zip(first, second))
    return {
        "items": len(kept),
        "raw_agreement": same / len(kept) if kept else math.nan,
        # Undefined (NaN) where both judges give one verdict throughout.
        "kappa": float(cohen_kappa_score(first, second)) if len(set(first) | set(second)) > 1 else math.nan,
    }


def balanced_sample(items: Sequence[Mapping], per_outcome: int, seed: int) -> list[dict]:
    """Released items stratified by generator and by the retired judge's verdict: from each
    generator the same number of items it preferred the answer on and the reference on (at
    most ``per_outcome`` each, and no more than the rarer verdict has), drawn at random with
    ``seed``; ties and items without a verdict are left out. A one-sided generator (59 of 60
    verdicts one way) so adds two items, not 60 that agree by default."""
    rng = random.Random(seed)
    strata: dict[tuple[str, str], list[int]] = {}
    for index, item in enumerate(items):
        if not math.isnan(item["original"]) and verdict(item["original"]) != TIE:
            strata.setdefault((item["model"], verdict(item["original"])), []).append(index)
    chosen = []
    for model in sorted({model for model, _ in strata}):
        sides = [strata.get((model, side), []) for side in (ANSWER, REFERENCE)]
        count = min(per_outcome, *map(len, sides))
        chosen += [index for side in sides for index in rng.sample(side, count)]
    return [dict(items[index]) for index in sorted(chosen)]


def _kappa(first: np.ndarray, second: np.ndarray) -> float:
    """Cohen's kappa of two verdict codes over the same items; NaN where chance agreement
    is certain (one verdict throughout)."""
    observed = float(np.mean(first == second))
    categories = np.union1d(first, second)
    expected = float(sum(np.mean(first == c) * np.mean(second == c) for c in categories))
    return math.nan if expected >= 1.0 else (observed - expected) / (1.0 - expected)


def verdict_agreement(items: Sequence[Mapping], successor: Sequence[float]) -> dict[str, Estimate]:
    """Raw agreement (x100) and Cohen's kappa of the two judges' verdicts, each with its
    bootstrap interval over instructions (an instruction's items, one per generator, are
    drawn together); items either judge gave no verdict on are left out."""
    kept = [
        (item["instruction"], verdict(item["original"]), verdict(preference))
        for item, preference in zip(items, successor, strict=True)
        if not (math.isnan(item["original"]) or math.isnan(preference))
    ]
    codes = {ANSWER: 0, REFERENCE: 1, TIE: 2}
    units = list(dict.fromkeys(instruction for instruction, _, _ in kept))
    members = [[] for _ in units]
    position = {instruction: index for index, instruction in enumerate(units)}
    for index, (instruction, _, _) in enumerate(kept):
        members[position[instruction]].append(index)
    first = np.array([codes[a] for _, a, _ in kept])
    second = np.array([codes[b] for _, _, b in kept])

    def per_draw(figure):
        def statistic(draws):
            return np.array([figure(np.concatenate([members[unit] for unit in row]).astype(int)) for row in draws])

        return statistic

    return {
        "raw_agreement": bootstrap(units, per_draw(lambda rows: 100.0 * float(np.mean(first[rows] == second[rows])))),
        "kappa": bootstrap(units, per_draw(lambda rows: _kappa(first[rows], second[rows]))),
    }


def grade_agreement(original: Sequence[float], successor: Sequence[float], units: Sequence) -> dict[str, Estimate]:
    """Two judges' grades of the same answers (MT-Bench's 1-10): Pearson correlation, mean
    difference successor - original, and the share (x100) within one point, each with its
    bootstrap interval over ``units`` (an item's unit, e.g. its question: all of a question's
    turns and models drawn together); items either judge left ungraded (NaN) are left out."""
    kept = [
        (unit, a, b)
        for unit, a, b in zip(units, original, successor, strict=True)
        if not (math.isnan(a) or math.isnan(b))
    ]
    ids = list(dict.fromkeys(unit for unit, _, _ in kept))
    position = {unit: index for index, unit in enumerate(ids)}
    members = [[] for _ in ids]
    for index, (unit, _, _) in enumerate(kept):
        members[position[unit]].append(index)
    first = np.array([a for _, a, _ in kept], dtype=float)
    second = np.array([b for _, _, b in kept], dtype=float)

    def pearson(rows):
        a, b = first[rows], second[rows]
        return math.nan if a.std() == 0 or b.std() == 0 else float(np.corrcoef(a, b)[0, 1])

    figures = {
        "pearson": pearson,
        "mean_difference": lambda rows: float(np.mean(second[rows] - first[rows])),
        "within_1": lambda rows: 100.0 * float(np.mean(np.abs(second[rows] - first[rows]) <= 1.0)),
    }
    return {
        name: bootstrap(
            ids,
            lambda draws, figure=figure: np.array(
                [figure(np.concatenate([members[unit] for unit in row]).astype(int)) for row in draws]
            ),
        )
        for name, figure in figures.items()
    }


def model_groups(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The rows of each model, by name, and all of them together where there are several."""
    groups = [(model, part) for model, part in frame.groupby("model", sort=True)]
    return groups + [(ALL_MODELS, frame)] if len(groups) > 1 else groups


def grade_agreement_rows(records: Sequence[Mapping], successor: Sequence[float], identity: Mapping) -> list[dict]:
    """One row per model and one over all: the successor's grades of the released answers
    (``records``: FastChat's single-answer grades as ``mt_bench_single`` reads them, each with
    ``model``, ``question_id``, ``turn`` and the retired judge's ``score``) against the retired
    judge's, by :func:`grade_agreement` over questions."""
    rows = []
    for model, part in model_groups(pd.DataFrame(list(records)).assign(successor=list(successor))):
        figures = grade_agreement(
            part["score"].astype(float).tolist(), part["successor"].astype(float).tolist(), part["question_id"].tolist()
        )
        row = {**identity, "model": model, "items": int(part[["score", "successor"]].notna().all(axis=1).sum())}
        for name, estimate in figures.items():
            row.update({name: estimate.value, f"{name} lo": estimate.low, f"{name} hi": estimate.high})
        rows.append({**row, "confidence": LEVEL})
    return rows


def agreement_rows(items: Sequence[Mapping], successor: Sequence[float], identity: Mapping) -> list[dict]:
    """One row per model and one over all models: the judges' agreement, and the win rate
    (mean preference for the answer, x100) under each with its interval and the paired
    difference, all from the same bootstrap draws of the instructions."""
    rows = []
    for model, part in model_groups(pd.DataFrame(list(items)).assign(successor=list(successor))):
        judged = part.dropna(subset=["original", "successor"])
        # The units are the instructions; pooled over models, an instruction's items are drawn together.
        units = list(dict.fromkeys(judged["instruction"]))
        index = {instruction: position for position, instruction in enumerate(units)}
        per_unit = judged.groupby(judged["instruction"].map(index))[["original", "successor"]].agg(["sum", "count"])
        original = _unit_mean(per_unit["original"], units)
        succeeding = _unit_mean(per_unit["successor"], units)
        change = difference(succeeding, original)
        intervals = verdict_agreement(part.to_dict("records"), part["successor"].tolist())
        rows.append(
            {
                **identity,
                "model": model,
                **agreement(part["original"].tolist(), part["successor"].tolist()),
                "raw_agreement lo": intervals["raw_agreement"].low / 100,
                "raw_agreement hi": intervals["raw_agreement"].high / 100,
                "kappa lo": intervals["kappa"].low,
                "kappa hi": intervals["kappa"].high,
                "original win rate": original,
                "successor win rate": succeeding,
                "difference": change.value,
                "difference lo": change.low,
                "difference hi": change.high,
                "difference p": change.p,
                "confidence": LEVEL,
            }
        )
    return rows


def _unit_mean(sums_counts: pd.DataFrame, units: Sequence[str]):
    """The mean preference over all items of the drawn instructions, x100."""
    return ratio_of_sums(sums_counts["sum"].to_numpy(), sums_counts["count"].to_numpy(), units, scale=100)


def judge_identity(name: str, spec: Mapping, model: str, role: str) -> dict:
    """A judge's columns in the table: its ``judges`` key, model and date."""
    return {f"{role} judge": name, f"{role} model": model, f"{role} as of": spec.get("as_of", "")}


def succession_table(
    succession: Mapping[str, Mapping], judged: Mapping[str, str], graded: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """The judge agreement table of one study: for each retired judge it names
    (``succession``: retired name -> its spec, its acting successor's name and spec), the
    successor's agreement with the released verdicts (``judged``: retired name -> the
    successor's verdict file) and with the released grades (``graded``: retired name -> the
    successor's grades of the graded answers, :func:`grade_agreement_rows`), or one row
    saying that none were released."""
    graded = graded or {}
    rows = []
    for retired, entry in succession.items():
        identity = {
            **judge_identity(retired, entry["spec"], judge_model(entry["spec"]), "original"),
            **judge_identity(
                entry["successor"], entry["successor_spec"], judge_model(entry["successor_spec"]), "successor"
            ),
        }
        if retired not in judged and retired not in graded:
            rows.append({**identity, "model": "", "items": 0, "measured": "no released verdicts"})
            continue
        if retired in judged:
            result = json.loads(Path(judged[retired]).read_text())
            rows += [
                {**row, "measured": "released verdicts"}
                for row in agreement_rows(result["items"], result["successor"], identity)
            ]
        if retired in graded:
            result = json.loads(Path(graded[retired]).read_text())
            rows += [
                {**row, "measured": "released grades"}
                for row in grade_agreement_rows(result["records"], result["successor"], identity)
            ]
    return pd.DataFrame(rows)
