"""The real default pipeline, end to end, in a scratch copy; reruns; the paper DAG; lint."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
import yaml

from reprolm.provenance import content_hash, provenance_path
from reprolm.length import TargetSet, count_words
from chat_endpoint_standin import ChatEndpointStandIn, chat_endpoint  # noqa: F401 (a fixture)
from workflow_helpers import REPO, dry_run_jobs, job_counts, scratch_copy, snakemake

pytestmark = pytest.mark.workflow

DEFAULT = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
MODELS = [f"{b}/{r}" for b in DEFAULT["ruler"]["bases"] for r in DEFAULT["ruler"]["recipes"]]
TARGETS = TargetSet.from_config(DEFAULT["length_targets"])


@pytest.fixture(scope="module")
def default_run(tmp_path_factory) -> Path:
    work = scratch_copy(tmp_path_factory.mktemp("default_run"))
    snakemake(work)
    return work


def test_tlg_levels_table_matches_generations(default_run):
    table = pd.read_csv(default_run / "results/tables/ruler/tlg_levels.csv")
    assert list(table.columns) == ["model", "level", "PM_in", "PM_out", "PM", "FM_in", "FM_out", "FM"]
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
    assert (default_run / "results/tables/ruler/tlg_levels.md").read_text().startswith("| model")


def test_ruler_prompts_end_with_the_mlt_and_baselines_ask_in_words(default_run):
    ruler = pq.read_table(default_run / f"results/generations/{MODELS[0]}/tlg.parquet").to_pylist()
    vanilla = pq.read_table(default_run / f"results/generations/{MODELS[1]}/tlg.parquet").to_pylist()
    assert all(r["prompt"].endswith(TARGETS[r["TargetLength"]].mlt) for r in ruler)
    assert all(f"word count of {TARGETS[r['TargetLength']].instruction()} words" in r["prompt"] for r in vanilla)


def test_other_ruler_tables(default_run):
    tables = default_run / "results/tables/ruler"
    multi = pd.read_csv(tables / "multi_mlt.csv")
    assert list(multi.columns) == ["model", *TARGETS.names, "Avg FM"]
    for _, row in multi.iterrows():
        assert row["Avg FM"] == pytest.approx(row[TARGETS.names].mean(), abs=0.01)
    self_mlt = pd.read_csv(tables / "self_mlt.csv")
    assert sorted(self_mlt["model"]) == sorted(m for m in MODELS if m.endswith("/ruler"))
    assert (self_mlt[TARGETS.names].sum(axis=1) + self_mlt["no MLT"] == DEFAULT["sources"]["arena_hard"]["fixture"]["n"]).all()
    ttest = pd.read_csv(tables / "ttest.csv")
    assert sorted(ttest["base"]) == sorted(DEFAULT["ruler"]["bases"])
    assert ttest["p"].between(0, 1).all()
    errors = pd.read_csv(tables / "length_errors.csv")
    assert errors["exact_match"].between(0, 100).all() and (errors["rmse"] >= 0).all()
    general = pd.read_csv(tables / "general.csv")
    tasks = [t["name"] for t in DEFAULT["lm_eval_suites"]["general"]["tasks"]]
    assert sorted(general["model"]) == sorted(MODELS)
    assert list(general.columns) == ["model", *tasks]
    assert general[tasks].apply(lambda col: col.between(0, 100)).all().all()
    png = default_run / "results/plots/ruler/tlg_targets.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_lm_eval_used_the_paper_fewshot_counts(default_run):
    result = json.loads((default_run / f"results/scores/lm_eval/{MODELS[0]}/general.json").read_text())
    expected = {t["name"]: t["num_fewshot"] for t in DEFAULT["lm_eval_suites"]["general"]["tasks"]}
    assert {name: task["num_fewshot"] for name, task in result["tasks"].items()} == expected
    assert all(not math.isnan(task["value"]) for task in result["tasks"].values())


def test_every_output_has_provenance_with_true_hashes(default_run):
    outputs = [
        default_run / "results/datasets/tlg/test.parquet",
        default_run / f"results/models/{MODELS[0]}",
        default_run / f"results/generations/{MODELS[0]}/tlg.parquet",
        default_run / f"results/scores/length_levels/{MODELS[0]}/tlg.json",
        default_run / "results/tables/ruler",
    ]
    for output in outputs:
        record = json.loads(provenance_path(output).read_text())
        assert record["outputs"][0]["sha256"] == content_hash(output)
        assert record["code"]["commit"] and "torch" in record["packages"]
        assert record["started"] <= record["finished"] and record["seed"] == DEFAULT["seed"]
        for group in record["inputs"].values():
            for item in group:
                assert item["sha256"] == content_hash(default_run / item["path"])
    finetune = json.loads(provenance_path(default_run / f"results/models/{MODELS[0]}").read_text())
    assert finetune["rule"] == "finetune"
    assert finetune["params"]["recipe"]["learning_rate"] == DEFAULT["recipes"]["ruler"]["learning_rate"]
    assert finetune["wildcards"] == dict(zip(("base", "recipe"), MODELS[0].split("/")))


def test_noop_rerun_does_nothing(default_run):
    result = snakemake(default_run, "-n")
    assert "Nothing to be done" in result.stdout + result.stderr


def test_changing_one_recipe_reruns_exactly_its_descendants(default_run, tmp_path):
    from reprolm.paths import split_expo

    changed = yaml.safe_load((default_run / "config/config.yaml").read_text())
    changed["recipes"]["vanilla"]["learning_rate"] *= 2
    configfile = tmp_path / "changed.yaml"
    configfile.write_text(yaml.safe_dump(changed, sort_keys=True))
    jobs = dry_run_jobs(default_run, "--configfile", str(configfile))
    bases = DEFAULT["ruler"]["bases"]
    # vanilla on every Ruler base, and on tiny_llama the recipes that start from it: DPO (ExPO),
    # FLR's fine-tuned scoring LM and the FLR-aligned policies.
    descendants = ["dpo", "flr_feedback", "flr_dpo", "flr_kto"]
    retrained = [(b, "vanilla") for b in bases] + [("tiny_llama", r) for r in descendants]
    assert sorted((w["base"], w["recipe"]) for rule, w in jobs if rule == "finetune") == sorted(retrained)
    for rule, wildcards in jobs:
        if "recipe" in wildcards:
            assert split_expo(wildcards["recipe"])[0] in ["vanilla"] + descendants, (rule, wildcards)
    counts = job_counts(jobs)
    assert not {"raw_source", "tokenizer", "build_base_model", "train_before_test"} & set(counts)
    # FLR scores with the vanilla model, so its online pairs are rebuilt; nothing else is.
    assert {w["dataset"] for rule, w in jobs if rule == "dataset"} == {"flr_pairs"}
    assert counts["lm_eval"] >= len(bases)
    assert {w["study"] for rule, w in jobs if rule == "study_tables"} == {"ruler", "expo", "flr"}  # not harmony


def test_extrapolated_model_is_built_on_request_from_its_two_checkpoints(default_run):
    from safetensors.torch import load_file

    from reprolm.paths import model_dir

    target = "results/models/tiny_llama/vanilla+expo0.7"  # outside the default alpha grid
    jobs = dry_run_jobs(default_run, target)
    assert job_counts(jobs) == {"extrapolate": 1}
    snakemake(default_run, target)
    out = default_run / target

    def weights(folder):
        return {name: t for file in sorted(folder.glob("*.safetensors")) for name, t in load_file(file).items()}

    merged = weights(out)
    sft, aligned = weights(default_run / model_dir("tiny_llama", "pretrained")), weights(default_run / model_dir("tiny_llama", "vanilla"))
    assert merged.keys() == aligned.keys()
    for name, value in aligned.items():
        assert torch.allclose(merged[name], value + 0.7 * (value - sft[name]), atol=1e-6), name
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["rule"] == "extrapolate" and provenance["params"]["alpha"] == 0.7
    assert "Nothing to be done" in snakemake(default_run, "-n", target).stdout


def test_dpo_starts_from_its_init_recipe_and_is_extrapolated_away_from_it(default_run):
    target = "results/models/tiny_llama/dpo+expo0.5"
    dpo = json.loads((default_run / "results/models/tiny_llama/dpo/provenance.json").read_text())
    assert [item["path"] for item in dpo["inputs"]["base"]] == ["results/models/tiny_llama/vanilla"]
    expo = json.loads((default_run / target / "provenance.json").read_text())
    assert [item["path"] for item in expo["inputs"]["sft"]] == ["results/models/tiny_llama/vanilla"]
    assert [item["path"] for item in expo["inputs"]["aligned"]] == ["results/models/tiny_llama/dpo"]


EXPO = DEFAULT["expo"]
EXPO_MODELS = [(b, r) for b in EXPO["bases"] for r in EXPO["recipes"]]


def _read(work: Path, path: str) -> dict:
    return json.loads((work / path).read_text())


def test_alpha_search_picks_the_extrapolation_the_judge_grades_highest(default_run):
    from reprolm.paths import expo_name
    from reprolm.studies.expo import alpha_search_grades, alpha_search_path

    curve_table = pd.read_csv(default_run / "results/tables/expo/alpha_search.csv")
    for base, recipe in EXPO_MODELS:
        grades = {float(alpha): _read(default_run, path)["mean"]
                  for alpha, path in alpha_search_grades(DEFAULT, base, recipe).items()}
        assert sorted(grades) == [0.0] + sorted(EXPO["alpha_search"]["alphas"])
        search = _read(default_run, alpha_search_path(DEFAULT, base, recipe))
        assert {point["alpha"]: point["mean_grade"] for point in search["curve"]} == grades
        best = max((alpha for alpha in grades if alpha > 0), key=grades.get)
        assert search["best_alpha"] == best
        rows = curve_table[curve_table["model"] == f"{base}/{recipe}"]
        assert rows["alpha"].tolist() == sorted(grades)
        assert rows.loc[rows["chosen"], "alpha"].tolist() == [best]
        # Each point was generated by its own extrapolated checkpoint, with ExPO's sampling.
        samples = pq.read_table(default_run / f"results/generations/{base}/{expo_name(recipe, best)}/expo_search.parquet")
        assert samples.num_rows == DEFAULT["datasets"]["expo_search"]["params"]["num"]
        model = _read(default_run, f"results/models/{base}/{expo_name(recipe, best)}/provenance.json")
        assert model["params"]["alpha"] == best
    assert (default_run / "results/plots/expo/alpha_search.png").stat().st_size > 0


def test_expo_tables_put_original_beside_its_chosen_extrapolation(default_run):
    from reprolm.paths import expo_name
    from reprolm.studies.expo import alpha_search_path

    tables = default_run / "results/tables/expo"
    alpaca, mt_bench = pd.read_csv(tables / "alpaca_eval.csv"), pd.read_csv(tables / "mt_bench.csv")
    lm_eval = pd.read_csv(tables / "lm_eval.csv")
    n_instructions = DEFAULT["sources"]["alpaca_eval"]["fixture"]["n"]
    for base, recipe in EXPO_MODELS:
        best = _read(default_run, alpha_search_path(DEFAULT, base, recipe))["best_alpha"]
        row = alpaca[alpaca["model"] == f"{base}/{recipe}"].iloc[0]
        assert row["alpha"] == best
        for column, model in (("Ori", recipe), ("+ ExPO", expo_name(recipe, best))):
            score = _read(default_run, f"results/scores/win_rate_tiny_rm/{base}/{model}/alpaca_eval.json")
            assert score["n"] == n_instructions and score["reference"] == "dataset"
            # A reward-model judge's preference is Bradley-Terry: strictly between 0 and 1.
            assert all(0 < p < 1 for p in score["preferences"])
            assert score["win_rate"] == pytest.approx(100 * sum(score["preferences"]) / n_instructions)
            assert row[f"Win Rate ({column})"] == pytest.approx(score["win_rate"], abs=0.005)
            assert row[f"LC Win Rate ({column})"] == pytest.approx(score["lc_win_rate"], abs=0.005)
            grade = _read(default_run, f"results/scores/grade_tiny_rm/{base}/{model}/mt_bench.json")
            assert [len(g) for g in grade["grades"]] == [2] * DEFAULT["sources"]["mt_bench"]["fixture"]["n"]
            grade_column = "Original" if column == "Ori" else "+ ExPO"
            grade_row = mt_bench[mt_bench["model"] == f"{base}/{recipe}"].iloc[0]
            assert grade_row[grade_column] == pytest.approx(grade["mean"], abs=0.0005)
        tasks = lm_eval[lm_eval["model"] == f"{base}/{recipe}"]
        assert tasks["task"].tolist() == [t["name"] for t in DEFAULT["lm_eval_suites"]["general"]["tasks"]]
    judge = pd.read_csv(tables / "judge.csv").iloc[0]
    assert judge["pairs"] == DEFAULT["sources"]["prefs"]["fixture"]["n"]
    assert judge["accuracy"] >= 90 and judge["ci_low"] <= judge["accuracy"] <= judge["ci_high"]


def test_mt_bench_second_turns_are_asked_after_the_models_own_first_answer(default_run):
    rows = pq.read_table(default_run / "results/generations/tiny_llama/dpo/mt_bench.parquet").to_pylist()
    for row in rows:
        conversation = row["conversation"]
        assert [turn["role"] for turn in conversation] == ["user", "assistant", "user", "assistant"]
        assert [conversation[0]["content"], conversation[2]["content"]] == list(row["turns"])
        assert conversation[1]["content"] in row["prompt"] and row["text"] == conversation[3]["content"]


def test_adding_an_alpha_runs_only_the_new_point(default_run, tmp_path):
    # 0.9: no earlier test built that extrapolation.
    changed = yaml.safe_load((default_run / "config/config.yaml").read_text())
    changed["expo"]["alpha_search"]["alphas"].append(0.9)
    configfile = tmp_path / "grid.yaml"
    configfile.write_text(yaml.safe_dump(changed))
    jobs = dry_run_jobs(default_run, "--configfile", str(configfile))
    new_points = {(b, f"{r}+expo0.9") for b, r in EXPO_MODELS}
    assert {(w["base"], w["recipe"] + "+expo" + w["alpha"]) for rule, w in jobs if rule == "extrapolate"} == new_points
    for rule in ("generate", "grade"):
        assert {(w["base"], w["recipe"]) for r, w in jobs if r == rule} == new_points
        assert {w["promptset"] for r, w in jobs if r == rule} == {"expo_search"}
    assert job_counts(jobs)["alpha_search"] == len(EXPO_MODELS)
    assert not {"finetune", "lm_eval", "win_rate", "dataset"} & set(job_counts(jobs))


def test_endpoint_judge_scores_through_the_workflow_and_its_key_is_never_written(default_run, tmp_path,
                                                                                chat_endpoint, monkeypatch):
    secret = "sk-reprolm-test-" + "7f3a9c1e5b"
    monkeypatch.setenv("REPROLM_TEST_JUDGE_KEY", secret)
    hub_token = "hf_reprolm" + "TestToken0123456789"
    monkeypatch.setenv("HF_TOKEN", hub_token)
    config = yaml.safe_load((default_run / "config/config.yaml").read_text())
    config["judges"]["standin"] = {"kind": "chat_endpoint", "base_url": chat_endpoint, "model": "stand-in",
                                   "api_key_env": "REPROLM_TEST_JUDGE_KEY"}
    configfile = tmp_path / "endpoint.yaml"
    configfile.write_text(yaml.safe_dump(config))
    grade_target = "results/scores/grade_standin/tiny_llama/dpo/mt_bench.json"
    win_target = "results/scores/win_rate_standin/tiny_llama/dpo/alpaca_eval.json"
    snakemake(default_run, grade_target, win_target, "--configfile", str(configfile))
    grade, win = _read(default_run, grade_target), _read(default_run, win_target)
    rows = pq.read_table(default_run / "results/generations/tiny_llama/dpo/mt_bench.parquet").to_pylist()
    # The stand-in rates an answer by its word count (at most 10).
    expected = [[min(10, len(turn["content"].split())) for turn in row["conversation"][1::2]] for row in rows]
    assert grade["grades"] == [[float(g) for g in row] for row in expected]
    answers = pq.read_table(default_run / "results/generations/tiny_llama/dpo/alpaca_eval.parquet").to_pylist()
    # ... and prefers the longer answer, whichever side it was shown on.
    for preference, answer in zip(win["preferences"], answers, strict=True):
        if len(answer["text"]) != len(answer["reference"]):
            assert preference == float(len(answer["text"]) > len(answer["reference"]))
    assert all(seen["authorization"] == f"Bearer {secret}" for seen in ChatEndpointStandIn.seen)
    for folder in ("logs", "results/scores", "benchmarks", ".snakemake"):
        for path in (default_run / folder).rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path
                assert hub_token.encode() not in path.read_bytes(), path


FLR = DEFAULT["flr"]


def test_flr_tables_put_every_judge_side_by_side(default_run):
    tables = default_run / "results/tables/flr"
    reward_models = pd.read_csv(tables / "reward_models.csv").set_index("judge")
    assert list(reward_models.index) == FLR["judges"]
    for judge in FLR["judges"]:
        pairs = _read(default_run, f"results/scores/pair_accuracy/{judge}/prefs/test.json")
        assert reward_models.loc[judge, "prefs accuracy"] == pytest.approx(pairs["accuracy"], abs=0.0005)
        for dataset in FLR["ratings"]:
            rated = _read(default_run, f"results/scores/rating_agreement/{judge}/{dataset}/test.json")
            assert rated["n"] == DEFAULT["sources"][dataset]["fixture"]["n"]
            for name in ("pearson", "spearman", "kendall"):
                assert reward_models.loc[judge, f"{dataset} {name}"] == pytest.approx(rated[name], abs=0.0005)
    # The trained reward model tells fluent answers from scrambled ones on every benchmark.
    assert reward_models.loc["tiny_rm", "prefs accuracy"] >= 90
    assert reward_models.loc["tiny_rm", "helpsteer spearman"] > 0.5
    assert reward_models.loc["tiny_rm", "wildbench spearman"] > 0.5
    ranking = pd.read_csv(tables / "model_ranking.csv")
    elo = yaml.safe_load((REPO / "config/lmsys_elo.yaml").read_text())["elo"]
    assert dict(zip(ranking["model"], ranking["elo"])) == {m: elo[m] for m in ranking["model"]}
    assert len(ranking) == 8 and (default_run / "results/plots/flr/model_ranking.png").exists()


def test_flr_online_pairs_are_the_policys_own_samples_best_against_worst(default_run):
    online = DEFAULT["datasets"]["flr_pairs"]["from_generations"]
    samples = pq.read_table(default_run / "results/generations/tiny_llama/vanilla/flr_online.parquet").to_pylist()
    grades = _read(default_run, "results/scores/grade_flr/tiny_llama/vanilla/flr_online.json")
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
        record = _read(default_run, f"results/models/tiny_llama/{recipe}/provenance.json")
        assert [i["path"] for i in record["inputs"]["train"]] == ["results/datasets/flr_pairs/train.parquet"]
        assert [i["path"] for i in record["inputs"]["base"]] == ["results/models/tiny_llama/vanilla"]
    alignment = pd.read_csv(default_run / "results/tables/flr/alignment.csv").set_index("model")
    for recipe in FLR["alignment"]["recipes"]:
        win = _read(default_run, f"results/scores/win_rate_tiny_rm/tiny_llama/{recipe}/flr_eval.json")
        assert win["reference"] == "vanilla"
        assert alignment.loc[f"tiny_llama/{recipe}", "win rate vs start"] == pytest.approx(win["win_rate"], abs=0.0005)


def test_changing_the_flr_categories_reruns_exactly_what_flr_scored(default_run, tmp_path):
    changed = yaml.safe_load((default_run / "config/config.yaml").read_text())
    changed["judges"]["flr"]["categories"] = ["relevance", "correctness"]
    configfile = tmp_path / "categories.yaml"
    configfile.write_text(yaml.safe_dump(changed))
    jobs = dry_run_jobs(default_run, "--configfile", str(configfile))
    counts = job_counts(jobs)
    assert {w["dataset"] for rule, w in jobs if rule == "dataset"} == {"flr_pairs"}
    assert sorted(w["recipe"] for rule, w in jobs if rule == "finetune") == ["flr_dpo", "flr_kto"]
    # (and the leaderboard's answers of the retrained policies)
    leaderboard = DEFAULT["leaderboard"]["promptset"]
    assert {(w["recipe"], w["promptset"]) for rule, w in jobs if rule == "generate"} == {
        ("flr_dpo", "flr_eval"), ("flr_kto", "flr_eval"), ("flr_dpo", leaderboard), ("flr_kto", leaderboard)}
    for rule in ("pair_accuracy", "rating_agreement", "model_ranking"):
        assert {w["judge"] for r, w in jobs if r == rule} == {"flr"}
    # The flr judge regrades everything it graded; other judges only the retrained policies.
    for rule, wildcards in jobs:
        if rule in ("grade", "win_rate") and wildcards["judge"] != "flr":
            assert wildcards["recipe"] in ("flr_dpo", "flr_kto"), (rule, wildcards)
    assert {w["study"] for rule, w in jobs if rule == "study_tables"} == {"flr"}
    assert not {"raw_source", "lm_eval", "extrapolate", "alpha_search", "train_before_test"} & set(counts)


GEM = DEFAULT["gem"]
GEM_LABELS = [GEM["labels"][recipe] for recipe in GEM["recipes"]]


def test_gem_sft_chats_hold_ultrafeedback_and_gsm8k_asked_as_evaluated(default_run):
    record = _read(default_run, "results/models/tiny_llama/gem_linear/provenance.json")
    assert record["params"]["recipe"]["loss"] == {"kind": "gem", "beta": 0.7, "h": "linear"}
    assert record["params"]["recipe"]["format"] == "chat_messages"
    chats = pq.read_table(default_run / "results/datasets/chat_sft/train.parquet").to_pylist()
    math = [chat for chat in chats if "Question: " in chat["messages"][0]["content"]]
    assert len(chats) - len(math) == DEFAULT["sources"]["ultrafeedback_sft"]["fixture"]["n"]
    assert len(math) == DEFAULT["sources"]["gsm8k_docs"]["fixture"]["n"]
    for chat in math:
        assert chat["messages"][0]["content"].startswith("\nYour task is to answer the question below.")
        assert "<<" not in chat["messages"][1]["content"]
        assert chat["messages"][1]["content"].split("\nThe answer is: ")[1].isdigit()


def _gem_rows(frame: pd.DataFrame) -> list[str]:
    return frame[frame["base"] == "tiny_llama"]["model"].tolist()


def test_gem_gsm8k_tables_recompute_from_the_generations(default_run):
    from reprolm.score.sampling import extract_answer, majority_and_pass_at_k, samples_by_prompt

    tables = default_run / "results/tables/gem"
    headline, scaling = pd.read_csv(tables / "gsm8k.csv"), pd.read_csv(tables / "gsm8k_scaling.csv")
    ks = DEFAULT["metrics"]["answer_voting"]["ks"]
    assert _gem_rows(headline) == GEM_LABELS
    assert headline.columns.tolist() == ["base", "model", "Greedy Decoding", f"Majority Voting (@{ks[-1]})",
                                         f"Best-of-N (@{ks[-1]})"]
    for recipe, label in zip(GEM["recipes"], GEM_LABELS, strict=True):
        greedy = pq.read_table(default_run / f"results/generations/tiny_llama/{recipe}/gsm8k_greedy.parquet").to_pylist()
        assert len(greedy) == DEFAULT["datasets"]["gsm8k_problems"]["params"]["num"]
        assert all(row["prompt"].count("Your task is to answer the question below.") == 1 for row in greedy)
        accuracy = 100 * sum(extract_answer(row["text"]) == row["answer"] for row in greedy) / len(greedy)
        row = headline[headline["model"] == label].iloc[0]
        assert row["Greedy Decoding"] == pytest.approx(accuracy, abs=0.005)
        sampled = pq.read_table(default_run / f"results/generations/tiny_llama/{recipe}/gsm8k_samples.parquet").to_pylist()
        answers = samples_by_prompt(sampled, lambda r: extract_answer(r["text"]))
        references = {r["id"]: r["answer"] for r in sampled}
        expected = majority_and_pass_at_k(list(answers.values()), [references[i] for i in answers], ks)
        curve = scaling[scaling["model"] == label]
        assert curve["k"].tolist() == ks
        assert curve["maj@k"].tolist() == pytest.approx([expected[k]["maj"] for k in ks], abs=0.005)
        assert curve["pass@k"].tolist() == pytest.approx([expected[k]["pass"] for k in ks], abs=0.005)
        # pass@k only grows with k and is never below majority voting.
        assert curve["pass@k"].is_monotonic_increasing and (curve["pass@k"] >= curve["maj@k"]).all()
    # The tiny models partly learn the fixture arithmetic: some, not all, problems are solved.
    assert 0 < scaling["pass@k"].max() < 100
    assert (default_run / "results/plots/gem/gsm8k_scaling.png").stat().st_size > 0


def test_gem_chat_best_of_n_recomputes_from_the_reward_models_grades(default_run):
    tables = default_run / "results/tables/gem"
    best, by_n = pd.read_csv(tables / "chat.csv"), pd.read_csv(tables / "chat_best_of_n.csv")
    ns = GEM["best_of_n"]["ns"]
    assert _gem_rows(best) == GEM_LABELS
    for recipe, label in zip(GEM["recipes"], GEM_LABELS, strict=True):
        grades = _read(default_run, f"results/scores/grade_tiny_rm/tiny_llama/{recipe}/gem_chat.json")
        rewards: dict = {}
        for prompt, sample, grade in sorted(zip(grades["ids"], grades["samples"], grades["grades"])):
            rewards.setdefault(prompt, []).append(grade[0])
        assert len(rewards) == DEFAULT["sources"]["alpaca_eval"]["fixture"]["n"]
        top = ns[-1]
        expected = sum(max(r[:top]) for r in rewards.values()) / len(rewards)
        assert best[best["model"] == label].iloc[0][f"Reward (Best-of-N @{top})"] == pytest.approx(expected, abs=0.005)
        curve = by_n[by_n["model"] == label]
        assert curve["n"].tolist() == ns
        assert curve["best-of-n"].is_monotonic_increasing and (curve["best-of-n"] >= curve["mean-of-n"] - 0.005).all()
    judge = pd.read_csv(tables / "reward_model.csv").iloc[0]
    assert judge["judge"] == "tiny_rm" and judge["pairs"] == DEFAULT["sources"]["prefs"]["fixture"]["n"]


def test_gem_diversity_and_ifeval_tables(default_run):
    from reprolm.score.diversity import distinct_n

    tables = default_run / "results/tables/gem"
    for promptset in ("poems", "stories"):
        frame = pd.read_csv(tables / f"diversity_{promptset}.csv")
        assert _gem_rows(frame) == GEM_LABELS
        for recipe, label in zip(GEM["recipes"], GEM_LABELS, strict=True):
            rows = pq.read_table(default_run / f"results/generations/tiny_llama/{recipe}/{promptset}.parquet").to_pylist()
            texts = {}
            for row in sorted(rows, key=lambda r: (r["id"], r["sample"])):
                texts.setdefault(row["id"], []).append(row["text"])
            assert {len(t) for t in texts.values()} == {DEFAULT["promptsets"][promptset]["sampling"]["n"]}
            distinct = sum(distinct_n(t, n) for t in texts.values() for n in (1, 2, 3)) / (3 * len(texts))
            row = frame[frame["model"] == label].iloc[0]
            assert row["N-gram Distinct Ratio"] == pytest.approx(distinct, abs=0.005)
            assert 0 <= row["Self-BLEU Diversity Score"] <= 100 and row["encoder"] == "packaged"
    assert (default_run / "results/plots/gem/diversity.png").stat().st_size > 0
    ifeval = pd.read_csv(tables / "ifeval.csv")
    assert _gem_rows(ifeval) == GEM_LABELS
    docs = pq.read_table(default_run / "resources/raw/ifeval_docs/train.parquet").to_pylist()
    needing = sum("length_constraints:number_sentences" in d["instruction_id_list"] for d in docs)
    strict_loose = ["Prompt-Strict", "Instruction-Strict", "Prompt-Level", "Instruction-Level"]
    for _, row in ifeval.iterrows():
        assert row["Avg"] == pytest.approx(sum(row[c] for c in strict_loose) / 4, abs=0.01)
        assert all(0 <= row[c] <= 100 for c in strict_loose)
    # No NLTK punkt_tab can be fetched here: the report says which prompts were left out and why.
    assert (ifeval["prompts scored"] == len(docs) - needing).all()
    assert ifeval["not scored"].str.contains(f"{needing} prompts with length_constraints:number_sentences").all()
    assert ifeval["not scored"].str.contains("punkt_tab").all()


def test_changing_the_voting_ks_rescores_only_the_sampled_gsm8k_answers(default_run, tmp_path):
    changed = yaml.safe_load((default_run / "config/config.yaml").read_text())
    changed["metrics"]["answer_voting"]["ks"] = [1, 8]
    configfile = tmp_path / "ks.yaml"
    configfile.write_text(yaml.safe_dump(changed))
    jobs = dry_run_jobs(default_run, "--configfile", str(configfile))
    assert job_counts(jobs) == {"score": len(GEM["recipes"]), "study_tables": 1, "paper_comparison": 1, "provenance_index": 1,
                                "all": 1}
    assert {(w["metric"], w["promptset"]) for rule, w in jobs if rule == "score"} == {("answer_voting", "gsm8k_samples")}
    assert {w["study"] for rule, w in jobs if rule == "study_tables"} == {"gem"}


def test_incompatible_extrapolation_is_refused_without_output(default_run, tmp_path):
    # The ruler recipe adds MLT tokens, so its model no longer matches the base model's shapes.
    config = yaml.safe_load((default_run / "config/config.yaml").read_text())
    config["expo"]["references"]["ruler"] = "pretrained"
    configfile = tmp_path / "expo.yaml"
    configfile.write_text(yaml.safe_dump(config))
    target = "results/models/tiny_llama/ruler+expo0.5"
    result = snakemake(default_run, target, "--configfile", str(configfile), check=False)
    assert result.returncode != 0
    assert "config.json 'vocab_size'" in result.stdout + result.stderr
    assert not (default_run / target).exists()
    assert not list((default_run / "results/models/tiny_llama").glob(".ruler+expo*"))
    result = snakemake(default_run, "-n", "results/models/tiny_qwen2/ruler+expo0.5", check=False)
    assert result.returncode != 0
    assert "expo.references has no entry for recipe 'ruler'" in result.stdout + result.stderr


def test_paper_config_builds_the_full_ruler_dag_offline(tmp_path):
    work = scratch_copy(tmp_path)
    jobs = dry_run_jobs(work, "--configfile", "config/paper.yaml")
    paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    bases, baselines = paper["ruler"]["bases"], paper["ruler"]["baselines"]
    assert len(bases) == 6 and len(baselines) == 6
    finetunes = sorted((w["base"], w["recipe"]) for rule, w in jobs
                       if rule == "finetune" and w["recipe"] in ("ruler", "vanilla"))
    assert finetunes == sorted((b, r) for b in bases for r in ("ruler", "vanilla"))
    counts = job_counts(jobs)
    ruler_models = {w["base"] for rule, w in jobs if rule == "download_base_model"} & set(bases + baselines)
    assert ruler_models == set(bases + baselines) and "build_base_model" not in counts
    # 12 finetuned + 6 instruct baselines; TLG and multi-MLT for all, self-MLT for Ruler models.
    ruler_promptsets = {e["promptset"] for e in paper["ruler"]["evaluations"]}
    assert sum(1 for rule, w in jobs if rule == "generate" and w["promptset"] in ruler_promptsets) == 18 * 2 + 6
    assert sum(1 for rule, w in jobs if rule == "lm_eval" and w["suite"] == "general") == 18
    ruler_sources = {"openhermes", "longform", "eli5", "arena_hard"}
    assert ruler_sources <= {w["source"] for rule, w in jobs if rule == "raw_source"}
    ruler_datasets = {"tlg", "ruler_train", "arena_multi_mlt", "arena_self_mlt"}
    assert ruler_datasets <= {w["dataset"] for rule, w in jobs if rule == "dataset"}
    # GEM: Llama-3-8B's three recipes on UltraFeedback, Qwen2.5-Math's on NuminaMath-CoT.
    gem_recipes = set(paper["gem"]["recipes"]) | {r for rs in paper["gem"]["recipes_by_base"].values() for r in rs}
    gem_finetunes = {(w["base"], w["recipe"]) for rule, w in jobs if rule == "finetune" and w["recipe"] in gem_recipes}
    assert gem_finetunes == {("llama3_8b", r) for r in ("ce", "gem_linear", "gem_logsigmoid")} | {
        ("qwen25_math_7b", r) for r in ("ce_numina", "gem_linear_numina", "gem_logsigmoid_numina")}
    assert {w["base"] for rule, w in jobs if rule == "lm_eval" and w["suite"] == "ifeval"} == set(paper["gem"]["bases"])
    assert {w["source"] for rule, w in jobs if rule == "raw_source"} >= {"ultrafeedback_sft", "numina_cot", "poem_prompts"}


def test_built_and_hub_base_models_go_to_their_own_rules(tmp_path):
    """One output pattern, two rules: each base name is claimed by the rule of its config section."""
    work = scratch_copy(tmp_path)
    config = yaml.safe_load((work / "config/config.yaml").read_text())
    config["base_models"]["hub_llama"] = {"hub": {"path": "example/tiny-llama"}}
    config["ruler"]["baselines"] = ["hub_llama"]
    (work / "mixed.yaml").write_text(yaml.safe_dump(config))
    jobs = dry_run_jobs(work, "--configfile", "mixed.yaml")
    built = sorted(name for name, spec in config["base_models"].items() if "build" in spec)
    assert sorted(w["base"] for rule, w in jobs if rule == "build_base_model") == built
    assert [w["base"] for rule, w in jobs if rule == "download_base_model"] == ["hub_llama"]


def test_bad_config_fails_before_any_job(tmp_path):
    work = scratch_copy(tmp_path)
    config = yaml.safe_load((work / "config/config.yaml").read_text())
    config["generation"]["backend"] = "tpu"
    (work / "bad.yaml").write_text(yaml.safe_dump(config))
    result = snakemake(work, "--configfile", "bad.yaml", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "'tpu' is not one of ['transformers', 'vllm']" in output
    assert "backend" in output
    config["generation"]["backend"] = "transformers"
    config["ruler"]["recipes"] = ["ruler", "vanila"]
    (work / "typo.yaml").write_text(yaml.safe_dump(config))
    result = snakemake(work, "--configfile", "typo.yaml", check=False)
    assert result.returncode != 0
    allowed = "['ce', 'dpo', 'flr_dpo', 'flr_feedback', 'flr_kto', 'gem_linear', 'gem_logsigmoid', 'reward', 'ruler', 'vanilla']"
    assert f"ruler.recipes: 'vanila' is not declared; allowed: {allowed}" in result.stdout + result.stderr
    assert not (work / "results").exists() and not (work / "resources").exists()


def test_lint_and_format_are_clean(tmp_path):
    work = scratch_copy(tmp_path)
    lint = snakemake(work, "--lint", check=False)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    import subprocess
    import sys

    fmt = subprocess.run([str(Path(sys.executable).with_name("snakefmt")), "--check", "workflow"], cwd=work,
                         capture_output=True, text=True)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_html_report_holds_every_studys_tables_plots_captions_and_the_provenance(default_run):
    snakemake(default_run, "--report", "report.html")
    html = (default_run / "report.html").read_text(errors="replace")
    made = [path.name for study in DEFAULT["studies"] for kind, pattern in (("tables", "*.csv"), ("plots", "*.png"))
            for path in (default_run / "results" / kind / study).glob(pattern)]
    assert len(made) > 30
    missing = [name for name in made + ["paper_headlines.csv", "effect_directions.csv", "leaderboard.csv",
                                        "provenance.csv"] if name not in html]
    assert missing == []
    # Each study's caption explains its metrics; the cross-study tables have their own.
    for explanation in ("half-open", "Kendall tau-b", "length-controlled win rate", "pair accuracy",
                        "n-gram distinct ratio", "tiny-scale", "reprolm lineage", "content hash"):
        assert explanation in html, explanation


def test_paper_config_builds_the_full_harmony_grid_and_the_expo_models_offline(tmp_path):
    work = scratch_copy(tmp_path)
    jobs = dry_run_jobs(work, "--configfile", "config/paper.yaml")
    paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    harmony = paper["harmony"]
    assert len(harmony["bases"]) == 61 and len(harmony["tasks"]) == 24
    grid = {(w["base"], w["task"]) for rule, w in jobs if rule == "train_before_test"}
    assert grid == {(b, t["name"]) for b in harmony["bases"] for t in harmony["tasks"]}
    assert job_counts(jobs)["train_before_test"] == 61 * 24
    # ExPO's published models: each aligned hub model extrapolated away from its SFT model.
    extrapolated = {(w["base"], w["recipe"], w["alpha"]) for rule, w in jobs if rule == "extrapolate"}
    published = {("zephyr_7b_alpha", "pretrained", "0.3"), ("zephyr_7b_beta", "pretrained", "0.1"),
                 ("zephyr_7b_dpo_full", "pretrained", "0.3"), ("mistral7b_pairrm_sppo", "pretrained", "0.3")}
    expo = paper["expo"]
    grid = {(b, "pretrained", f"{a:g}") for b in expo["bases"] for a in expo["alpha_search"]["alphas"]}
    assert extrapolated == published | grid
    downloads = {w["base"] for rule, w in jobs if rule == "download_base_model"}
    assert set(expo["base_references"].values()) | {"skywork_rm"} <= downloads
    # The alpha search: every grid point and each original graded by the reward model.
    assert {(w["base"], w["recipe"]) for rule, w in jobs if rule == "alpha_search"} == {(b, "pretrained") for b in expo["bases"]}
    graded = {(w["judge"], w["base"], w["recipe"], w["promptset"]) for rule, w in jobs
              if rule == "grade" and w["promptset"] == "expo_search"}
    searched = {"pretrained"} | {f"pretrained+expo{a:g}" for a in expo["alpha_search"]["alphas"]}
    assert graded == {("skywork_rm", b, r, "expo_search") for b in expo["bases"] for r in searched}


def test_harmony_tables_match_the_score_files(default_run):
    harmony = DEFAULT["harmony"]
    tables = default_run / "results/tables/harmony"
    tasks = [t["name"] for t in harmony["tasks"]]
    models = sorted(f"{b}/pretrained" for b in harmony["bases"])
    for kind, key in (("direct", "direct_eval"), ("train_before_test", "train_before_test")):
        table = pd.read_csv(tables / f"{kind}_scores.csv").set_index("model")
        assert sorted(table.index) == models and list(table.columns) == tasks
        for model in models:
            for task in tasks:
                score = json.loads((default_run / f"results/scores/train_before_test/{model}/{task}.json").read_text())
                assert table.loc[model, task] == pytest.approx(round(100 * score[key], 2))
                assert score["train_before_test"] == max(score["epochs"], key=lambda e: (e["valid"], -e["epoch"]))["test"]
                assert len(score["epochs"]) == harmony["train"]["num_train_epochs"]
    summary = pd.read_csv(tables / "consistency_summary.csv").set_index("evaluation")
    assert list(summary.index) == ["direct", "train_before_test"]
    # The summary is the aggregation of the score tables (NaN where every model ties).
    from reprolm.aggregate.harmony import ranking_consistency

    for kind in ("direct", "train_before_test"):
        matrix = pd.read_csv(tables / f"{kind}_scores.csv").set_index("model") / 100
        expected = ranking_consistency(matrix, min_models=harmony["min_models"]).mean
        reported = summary.loc[kind, "mean_kendall_tau"]
        assert (math.isnan(expected) and math.isnan(reported)) or reported == pytest.approx(expected, abs=1e-3)
    for name in ("tau_direct.png", "tau_train_before_test.png", "consistency.png"):
        assert (default_run / "results/plots/harmony" / name).read_bytes()[:4] == b"\x89PNG"
    for kind in ("direct", "train_before_test"):
        board = pd.read_csv(tables / f"leaderboard_{kind}.csv")
        assert list(board.columns) == ["model", "Rank", "PC1", *tasks]


def test_harmony_default_tasks_are_learnt_so_its_figures_mean_something(default_run):
    """The fixture tasks are learnable at tiny scale: fine-tuning on boolq and cola moves
    models well above chance, every task separates the models after training, and so the
    consistency figures are defined."""
    tables = default_run / "results/tables/harmony"
    direct = pd.read_csv(tables / "direct_scores.csv").set_index("model")
    trained = pd.read_csv(tables / "train_before_test_scores.csv").set_index("model")
    assert trained["boolq"].max() >= 90 and trained["cola"].max() >= 90
    assert (trained[["boolq", "cola"]].mean() > direct[["boolq", "cola"]].mean() + 20).all()
    assert (trained.nunique() > 1).all()
    summary = pd.read_csv(tables / "consistency_summary.csv").set_index("evaluation")
    assert summary["mean_kendall_tau"].notna().all()
    assert summary.loc["train_before_test", "pc1_tasks"] == len(trained.columns)


def test_task_without_training_split_is_refused_before_any_job(tmp_path):
    work = scratch_copy(tmp_path)
    config = yaml.safe_load((work / "config/config.yaml").read_text())
    config["harmony"]["tasks"].append({"name": "truthfulqa", "task": "truthfulqa_mc2", "metric": "acc,none"})
    (work / "bad.yaml").write_text(yaml.safe_dump(config))
    result = snakemake(work, "--configfile", "bad.yaml", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "tasks without a training split cannot be trained on: ['truthfulqa']" in output
    assert "configured tasks that have one: ['arc_easy', 'boolq', 'cola', 'gsm8k']" in output
    assert not (work / "results").exists()


# ---- reruns after library edits; lineage and verification ----

def _edited_library(work: Path, relative: str, old: str, new: str) -> dict:
    """A copy of the library with one edit, and the environment that makes jobs use it."""
    import shutil

    library = work / "edited_src"
    if library.exists():
        shutil.rmtree(library)
    shutil.copytree(REPO / "src", library, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    path = library / relative
    text = path.read_text()
    assert text.count(old) == 1, (relative, old)
    path.write_text(text.replace(old, new))
    return {"PYTHONPATH": str(library)}


def test_library_edits_rerun_exactly_the_jobs_whose_code_changed(default_run):
    """Library code is fingerprinted per job (reprolm.provenance.fingerprint): an edit reruns
    the jobs whose code it changed, and what descends from them."""
    # An unedited copy of the library: nothing to do.
    unedited = _edited_library(default_run, "reprolm/score/length.py", "def level_scores(", "def level_scores(")
    assert dry_run_jobs(default_run, env=unedited) == []
    # A docstring is not code.
    docstring = _edited_library(default_run, "reprolm/score/length.py", '"""Rows ``Level:0`` .. and ``All``',
                                '"""Per-level rows ``Level:0`` .. and ``All``')
    assert dry_run_jobs(default_run, env=docstring) == []
    # The length-level scoring: its scores and the Ruler tables, nothing else.
    scoring = _edited_library(default_run, "reprolm/score/length.py", '    rows.append(_score_row("All", counts.values()))',
                              '    rows.append(_score_row("All", list(counts.values())))')
    jobs = dry_run_jobs(default_run, env=scoring)
    assert {w["metric"] for rule, w in jobs if rule == "score"} == {"length_levels"}
    assert job_counts(jobs) == {"score": len(MODELS), "study_tables": 1, "paper_comparison": 1, "provenance_index": 1,
                                "all": 1}
    assert [w["study"] for rule, w in jobs if rule == "study_tables"] == ["ruler"]
    # One dataset builder: that dataset and what descends from it (GEM's SFT chats).
    builder = _edited_library(default_run, "reprolm/data/builders.py",
                              '    template = ctx.params.get("question_template", "{instruction}")',
                              '    template = str(ctx.params.get("question_template", "{instruction}"))')
    jobs = dry_run_jobs(default_run, env=builder)
    assert {w["dataset"] for rule, w in jobs if rule == "dataset"} == {"chat_sft"}
    assert {w["recipe"] for rule, w in jobs if rule == "finetune"} == set(GEM["recipes"])
    assert {w["recipe"] for _, w in jobs if "recipe" in w} == set(GEM["recipes"])
    assert {w["study"] for rule, w in jobs if rule == "study_tables"} == {"gem"}
    assert not {"raw_source", "tokenizer", "build_base_model", "train_before_test"} & set(job_counts(jobs))


def test_lineage_traces_a_table_back_to_its_raw_sources(default_run, capsys):
    from reprolm.cli import main
    from reprolm.provenance.query import lineage

    graph = lineage("results/tables/gem", root=default_run)
    artifacts = graph["artifacts"]
    table = artifacts["results/tables/gem"]
    assert table["rule"] == "study_tables" and table["wildcards"] == {"study": "gem"}
    assert table["code"]["commit"] and len(table["params"]["code"]) == 64
    # table <- score <- generations <- model <- dataset <- raw source, each with its record.
    chain = ["results/scores/answer_voting/tiny_llama/ce/gsm8k_samples.json",
             "results/generations/tiny_llama/ce/gsm8k_samples.parquet", "results/models/tiny_llama/ce",
             "results/datasets/chat_sft/train.parquet", "resources/raw/ultrafeedback_sft"]
    for parent, child in zip(["results/tables/gem"] + chain, chain):
        assert child in artifacts[parent]["inputs"], (parent, child)
        assert artifacts[child]["sha256"] == content_hash(default_run / child)
    assert artifacts["resources/raw/ultrafeedback_sft"]["inputs"] == []
    assert main(["--root", str(default_run), "lineage", "results/tables/gem", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(graph))
    assert main(["--root", str(default_run), "lineage", "results/models/tiny_llama/ce"]) == 0
    tree = capsys.readouterr().out.splitlines()
    assert tree[0].startswith("results/models/tiny_llama/ce  [rule finetune base=tiny_llama recipe=ce]")
    assert any("resources/raw/ultrafeedback_sft  [rule raw_source" in line for line in tree)
    assert main(["--root", str(default_run), "lineage", "results/nothing.json"]) == 2


def test_verify_finds_modified_results_and_stale_descendants(default_run, tmp_path, capsys):
    import shutil

    from reprolm.cli import main

    for folder in ("results", "resources", "config"):
        shutil.copytree(default_run / folder, tmp_path / folder, symlinks=True)
    assert main(["--root", str(tmp_path), "verify"]) == 0
    score = "results/scores/diversity/tiny_llama/ce/poems.json"
    edited = json.loads((tmp_path / score).read_text())
    edited["distinct"] = 99.0
    (tmp_path / score).write_text(json.dumps(edited))
    assert main(["--root", str(tmp_path), "verify"]) == 1
    report = capsys.readouterr().out.splitlines()
    assert f"{score}: modified after it was made" in report
    # The GEM tables and plots (one job) read it.
    for output in ("results/tables/gem", "results/plots/gem"):
        assert f"{output}: inputs changed since it was made: {score}" in report
    assert len(report) == 3


def test_a_checkpoint_replaced_in_place_reruns_what_was_made_from_it(default_run, tmp_path):
    import shutil

    work = tmp_path / "run"
    shutil.copytree(default_run, work, symlinks=True, ignore=shutil.ignore_patterns("edited_src"))
    assert dry_run_jobs(work) == []
    # New weights under the old name: Snakemake dates the folder by its marker, which did not change.
    config = work / "results/models/tiny_llama/ce/generation_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "temperature": 0.5}))
    jobs = dry_run_jobs(work)
    assert {(w["base"], w["recipe"]) for _, w in jobs if "recipe" in w} == {("tiny_llama", "ce")}
    assert {rule for rule, _ in jobs} == {"generate", "score", "grade", "lm_eval", "study_tables", "paper_comparison",
                                          "leaderboard", "provenance_index", "all"}
    assert {w["study"] for rule, w in jobs if rule == "study_tables"} == {"gem"}


def test_paper_comparison_sets_headlines_beside_this_run_and_checks_directions_at_tiny_scale(default_run):
    headlines = pd.read_csv(default_run / "results/report/paper_headlines.csv")
    spec = yaml.safe_load((REPO / "config/paper_headlines.yaml").read_text())
    assert len(headlines) == len(spec["headlines"])
    # The tiny default has none of the papers' models: every headline is there, none filled.
    assert headlines["this run"].isna().all() and headlines["paper"].notna().all()
    assert set(headlines["study"]) == {item["study"] for item in spec["headlines"]} & set(DEFAULT["studies"])
    directions = pd.read_csv(default_run / "results/report/effect_directions.csv")
    assert len(directions) == len(spec["directions"])
    gem = directions[directions["claim"].str.startswith("GEM-Linear keeps more poem diversity")].iloc[0]
    poems = pd.read_csv(default_run / "results/tables/gem/diversity_poems.csv").set_index("model")
    assert gem["expected higher"] == pytest.approx(poems.loc["GEM-Linear", "N-gram Distinct Ratio"], abs=1e-3)
    assert gem["expected lower"] == pytest.approx(poems.loc["CE", "N-gram Distinct Ratio"], abs=1e-3)
    assert gem["shown"] == (gem["expected higher"] > gem["expected lower"])
    harmony = directions[directions["study"] == "harmony"].iloc[0]
    summary = pd.read_csv(default_run / "results/tables/harmony/consistency_summary.csv").set_index("evaluation")
    assert harmony["expected higher"] == pytest.approx(summary.loc["train_before_test", "mean_kendall_tau"], abs=1e-3)


# What differs between two clean runs by design, and is left out of the comparison:
# provenance records and their index (when and where each job ran), Snakemake's folder
# timestamp markers, and the cache of which lm-eval tasks have a training split (it keeps
# every task any run has asked about, so its content depends on history, not on this run).
VOLATILE_NAMES = ("provenance.json", ".snakemake_timestamp")
VOLATILE_PATHS = ("results/report/provenance.csv", "resources/lm_eval_tasks.json")


def _content_files(work: Path) -> dict[str, str]:
    return {path.relative_to(work).as_posix(): content_hash(path)
            for folder in ("results", "resources") for path in sorted((work / folder).rglob("*"))
            if path.is_file() and not path.name.endswith(VOLATILE_NAMES) and "hf_home" not in path.parts
            and path.relative_to(work).as_posix() not in VOLATILE_PATHS}


def test_a_second_clean_run_makes_byte_identical_results(default_run, tmp_path):
    """Determinism: the whole default configuration made again from scratch, in another
    folder, gives the same bytes: raw sources, tokenizer, base models, datasets, every
    finetune's weights and Trainer arguments (CPU training with fixed seeds), extrapolated
    models, greedy and sampled generations, scores, grades, lm-eval results, tables, plots and
    the report's tables."""
    work = scratch_copy(tmp_path)
    snakemake(work)
    again = _content_files(work)
    # The first run's folder also holds what other tests asked for beyond the default.
    first = _content_files(default_run)
    assert len(again) > 400 and set(again) <= set(first)
    assert {"results/models/tiny_llama/gem_linear/model.safetensors", "results/tables/harmony/consistency_summary.csv",
            "results/report/leaderboard.csv", "results/generations/tiny_llama/dpo+expo0.3/expo_search.parquet",
            "results/plots/gem/diversity.png"} <= set(again)
    different = sorted(path for path, digest in again.items() if first[path] != digest)
    assert different == []


def test_the_report_lists_the_provenance_of_everything_behind_it(default_run):
    index = pd.read_csv(default_run / "results/report/provenance.csv").set_index("artifact")
    for artifact in ("results/tables/gem", "results/report/leaderboard.csv", "results/models/tiny_llama/ce",
                     "resources/raw/ultrafeedback_sft", "resources/models/tiny_llama"):
        assert index.loc[artifact, "sha256"] == content_hash(default_run / artifact), artifact
    assert index.loc["results/models/tiny_llama/ce", "rule"] == "finetune"
    recorded = index[index["rule"].notna()]
    assert recorded["commit"].notna().all() and recorded["host"].notna().all()
    # Configuration files the jobs read have no record of their own; they are listed with their hash.
    assert index.loc["config/flr_followups.yaml", "sha256"] == content_hash(REPO / "config/flr_followups.yaml")
    assert len(index.loc["results/tables/gem", "library code"]) == 16
