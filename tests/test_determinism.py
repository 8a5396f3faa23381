"""Determinism without a second whole default run: small configs of ExPO, FLR and GEM run
clean (Ruler's chain and Harmony's train-before-test are made twice by the SLURM workflow test).

Each tests/configs/config-{study}.yaml is a subset of config/config.yaml with the same params
for everything it keeps (tests/test_small_configs.py checks that), trimmed to few bases and
recipes. Run in a scratch folder that holds nothing from the default run but the upstream of
its base models (raw sources, the tokenizer and the pretrained bases: ``small_runs``), it must
make the same bytes, at the same paths, as the session's default run: datasets, every
finetune's weights and Trainer arguments, extrapolated models, greedy and sampled
generations, scores, grades, lm-eval results.

The three configs run together, as one Snakemake run of their union (``small_runs``): each
keeps only the default's params, so their union does too, and the upstream they have in
common (the vanilla SFT model, the reward model) is made once; one run also parses the
workflow, asks lm-eval about its tasks and starts its fork server once, not three times. Each
study's test checks its own key artifacts and tables, and every file in the folder.

Compared: every file under results/ and resources/ of the small run, which must all exist in
the default run, except what differs by design:
- provenance records and Snakemake's folder timestamp markers (when and where a job ran);
- results/report/*: the cross-study tables (paper comparison, leaderboard, provenance index)
  depend on the whole config;
- resources/lm_eval_tasks.json: a cache of what lm-eval says of each task (training split,
  reported metrics), holding every task any run asked about (its content depends on history);
- the hub cache (resources/hf_home);
- the study's plots (results/plots/{study}): each draws every model of the study's section,
  which the small config trims;
- the studies' tables (results/tables/{study}) are compared row by row instead of byte for
  byte: every column of the small run's table must be a column of the default run's table of
  the same name, and every row (one per kept model, base or judge), read in those columns, a
  row of it; except the tables in WHOLE_STUDY_TABLES, whose every row aggregates over all the
  study's models.
"""

from __future__ import annotations

import csv
import io
import subprocess
from pathlib import Path

import pytest
import yaml

from reprolm.config import overlays
from reprolm.config.run_folder import RECORD
from reprolm.provenance import content_hash
from workflow_helpers import REPO, scratch_copy, snakemake

pytestmark = pytest.mark.workflow

CONFIGS = REPO / "tests" / "configs"
# Ruler's chain (tokenizer, base model, datasets, MLT finetune, generation, length score) and
# Harmony's train-before-test are made twice from nothing, and compared byte for byte, by
# tests/test_slurm_workflow.py (on the cluster and locally); their small configs are left out
# here to keep the suite within its time.
STUDIES = ("expo", "flr", "gem")
VOLATILE_NAMES = ("provenance.json", ".snakemake_timestamp")
VOLATILE_PATHS = ("resources/lm_eval_tasks.json",)
VOLATILE_FOLDERS = ("results/report/",)
# What a small run starts from (the ``small_runs`` fixture): the upstream of every base model,
# and what lm-eval's task index said of the default's tasks (the workflow asks it before any
# job, about 25 s; a cache, left out of the comparison).
SEEDED = (
    "resources/raw",
    "resources/tokenizers",
    "resources/models",
    ".snakemake/metadata",
    "resources/lm_eval_tasks.json",
)
# Tables whose rows are computed over every model of the study (rankings, consistency across
# models): a trimmed study section changes every row. Left out of the row comparison.
WHOLE_STUDY_TABLES: dict[str, tuple[str, ...]] = {
    "expo": (),
    "flr": (),
    "gem": (),
}
# What each small run must have made and compared byte for byte: its models, generations,
# scores (and, for every study, the upstream datasets).
KEY_ARTIFACTS = {
    "expo": [
        "results/models/tiny_llama/dpo/model.safetensors",
        "results/models/tiny_llama/reward/model.safetensors",
        "results/models/tiny_llama/dpo+expo0.3/model-00001-of-00001.safetensors",
        "results/generations/tiny_llama/dpo+expo0.3/expo_search.parquet",
        "results/generations/tiny_llama/dpo+expo0.5/expo_search.parquet",
        "results/scores/grade_tiny_rm/tiny_llama/dpo+expo0.1/expo_search.json",
        "results/scores/alpha_search/tiny_llama/dpo/expo_search.json",
        "results/generations/tiny_llama/dpo/mt_bench.parquet",
        "results/scores/win_rate_tiny_rm/tiny_llama/dpo/alpaca_eval.json",
        "results/scores/pair_accuracy/tiny_rm/prefs/test.json",
    ],
    "flr": [
        "results/models/tiny_llama/flr_dpo/model.safetensors",
        "results/datasets/flr_pairs/train.parquet",
        "results/generations/tiny_llama/vanilla/flr_online.parquet",
        "results/scores/grade_flr/tiny_llama/vanilla/flr_online.json",
        "results/scores/rating_agreement/flr/helpsteer/test.json",
        "results/scores/model_ranking/tiny_rm/wildbench/test.json",
        "results/scores/pair_accuracy/flr/prefs/test.json",
        "results/scores/win_rate_tiny_rm/tiny_llama/flr_dpo/flr_eval.json",
    ],
    "gem": [
        "results/datasets/chat_sft/train.parquet",
        "results/models/tiny_llama/gem_linear/model.safetensors",
        "results/models/tiny_llama/ce/model.safetensors",
        "results/generations/tiny_llama/ce/gsm8k_samples.parquet",
        "results/generations/tiny_llama/gem_linear/poems.parquet",
        "results/scores/answer_voting/tiny_llama/ce/gsm8k_samples.json",
        "results/scores/diversity/tiny_llama/gem_linear/stories.json",
        "results/scores/grade_tiny_rm/tiny_llama/ce/gem_chat.json",
        "results/scores/lm_eval/tiny_llama/gem_linear/ifeval.json",
    ],
}


def content_files(work: Path) -> dict[str, Path]:
    """Files of a run under results/ and resources/, but those that differ by design
    (module docstring): relative path -> file."""
    files = {}
    for folder in ("results", "resources"):
        for path in sorted((work / folder).rglob("*")):
            relative = path.relative_to(work).as_posix()
            if (
                path.is_file()
                and not path.name.endswith(VOLATILE_NAMES)
                and "hf_home" not in path.parts
                and relative not in VOLATILE_PATHS
                and not relative.startswith(VOLATILE_FOLDERS)
            ):
                files[relative] = path
    return files


def table(path: Path) -> tuple[list[str], list[tuple[str, ...]]]:
    """A CSV or Markdown table's columns and rows, as text (a Markdown table without the
    padding that aligns its columns to the widest cell, which depends on the other rows)."""
    if path.suffix == ".csv":
        lines = list(csv.reader(io.StringIO(path.read_text())))
    else:
        lines = [
            [cell.strip() for cell in line.strip().strip("|").split("|")] for line in path.read_text().splitlines()
        ]
        lines = [cells for cells in lines if not all(cell and set(cell) <= set("-:") for cell in cells)]
    return lines[0], [tuple(row) for row in lines[1:]]


def same_replicates(small: Path, default: Path) -> bool:
    """Every cell's bootstrap replicates kept beside a small run's table (``write_table``) are
    those of a cell of the same column beside the default's (rows are numbered per table)."""
    import pandas as pd

    def cells(path: Path) -> set[tuple]:
        kept = pd.read_parquet(path)
        # Text, so that a draw that leaves the figure undefined (nan) matches its like.
        return {
            (column, tuple(map(repr, values)))
            for column, values in zip(kept["column"], kept["replicates"], strict=True)
        }

    found = cells(small)
    return bool(found) and found <= cells(default)


def same_rows(small: Path, default: Path) -> bool:
    """Every column of the small run's table is one of the default's, and every row, read in
    those columns, is a row of the default's (which has more rows, or more columns, where the
    small config keeps fewer models or judges)."""
    if small.name.endswith(".replicates.parquet"):
        return same_replicates(small, default)
    columns, rows = table(small)
    default_columns, default_rows = table(default)
    if not rows or not set(columns) <= set(default_columns):
        return False
    index = [default_columns.index(column) for column in columns]
    return set(rows) <= {tuple(row[i] for i in index) for row in default_rows}


def compare(small_run: Path, default_run: Path) -> tuple[list[str], list[str], list[str]]:
    """(files compared byte for byte, tables compared row by row, paths that differ)."""
    small, default = content_files(small_run), content_files(default_run)
    missing = sorted(set(small) - set(default))
    assert missing == [], f"the small runs made files the default run did not: {missing[:20]}"
    whole, by_rows, different = [], [], []
    for relative, path in small.items():
        parts = relative.split("/")
        # Plots are compared by their tables; the run folder's record names the config that
        # made it, which here is the small one.
        if parts[:2] == ["results", "plots"] or relative == RECORD.as_posix():
            continue
        if parts[:2] == ["results", "tables"]:
            table_csv = parts[-1].removesuffix(".replicates.parquet") + ".csv"
            if parts[-1] in WHOLE_STUDY_TABLES[parts[2]] or table_csv in WHOLE_STUDY_TABLES[parts[2]]:
                continue
            by_rows.append(relative)
            if not same_rows(path, default[relative]):
                different.append(relative)
            continue
        whole.append(relative)
        if content_hash(path) != content_hash(default[relative]):
            different.append(relative)
    return whole, by_rows, sorted(different)


def _united(first, second, where: str):
    """Two small configs' values of one key as one: mappings key by key, anything else equal."""
    if isinstance(first, dict) and isinstance(second, dict):
        return {
            key: _united(first[key], second[key], f"{where}.{key}")
            if key in first and key in second
            else first.get(key, second.get(key))
            for key in {**first, **second}
        }
    assert first == second, f"{where} differs between two small configs"
    return first


def union_of_small_configs(studies) -> dict:
    """The small configs of ``studies`` as one config: their studies, every source, dataset,
    recipe, claim, ... any of them keeps (each the default's, unchanged:
    tests/test_small_configs.py), and each study's own trimmed section."""
    union: dict = {"studies": []}
    for study in studies:
        small = overlays.load(CONFIGS / f"config-{study}.yaml", REPO)
        union["studies"] += small.pop("studies")
        for key, value in small.items():
            union[key] = _united(union[key], value, f"config-{study}.yaml: {key}") if key in union else value
    return union


@pytest.fixture(scope="module")
def small_runs(default_run, tmp_path_factory) -> tuple[Path, tuple[list[str], list[str], list[str]]]:
    """A scratch copy of the workflow where the small configs ran, together, from the default
    run's raw sources, tokenizer and pretrained base models only (with Snakemake's records of
    them, so that they count as made); and its comparison with the default run. Pretraining a
    base is the slowest job of a small run, and its determinism is checked where it runs twice
    from nothing: tests/test_slurm_workflow.py builds the tokenizer and base model on the
    cluster and locally and compares their bytes."""
    work = scratch_copy(tmp_path_factory.mktemp("small_runs"))
    for relative in SEEDED:
        target = work / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-a", str(default_run / relative), str(target)], check=True)
    (work / "config-small.yaml").write_text(yaml.safe_dump(union_of_small_configs(STUDIES), sort_keys=False))
    # The studies' tables and plots and all they need; not the report (left out of the
    # comparison), whose paper comparison needs every headline's table column.
    targets = [f"results/{kind}/{study}" for study in STUDIES for kind in ("tables", "plots")]
    snakemake(work, *targets, "--configfile", "config-small.yaml")
    return work, compare(work, default_run)


@pytest.mark.parametrize("study", STUDIES)
def test_a_small_config_run_from_scratch_makes_the_default_runs_bytes(small_runs, study):
    _, (whole, by_rows, different) = small_runs
    assert set(KEY_ARTIFACTS[study]) <= set(whole), sorted(set(KEY_ARTIFACTS[study]) - set(whole))
    # The study's tables: at least two CSV tables, each row found in the default's.
    tables = [path for path in by_rows if path.startswith(f"results/tables/{study}/") and path.endswith(".csv")]
    assert len(tables) >= 2, by_rows
    assert different == []
