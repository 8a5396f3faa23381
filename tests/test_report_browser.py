"""The HTML report as a reader sees it: opened in headless Chromium, every study table shown
as a rendered table with its own caption, the landing page readable in a desktop and a laptop
window (intro and headline tables within reach of the scroll bar, nothing laid over them),
and every cross-study table a page opened from the menu."""

from __future__ import annotations

import json
import re
import shutil
import time

import pandas as pd
import pytest

from browser import BrowserError, Chromium
from default_config import DEFAULT
from reprolm.studies import study
from workflow_helpers import REPO, copy_run, snakemake

pytestmark = [
    pytest.mark.workflow,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium missing: `make setup` installs it"),
]

CELLS = """Array.from(document.querySelectorAll("{table}")).map(table => ({{
    header: Array.from(table.querySelectorAll("thead th")).map(cell => cell.textContent.trim()),
    rows: Array.from(table.querySelectorAll("tbody tr")).map(
        row => Array.from(row.querySelectorAll("td")).map(cell => cell.textContent.trim())),
}}))"""

# A desktop window and a laptop's.
WINDOWS = [(1440, 900), (1280, 720)]
LANDING = ".prose table.directions"


@pytest.fixture(scope="module")
def report(default_run, tmp_path_factory):
    """The report of a private copy of the default run."""
    run = copy_run(default_run, tmp_path_factory.mktemp("report") / "run")
    snakemake(run, "--report", "report.html")
    return run


def open_report(browser: Chromium, run, window: tuple[int, int]) -> str:
    """The report in a tab of ``window`` (width, height), its landing page laid out with the
    rule graph drawn."""
    page = browser.open("about:blank")
    browser.viewport(page, *window)
    browser.send("Page.navigate", page, url=(run / "report.html").as_uri())
    browser.wait_for(page, f"typeof app !== 'undefined' && document.querySelector('{LANDING}') !== null")
    browser.wait_for(page, "document.querySelector('#rulegraph .marks') !== null")
    browser.wait_still(page, "#app a, #app table, #app p, #rulegraph .marks")
    return page


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


def shown_page(browser: Chromium, page: str, uri: str) -> int:
    """The execution context of the report's frame showing ``uri``, once its table is there."""
    deadline = time.monotonic() + 20
    while not [frame for frame in browser.child_frames(page) if frame["url"] == uri]:
        assert time.monotonic() < deadline, f"{uri[:80]} is not shown"
        time.sleep(0.05)
    (frame,) = [frame for frame in browser.child_frames(page) if frame["url"] == uri]
    context = browser.frame_context(page, frame["id"])
    browser.wait_for(page, "document.querySelector('table') !== null", context=context)
    return context


def test_every_study_table_is_rendered_with_its_own_caption_and_the_headlines_open_the_report(report):
    with Chromium() as browser:
        page = open_report(browser, report, WINDOWS[0])

        # The first page: the directions of effect and the headline figures this run made.
        effects, figures = browser.evaluate(page, CELLS.format(table=".prose table"))
        directions = pd.read_csv(report / "results/report/effect_directions.csv", dtype=str, keep_default_na=False)
        headlines = pd.read_csv(report / "results/report/paper_headlines.csv", dtype=str, keep_default_na=False)
        assert effects["header"] == ["study", "claim", "difference", "95% interval", "units", "seeds", "verdict"]
        assert [row[1] for row in effects["rows"]] == directions["claim"].tolist()
        assert [row[2] for row in effects["rows"]] == directions["difference"].tolist()
        assert [row[-1] for row in effects["rows"]] == directions["verdict"].tolist()
        made = headlines[headlines["this run"] != ""]
        assert len(made) > 0, "the default makes none of the papers' headline figures"
        assert [row[2:5] for row in figures["rows"]] == made[["paper", "model", "this run"]].values.tolist()
        assert [row[-1] for row in figures["rows"]] == made["this run model"].tolist()

        results = browser.evaluate(page, "results")
        shown = study_tables(report)
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
            context = shown_page(browser, page, uri)
            (rendered,) = browser.evaluate(page, CELLS.format(table="table"), context=context)
            expected = pd.read_csv(csv_path, dtype=str, keep_default_na=False)
            assert rendered["header"] == list(expected.columns), csv_path.name
            assert rendered["rows"] == expected.values.tolist(), csv_path.name
            # A table the run leaves empty (no published reference configured) shows its header.
            numbers = [cell for row in rendered["rows"] for cell in row if is_number(cell)]
            assert numbers or expected.empty, f"{csv_path.name} shows no figure"


# Where the landing page's parts are, in CSS pixels of the window: the intro, the two summary
# tables, and the rule graph Snakemake draws beside the description; and the pane that scrolls.
LAYOUT = """(() => {
    const box = element => {
        const r = element.getBoundingClientRect();
        return {top: r.top, bottom: r.bottom, left: r.left, right: r.right};
    };
    const prose = document.querySelector(".prose");
    let pane = prose.parentElement;
    while (!["auto", "scroll"].includes(getComputedStyle(pane).overflowY)) pane = pane.parentElement;
    return {
        window: {width: innerWidth, height: innerHeight},
        pane: {...box(pane), scrollHeight: pane.scrollHeight, clientHeight: pane.clientHeight},
        intro: box(prose.querySelector("p")),
        directions: box(prose.querySelector("table.directions")),
        headlines: box(prose.querySelector("table.headlines")),
        rulegraph: box(document.querySelector("#rulegraph .marks")),
    };
})()"""
PARTS = ("intro", "directions", "headlines", "rulegraph")
# Layout positions are fractional: an edge scrolled to the window's is within a pixel of it.
PIXEL = 1
SELECTORS = {
    "intro": ".prose p",
    "directions": ".prose table.directions",
    "headlines": ".prose table.headlines",
    "rulegraph": "#rulegraph .marks",
}


def overlap(a: dict, b: dict) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


@pytest.mark.parametrize("window", WINDOWS, ids=lambda window: f"{window[0]}x{window[1]}")
def test_the_landing_page_reads_from_its_intro_down_with_nothing_laid_over_its_tables(report, window):
    width, height = window
    with Chromium() as browser:
        page = open_report(browser, report, window)
        layout = browser.evaluate(page, LAYOUT)
        assert layout["window"] == {"width": width, "height": height}
        # As it opens: the intro at the top of the window, the tables' headings below it.
        assert 0 <= layout["intro"]["top"] and layout["intro"]["bottom"] <= height, layout
        assert 0 <= layout["directions"]["top"] < height, layout
        # Longer than the window, it scrolls; every part's top and bottom are within its reach.
        assert layout["pane"]["scrollHeight"] > layout["pane"]["clientHeight"], layout
        for part in PARTS:
            for end in ("start", "end"):
                browser.evaluate(
                    page, f"document.querySelector('{SELECTORS[part]}').scrollIntoView({{block: '{end}'}})"
                )
                reached = browser.evaluate(page, LAYOUT)[part]
                edge = "top" if end == "start" else "bottom"
                assert -PIXEL <= reached[edge] <= height + PIXEL, (part, end, reached)
        # Side by side, the text and tables are not cut by the window or the pane, and the
        # rule graph lies clear of them.
        for part in ("intro", "directions", "headlines"):
            box = layout[part]
            assert layout["pane"]["left"] <= box["left"] and box["right"] <= min(width, layout["pane"]["right"]), part
            assert not overlap(box, layout["rulegraph"]), (part, box, layout["rulegraph"])
        # Nothing is laid over the intro: at its centre, its own text.
        browser.evaluate(page, "document.querySelector('.prose p').scrollIntoView({block: 'start'})")
        assert browser.evaluate(
            page,
            """(() => { const intro = document.querySelector('.prose p'); const r = intro.getBoundingClientRect();
                return intro.contains(document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2)); })()""",
        )


# Each cross-study view: its menu category, its subcategory where the category has several,
# its label in the results list, and its CSV.
def cross_study_pages() -> list[tuple]:
    pages = [
        ("paper comparison", None, "paper headlines", "results/report/paper_headlines.csv"),
        ("paper comparison", None, "effect directions", "results/report/effect_directions.csv"),
        ("leaderboard", None, "leaderboard", "results/report/leaderboard.csv"),
        ("provenance", None, "provenance index", "results/report/provenance.csv"),
    ]
    pages += [(name, "cost", "cost", f"results/report/cost/{name}.csv") for name in DEFAULT["studies"]]
    pages += [("expo", "tables", "judge_agreement", "results/tables/judge_agreement/expo.csv")]
    return pages


MENU_ITEM = """Array.from(document.querySelectorAll("#app a")).find(
    link => link.querySelector("span") && link.querySelector("span").textContent.trim() === {label})"""
RESULT_BUTTON = """Array.from(document.querySelectorAll("#app tbody tr")).find(
    row => row.querySelector("td") && row.querySelector("td").textContent.trim() === {label}
).querySelector("a[type=button]")"""


def test_every_cross_study_table_is_a_page_opened_from_the_menu_its_table_in_view(report):
    with Chromium() as browser:
        for category, subcategory, label, csv_path in cross_study_pages():
            page = open_report(browser, report, WINDOWS[0])
            browser.click(page, MENU_ITEM.format(label=json.dumps(category)))
            if subcategory:
                browser.wait_for(page, f"!!({MENU_ITEM.format(label=json.dumps(subcategory))})")
                browser.click(page, MENU_ITEM.format(label=json.dumps(subcategory)))
            browser.wait_for(page, f"!!({RESULT_BUTTON.format(label=json.dumps(label))})")
            browser.click(page, RESULT_BUTTON.format(label=json.dumps(label)))
            frame = browser.wait_for(
                page,
                """(() => { const frame = document.querySelector('#app iframe'); if (!frame) return null;
                    const r = frame.getBoundingClientRect();
                    return {src: frame.src, top: r.top, bottom: r.bottom, left: r.left, right: r.right}; })()""",
            )
            context = shown_page(browser, page, frame["src"])
            # The frame fills the window beside the menu; in it, the title, the CSV's link and
            # the table's header and first row are in view without scrolling.
            assert frame["top"] == 0 and frame["bottom"] == WINDOWS[0][1] and frame["right"] == WINDOWS[0][0]
            view = browser.evaluate(
                page,
                """(() => { const box = element => { const r = element.getBoundingClientRect();
                        return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
                    const first = document.querySelector('tbody tr');
                    return {height: innerHeight, width: innerWidth, title: document.querySelector('h2').textContent,
                        link: document.querySelector('a[download]').getAttribute('download'),
                        header: box(document.querySelector('thead')), first: first && box(first)}; })()""",
                context=context,
            )
            expected = pd.read_csv(report / csv_path, dtype=str, keep_default_na=False)
            assert view["link"] == (report / csv_path).name, label
            assert 0 <= view["header"]["top"] and view["header"]["bottom"] <= view["height"], (label, view)
            if not expected.empty:
                assert view["first"]["bottom"] <= view["height"] and view["first"]["left"] >= 0, (label, view)
            (rendered,) = browser.evaluate(page, CELLS.format(table="table"), context=context)
            assert rendered["header"] == list(expected.columns), label
            assert rendered["rows"] == expected.values.tolist(), label
            browser.send("Page.close", page)


def test_a_click_on_an_element_under_another_is_refused(report):
    """The geometry the tests rely on can fail: a menu item a person cannot reach (a panel
    laid over the whole window) is not clicked."""
    with Chromium() as browser:
        page = open_report(browser, report, WINDOWS[0])
        browser.evaluate(
            page,
            """(() => { const cover = document.createElement('div'); cover.id = 'cover';
                cover.style = 'position: fixed; inset: 0; z-index: 9999; background: white';
                document.body.appendChild(cover); })()""",
        )
        with pytest.raises(BrowserError, match="hidden under another element"):
            browser.click(page, MENU_ITEM.format(label=json.dumps("paper comparison")))
