"""Tables as pages of the HTML report (``snakemake --report``): the report shows an HTML
result inline, where a CSV is only a download link."""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from reprolm.aggregate.judge_notes import judge_caption, notes_for
from reprolm.io import atomic_path

STYLE = """
body { font-family: sans-serif; font-size: 14px; margin: 1em; }
table { border-collapse: collapse; }
th, td { border-bottom: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
thead th { background: #f0f0f0; position: sticky; top: 0; }
"""


def read_cells(csv_path: str | Path) -> pd.DataFrame:
    """A table's cells as the CSV writes them (text, empty for a missing figure), so that the
    page shows exactly the figures of the CSV, at its precision. A table with no rows and no
    columns (nothing to compare, as a judge agreement table without a retired judge) is empty."""
    try:
        return pd.read_csv(csv_path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def html_table(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, border=0, escape=True)


def table_page(csv_path: str | Path, title: str, caption: str = "") -> str:
    """A standalone page: the title, the caption (a judged table's judges), a link that
    downloads the CSV, and the table."""
    csv_path = Path(csv_path)
    data = base64.b64encode(csv_path.read_bytes()).decode()
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<h2>{html.escape(title)}</h2>"
        + (f"<p class='caption'>{html.escape(caption)}</p>" if caption else "")
        + f"<p><a download='{html.escape(csv_path.name)}' href='data:text/csv;base64,{data}'>"
        f"{html.escape(csv_path.name)}</a></p>"
        f"{html_table(read_cells(csv_path))}</body></html>\n"
    )


def write_table_pages(
    tables: str | Path,
    pages: str | Path,
    study: str,
    judges: Mapping[str, Sequence[Mapping]] | None = None,
    agreement: str | Path | None = None,
) -> list[Path]:
    """``{name}.html`` in ``pages`` for every ``{name}.csv`` in ``tables``; the folder is
    written whole or not at all. A judged table's page names its judges (``judges``:
    :func:`reprolm.aggregate.judge_notes.table_judge_notes`) and their measured agreement
    with the retired judges they act for (``agreement``: the study's judge agreement table)."""
    measured = pd.read_csv(agreement) if agreement else None
    written = []
    with atomic_path(pages) as tmp:
        tmp.mkdir()
        for csv_path in sorted(Path(tables).glob("*.csv")):
            notes = notes_for(judges or {}, csv_path.stem)
            caption = judge_caption(notes, study, measured) if notes else ""
            page = tmp / f"{csv_path.stem}.html"
            page.write_text(table_page(csv_path, f"{study}: {csv_path.stem}", caption))
            written.append(Path(pages) / page.name)
    return written


def write_table_page(csv_path: str | Path, output: str | Path, title: str) -> None:
    with atomic_path(output) as tmp:
        Path(tmp).write_text(table_page(csv_path, title))


def headline_summary(headlines_csv: str | Path, directions_csv: str | Path) -> str:
    """The report's first page: the papers' headline figures beside this run's, and each
    paper's direction of effect with this run's difference, its 95% interval, the units and
    seeds it rests on, and its verdict."""
    headlines = read_cells(headlines_csv)
    directions = read_cells(directions_csv)
    interval = directions["difference lo"] + " .. " + directions["difference hi"]
    effects = pd.DataFrame(
        {
            "study": directions["study"],
            "claim": directions["claim"],
            "difference": directions["difference"],
            "95% interval": interval.where(directions["difference lo"] != "", ""),
            "units": directions["units"],
            "seeds": directions["seeds"],
            "verdict": directions["verdict"],
            "shown after Holm": directions["shown after Holm"],
        }
    )
    figures = headlines[["study", "figure", "model", "paper", "this run"]]
    return "<h3>Directions of effect</h3>" + html_table(effects) + "<h3>Headline figures</h3>" + html_table(figures)


def write_headline_summary(headlines_csv: str | Path, directions_csv: str | Path, output: str | Path) -> None:
    with atomic_path(output) as tmp:
        Path(tmp).write_text(headline_summary(headlines_csv, directions_csv) + "\n")
