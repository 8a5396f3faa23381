"""The Ruler study in the finished default run: its tables recount from the generations."""

from __future__ import annotations

import json
import math

import pandas as pd
import pyarrow.parquet as pq
import pytest

from default_config import DEFAULT, MODELS, TARGETS
from reprolm.length import count_words
from reprolm.studies.ruler.tables import general_column

pytestmark = pytest.mark.workflow


def test_tlg_levels_table_matches_generations(default_run):
    table = pd.read_csv(default_run / "results/tables/ruler/tlg_levels.csv")
    assert list(table.columns) == [
        "model",
        "level",
        "PM_in",
        "PM_out",
        "PM",
        "PM lo",
        "PM hi",
        "FM_in",
        "FM_out",
        "FM",
        "FM lo",
        "FM hi",
        "at max_new_tokens",
        "at max_new_tokens lo",
        "at max_new_tokens hi",
        "definition",
    ]
    # The default trains the tiny bases with their own template; its fixture has no two-turn
    # dialogue that is not a human's question and gpt's answer.
    assert set(table["definition"]) == {"template=own, single_turn=two_turns"}
    assert ((table["PM lo"] <= table["PM"]) & (table["PM"] <= table["PM hi"])).all()
    assert sorted(set(table["model"])) == sorted(MODELS)
    levels = [f"Level:{level}" for level in TARGETS.levels] + ["All"]
    for model in MODELS:
        rows = table[table["model"] == model].set_index("level")
        assert list(rows.index) == levels
        # Recount from the generations: the table is pooled counts of \w+ words in windows.
        generations = pq.read_table(default_run / f"results/generations/{model}/tlg.parquet").to_pylist()
        assert len(generations) == DEFAULT["datasets"]["tlg"]["params"]["num"]
        pm_in = sum(TARGETS[g["TargetLength"]].pm.contains(count_words(g["text"])) for g in generations)
        fm_in = sum(TARGETS[g["TargetLength"]].fm.contains(count_words(g["text"])) for g in generations)
        assert rows.loc["All", "PM_in"] == pm_in and rows.loc["All", "FM_in"] == fm_in
        assert rows.loc["All", "PM_in"] + rows.loc["All", "PM_out"] == len(generations)
        assert rows.loc["All", "PM"] == pytest.approx(round(100 * pm_in / len(generations), 2))
        assert rows.loc["All", "PM_in"] == rows.drop("All")["PM_in"].sum()
        # The share of each level's outputs whose generation record says it ran to max_new_tokens.
        for level in levels:
            members = [g for g in generations if level == "All" or f"Level:{TARGETS[g['TargetLength']].level}" == level]
            assert rows.loc[level, "at max_new_tokens"] == pytest.approx(at_limit(members), abs=0.01, nan_ok=True), (
                model,
                level,
            )
    assert (default_run / "results/tables/ruler/tlg_levels.md").read_text().startswith("| model")


def at_limit(generations: list[dict]) -> float:
    """The percentage of generation records that say their sample ran to max_new_tokens (nan
    for none, as a table's empty cell reads)."""
    if not generations:
        return math.nan
    return round(100 * sum(g["hit_max_new_tokens"] for g in generations) / len(generations), 2)


def test_ruler_prompts_end_with_the_mlt_and_baselines_ask_in_words(default_run):
    ruler = pq.read_table(default_run / f"results/generations/{MODELS[0]}/tlg.parquet").to_pylist()
    vanilla = pq.read_table(default_run / f"results/generations/{MODELS[1]}/tlg.parquet").to_pylist()
    assert all(r["prompt"].endswith(TARGETS[r["TargetLength"]].mlt) for r in ruler)
    assert all(f"word count of {TARGETS[r['TargetLength']].instruction()} words" in r["prompt"] for r in vanilla)


def test_other_ruler_tables(default_run):
    tables = default_run / "results/tables/ruler"
    multi = pd.read_csv(tables / "multi_mlt.csv")
    assert list(multi.columns) == [
        "model",
        *[f"{name}{bound}" for name in [*TARGETS.names, "Avg FM", "at max_new_tokens"] for bound in ("", " lo", " hi")],
        "definition",
    ]
    for _, row in multi.iterrows():
        assert row["Avg FM"] == pytest.approx(row[TARGETS.names].mean(), abs=0.01)
        generations = pq.read_table(default_run / f"results/generations/{row['model']}/multi_mlt.parquet").to_pylist()
        assert row["at max_new_tokens"] == pytest.approx(at_limit(generations), abs=0.01)
    self_mlt = pd.read_csv(tables / "self_mlt.csv")
    assert list(self_mlt.columns) == [
        "model",
        *TARGETS.names,
        "no MLT",
        *[f"{name}{bound}" for name in ("FM", "Avg", "at max_new_tokens") for bound in ("", " lo", " hi")],
        "definition",
    ]
    assert sorted(self_mlt["model"]) == sorted(m for m in MODELS if m.endswith("/ruler"))
    for _, row in self_mlt.iterrows():
        generations = pq.read_table(default_run / f"results/generations/{row['model']}/self_mlt.parquet").to_pylist()
        assert row["at max_new_tokens"] == pytest.approx(at_limit(generations), abs=0.01)
    assert (
        self_mlt[TARGETS.names].sum(axis=1) + self_mlt["no MLT"] == DEFAULT["sources"]["arena_hard"]["fixture"]["n"]
    ).all()
    ttest = pd.read_csv(tables / "ttest.csv")
    assert sorted(ttest["base"]) == sorted(DEFAULT["ruler"]["bases"])
    assert ttest["p"].between(0, 1).all()
    errors = pd.read_csv(tables / "length_errors.csv")
    assert list(errors.columns) == [
        "model",
        *[f"{name}{bound}" for name in ("exact_match", "rmse") for bound in ("", " lo", " hi")],
        "n",
        *[f"at max_new_tokens{bound}" for bound in ("", " lo", " hi")],
        "definition",
    ]
    assert errors["exact_match"].between(0, 100).all() and (errors["rmse"] >= 0).all()
    # The share of all TLG outputs at the limit; the table's page warns of each model at 20% or more.
    page = (default_run / "results/report/tables/ruler/length_errors.html").read_text()
    for _, row in errors.iterrows():
        generations = pq.read_table(default_run / f"results/generations/{row['model']}/tlg.parquet").to_pylist()
        assert row["at max_new_tokens"] == pytest.approx(at_limit(generations), abs=0.01)
        warned = f"of {row['model']}&#x27;s outputs ran to max_new_tokens" in page
        assert warned == (row["at max_new_tokens"] >= 20), row["model"]
    general = pd.read_csv(tables / "general.csv")
    # A column per metric, named: the original's (ruler.lm_eval_metrics) where the suite reads another.
    chosen = DEFAULT["ruler"]["lm_eval_metrics"]
    assert chosen["hellaswag"] == "acc,none"
    tasks = [
        general_column(t["name"], metric)
        for t in DEFAULT["lm_eval_suites"]["general"]["tasks"]
        for metric in (
            [chosen[t["name"]]] if isinstance(chosen.get(t["name"]), str) else chosen.get(t["name"], [t["metric"]])
        )
    ]
    assert "hellaswag (acc)" in tasks and "gsm8k (exact_match,strict-match)" in tasks and "mmlu (acc)" in tasks
    assert sorted(general["model"]) == sorted(MODELS)
    assert list(general.columns) == ["model", *[f"{task}{bound}" for task in tasks for bound in ("", " lo", " hi")]]
    for model in MODELS:
        result = json.loads((default_run / f"results/scores/lm_eval/{model}/general.json").read_text())
        row = general.set_index("model").loc[model]
        assert row["hellaswag (acc)"] == pytest.approx(
            100 * result["tasks"]["hellaswag"]["metrics"]["acc,none"], abs=0.01
        )
    assert all(
        (general[f"{task} lo"] <= general[task]).all() and (general[task] <= general[f"{task} hi"]).all()
        for task in tasks
    )
    assert general[tasks].apply(lambda col: col.between(0, 100)).all().all()
    png = default_run / "results/plots/ruler/tlg_targets.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_lm_eval_used_the_paper_fewshot_counts(default_run):
    result = json.loads((default_run / f"results/scores/lm_eval/{MODELS[0]}/general.json").read_text())
    expected = {t["name"]: t["num_fewshot"] for t in DEFAULT["lm_eval_suites"]["general"]["tasks"]}
    assert {name: task["num_fewshot"] for name, task in result["tasks"].items()} == expected
    assert all(not math.isnan(task["value"]) for task in result["tasks"].values())
