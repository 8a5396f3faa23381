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

from reprolm.aggregate.uncertainty import LEVEL, difference, ratio_of_sums
from reprolm.score.judges import judge_kind, judge_model, successors

RELEASED_FIELDS = ("instruction", "output_1", "output_2", "generator_2", "preference")
# A verdict as a category: the answer preferred, the reference preferred, or neither.
ANSWER, REFERENCE, TIE = "answer", "reference", "tie"
ALL_MODELS = "all"


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


def judge_description(name: str, spec: Mapping, base_models: Mapping) -> str:
    """A judge as a caption names it: its key, kind and model, and the date its model stands
    for (``as_of``); a local judge on a model this project builds is a stand-in."""
    kind = judge_kind(spec)
    if spec["kind"] == "alpaca_eval":
        # The annotator config names its model; reading it needs the alpaca_eval package.
        from reprolm.score.alpaca_eval_judge import DEFAULT_ANNOTATOR

        model = spec.get("annotator", DEFAULT_ANNOTATOR)
    else:
        model = spec["model"]
    parts = [f"{kind.title or kind.name} {model}"]
    base = base_models.get(str(model).split("/")[0], {}) if kind.local else {}
    if "build" in base:
        parts.append("a stand-in: a tiny model this project builds")
    elif "hub" in base:
        hub = base["hub"]
        parts.append(f"hub {hub['path']}" + (f"@{hub['revision']}" if hub.get("revision") else ""))
    parts.append(f"as of {spec['as_of']}" if spec.get("as_of") else "no as_of date")
    return f"{name} ({', '.join(parts)})"


def table_judge_notes(
    table_judges: Mapping[str, Sequence[str]], judges: Mapping[str, Mapping], base_models: Mapping
) -> dict[str, list[dict]]:
    """For each judged table of a study (:meth:`reprolm.studies.Study.table_judges` of the
    config as written, before succession), each judge that makes it: the judge acting for the
    one named (:func:`reprolm.score.judges.successors`), its description, and the retired
    judge named where it acts for one, with whether that one has released verdicts."""
    acting = successors(judges)
    notes = {}
    for table, names in table_judges.items():
        notes[table] = []
        for name in dict.fromkeys(names):
            judge = acting.get(name, name)
            retired = [] if judge == name else [name]
            notes[table].append(
                {
                    "judge": judge,
                    "description": judge_description(judge, judges[judge], base_models),
                    "retired": [
                        {
                            "judge": old,
                            "description": judge_description(old, judges[old], base_models),
                            "released": bool(judges[old].get("released_verdicts")),
                        }
                        for old in retired
                    ],
                }
            )
    return notes


def measured_agreement(table: pd.DataFrame, retired: str, successor: str) -> dict | None:
    """The pooled row of a judge agreement table for one succession (the ``all`` row, or a
    single model's): items, raw agreement and kappa; None where none was measured."""
    rows = table[(table["original judge"] == retired) & (table["successor judge"] == successor)]
    if "measured" in rows.columns:
        rows = rows[rows["measured"] == "released verdicts"]
    pooled = rows[rows["model"] == ALL_MODELS]
    rows = pooled if len(pooled) else rows
    if len(rows) != 1:
        return None
    row = rows.iloc[0]
    return {"items": int(row["items"]), "raw_agreement": float(row["raw_agreement"]), "kappa": float(row["kappa"])}


def judge_caption(notes: Sequence[Mapping], study: str, agreement: pd.DataFrame | None = None) -> str:
    """The sentences of a judged table's caption naming its judges and, for a judge acting
    for a retired one, their agreement: the figures of ``agreement`` (the study's judge
    agreement table) where given, else where they are measured."""
    where = f"results/tables/judge_agreement/{study}.csv"
    sentences = []
    for note in notes:
        text = f"Judge: {note['description']}"
        if not note["retired"]:
            sentences.append(
                text + "; it acts for no retired judge, so no agreement with an original judge is measured."
            )
            continue
        for retired in note["retired"]:
            text += f", acting for the retired {retired['description']}"
            if not retired["released"]:
                text += (
                    f"; agreement with it: none measured (judges.{retired['judge']} names no released_verdicts; "
                    "only AlpacaEval-format pairwise verdicts are read)"
                )
            elif agreement is None:
                text += f"; its agreement with it on the released verdicts (raw agreement, Cohen's kappa) is in {where}"
            else:
                measured = measured_agreement(agreement, retired["judge"], note["judge"])
                text += (
                    f"; agreement with it: none measured ({where} has no row for it)"
                    if measured is None
                    else f"; agreement with it on {measured['items']} released verdicts: raw agreement "
                    f"{measured['raw_agreement']:.3f}, Cohen's kappa {_kappa(measured['kappa'])} ({where})"
                )
        sentences.append(text + ".")
    return " ".join(sentences)


def _kappa(kappa: float) -> str:
    return "undefined (one verdict throughout)" if math.isnan(kappa) else f"{kappa:.3f}"


def notes_for(notes: Mapping[str, Sequence[Mapping]], table: str) -> list[Mapping]:
    """The judge notes of a table, by its name or a name prefix ending in ``*``."""
    for key, value in notes.items():
        if key == table or (key.endswith("*") and table.startswith(key[:-1])):
            return list(value)
    return []
