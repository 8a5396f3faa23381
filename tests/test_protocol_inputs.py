"""Protocol inputs pinned and computed with the field's libraries: FastChat's MT-Bench files
at one commit, Holm through statsmodels, PCA through scikit-learn, lm-eval through its
public API only."""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from reprolm.aggregate.uncertainty import holm, unit_draws
from reprolm.data.released_ratings import FASTCHAT_COMMIT, missing_released_files
from reprolm.data.sources import read_source, write_source
from reprolm.data.upstream import MT_BENCH_PROMPTS
from reprolm.studies.harmony.rankings import _drawn_pc1_share, pc1_share

ROOT = Path(__file__).resolve().parents[1]
FASTCHAT = ROOT / "config/reference/fastchat"
PAPER_SOURCES = yaml.safe_load((ROOT / "config/paper.yaml").read_text())["sources"]
# A Python import of a module or name that lm-eval marks private (a leading underscore).
PRIVATE_LM_EVAL_IMPORT = re.compile(
    r"from lm_eval[\w.]*\._\w|from lm_eval[\w.]* import .*\b_\w|lm_eval\.[\w.]*\._[a-z]"
)


def git_blob_id(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def recorded_blobs() -> dict[str, str]:
    """``file here -> git blob id`` from the README's table."""
    rows = re.findall(r"^\| `([^`]+)` \| `[^`]+` \| ([0-9a-f]{40}) \|$", (FASTCHAT / "README.md").read_text(), re.M)
    return dict(rows)


def paper_source(name: str) -> dict:
    return {"name": name, **PAPER_SOURCES[name]}


def test_fastchat_files_are_the_pinned_commit_s_bytes_under_its_licence():
    readme = (FASTCHAT / "README.md").read_text()
    assert FASTCHAT_COMMIT in readme
    blobs = recorded_blobs()
    assert sorted(blobs) == [
        "LICENSE",
        "judge_prompts.jsonl",
        "mt_bench/question.jsonl",
        "mt_bench/reference_answer/gpt-4.jsonl",
    ]
    assert {name: git_blob_id(FASTCHAT / name) for name in blobs} == blobs
    assert (FASTCHAT / "LICENSE").read_text().lstrip().startswith("Apache License\n")


def test_paper_reads_mt_bench_and_its_judge_prompts_from_the_pinned_files():
    assert PAPER_SOURCES["fastchat_judge_prompts"]["files"] == {
        "train": "config/reference/fastchat/judge_prompts.jsonl"
    }
    assert PAPER_SOURCES["mt_bench"]["released"] == {
        "format": "fastchat_mt_bench",
        "files": {
            "questions": "config/reference/fastchat/mt_bench/question.jsonl",
            "reference_answers": "config/reference/fastchat/mt_bench/reference_answer/gpt-4.jsonl",
        },
    }
    assert "raw.githubusercontent.com/lm-sys/FastChat/main" not in (ROOT / "config/paper.yaml").read_text()


def test_mt_bench_questions_carry_gpt4_s_reference_answers(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert write_source(paper_source("mt_bench"), tmp_path / "mt_bench") == {"train": 80}
    rows = {row["prompt_id"]: row for row in read_source(tmp_path / "mt_bench", "mt_bench_prompts")}
    assert sorted(rows) == list(range(81, 161))
    referenced = {question for question, row in rows.items() if len(row["reference"])}
    # FastChat's GPT-4 references: every math, reasoning and coding question, two turns each.
    assert referenced == {q for q, row in rows.items() if row["category"] in {"math", "reasoning", "coding"}}
    assert len(referenced) == 30 and all(len(rows[q]["reference"]) == 2 for q in referenced)
    first = MT_BENCH_PROMPTS.instruction(rows[101])
    assert first["category"] == "reasoning" and len(first["turns"]) == 2
    # GPT-4's answer, not question.jsonl's short "You are in second place."
    assert first["reference_answers"][0].startswith("If you have just overtaken the second person")
    # question.jsonl's own references on other categories (stem, extraction) are not read.
    assert rows[142]["reference"] == [] and rows[142]["category"] == "stem"


def test_judge_prompts_source_reads_fastchat_s_eight_prompts(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert write_source(paper_source("fastchat_judge_prompts"), tmp_path / "prompts") == {"train": 8}
    names = [row["name"] for row in read_source(tmp_path / "prompts", "fastchat_judge_prompts")]
    assert {"single-v1", "single-math-v1", "single-v1-multi-turn", "single-math-v1-multi-turn"} <= set(names)


def test_a_missing_fastchat_file_is_refused_with_its_url_at_the_commit(tmp_path):
    spec = {
        "schema": "mt_bench_prompts",
        "released": {
            "format": "fastchat_mt_bench",
            "files": {
                "questions": str(tmp_path / "question.jsonl"),
                "reference_answers": str(tmp_path / "gpt-4.jsonl"),
            },
        },
    }
    [questions, references] = missing_released_files("mt_bench", spec)
    commit_url = (
        f"https://raw.githubusercontent.com/lm-sys/FastChat/{FASTCHAT_COMMIT}/fastchat/llm_judge/data/mt_bench/"
    )
    assert commit_url + "question.jsonl" in questions
    assert commit_url + "reference_answer/gpt-4.jsonl" in references


def test_holm_leaves_untested_claims_out_of_the_family():
    # Three tested claims (the nans are not counted): 0.02 x 3 for both ties, 0.3 x 1.
    assert holm([0.02, math.nan, 0.02, 0.3, math.nan]) == pytest.approx(
        [0.06, math.nan, 0.06, 0.3, math.nan], nan_ok=True
    )
    assert holm([math.nan]) == pytest.approx([math.nan], nan_ok=True)
    assert holm([]) == []


def test_bootstrap_pc1_share_in_numpy_equals_scikit_learn_s():
    rng = np.random.default_rng(7)
    values = rng.normal(size=(12, 5)) + rng.normal(size=(12, 1))
    values[3, 2] = np.nan  # an incomplete model, left out as pc1_share leaves it out
    matrix = pd.DataFrame(values, columns=list("abcde"))
    assert _drawn_pc1_share(values) == pytest.approx(pc1_share(matrix), abs=1e-12)
    for rows in unit_draws(list(matrix.index), 20):
        assert _drawn_pc1_share(values[rows]) == pytest.approx(pc1_share(matrix.iloc[rows]), abs=1e-12, nan_ok=True)


def test_src_imports_nothing_private_of_lm_eval():
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / "src").rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if PRIVATE_LM_EVAL_IMPORT.search(line)
    ]
    assert offenders == []
    assert PRIVATE_LM_EVAL_IMPORT.search("    from lm_eval.tasks._yaml_loader import load_yaml")
    assert PRIVATE_LM_EVAL_IMPORT.search("from lm_eval.tasks import _yaml_loader")
    assert not PRIVATE_LM_EVAL_IMPORT.search("from lm_eval.utils import import_function")


@pytest.mark.parametrize("task", ["arc_challenge", "truthfulqa_mc2"])
def test_builtin_task_config_is_lm_eval_s_own(task):
    # lm-eval's private loader as the reference the public route must agree with (arc_challenge
    # includes arc_easy's YAML; truthfulqa_mc2 includes mc1's and names a !function).
    from lm_eval.tasks._yaml_loader import load_yaml

    from reprolm.score.lm_eval_bridge import builtin_task_config, task_manager

    def comparable(config: dict) -> str:
        # Each import of a task's module makes new function objects, under another module
        # name: compare them by the file defining them and their name.
        return json.dumps(
            config, sort_keys=True, default=lambda value: f"{value.__code__.co_filename}:{value.__qualname__}"
        )

    ours = builtin_task_config(task)
    assert comparable(ours) == comparable(load_yaml(task_manager().task_index[task].yaml_path, resolve_func=True))
    assert "include" not in ours
    assert (task == "truthfulqa_mc2") == callable(ours.get("process_results"))
