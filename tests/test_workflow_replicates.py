"""Replicate seeds end to end: GEM-Linear finetuned under a second seed in a copy of the
default run, its poems sampled and scored, and the GEM tables and effect claim pooled over
both seeds."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from default_config import DEFAULT
from workflow_helpers import snakemake

pytestmark = pytest.mark.workflow


def test_a_second_seed_of_a_recipe_is_its_own_finetune_and_the_tables_pool_both(run_copy):
    config = json.loads(json.dumps(DEFAULT))
    config["studies"] = ["gem"]
    config["recipes"]["gem_linear"]["seeds"] = [config["seed"], 7]
    # Only the poems' diversity: the replicate is the point, not every GEM evaluation.
    config["gem"]["evaluations"] = [{"promptset": "poems", "metric": "diversity"}]
    for key in ("best_of_n", "judge_validation", "lm_eval_suite"):
        config["gem"].pop(key)
    (run_copy / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

    ran = snakemake(run_copy)
    # The default seed's models are the default run's: only the new seed's work was done (the
    # run's log lists each job it ran as a dry run would).
    log = ran.stdout + ran.stderr
    assert "output: results/models/tiny_llama/gem_linear-seed7\n" in log
    assert "results/models/tiny_llama/gem_linear\n" not in log and "results/models/tiny_llama/ce\n" not in log

    record = json.loads((run_copy / "results/models/tiny_llama/gem_linear-seed7/provenance.json").read_text())
    default = json.loads((run_copy / "results/models/tiny_llama/gem_linear/provenance.json").read_text())
    assert record["seed"] == 7 and record["params"]["seed"] == 7 and default["seed"] == config["seed"]
    assert record["params"]["recipe"] == default["params"]["recipe"]
    assert record["outputs"] != default["outputs"]  # another seed, other weights

    scores = {
        name: json.loads((run_copy / f"results/scores/diversity/tiny_llama/{name}/poems.json").read_text())
        for name in ("gem_linear", "gem_linear-seed7", "ce")
    }
    poems = pd.read_csv(run_copy / "results/tables/gem/diversity_poems.csv").set_index("model")
    column = "N-gram Distinct Ratio"
    linear, ce = poems.loc["GEM-Linear"], poems.loc["CE"]
    per_seed = [scores[name]["distinct"] for name in ("gem_linear", "gem_linear-seed7")]
    assert per_seed[0] != per_seed[1]
    assert linear[column] == pytest.approx(sum(per_seed) / 2, abs=0.01)
    assert linear[f"{column} seeds"] == 2
    assert linear[f"{column} seed sd"] == pytest.approx(abs(per_seed[0] - per_seed[1]) / 2**0.5, abs=0.01)
    assert linear[f"{column} lo"] <= linear[column] <= linear[f"{column} hi"]
    assert ce[f"{column} seeds"] == 1 and ce[column] == pytest.approx(scores["ce"]["distinct"], abs=0.01)

    claims = pd.read_csv(run_copy / "results/report/effect_directions.csv").set_index("claim")
    claim = claims.loc["tiny_llama: GEM-Linear keeps more poem diversity than CE (n-gram distinct ratio)"]
    assert claim["expected higher"] == pytest.approx(linear[column], abs=1e-3)
    assert claim["difference lo"] <= claim["difference"] <= claim["difference hi"] and claim["paired"]
    # GEM-Linear pools two seeds, CE one: a claim still resting on one seed is a smoke check.
    assert claim["seeds"] == 1 and claim["verdict"] == "smoke check" and not claim["shown"]
    assert "Nothing to be done" in snakemake(run_copy, "-n").stdout
