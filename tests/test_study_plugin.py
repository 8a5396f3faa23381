"""A study is one module: a sixth study from a single file under tests/ (plus its config
section) runs through the unchanged workflow to a table in the report, and its own paper
figures to the paper comparison; a seventh brings a step of its own (a rule, its metric and a
table) in one folder."""

from __future__ import annotations

import json
import subprocess

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from reprolm.length import count_words
from reprolm.score.sampling import extract_answer
from workflow_helpers import REPO, copy_run, scratch_copy, snakemake

pytestmark = pytest.mark.workflow

STUDY_FILE = REPO / "tests" / "studies" / "greedy_accuracy.py"
# A study with its own step: study.py, rules.smk (its rule) and count_words.py (its metric).
STEP_STUDY = REPO / "tests" / "studies" / "prompt_words"
BASES = ["tiny_llama_small"]


def _config(**changes) -> dict:
    """An overlay of the default config: a change of the default run whose copy it runs in (a
    config of another base is refused there: reprolm.config.run_folder)."""
    return {
        "extends": "config/config.yaml",
        "studies": ["greedy_accuracy"],
        "study_modules": [str(STUDY_FILE)],
        "greedy_accuracy": {
            "bases": BASES,
            "evaluations": [{"promptset": "gsm8k_greedy", "metric": "answer_accuracy"}],
        },
        # The leaderboard ranks finetuned models; this study evaluates base models as they are.
        "leaderboard": None,
        **changes,
    }


@pytest.fixture(scope="module")
def plugin_run(default_run, tmp_path_factory):
    """The sixth study on a copy of the finished default run: only its own jobs run (its base
    model and prompt set are the default's)."""
    work = copy_run(default_run, tmp_path_factory.mktemp("plugin_study") / "run")
    (work / "plugin.yaml").write_text(yaml.safe_dump(_config()))
    snakemake(work, "--configfile", "plugin.yaml")
    return work


def test_a_study_from_its_own_file_runs_to_its_table(plugin_run):
    table = pd.read_csv(plugin_run / "results/tables/greedy_accuracy/accuracy.csv")
    assert list(table.columns) == ["rank", "model", "accuracy", "unparsed", "problems"]
    assert table["model"].tolist() == [f"{b}/pretrained" for b in BASES]
    for _, row in table.iterrows():
        # Recount from the generations: the workflow's own generate and score stages made them.
        rows = pq.read_table(plugin_run / f"results/generations/{row['model']}/gsm8k_greedy.parquet").to_pylist()
        answers = [extract_answer(r["text"]) for r in rows if r["sample"] == 0]
        assert row["problems"] == len(answers)
        assert row["unparsed"] == sum(a is None for a in answers)
        correct = sum(a == r["answer"] for a, r in zip(answers, [r for r in rows if r["sample"] == 0]))
        assert row["accuracy"] == pytest.approx(100 * correct / len(answers), abs=0.005)
    assert (plugin_run / "results/plots/greedy_accuracy/accuracy.png").read_bytes()[:4] == b"\x89PNG"
    record = (plugin_run / "results/tables/greedy_accuracy/provenance.json").read_text()
    assert "tests/studies/greedy_accuracy.py" in record  # the study's file is an input of its tables
    assert "Nothing to be done" in snakemake(plugin_run, "-n", "--configfile", "plugin.yaml").stdout


def test_the_plugin_studys_own_paper_figures_reach_the_paper_comparison(plugin_run):
    accuracy = pd.read_csv(plugin_run / "results/tables/greedy_accuracy/accuracy.csv").set_index("model")
    run = accuracy.loc["tiny_llama_small/pretrained", "accuracy"]
    headlines = pd.read_csv(plugin_run / "results/report/paper_headlines.csv")
    # Only the enabled study's entries: config/paper_headlines.yaml's are all for other studies.
    assert headlines[["study", "figure", "model", "paper"]].values.tolist() == [
        ["greedy_accuracy", "GSM8K greedy accuracy", "Llama-3-8B CE (GEM paper)", 47.2]
    ]
    assert headlines["this run"].tolist() == [pytest.approx(run, abs=0.0005)]
    assert headlines["difference"].tolist() == [pytest.approx(run - 47.2, abs=0.0005)]
    directions = pd.read_csv(plugin_run / "results/report/effect_directions.csv")
    # The study's own writer gives a plain figure: its difference from 0, without an interval.
    assert directions[["study", "claim", "expected higher", "expected lower", "verdict"]].values.tolist() == [
        [
            "greedy_accuracy",
            "greedy decoding answers some problems right (accuracy above 0%)",
            pytest.approx(run, abs=0.0005),
            0.0,
            "no interval",
        ]
    ]


def test_editing_the_plugin_studys_figures_reruns_the_paper_comparison(plugin_run, tmp_path):
    edited = tmp_path / "greedy_accuracy.py"
    edited.write_text(STUDY_FILE.read_text().replace('"paper": 47.2', '"paper": 48.0'))
    (plugin_run / "figures.yaml").write_text(yaml.safe_dump(_config(study_modules=[str(edited)])))
    # Its figures are a param of the comparison, which reruns on them whether or not its tables do.
    changed = snakemake(plugin_run, "--list-changes", "params", "--configfile", "figures.yaml").stdout.split()
    assert {"results/report/paper_headlines.csv", "results/report/effect_directions.csv"} <= set(changed)
    unchanged = snakemake(plugin_run, "--list-changes", "params", "--configfile", "plugin.yaml").stdout.split()
    assert "results/report/paper_headlines.csv" not in unchanged


def test_the_report_holds_the_plugin_studys_table_plot_and_caption(plugin_run):
    snakemake(plugin_run, "--configfile", "plugin.yaml", "--report", "report.html")
    html = (plugin_run / "report.html").read_text(errors="replace")
    for needle in (
        "results/report/tables/greedy_accuracy/accuracy.html",  # its table, a page
        "accuracy.png",
        "counts answers with no number to read",
        "Greedy accuracy per model",
    ):
        assert needle in html, needle


def test_editing_the_study_file_reruns_its_tables_only(plugin_run, tmp_path):
    edited = tmp_path / "greedy_accuracy.py"
    edited.write_text(
        STUDY_FILE.read_text().replace('axes.set_ylabel("greedy accuracy (%)")', 'axes.set_ylabel("accuracy (%)")')
    )
    (plugin_run / "edited.yaml").write_text(yaml.safe_dump(_config(study_modules=[str(edited)])))
    result = snakemake(plugin_run, "-n", "--configfile", "edited.yaml")
    jobs = [line.split()[1].rstrip(":") for line in result.stdout.splitlines() if line.lstrip().startswith("rule ")]
    assert sorted(jobs) == [
        "all",
        "cost_page",
        "headline_summary",
        "paper_comparison",
        "paper_comparison_pages",
        "provenance_index",
        "provenance_page",
        "study_cost",
        "study_tables",
        "table_pages",
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"studies": ["greedy_acuracy"]},
            "studies: unknown study 'greedy_acuracy'; registered: ['ruler', 'harmony', 'expo', 'flr', 'gem', "
            "'greedy_accuracy']; did you mean 'greedy_accuracy'?",
        ),
        ({"greedy_accuracy": {"bases": BASES}}, "greedy_accuracy: 'evaluations' is a required property"),
        ({"greedy_acuracy": {}}, "top-level config key: 'greedy_acuracy' is not declared"),
        ({"seeed": 42}, "top-level config key: 'seeed' is not declared"),
        ({"study_modules": ["tests/studies/missing.py"]}, "study_modules[0]: tests/studies/missing.py does not exist"),
    ],
)
def test_a_misconfigured_plugin_study_fails_before_any_job(tmp_path, change, message):
    work = scratch_copy(tmp_path)
    (work / "bad.yaml").write_text(yaml.safe_dump(_config(**change)))
    result = snakemake(work, "-n", "--configfile", "bad.yaml", check=False)
    assert result.returncode != 0
    assert message in result.stdout + result.stderr
    assert not (work / "results").exists()


def test_a_plugin_studys_misdeclared_figure_fails_before_any_job(tmp_path):
    work = scratch_copy(tmp_path / "work")
    edited = tmp_path / "greedy_accuracy.py"
    misdeclared = STUDY_FILE.read_text().replace(
        '"where": {"model": "tiny_llama_small/pretrained"},\n            "column": "accuracy",',
        '"where": {"model": "tiny_llama_small/pretrained"},\n            "colum": "accuracy",',
    )
    assert misdeclared != STUDY_FILE.read_text()
    edited.write_text(misdeclared)
    (work / "bad.yaml").write_text(yaml.safe_dump(_config(study_modules=[str(edited)])))
    result = snakemake(work, "-n", "--configfile", "bad.yaml", check=False)
    assert result.returncode != 0
    assert (
        "study 'greedy_accuracy': headlines[0]: missing keys ['column'], unknown keys ['colum']"
        in result.stdout + result.stderr
    )
    assert not (work / "results").exists()


def test_a_study_with_a_step_of_its_own_runs_from_its_folder_to_the_report(run_copy):
    """Only its config section and study_modules name it: the workflow includes its rules file,
    runs its step on the prompt sets' datasets (the default run's, which the workflow's own
    dataset rule built) and its table reaches the report (no model)."""
    work = run_copy
    config = {
        "extends": "config/config.yaml",
        "studies": ["prompt_words"],
        "study_modules": [str(STEP_STUDY / "study.py")],
        "prompt_words": {"promptsets": ["poems", "gsm8k_greedy"]},
        "leaderboard": None,
    }
    (work / "words.yaml").write_text(yaml.safe_dump(config))
    snakemake(work, "--configfile", "words.yaml")
    table = pd.read_csv(work / "results/tables/prompt_words/prompt_words.csv").set_index("promptset")
    assert sorted(table.index) == ["gsm8k_greedy", "poems"]
    for promptset, dataset in [("poems", "poems"), ("gsm8k_greedy", "gsm8k_problems")]:
        # Recount from the dataset the workflow's own dataset rule built.
        words = [
            count_words(row["turns"][0])
            for row in pq.read_table(work / f"results/datasets/{dataset}/test.parquet").to_pylist()
        ]
        assert table.loc[promptset, "prompts"] == len(words) > 0
        assert table.loc[promptset, "mean_words"] == pytest.approx(sum(words) / len(words), abs=0.005)
        assert table.loc[promptset, "max_words"] == max(words)
        step = work / f"results/scores/prompt_words/prompts/{dataset}/test.json"
        assert json.loads(step.read_text())["words"] == words
        record = json.loads(step.with_name("test.json.provenance.json").read_text())
        assert record["rule"] == "prompt_words" and record["wildcards"] == {"dataset": dataset, "split": "test"}
    assert (work / "results/report/tables/prompt_words/prompt_words.html").is_file()
    assert "Nothing to be done" in snakemake(work, "-n", "--configfile", "words.yaml").stdout
    # Nothing outside its folder knows it.
    named = subprocess.run(["grep", "-rl", "prompt_words", "src", "workflow"], cwd=REPO, capture_output=True, text=True)
    assert named.stdout == ""
