"""FLR in the finished default run: judges side by side, online pairs from the policy's own samples."""

from __future__ import annotations

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from default_config import DEFAULT, FLR, read_json
from workflow_helpers import REPO

pytestmark = pytest.mark.workflow


def test_flr_tables_put_every_judge_side_by_side(default_run):
    tables = default_run / "results/tables/flr"
    reward_models = pd.read_csv(tables / "reward_models.csv").set_index("judge")
    assert list(reward_models.index) == FLR["judges"]
    for judge in FLR["judges"]:
        pairs = read_json(default_run, f"results/scores/pair_accuracy/{judge}/prefs/test.json")
        assert reward_models.loc[judge, "prefs accuracy"] == pytest.approx(pairs["accuracy"], abs=0.0005)
        assert reward_models.loc[judge, "prefs accuracy lo"] == pytest.approx(pairs["ci_low"], abs=0.0005)
        assert reward_models.loc[judge, "prefs accuracy hi"] == pytest.approx(pairs["ci_high"], abs=0.0005)
        for dataset in FLR["ratings"]:
            rated = read_json(default_run, f"results/scores/rating_agreement/{judge}/{dataset}/test.json")
            assert rated["n"] == DEFAULT["sources"][dataset]["fixture"]["n"]
            for name in ("pearson", "spearman", "kendall"):
                assert reward_models.loc[judge, f"{dataset} {name}"] == pytest.approx(rated[name], abs=0.0005)
                figure, low, high = (reward_models.loc[judge, f"{dataset} {name}{end}"] for end in ("", " lo", " hi"))
                assert low - 0.0005 <= figure <= high + 0.0005
    # The trained reward model tells fluent answers from scrambled ones on every benchmark.
    assert reward_models.loc["tiny_rm", "prefs accuracy"] >= 90
    assert reward_models.loc["tiny_rm", "helpsteer spearman"] > 0.5
    assert reward_models.loc["tiny_rm", "wildbench spearman"] > 0.5
    ranking = pd.read_csv(tables / "model_ranking.csv")
    elo = yaml.safe_load((REPO / "config/lmsys_elo.yaml").read_text())["elo"]
    assert dict(zip(ranking["model"], ranking["elo"])) == {m: elo[m] for m in ranking["model"]}
    assert len(ranking) == 8 and (default_run / "results/plots/flr/model_ranking.png").exists()
    for judge in FLR["judges"]:
        assert (
            (ranking[f"{judge} lo"] <= ranking[judge] + 0.0005) & (ranking[judge] <= ranking[f"{judge} hi"] + 0.0005)
        ).all()


def test_flr_online_pairs_are_the_policys_own_samples_best_against_worst(default_run):
    online = DEFAULT["datasets"]["flr_pairs"]["from_generations"]
    samples = pq.read_table(default_run / "results/generations/tiny_llama/vanilla/flr_online.parquet").to_pylist()
    grades = read_json(default_run, "results/scores/grade_flr/tiny_llama/vanilla/flr_online.json")
    assert online == {"model": "tiny_llama/vanilla", "promptset": "flr_online", "judge": "flr"}
    assert len(samples) == DEFAULT["datasets"]["flr_prompts"]["params"]["num"] * 4
    graded = {}
    for row, grade in zip(samples, grades["grades"]):
        graded.setdefault(row["instruction"], {})[row["text"]] = grade[0]
    pairs = pq.read_table(default_run / "results/datasets/flr_pairs/train.parquet").to_pylist()
    assert pairs
    for pair in pairs:
        by_text = graded[pair["prompt"][0]["content"]]
        chosen, rejected = pair["chosen"][0]["content"], pair["rejected"][0]["content"]
        assert by_text[chosen] == max(by_text.values()) and by_text[rejected] == min(by_text.values())
    for recipe in ("flr_dpo", "flr_kto"):
        record = read_json(default_run, f"results/models/tiny_llama/{recipe}/provenance.json")
        assert [i["path"] for i in record["inputs"]["train"]] == ["results/datasets/flr_pairs/train.parquet"]
        assert [i["path"] for i in record["inputs"]["base"]] == ["results/models/tiny_llama/vanilla"]
    alignment = pd.read_csv(default_run / "results/tables/flr/alignment.csv").set_index("model")
    for recipe in FLR["alignment"]["recipes"]:
        win = read_json(default_run, f"results/scores/win_rate_tiny_rm/tiny_llama/{recipe}/flr_eval.json")
        assert win["reference"] == "vanilla"
        assert alignment.loc[f"tiny_llama/{recipe}", "win rate vs start"] == pytest.approx(win["win_rate"], abs=0.0005)
        low, high = alignment.loc[f"tiny_llama/{recipe}", ["win rate vs start lo", "win rate vs start hi"]]
        assert low - 0.0005 <= win["win_rate"] <= high + 0.0005
