"""What a judged table's caption says of its judges: each judge's description (kind, model, the
date its model stands for, whether it is a stand-in) and, for a judge acting for a retired one,
their measured agreement from the study's judge agreement table
(:mod:`reprolm.aggregate.judge_agreement`).

Kept apart from the agreement computation so that the workflow, which writes these notes into
every judged rule's params at parse time, does not import scikit-learn for them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from reprolm.score.judges import DEFAULT_ANNOTATOR, judge_kind, successors

# The row of a judge agreement table that pools every model's items.
ALL_MODELS = "all"


def judge_description(name: str, spec: Mapping, base_models: Mapping) -> str:
    """A judge as a caption names it: its key, kind and model, and the date its model stands
    for (``as_of``); a local judge on a model this project builds is a stand-in."""
    kind = judge_kind(spec)
    if spec["kind"] == "alpaca_eval":
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
                            "graded": bool(judges[old].get("released_grades")),
                        }
                        for old in retired
                    ],
                }
            )
    return notes


def measured_agreement(
    table: pd.DataFrame, retired: str, successor: str, measured: str = "released verdicts"
) -> dict | None:
    """The pooled row of a judge agreement table for one succession (the ``all`` row, or a
    single model's) on the released verdicts (items, raw agreement and kappa) or, with
    ``measured="released grades"``, grades (items, Pearson, mean difference, within one
    point); None where none was measured."""
    rows = table[(table["original judge"] == retired) & (table["successor judge"] == successor)]
    if "measured" in rows.columns:
        rows = rows[rows["measured"] == measured]
    pooled = rows[rows["model"] == ALL_MODELS]
    rows = pooled if len(pooled) else rows
    if len(rows) != 1:
        return None
    row = rows.iloc[0]
    figures = ("raw_agreement", "kappa") if measured == "released verdicts" else GRADE_FIGURES
    return {"items": int(row["items"]), **{name: float(row[name]) for name in figures}}


GRADE_FIGURES = ("pearson", "mean_difference", "within_1")


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
            if retired.get("graded"):
                text += _grade_agreement(agreement, retired["judge"], note["judge"], where)
            elif not retired["released"]:
                text += (
                    f"; agreement with it: none measured (judges.{retired['judge']} names no released_verdicts "
                    "or released_grades)"
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


def _grade_agreement(agreement: pd.DataFrame | None, retired: str, successor: str, where: str) -> str:
    if agreement is None:
        return (
            f"; its agreement with it on the released grades (Pearson, mean difference, within one point) is in {where}"
        )
    measured = measured_agreement(agreement, retired, successor, "released grades")
    if measured is None:
        return f"; agreement with it: none measured ({where} has no row for it)"
    return (
        f"; agreement with it on {measured['items']} released grades: Pearson {measured['pearson']:.3f}, "
        f"mean difference {measured['mean_difference']:+.2f}, within one point {measured['within_1']:.1f}% ({where})"
    )


def _kappa(kappa: float) -> str:
    return "undefined (one verdict throughout)" if math.isnan(kappa) else f"{kappa:.3f}"


def notes_for(notes: Mapping[str, Sequence[Mapping]], table: str) -> list[Mapping]:
    """The judge notes of a table, by its name or a name prefix ending in ``*``."""
    for key, value in notes.items():
        if key == table or (key.endswith("*") and table.startswith(key[:-1])):
            return list(value)
    return []
