"""Replicate seeds: model names and paths per seed, and study tables pooled over them."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from reprolm.aggregate.replicates import pool_tables, replicate_sets
from reprolm.aggregate.tables import Score
from reprolm.aggregate.uncertainty import mean_of
from reprolm.config import lookups
from reprolm.io import collected_tables, write_table
from reprolm.paths import score_path, split_seed
from reprolm.studies import Study

CONFIG = {
    "seed": 42,
    "base_models": {"tiny": {}},
    "recipes": {
        "sft": {"dataset": "d", "seeds": [42, 7, 9]},
        "dpo": {"dataset": "p", "init": "sft", "seeds": [42, 7]},
        "plain": {"dataset": "d"},
        "kto": {"dataset": "p", "init": "sft", "seeds": [5]},
    },
}


def test_the_default_seed_keeps_the_plain_name_and_others_are_named_by_seed():
    assert lookups.replicate_names(CONFIG, "sft") == ["sft", "sft-seed7", "sft-seed9"]
    assert lookups.replicate_names(CONFIG, "plain") == ["plain"]
    assert lookups.replicate_names(CONFIG, "pretrained") == ["pretrained"]
    assert split_seed("sft-seed7") == ("sft", 7) and split_seed("sft") == ("sft", None)
    assert split_seed("dpo+expo0.5") == ("dpo+expo0.5", None)
    assert [lookups.recipe_seed(CONFIG, name) for name in ("sft", "sft-seed7", "plain")] == [42, 7, 42]
    assert lookups.recipe_spec(CONFIG, "sft-seed9") == {"dataset": "d"}


def test_a_replicate_starts_from_its_inits_replicate_of_the_same_seed_where_there_is_one():
    assert lookups.finetune_start(CONFIG, "tiny", "dpo-seed7") == "results/models/tiny/sft-seed7"
    assert lookups.finetune_start(CONFIG, "tiny", "dpo") == "results/models/tiny/sft"
    assert lookups.finetune_start(CONFIG, "tiny", "kto-seed5") == "results/models/tiny/sft"  # sft has no seed 5
    assert lookups.finetune_start(CONFIG, "tiny", "sft-seed7") == "resources/models/tiny"


def test_a_prompt_sets_sampling_replicates_have_their_own_seed_and_share_its_settings():
    config = {**CONFIG, "promptsets": {"poems": {"dataset": "d", "seeds": [42, 3], "sampling": {"n": 4}}}}
    assert lookups.replicate_promptsets(config, "poems") == ["poems", "poems-seed3"]
    assert lookups.replicate_promptsets(config, "ifeval_suite") == ["ifeval_suite"]
    assert [lookups.sampling_seed(config, name) for name in ("poems", "poems-seed3")] == [42, 3]
    # Listing seeds is no setting of a replicate: the plain prompt set's param stays as it was.
    assert lookups.promptset_spec(config, "poems-seed3") == {"dataset": "d", "sampling": {"n": 4}}
    assert lookups.recipe_spec(CONFIG, "sft") == {"dataset": "d"}
    paths = lookups.replicate_score_paths(config, [score_path("diversity", "tiny", "dpo", "poems")])
    assert paths == [
        score_path("diversity", "tiny", recipe, name)
        for recipe in ("dpo", "dpo-seed7")
        for name in ("poems", "poems-seed3")
    ]
    sets = replicate_sets(
        [
            Score("diversity", "tiny", recipe, name, {"at": (recipe, name)})
            for recipe, name in [
                ("dpo-seed7", "poems"),
                ("dpo", "poems-seed3"),
                ("dpo", "poems"),
                ("dpo-seed7", "poems-seed3"),
            ]
        ]
    )
    assert [(s.recipe, s.name, s.data["at"]) for [s] in sets] == [
        ("dpo", "poems", ("dpo", "poems")),
        ("dpo", "poems", ("dpo", "poems-seed3")),
        ("dpo", "poems", ("dpo-seed7", "poems")),
        ("dpo", "poems", ("dpo-seed7", "poems-seed3")),
    ]


def test_score_paths_expand_to_one_per_replicate():
    paths = [
        score_path("diversity", "tiny", "sft", "poems"),
        score_path("diversity", "tiny", "plain", "poems"),
        "results/scores/pair_accuracy/rm/sft/test.json",
    ]  # a judge's score on a dataset named like a recipe
    assert lookups.replicate_score_paths(CONFIG, paths) == [
        "results/scores/diversity/tiny/sft/poems.json",
        "results/scores/diversity/tiny/sft-seed7/poems.json",
        "results/scores/diversity/tiny/sft-seed9/poems.json",
        "results/scores/diversity/tiny/plain/poems.json",
        "results/scores/pair_accuracy/rm/sft/test.json",
    ]


def _score(recipe: str, correct: list[int]) -> Score:
    return Score("answer_accuracy", "tiny", recipe, "gsm8k", {"correct": correct, "ids": list(range(len(correct)))})


def test_replicate_sets_name_each_seed_by_its_recipe_and_reuse_unreplicated_models():
    scores = [_score("sft-seed9", [1]), _score("plain", [0]), _score("sft", [1, 1]), _score("sft-seed7", [0, 0])]
    sets = replicate_sets(scores)
    assert len(sets) == 3
    assert [[(s.recipe, s.data["correct"]) for s in members] for members in sets] == [
        [("sft", [1, 1]), ("plain", [0])],
        [("sft", [0, 0]), ("plain", [0])],
        [("sft", [1]), ("plain", [0])],
    ]


def _accuracy_writer(scores, study, settings, tables, plots):
    frame = pd.DataFrame(
        [
            {
                "model": s.model,
                "accuracy": mean_of(s.data["correct"], s.data["ids"], scale=100),
                "prompts": len(s.data["ids"]),
            }
            for s in sorted(scores, key=lambda s: s.recipe)
        ]
    )
    write_table(frame, tables, "accuracy")
    (plots / "drawn.txt").write_text(",".join(str(s.data["correct"]) for s in sorted(scores, key=lambda s: s.recipe)))


def test_tables_pool_seeds_and_count_an_unreplicated_model_once(tmp_path):
    ids = list(range(40))
    rng = np.random.default_rng(0)
    by_seed = {name: rng.integers(0, 2, size=40).tolist() for name in ("sft", "sft-seed7", "sft-seed9")}
    paths = []
    for recipe, correct in {**by_seed, "plain": [1, 0] * 20}.items():
        path = tmp_path / score_path("answer_accuracy", "tiny", recipe, "gsm8k")
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"correct": correct, "ids": ids}))
        paths.append(str(path))
    study = type("Accuracy", (Study,), {"name": "accuracy", "table_writer": lambda self: _accuracy_writer})()
    study.write_tables(paths, {}, {}, str(tmp_path / "tables"), str(tmp_path / "plots"))

    table = pd.read_csv(tmp_path / "tables" / "accuracy.csv").set_index("model")
    per_seed = [100 * np.mean(correct) for correct in by_seed.values()]
    sft = table.loc["tiny/sft"]
    assert sft["accuracy"] == pytest.approx(np.mean(per_seed), abs=0.005)
    assert sft["accuracy seeds"] == 3 and sft["accuracy seed sd"] == pytest.approx(np.std(per_seed, ddof=1), abs=0.005)
    assert sft["accuracy lo"] < sft["accuracy"] < sft["accuracy hi"]
    plain = table.loc["tiny/plain"]
    single = mean_of([1, 0] * 20, ids, scale=100)
    assert (plain["accuracy"], plain["accuracy lo"], plain["accuracy hi"], plain["accuracy seeds"]) == pytest.approx(
        (single.value, round(single.low, 2), round(single.high, 2), 1)
    )
    assert table["prompts"].tolist() == [40, 40]
    # The plots are the default seed's.
    assert (tmp_path / "plots" / "drawn.txt").read_text() == f"{[1, 0] * 20},{by_seed['sft']}"


def test_replicate_sets_that_made_different_tables_are_refused(tmp_path):
    with collected_tables() as first:
        write_table(pd.DataFrame({"a": [1]}), tmp_path, "one")
    with collected_tables() as second:
        write_table(pd.DataFrame({"a": [1, 2]}), tmp_path, "one")
    with pytest.raises(ValueError, match=r"table 'one': replicate set 1 has shape \(2, 1\)"):
        pool_tables([first, second])
    assert not (tmp_path / "one.csv").exists()  # collected, never written


def test_replicates_expo_cannot_pool_on_both_sides_are_refused_before_any_job():
    import copy

    from default_config import DEFAULT
    from reprolm.checks import check_config
    from reprolm.errors import ConfigError
    from workflow_helpers import REPO

    schema = REPO / "workflow" / "schemas" / "config.schema.yaml"
    config = copy.deepcopy(DEFAULT)
    config["recipes"]["gem_linear"]["seeds"] = [config["seed"], 7]  # not extrapolated: fine
    check_config(config, schema)
    aligned = config["expo"]["recipes"][0]
    config["recipes"][aligned]["seeds"] = [config["seed"], 7]
    with pytest.raises(
        ConfigError, match=rf"^recipes\.{aligned}\.seeds: '{aligned}' is extrapolated by the expo study"
    ):
        check_config(config, schema)
    config = copy.deepcopy(DEFAULT)
    search = config["expo"]["alpha_search"]["promptset"]
    config["promptsets"][search]["seeds"] = [config["seed"], 3]
    with pytest.raises(ConfigError, match=rf"^promptsets\.{search}\.seeds: the expo alpha search"):
        check_config(config, schema)
