"""reprolm impact: what a config change, a --config override and a code edit rerun, why and
at what cost, before anything runs (real Snakemake DAGs of the default config, in a scratch
copy of the workflow)."""

from __future__ import annotations

import copy
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from default_config import DEFAULT, GEM
from reprolm.cli import main
from reprolm.data.builders import BUILDERS
from reprolm.generate.prompts import PROMPT_BUILDERS
from reprolm.impact import impact, job_states, reruns, tree_at
from reprolm.score.metrics import METRICS
from workflow_helpers import REPO, scratch_copy

pytestmark = pytest.mark.workflow

SUMMARY = re.compile(
    r"^retrains (\d+) models, regenerates (\d+) prompt sets, rescores (\d+) score jobs: (\d+\.\d) GPU-h "
    r"\((\d+) jobs, about [\d.e-]+ h of wall time on 8 h100 GPUs\)$"
)
RULE_LINE = re.compile(r"^  (\w+)\s+(\d+) jobs\s+([\d.]+) GPU-h\s+([\d.]+) h  (.*)$")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return scratch_copy(tmp_path_factory.mktemp("impact"))


def _printed(capsys, *argv) -> tuple[re.Match, dict[str, re.Match]]:
    assert main(list(argv)) == 0
    lines = capsys.readouterr().out.splitlines()
    summary = SUMMARY.match(lines[0])
    assert summary, lines[0]
    rules = {match.group(1): match for match in map(RULE_LINE.match, lines[2:])}
    assert None not in rules and len(rules) == len(lines) - 2, lines
    return summary, rules


def _ruler_length_scores(metrics) -> set:
    ruler = DEFAULT["ruler"]
    return {
        (e["metric"], base, recipe)
        for e in ruler["evaluations"]
        if e["metric"] in metrics
        for base in ruler["bases"]
        for recipe in e.get("recipes", ruler["recipes"])
    }


def test_moving_a_length_window_rescores_only_the_length_scores_that_read_it(folder, capsys):
    """The issue's edit: the lower edge of Ruler's open-ended window (PM and FM) moves."""
    targets = copy.deepcopy(DEFAULT["length_targets"])
    targets[-1]["pm"][0] = targets[-1]["fm"][0] = targets[-1]["pm"][0] - 10
    (folder / "window.yaml").write_text(yaml.safe_dump({"extends": "config/config.yaml", "length_targets": targets}))
    summary, rules = _printed(capsys, "--root", str(folder), "impact", "--configfile", "window.yaml")
    # length_levels reads PM and FM, length_multi_mlt computes both, length_self_mlt FM.
    scores = _ruler_length_scores({"length_levels", "length_multi_mlt", "length_self_mlt"})
    assert summary.groups()[:4] == ("0", "0", str(len(scores)), "0.0")
    assert rules["score"].group(2) == str(len(scores)) and rules["score"].group(5) == f"params {len(scores)}"
    assert rules["study_tables"].group(5) == "params 1"  # Ruler's tables read the windows
    assert not {"dataset", "finetune", "generate", "extrapolate", "grade", "lm_eval"} & set(rules)
    found = impact(folder, "window.yaml")
    assert {
        (j.state.wildcards["metric"], j.state.wildcards["base"], j.state.wildcards["recipe"])
        for j in found.found
        if j.state.rule == "score"
    } == scores
    assert {j.state.wildcards["study"] for j in found.found if j.state.rule == "study_tables"} == {"ruler"}
    assert int(summary.group(5)) == len(found.found) == sum(int(m.group(2)) for m in rules.values())


def test_a_config_override_rescores_the_sampled_answers_only(folder, capsys):
    summary, rules = _printed(capsys, "--root", str(folder), "impact", "--config", "metrics.answer_voting.ks=[1, 8]")
    recipes = len(GEM["recipes"])
    assert summary.groups()[:4] == ("0", "0", str(recipes), "0.0")
    assert rules["score"].group(5) == f"params {recipes}"
    assert rules["study_tables"].group(5) == "upstream 1"  # GEM's tables read the scores, not ks
    assert set(rules) == {
        "score",
        "study_tables",
        "table_pages",
        "paper_comparison",
        "paper_comparison_pages",
        "headline_summary",
        "study_cost",
        "cost_page",
        "provenance_index",
        "provenance_page",
    }


def test_a_recipe_override_retrains_and_costs_gpu_hours(folder, capsys):
    """A DPO beta: the DPO model, what is made from it, on the plan's cost model."""
    summary, rules = _printed(capsys, "--root", str(folder), "impact", "--config", "recipes.dpo.beta=0.2")
    assert rules["finetune"].group(2) == "1" and rules["finetune"].group(5) == "params 1"
    assert rules["extrapolate"].group(5) == f"upstream {rules['extrapolate'].group(2)}"
    assert int(summary.group(1)) == 1 + int(rules["extrapolate"].group(2))
    assert int(summary.group(2)) == int(rules["generate"].group(2)) > 0
    assert "dataset" not in rules


def test_a_key_the_config_does_not_have_is_refused(folder, capsys):
    assert main(["--root", str(folder), "impact", "--config", "recipes.nope.beta=0.2"]) == 2
    assert (
        capsys.readouterr().err.strip()
        == "reprolm impact: --config 'recipes.nope.beta=0.2': the config has no recipes.nope"
    )


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    """A scratch copy of the workflow with its package, committed to a git repository."""
    work = scratch_copy(tmp_path_factory.mktemp("impact_code"))
    shutil.copytree(REPO / "src", work / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "workflow", "config", "src"], check=True)
    subprocess.run([*git, "commit", "-qm", "the workflow"], check=True)
    return work


def _edited(repository, relative: str, old: str, new: str):
    path = repository / relative
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))
    return text


def test_editing_a_metric_rescores_its_score_jobs_and_the_tables_above_them(repository, capsys):
    original = _edited(
        repository,
        "src/reprolm/score/metrics.py",
        '        **length.self_generated_scores([r["text"] for r in rows], _targets(context)),\n',
        '        **length.self_generated_scores([r["text"].strip() for r in rows], _targets(context)),\n',
    )
    try:
        summary, rules = _printed(capsys, "--root", str(repository), "impact", "--rev", "HEAD")
    finally:
        (repository / "src/reprolm/score/metrics.py").write_text(original)
    scores = _ruler_length_scores({"length_self_mlt"})
    assert summary.groups()[:4] == ("0", "0", str(len(scores)), "0.0")
    assert rules["score"].group(5) == f"code {len(scores)}"
    assert rules["study_tables"].group(5) == "upstream 1"
    assert not {"dataset", "finetune", "generate", "grade"} & set(rules)


# docs/cli.md, "What a change will rerun": the commands as printed there.
DOCS_COMMANDS = re.compile(r"## What a change will rerun\n.*?```bash\n(.*?)```", re.S)


WINDOW_EDIT = "reprolm impact --config 'length_targets.5.pm=[190, null]' 'length_targets.5.fm=[190, null]'"
BETA_EDIT = "reprolm impact --config recipes.dpo.beta=0.2"
AGAINST_HEAD = "reprolm impact --rev HEAD"


@pytest.mark.doc_command(WINDOW_EDIT)
@pytest.mark.doc_command(BETA_EDIT)
@pytest.mark.doc_command(AGAINST_HEAD)
def test_the_docs_commands_say_what_they_rerun(repository):
    commands = DOCS_COMMANDS.search((REPO / "docs" / "cli.md").read_text()).group(1).strip().splitlines()
    assert commands == [WINDOW_EDIT, BETA_EDIT, AGAINST_HEAD]
    env = {**os.environ, "PYTHONPATH": str(repository / "src")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    printed = []
    for command in commands:
        result = subprocess.run(["bash", "-c", command], cwd=repository, env=env, capture_output=True, text=True)
        assert result.returncode == 0, (command, result.stderr[-3000:])
        printed.append(result.stdout.splitlines())
    window, beta, clean = printed
    assert SUMMARY.match(window[0]).groups()[:2] == ("0", "0")
    assert {RULE_LINE.match(line).group(1) for line in window[2:]} >= {"score", "study_tables"}
    assert int(SUMMARY.match(beta[0]).group(1)) > 0
    # The tree is its revision: nothing reruns.
    assert SUMMARY.match(clean[0]).group(5) == "0" and clean[1:] == ["nothing reruns"]


@pytest.fixture(scope="module")
def committed(repository, tmp_path_factory):
    """The jobs of the repository's committed revision, read once with its own package."""
    tree = tree_at(repository, "HEAD", tmp_path_factory.mktemp("head"))
    return job_states(tree, package=tree)


def _entry(kind: str, name: str):
    from reprolm.studies import STUDIES

    registries = {"builder": BUILDERS, "prompt kind": PROMPT_BUILDERS, "metric": METRICS}
    return STUDIES[name].table_writer() if kind == "tables" else registries[kind][name]


# One edit per stage: a registered entry's function gains a parameter (its code changes, what
# it computes does not), and exactly the jobs that run it rerun by their code; the rest of
# the rerun set comes after them.
STAGE_EDITS = [
    ("builder", "ruler_multi_mlt", "dataset", lambda w: w["dataset"] == "arena_multi_mlt"),
    ("prompt kind", "self_length", "generate", lambda w: w["promptset"] == "self_mlt"),
    ("metric", "length_self_mlt", "score", lambda w: w["metric"] == "length_self_mlt"),
    ("tables", "gem", "study_tables", lambda w: w["study"] == "gem"),
]


@pytest.mark.parametrize(("kind", "name", "rule", "runs_it"), STAGE_EDITS, ids=[e[0] for e in STAGE_EDITS])
def test_editing_an_entry_reruns_by_code_exactly_the_jobs_that_run_it(repository, committed, kind, name, rule, runs_it):
    function = inspect.unwrap(_entry(kind, name))
    relative = Path(inspect.getsourcefile(function)).resolve().relative_to(REPO / "src")
    text = (repository / "src" / relative).read_text()
    signature = re.compile(rf"^(\s*def {function.__name__}\([^)]*)\)", re.M)
    assert len(signature.findall(text)) == 1, (relative, function.__name__)
    (repository / "src" / relative).write_text(signature.sub(r"\1, _edited=None)", text))
    try:
        edited = job_states(repository, package=repository)
    finally:
        (repository / "src" / relative).write_text(text)
    found = reruns(committed.states, edited.states)
    by_code = {job.key for job in found if "code" in job.reasons}
    expected = {key for key, state in edited.states.items() if state.rule == rule and runs_it(state.wildcards)}
    assert expected and by_code == expected
    assert all(job.reasons == ["upstream"] for job in found if job.key not in expected)
    if kind in ("metric", "tables"):
        assert not {"dataset", "finetune", "generate", "grade"} & {job.state.rule for job in found}
