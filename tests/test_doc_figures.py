"""Figures in README.md and docs/ that the code determines are computed here and must be what
the pages say: job counts from one dry run per config (default and paper.yaml, from scratch),
and `reprolm plan`'s figures for paper.yaml, of the same DAG. Timings are measured by
`make bench`, not by tests: the pages link to bench/RESULTS.md instead of typing them."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from doc_commands import run_printed
from reprolm.plan import makespan, plan
from workflow_helpers import REPO, scratch_copy, snakemake

pytestmark = pytest.mark.workflow

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
# A figure of jobs or compute that a page types: every one must be checked below.
TYPED = re.compile(r"\b\d[\d,.]*\**\s+(?:H100\s+)?(?:jobs|GPU-hours|CPU-hours)\b")
NUMBER = r"(\d[\d,.]*)"
# docs/cluster.md's dry run of paper.yaml, run as printed for its job count.
PAPER_DRY_RUN = "snakemake -n --configfile config/paper.yaml"


def _total(dry_run_output: str) -> int:
    return int(re.search(r"^total\s+(\d+)$", dry_run_output, re.M).group(1))


@pytest.fixture(scope="module")
def computed(tmp_path_factory) -> dict[str, float]:
    """Each figure the pages type, from the code: one dry run per config in a fresh copy of
    the workflow (as in a fresh clone), and the plan of paper.yaml."""
    work = scratch_copy(tmp_path_factory.mktemp("doc_figures"))
    default = snakemake(work, "-n")
    paper = run_printed(PAPER_DRY_RUN, work)
    assert paper.returncode == 0, (paper.stdout + paper.stderr)[-3000:]
    paper_text = paper.stdout + paper.stderr
    estimate = plan(work, "config/paper.yaml", width=64, calibrated=False)
    table = estimate.table()
    stages = table[table["study"] == "all"].set_index("stage")
    return {
        "default dry run jobs": _total(default.stdout + default.stderr),
        "paper dry run jobs": _total(paper_text),
        "plan jobs": stages.loc["total", "jobs"],
        "plan GPU-hours": stages.loc["total", "GPU hours"],
        "train-before-test jobs": stages.loc["train_before_test", "jobs"],
        "train-before-test GPU-hours": stages.loc["train_before_test", "GPU hours"],
        "finetune GPU-hours": stages.loc["finetune", "GPU hours"],
        "judge GPU-hours": stages.loc["judge", "GPU hours"],
        "generation GPU-hours": stages.loc["generate", "GPU hours"],
        "evaluation GPU-hours": stages.loc["evaluate", "GPU hours"],
        "CPU-hours": stages.loc["total", "CPU hours"],
        "checkpoint TB": stages.loc["total", "checkpoint GB"] / 1000,
        "wall hours on 64 GPUs": makespan(estimate.jobs, 64) / 3600,
        "wall hours on 256 GPUs": makespan(estimate.jobs, 256) / 3600,
        "jobs bounded by their request": stages.loc["total", "jobs bounded by their request"],
        "models of unknown size": sum(size is None for size, _ in estimate.sizes.values()),
    }


# (page, the text around the figure with NUMBER where it stands, the figure, exact or rounded)
PLAN_PARAGRAPH = "For `config/paper.yaml`, uncalibrated, in a fresh clone: "
FIGURES = [
    ("README.md", f"settings \\({NUMBER} jobs in a dry run:", "paper dry run jobs", "exact"),
    ("docs/cluster.md", f"# the full DAG \\({NUMBER} jobs\\), offline", "paper dry run jobs", "exact"),
    ("docs/development.md", f"run's jobs \\({NUMBER} in a dry run from scratch;", "default dry run jobs", "exact"),
    ("docs/cluster.md", f"{PLAN_PARAGRAPH}\\*\\*{NUMBER} jobs,", "plan jobs", "exact"),
    ("docs/cluster.md", f"jobs, about {NUMBER} H100\\s+GPU-hours\\*\\*", "plan GPU-hours", "rounded"),
    ("docs/cluster.md", f"train-before-test's {NUMBER} runs", "train-before-test jobs", "exact"),
    ("docs/cluster.md", f"runs about {NUMBER} of them", "train-before-test GPU-hours", "rounded"),
    ("docs/cluster.md", f"finetunes {NUMBER}, judges", "finetune GPU-hours", "rounded"),
    ("docs/cluster.md", f"judges {NUMBER},\\s+generation", "judge GPU-hours", "rounded"),
    ("docs/cluster.md", f"generation {NUMBER}, evaluation", "generation GPU-hours", "rounded"),
    ("docs/cluster.md", f"evaluation {NUMBER}\\), ", "evaluation GPU-hours", "rounded"),
    ("docs/cluster.md", f"{NUMBER} CPU-hours of downloads", "CPU-hours", "rounded"),
    ("docs/cluster.md", f"{NUMBER} TB of\\s+checkpoints", "checkpoint TB", "rounded"),
    ("docs/cluster.md", f"roughly {NUMBER} hours of wall\\s+time on 64 GPUs", "wall hours on 64 GPUs", "rounded"),
    ("docs/cluster.md", f"on 64 GPUs \\({NUMBER} on 256:", "wall hours on 256 GPUs", "rounded"),
    ("docs/cluster.md", f"{NUMBER} jobs are bounded by their request", "jobs bounded by their request", "exact"),
    ("docs/cluster.md", f"the\\s+{NUMBER} models of unknown size", "models of unknown size", "exact"),
]


def _significant(written: str) -> int:
    """The significant digits a page's figure shows (``13,500``: 3; ``4.3``: 2; ``80``: 1)."""
    digits = written.replace(",", "")
    return len(digits.replace(".", "").lstrip("0") if "." in digits else digits.strip("0"))


def _rounded(value: float, significant: int) -> float:
    return round(value, significant - 1 - math.floor(math.log10(abs(value))))


@pytest.mark.parametrize(("page", "pattern", "figure", "kind"), FIGURES, ids=[f[2] + "@" + f[0] for f in FIGURES])
@pytest.mark.doc_command(PAPER_DRY_RUN)
def test_a_typed_figure_is_what_the_code_gives(computed, page, pattern, figure, kind):
    found = re.findall(pattern, (REPO / page).read_text())
    assert len(found) == 1, f"{page}: {pattern!r} found {len(found)} times"
    written = found[0]
    value = computed[figure]
    if kind == "exact":
        assert written == str(int(value)), f"{page} says {written}, the code gives {figure} = {int(value)}"
    else:
        number = float(written.replace(",", ""))
        expected = _rounded(value, _significant(written))
        assert number == pytest.approx(expected), (
            f"{page} says {written}, the code gives {figure} = {value:.4g} ({expected:g} as written)"
        )


def test_every_typed_job_or_compute_figure_in_the_pages_is_checked():
    """A new figure of jobs, GPU-hours or CPU-hours typed into a page needs a check above."""
    checked: dict[str, list[tuple[int, int]]] = {}
    for page, pattern, *_ in FIGURES:
        checked.setdefault(page, []).extend(m.span() for m in re.finditer(pattern, (REPO / page).read_text()))
    unchecked = []
    for path in PAGES:
        page = path.relative_to(REPO).as_posix()
        text = path.read_text()
        for match in TYPED.finditer(text):
            if not any(start <= match.start() < end for start, end in checked.get(page, [])):
                line = text.count("\n", 0, match.start()) + 1
                unchecked.append(f"{page}:{line}: {match.group(0)}")
    assert unchecked == []


def test_the_pages_type_no_run_times_but_link_to_the_bench_results():
    """The default run's and the suite's times are `make bench`'s and CI's measurements, dated
    in bench/RESULTS.md; README and docs link there instead of typing them."""
    readme = (REPO / "README.md").read_text()
    development = (REPO / "docs" / "development.md").read_text()
    assert "[`bench/RESULTS.md`](bench/RESULTS.md)" in readme
    for page, text in (("README.md", readme), ("docs/development.md", development)):
        typed = re.findall(r"(?:takes|run takes|about)\s+(?:\d[\d.-]*)\s*(?:minutes|min)\b", text)
        assert typed == [], f"{page} types run times: {typed}"
    assert Path(REPO / "bench" / "RESULTS.md").is_file()
