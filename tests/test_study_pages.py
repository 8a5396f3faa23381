"""The study pages' statements about config/paper.yaml hold in config/paper.yaml: the keys
their definition tables name, the tests and definitions they say it selects, the judges and
reference answers they say it uses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from reprolm.score.definitions import DEFAULT_DEFINITION, DEFINITIONS
from reprolm.score.judges import successors
from reprolm.score.length import LENGTH_TTESTS

ROOT = Path(__file__).resolve().parents[1]
PAPER = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
STUDY_PAGES = sorted((ROOT / "docs" / "studies").glob("*.md"))
# `path: value` inside backticks, the form the pages use for one setting.
SETTING = re.compile(r"`([a-z_][\w.{},*]*): ([^`]+)`")
# What each registered length t-test is called on the pages.
TTEST_NAMES = {False: "Welch's", True: "Student's"}


def page(name: str) -> str:
    return (ROOT / "docs" / "studies" / f"{name}.md").read_text()


def flat(text: str) -> str:
    """A page's prose on one line, so a statement wrapped across lines still matches."""
    return " ".join(text.split())


def settings_at(config: dict, dotted: str) -> list:
    """The values a dotted path names, ``{a,b}`` and ``*`` expanded; a missing key gives
    None (the setting's default)."""
    found = [config]
    for part in re.findall(r"\{[^}]*\}|[^.]+", dotted):
        keys = part.strip("{}").split(",") if part.startswith("{") else [part]
        step = []
        for value in found:
            if not isinstance(value, dict):
                step.append(None)
            elif keys == ["*"]:
                step += list(value.values())
            else:
                step += [value.get(key) for key in keys]
        found = step
    return found


def definition_tables(text: str) -> list[list[dict]]:
    """Each markdown table whose header names paper.yaml, as rows keyed by header cell."""
    tables, lines = [], text.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("|") and "paper.yaml" in line and index + 1 < len(lines) and "---" in lines[index + 1]:
            header = [cell.strip() for cell in line.strip("|").split("|")]
            rows = []
            for body in lines[index + 2 :]:
                if not body.startswith("|"):
                    break
                rows.append(dict(zip(header, (cell.strip() for cell in body.strip("|").split("|")), strict=False)))
            tables.append(rows)
    return tables


def parsed(value: str):
    return yaml.safe_load(value)


def paper_column(row: dict) -> str:
    return next(cell for name, cell in row.items() if "paper.yaml" in name)


@pytest.mark.parametrize("path", STUDY_PAGES, ids=lambda path: path.stem)
def test_every_setting_a_definitions_table_gives_paper_yaml_is_paper_yamls(path):
    """In a table whose header names paper.yaml, a `key: value` in paper.yaml's column is
    what paper.yaml holds there, and the one in a `key` column (the other choice) is not."""
    checked = 0
    for table in definition_tables(path.read_text()):
        for row in table:
            for key, value in SETTING.findall(paper_column(row)):
                held = settings_at(PAPER, key)
                assert all(setting == parsed(value) for setting in held), (path.name, row, key, held)
                checked += 1
            for key, value in SETTING.findall(row.get("key", "")):
                held = settings_at(PAPER, key)
                assert all(setting != parsed(value) for setting in held), (path.name, row, key, held)
                checked += 1
    if definition_tables(path.read_text()):
        assert checked, f"{path.name}: a definitions table with no `key: value` to check"


def test_ruler_page_names_the_t_test_paper_yaml_selects():
    rows = [row for table in definition_tables(page("ruler")) for row in table if row["what"] == "t-test of lengths"]
    assert len(rows) == 1
    chosen = LENGTH_TTESTS.get(PAPER["ruler"].get("compat", DEFAULT_DEFINITION), "ruler.compat")
    assert paper_column(rows[0]).startswith(TTEST_NAMES[chosen.equal_var])
    other = LENGTH_TTESTS.get("original", "ruler.compat")
    assert rows[0]["the other choice"].startswith(TTEST_NAMES[other.equal_var])
    assert f"a t-test of answer lengths, ruler against vanilla ({TTEST_NAMES[chosen.equal_var]} by default" in flat(
        page("ruler")
    )


def test_ruler_page_names_the_baselines_and_the_doubled_bos_prompt_set_paper_yaml_asks():
    text, ruler = flat(page("ruler")), PAPER["ruler"]
    assert "the seed's ten other open models" in text and len(ruler["tlg_only"]) == 10
    assert set(ruler["tlg_only"]) <= set(ruler["baselines"])
    doubled = [e for e in ruler["evaluations"] if PAPER["promptsets"][e["promptset"]].get("prompt_bos") == "tokenizer"]
    assert [(e["promptset"], e["recipes"]) for e in doubled] == [("tlg_doubled_bos", ["pretrained"])]
    assert "(prompt set `tlg_doubled_bos`, rows marked `[prompt_bos=tokenizer]`)" in text


def test_gem_page_says_paper_yaml_scores_and_trains_by_the_original_definitions():
    header = next(line for line in page("gem").splitlines() if line.startswith("|") and "paper.yaml" in line)
    assert "`original`" in header
    for metric, settings in PAPER["metrics"].items():
        if metric in DEFINITIONS:
            assert settings.get("compat") == "original", metric
    study = PAPER["gem"]
    recipes = set(study["recipes"]).union(*study["recipes_by_base"].values())
    assert {PAPER["recipes"][recipe]["loss"]["compat"] for recipe in recipes} == {"original"}
    # The chat reward: the headline judge reads as evaluation_reward.py, the one beside at the
    # answer's end (the default).
    best_of_n = study["best_of_n"]
    assert PAPER["judges"][best_of_n["judge"]]["compat"] == "original"
    assert [PAPER["judges"][judge].get("compat", DEFAULT_DEFINITION) for judge in best_of_n["beside"]] == ["paper"]
    # IFEval: the suite's first task (the seed's columns) samples as the original did, greedy beside.
    sampled, greedy = PAPER["lm_eval_suites"][study["lm_eval_suite"]]["tasks"]
    assert sampled["gen_kwargs"] == {
        "do_sample": True,
        "temperature": 0.6,
        "top_p": 0.9,
        "top_k": 50,
        "max_gen_toks": 1024,
    }
    assert "gen_kwargs" not in greedy and sampled["task"] == greedy["task"] == "ifeval"
    row = next(line for line in page("gem").splitlines() if line.startswith("| IFEval"))
    assert (
        f"(`{sampled['name']}`, the suite's first task" in row
        and f"(`{greedy['name']}`, the `[{greedy['name']}]`" in row
    )
    row = next(line for line in page("gem").splitlines() if line.startswith("| Chat reward read-out"))
    assert f"(`{best_of_n['judge']}`)" in row and f"(`{best_of_n['beside'][0]}`" in row


def test_gem_page_gives_the_chat_sft_size_paper_yaml_builds():
    chats = PAPER["datasets"]["chat_sft"]
    # The whole split: its size, written so that the plan can price the finetunes on it.
    assert chats["sources"] == ["ultrafeedback_sft"] and chats["params"]["num"] == 61_135
    assert "all 61,135 chats of UltraFeedback's `train_sft` split" in flat(page("gem"))
    assert "66K UltraFeedback" not in flat(page("gem"))


def test_the_studies_index_names_the_judges_and_references_paper_yaml_uses():
    text = flat(page("index"))
    acting = successors(PAPER["judges"])
    benchmark, single_grade = PAPER["expo"]["benchmark_judge"], PAPER["expo"]["single_grade_judge"]
    assert f"AlpacaEval 2.0 from `{acting[benchmark]}`" in text
    assert f"MT-Bench from `{acting[single_grade]}`" in text
    references = PAPER["sources"]["mt_bench"]["released"]["files"]["reference_answers"]
    assert f"FastChat's GPT-4 reference answers (`{references}`" in text
    assert "HuggingFaceH4/mt_bench_prompts" not in text
    alignment_judge = PAPER["flr"]["alignment"]["judge"]
    assert f"judged by GPT-4 Turbo's successor (`{acting[alignment_judge]}`" in text


def test_the_studies_index_says_the_math_extra_is_installed():
    environment = (ROOT / "workflow" / "envs" / "evaluate.yaml").read_text()
    requirements = (ROOT / "requirements" / "base.txt").read_text()
    assert re.search(r"lm-eval\[[^\]]*\bmath\b", environment) and re.search(r"lm-eval\[[^\]]*\bmath\b", requirements)
    assert "its MATH Lvl 5 uses lm-eval's `math` extra" in flat(page("index"))
    assert "does not install" not in flat(page("index"))


def test_the_studies_index_says_the_v2_suite_runs_as_the_leaderboards_command():
    suite = PAPER["lm_eval_suites"][PAPER["expo"]["leaderboard_v2_suite"]]
    assert suite["apply_chat_template"] is True and suite["fewshot_as_multiturn"] is True
    assert "through the chat template with `fewshot_as_multiturn`, the leaderboard's documented command" in flat(
        page("index")
    )
