"""The HTML report as a reader sees it: opened in headless Chromium, every study table shown
as a rendered table with its own caption, the headline figures on the first page."""

from __future__ import annotations

import json
import re
import shutil
import time

import pandas as pd
import pytest

from browser import Chromium
from default_config import DEFAULT
from reprolm.studies import study
from workflow_helpers import REPO, snakemake

pytestmark = [
    pytest.mark.workflow,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium missing: `make setup` installs it"),
]

CELLS = """Array.from(document.querySelectorAll("{table}")).map(table => ({{
    header: Array.from(table.querySelectorAll("thead th")).map(cell => cell.textContent.trim()),
    rows: Array.from(table.querySelectorAll("tbody tr")).map(
        row => Array.from(row.querySelectorAll("td")).map(cell => cell.textContent.trim())),
}}))"""


def words(text: str) -> str:
    """Text as it reads, reStructuredText's inline markup (literals, bold) and line breaks gone."""
    return " ".join(re.sub(r"``|\*\*", "", text).split())


def table_caption(captions: dict, name: str) -> str:
    for key, text in captions["table"].items():
        if key == name or (key.endswith("*") and name.startswith(key[:-1])):
            return text
    raise AssertionError(f"no caption of its own for table {name}")


def study_tables(run) -> list[tuple]:
    """Every study table of the run: its CSV, its page in the report, its label there and its own caption."""
    tables = []
    for name_of_study in DEFAULT["studies"]:
        captions = study(DEFAULT, name_of_study).captions()
        for csv_path in sorted((run / "results/tables" / name_of_study).glob("*.csv")):
            page = f"results/report/tables/{name_of_study}/{csv_path.stem}.html"
            tables.append((csv_path, page, csv_path.stem, table_caption(captions, csv_path.stem)))
    # A retired judge's agreement with its successor: the study's table, made by its own rule.
    agreement = (REPO / "workflow/report/judge_agreement.rst").read_text()
    for csv_path in sorted((run / "results/tables/judge_agreement").glob("*.csv")):
        tables.append((csv_path, f"results/report/judge_agreement/{csv_path.stem}.html", "judge_agreement", agreement))
    return tables


def is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def test_every_study_table_is_rendered_with_its_own_caption_and_the_headlines_open_the_report(run_copy):
    snakemake(run_copy, "--report", "report.html")
    with Chromium() as browser:
        page = browser.open((run_copy / "report.html").as_uri())
        browser.wait_for(page, "typeof app !== 'undefined' && document.querySelectorAll('.prose table').length > 0")

        # The first page: the directions of effect and the headline figures, as tables.
        first_page = browser.evaluate(page, CELLS.format(table=".prose table"))
        directions = pd.read_csv(run_copy / "results/report/effect_directions.csv", dtype=str, keep_default_na=False)
        headlines = pd.read_csv(run_copy / "results/report/paper_headlines.csv", dtype=str, keep_default_na=False)
        effects, figures = first_page
        assert [row[1] for row in effects["rows"]] == directions["claim"].tolist()
        assert [row[-2] for row in effects["rows"]] == directions["verdict"].tolist()
        assert [row[2] for row in effects["rows"]] == directions["difference"].tolist()
        assert [row[3] for row in figures["rows"]] == headlines["paper"].tolist()

        results = browser.evaluate(page, "results")
        shown = study_tables(run_copy)
        assert {table.parent.name for table, *_ in shown} >= set(DEFAULT["studies"])
        for csv_path, result, label, caption in shown:
            assert result in results, result
            assert results[result]["labels"] == {"table": label}

            # Its caption, in the panel beside the table once the reader picks it.
            browser.evaluate(page, f"app.showResultInfo({json.dumps(result)})")
            caption = words(caption)
            browser.wait_for(page, f"document.body.innerText.replace(/\\s+/g, ' ').includes({json.dumps(caption)})")

            # The table itself, as the report's view button shows it: a page in a frame.
            uri = results[result]["data_uri"]
            browser.evaluate(
                page,
                f"app.setView({{content: 'html', contentPath: {json.dumps(uri)}, resultPath: {json.dumps(result)}}})",
            )
            deadline = time.monotonic() + 20
            while not [frame for frame in browser.child_frames(page) if frame["url"] == uri]:
                assert time.monotonic() < deadline, f"{result} is not shown"
                time.sleep(0.05)
            (frame,) = [frame for frame in browser.child_frames(page) if frame["url"] == uri]
            context = browser.frame_context(page, frame["id"])
            browser.wait_for(page, "document.querySelector('table') !== null", context=context)
            (rendered,) = browser.evaluate(page, CELLS.format(table="table"), context=context)
            expected = pd.read_csv(csv_path, dtype=str, keep_default_na=False)
            assert rendered["header"] == list(expected.columns), csv_path.name
            assert rendered["rows"] == expected.values.tolist(), csv_path.name
            # A table the run leaves empty (no published reference configured) shows its header.
            numbers = [cell for row in rendered["rows"] for cell in row if is_number(cell)]
            assert numbers or expected.empty, f"{csv_path.name} shows no figure"
