"""Tables as pages of the HTML report (``snakemake --report``): the report shows an HTML
result inline, where a CSV is only a download link."""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from reprolm.aggregate.judge_notes import judge_caption, notes_for
from reprolm.io import atomic_path
from reprolm.provenance import provenance_path

STYLE = """
body { font-family: sans-serif; font-size: 14px; margin: 1em; }
table { border-collapse: collapse; }
th, td { border-bottom: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
thead th { background: #f0f0f0; position: sticky; top: 0; }
.warning { background: #fff3cd; border-left: 4px solid #d97706; padding: 0.4em 0.8em; margin: 0.8em 0; }
"""
# A table column: the percentage of a row's outputs that never stopped and ran to the
# generation's max_new_tokens. Their lengths are the budget's, so a table page flags every
# row where it is AT_LIMIT_FLAG or more.
AT_LIMIT = "at max_new_tokens"
AT_LIMIT_FLAG = 20.0


def read_cells(csv_path: str | Path) -> pd.DataFrame:
    """A table's cells as the CSV writes them (text, empty for a missing figure), so that the
    page shows exactly the figures of the CSV, at its precision. A table with no rows and no
    columns (nothing to compare, as a judge agreement table without a retired judge) is empty."""
    try:
        return pd.read_csv(csv_path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def html_table(frame: pd.DataFrame) -> str:
    """The table, its columns of figures (every cell a number or empty) aligned right, as
    figures read, its text left."""
    figure_columns = set(_figure_columns(frame))
    figures = [position for position, column in enumerate(frame.columns, start=1) if column in figure_columns]
    cells = ", ".join(f"th:nth-child({position}), td:nth-child({position})" for position in figures)
    style = f"<style>{cells} {{ text-align: right; }}</style>" if figures else ""
    return style + frame.to_html(index=False, border=0, escape=True, justify="left")


def _figure_columns(frame: pd.DataFrame) -> list[str]:
    """The columns whose every cell is a number or empty, and not all empty."""
    return [
        column
        for column in frame.columns
        if (frame[column] != "").any() and all(_is_number(cell) for cell in frame[column] if cell != "")
    ]


def limit_warnings(frame: pd.DataFrame) -> list[str]:
    """For a table with an :data:`AT_LIMIT` column, a warning per row name (the first
    column) whose rows have :data:`AT_LIMIT_FLAG` percent or more of their outputs at the
    limit, with each such row's share (and, where a name has several rows, the row's other
    text before its figures, such as a level). An empty share (not known) is no warning."""
    if AT_LIMIT not in frame.columns or frame.empty:
        return []
    figures = _figure_columns(frame)
    first_figure = next((i for i, column in enumerate(frame.columns) if column in figures), len(frame.columns))
    labels = list(frame.columns[:first_figure]) or [frame.columns[0]]
    flagged: dict[str, list[str]] = {}
    for _, row in frame.iterrows():
        share = row[AT_LIMIT]
        if not (_is_number(share) and float(share) >= AT_LIMIT_FLAG):
            continue
        detail = ", ".join(row[column] for column in labels[1:] if row[column] != "")
        flagged.setdefault(row[labels[0]], []).append(f"{share}%" + (f" ({detail})" if detail else ""))
    return [
        f"{', '.join(shares)} of {name}'s outputs ran to max_new_tokens without stopping: "
        "their lengths measure the budget, not the model."
        for name, shares in flagged.items()
    ]


def table_page(csv_path: str | Path, title: str, caption: str = "") -> str:
    """A standalone page: the title, the caption (a judged table's judges), a warning where
    many of a row's outputs ran to max_new_tokens (:func:`limit_warnings`), a link that
    downloads the CSV, and the table."""
    csv_path = Path(csv_path)
    data = base64.b64encode(csv_path.read_bytes()).decode()
    cells = read_cells(csv_path)
    warnings = "".join(f"<p class='warning'>&#9888; {html.escape(line)}</p>" for line in limit_warnings(cells))
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<h2>{html.escape(title)}</h2>"
        + (f"<p class='caption'>{html.escape(caption)}</p>" if caption else "")
        + warnings
        + f"<p><a download='{html.escape(csv_path.name)}' href='data:text/csv;base64,{data}'>"
        f"{html.escape(csv_path.name)}</a></p>"
        f"{html_table(cells)}</body></html>\n"
    )


def served_model_notes(generation_folders: Mapping[str, str | Path]) -> dict[str, str]:
    """For each API model (its generations' folder), a caption note where the API served
    another model than the configured snapshot, from its generations' provenance records
    (:meth:`reprolm.generate.endpoint_backend.ChatEndpointBackend.served`); none where it
    served the configured one."""
    notes = {}
    for base, folder in sorted(generation_folders.items()):
        configured, served = set(), {}
        for generations in sorted(Path(folder).rglob("*.parquet")):
            record_path = provenance_path(generations)
            if not record_path.is_file():
                continue
            endpoint = json.loads(record_path.read_text()).get("endpoint") or {}
            configured.add(endpoint.get("configured_model"))
            for item in endpoint.get("served", []):
                served.setdefault(item["model"], set()).add(item.get("system_fingerprint"))
        other = {model: prints for model, prints in served.items() if model not in configured}
        if other:
            shown = "; ".join(
                f"{model} (system fingerprint {', '.join(sorted(str(p) for p in prints))})"
                for model, prints in sorted(other.items(), key=lambda item: str(item[0]))
            )
            notes[base] = (
                f"{base}: configured as {', '.join(sorted(map(str, configured)))}, but the API served {shown}: "
                "not the configured snapshot."
            )
    return notes


def write_table_pages(
    tables: str | Path,
    pages: str | Path,
    study: str,
    judges: Mapping[str, Sequence[Mapping]] | None = None,
    agreement: str | Path | None = None,
    served: Mapping[str, str] | None = None,
) -> list[Path]:
    """``{name}.html`` in ``pages`` for every ``{name}.csv`` in ``tables``; the folder is
    written whole or not at all. A judged table's page names its judges (``judges``:
    :func:`reprolm.aggregate.judge_notes.table_judge_notes`) and their measured agreement
    with the retired judges they act for (``agreement``: the study's judge agreement table);
    a table naming an API model that served another model than configured says so
    (``served``: :func:`served_model_notes`)."""
    measured = pd.read_csv(agreement) if agreement else None
    written = []
    with atomic_path(pages) as tmp:
        tmp.mkdir()
        for csv_path in sorted(Path(tables).glob("*.csv")):
            notes = notes_for(judges or {}, csv_path.stem)
            caption = judge_caption(notes, study, measured) if notes else ""
            text = csv_path.read_text()
            flags = [note for base, note in (served or {}).items() if base in text]
            caption = " ".join(part for part in [caption, *flags] if part)
            page = tmp / f"{csv_path.stem}.html"
            page.write_text(table_page(csv_path, f"{study}: {csv_path.stem}", caption))
            written.append(Path(pages) / page.name)
    return written


def write_table_page(csv_path: str | Path, output: str | Path, title: str) -> None:
    with atomic_path(output) as tmp:
        Path(tmp).write_text(table_page(csv_path, title))


def _interval(low: pd.Series, high: pd.Series) -> pd.Series:
    """``[lo, hi]`` where a figure has an interval, else empty."""
    return ("[" + low + ", " + high + "]").where((low != "") & (high != ""), "")


# The summary's columns of figures stay on one line each; its second column (a claim, a
# figure's name) takes the width left.
SUMMARY_STYLE = """<style>
table.summary th { text-align: left; }
table.summary td { white-space: nowrap; }
table.summary td:nth-child(2) { white-space: normal; }
</style>"""


def headline_summary(headlines_csv: str | Path, directions_csv: str | Path) -> str:
    """The report's first page, compact: each paper's direction of effect with this run's
    difference, its 95% interval, the units and seeds it rests on and its verdict; and the
    papers' headline figures beside this run's, for each figure the run made (of the paper's
    model or of a model standing in for it). Every column of both is on their own pages."""
    headlines = read_cells(headlines_csv)
    directions = read_cells(directions_csv)
    effects = pd.DataFrame(
        {
            "study": directions["study"],
            "claim": directions["claim"],
            "difference": directions["difference"],
            "95% interval": _interval(directions["difference lo"], directions["difference hi"]),
            "units": directions["units"],
            "seeds": directions["seeds"],
            "verdict": directions["verdict"],
        }
    )
    made = headlines[headlines["this run"] != ""]
    figures = pd.DataFrame(
        {
            "study": made["study"],
            "figure": made["figure"],
            "paper": made["paper"],
            "paper's model": made["model"],
            "this run": made["this run"],
            "95% interval": _interval(made["this run lo"], made["this run hi"]),
            "this run's model": made["this run model"],
        }
    )
    # A claim the config says this run is not expected to show, with its reason.
    not_expected = "".join(
        f"<p>Not expected in this run: <em>{html.escape(claim)}</em>: {html.escape(reason)}</p>"
        for claim, reason in zip(directions["claim"], directions.get("not expected here", []), strict=False)
        if reason
    )
    unmade = len(headlines) - len(made)
    note = (
        f"<p>{unmade} of the papers' {len(headlines)} headline figures are not made by this run "
        "(its models are neither the papers' nor stand-ins for them); the paper headlines page lists them all.</p>"
        if unmade
        else ""
    )
    return (
        SUMMARY_STYLE
        + "<h3>Directions of effect</h3>"
        + effects.to_html(index=False, border=0, escape=True, justify="left", classes="summary directions")
        + not_expected
        + "<h3>Headline figures</h3>"
        + figures.to_html(index=False, border=0, escape=True, justify="left", classes="summary headlines")
        + note
    )


def write_headline_summary(headlines_csv: str | Path, directions_csv: str | Path, output: str | Path) -> None:
    with atomic_path(output) as tmp:
        Path(tmp).write_text(headline_summary(headlines_csv, directions_csv) + "\n")
