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
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
from sklearn.metrics import cohen_kappa_score

from reprolm.aggregate.judge_notes import ALL_MODELS
from reprolm.aggregate.uncertainty import LEVEL, difference, ratio_of_sums
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


def agreement_rows(items: Sequence[Mapping], successor: Sequence[float], identity: Mapping) -> list[dict]:
    """One row per model and one over all models: the judges' agreement, and the win rate
    (mean preference for the answer, x100) under each with its interval and the paired
    difference, all from the same bootstrap draws of the instructions."""
    frame = pd.DataFrame(list(items)).assign(successor=list(successor))
    groups = [(model, part) for model, part in frame.groupby("model", sort=True)]
    if len(groups) > 1:
        groups.append((ALL_MODELS, frame))
    rows = []
    for model, part in groups:
        judged = part.dropna(subset=["original", "successor"])
        # The units are the instructions; pooled over models, an instruction's items are drawn together.
        units = list(dict.fromkeys(judged["instruction"]))
        index = {instruction: position for position, instruction in enumerate(units)}
        per_unit = judged.groupby(judged["instruction"].map(index))[["original", "successor"]].agg(["sum", "count"])
        original = _unit_mean(per_unit["original"], units)
        succeeding = _unit_mean(per_unit["successor"], units)
        change = difference(succeeding, original)
        rows.append(
            {
                **identity,
                "model": model,
                **agreement(part["original"].tolist(), part["successor"].tolist()),
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


def succession_table(succession: Mapping[str, Mapping], judged: Mapping[str, str]) -> pd.DataFrame:
    """The judge agreement table of one study: for each retired judge it names
    (``succession``: retired name -> its spec, its acting successor's name and spec), the
    successor's agreement with the released verdicts (``judged``: retired name -> the
    successor's verdict file), or one row saying that none were released."""
    rows = []
    for retired, entry in succession.items():
        identity = {
            **judge_identity(retired, entry["spec"], judge_model(entry["spec"]), "original"),
            **judge_identity(
                entry["successor"], entry["successor_spec"], judge_model(entry["successor_spec"]), "successor"
            ),
        }
        if retired not in judged:
            rows.append({**identity, "model": "", "items": 0, "measured": "no released verdicts"})
            continue
        result = json.loads(Path(judged[retired]).read_text())
        rows += [
            {**row, "measured": "released verdicts"}
            for row in agreement_rows(result["items"], result["successor"], identity)
        ]
    return pd.DataFrame(rows)
