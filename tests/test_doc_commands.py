"""Every command README.md and docs/ print in a fenced shell block is run by a test exactly as
printed (tests/doc_commands.py): each such test carries ``@pytest.mark.doc_command(...)``,
read here from the test sources (ast, nothing imported). The few that cannot run here are
listed in NOT_RUN_AS_PRINTED with the reason and the test of their closest form, and reported
as a warning by every run of this module. The commands no other module runs are run below, on
a copy of the session's default run."""

from __future__ import annotations

import ast
import datetime as dt
import json
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest
import yaml

from doc_commands import VENV_BIN, printed_commands, run_printed, without_comment
from reprolm.provenance import content_hash
from workflow_helpers import REPO, scratch_copy

TESTS = REPO / "tests"

# command as printed -> (why it is not run as printed here, the test that runs its closest form)
NOT_RUN_AS_PRINTED = {
    "make test": (
        "it is the whole suite, which this test is part of; CI runs it (.ci/run)",
        "tests/test_install.py::test_make_run_needs_no_root_and_no_system_package",
    ),
    "make setup-gpu && make slurm-profile": (
        "`make setup-gpu` installs CUDA wheels from the package index: no GPU and no index here",
        "tests/test_gpu_smoke.py::test_the_readme_command_runs_every_step_on_the_cpu",
    ),
    "reprolm rehearse --configfile config/paper.yaml --profile slurm --stand-in --sizes": (
        "its stand-ins fetch each hub model family's config and tokenizer (no hub here: the test "
        "gives --hub-mirror), and one job per rule x family x request of paper.yaml is more SLURM "
        "jobs than the 2-core test cluster runs in a test (the test stands in generate and score)",
        "tests/test_rehearse.py::test_stand_in_run_of_each_family_and_class_through_the_profile",
    ),
    "snakemake --profile slurm --configfile config/paper.yaml": (
        "it submits the papers' GPU jobs to a real cluster (gated hub downloads first); the test "
        "cluster runs the same profile by name on a dry run of paper.yaml",
        "tests/test_paper_dag.py::test_profile_slurm_as_typed_asks_for_every_cpu_the_config_gives",
    ),
}


def _string(node: ast.expr, constants: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def marked_commands(folder: Path = TESTS) -> dict[str, list[str]]:
    """command -> the tests (``file::function``) whose ``doc_command`` marker names it; an
    argument may be a string or a module-level string constant."""
    marked: dict[str, list[str]] = {}
    for source in sorted(folder.rglob("*.py")):
        tree = ast.parse(source.read_text(), filename=str(source))
        constants = {
            target.id: node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for decorator in function.decorator_list:
                if (
                    isinstance(decorator, ast.Call)
                    and isinstance(decorator.func, ast.Attribute)
                    and decorator.func.attr == "doc_command"
                ):
                    name = f"{source.relative_to(REPO).as_posix()}::{function.name}"
                    for argument in decorator.args:
                        command = _string(argument, constants)
                        assert command is not None, (
                            f"{name}: doc_command takes the command's text, got {ast.dump(argument)}"
                        )
                        marked.setdefault(command, []).append(name)
    return marked


def _test_exists(name: str) -> bool:
    path, function = name.split("::")
    tree = ast.parse((REPO / path).read_text())
    return any(isinstance(node, ast.FunctionDef) and node.name == function for node in ast.walk(tree))


def test_printed_commands_are_the_fenced_shell_lines_without_prompts_or_comments(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "Text `reprolm verify` inline.\n\n```bash\nreprolm verify   # re-hash\n\nmake run\n```\n\n"
        "```yaml\nkey: value  # not a command\n```\n\n```console\n$ snakemake -n \\\n    --configfile 'a #b.yaml'\n```\n"
        "```\nworkflow/   a layout, not a command\n```\n"
    )
    assert [(c.line, c.command) for c in printed_commands([page])] == [
        (4, "reprolm verify"),
        (6, "make run"),
        (14, "snakemake -n --configfile 'a #b.yaml'"),
    ]
    assert without_comment("echo a#b # c") == "echo a#b"


def test_every_printed_command_is_run_by_a_test_as_printed():
    marked = marked_commands()
    missing = [
        f"{printed.page}:{printed.line}: {printed.command}"
        for printed in printed_commands()
        if printed.command not in marked and printed.command not in NOT_RUN_AS_PRINTED
    ]
    assert missing == [], (
        "commands printed in README.md/docs that no test runs as printed (add a test marked "
        "@pytest.mark.doc_command(COMMAND) that runs doc_commands.run_printed(COMMAND, ...)):\n" + "\n".join(missing)
    )


def test_every_marked_or_listed_command_is_still_printed():
    printed = {command.command for command in printed_commands()}
    stale = [
        f"{test}: {command}" for command, tests in marked_commands().items() if command not in printed for test in tests
    ]
    stale += [f"NOT_RUN_AS_PRINTED: {command}" for command in NOT_RUN_AS_PRINTED if command not in printed]
    assert stale == [], "commands no page prints any more:\n" + "\n".join(stale)


@pytest.mark.parametrize("command", sorted(NOT_RUN_AS_PRINTED))
def test_a_command_not_run_as_printed_is_reported_with_its_closest_test(command):
    reason, closest = NOT_RUN_AS_PRINTED[command]
    assert command not in marked_commands(), f"`{command}` is run as printed by a test: take it off the list"
    assert _test_exists(closest), f"`{command}`: no test {closest}"
    warnings.warn(f"not run as printed: `{command}`: {reason}; closest form: {closest}", stacklevel=1)


# --- the commands of docs/provenance.md and docs/studies/expo.md, on a copy of the default run ---

LINEAGE_TREE = "reprolm lineage results/tables/gem"
LINEAGE_JSON = "reprolm lineage results/tables/gem --json"
LINEAGE_FILE = "reprolm lineage results/tables/ruler/tlg_levels.csv"
VERIFY = "reprolm verify"
COST = "reprolm cost results/tables/gem"
COST_JSON = "reprolm cost results/models/tiny_llama/ruler --json"
PROGRESS = "reprolm progress --since 2h"
EXPO_SFT = "snakemake --cores 2 results/models/tiny_llama/sft+expo0.5"
EXPO_DPO = "snakemake --cores 2 results/models/tiny_llama/dpo+expo0.5"
MAKE_RUN = "make run"


def _ran(command: str, folder: Path) -> str:
    result = run_printed(command, folder)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"`{command}` exited {result.returncode}:\n{output[-4000:]}"
    return result.stdout


@pytest.mark.slow
@pytest.mark.doc_command(LINEAGE_TREE)
@pytest.mark.doc_command(LINEAGE_JSON)
@pytest.mark.doc_command(LINEAGE_FILE)
def test_the_lineage_commands_as_printed(run_copy):
    tree = _ran(LINEAGE_TREE, run_copy).splitlines()
    assert tree[0].startswith("results/tables/gem  [rule study_tables study=gem]"), tree[:3]
    assert any("resources/raw/ultrafeedback_sft  [rule raw_source" in line for line in tree)
    graph = json.loads(_ran(LINEAGE_JSON, run_copy))
    assert graph["root"] == "results/tables/gem"
    assert graph["artifacts"]["results/models/tiny_llama/ce"]["sha256"] == content_hash(
        run_copy / "results/models/tiny_llama/ce"
    )
    # A file of a recorded folder: the folder's lineage.
    ruler = _ran(LINEAGE_FILE, run_copy).splitlines()
    assert ruler[0].startswith("results/tables/ruler/tlg_levels.csv  sha256 "), ruler[:3]
    assert ruler[0].endswith("(in results/tables/ruler, whose record follows)"), ruler[:3]
    assert ruler[1].startswith("└── results/tables/ruler  [rule study_tables study=ruler]"), ruler[:3]
    assert any(
        "results/models/tiny_llama/ruler  [rule finetune base=tiny_llama recipe=ruler]" in line for line in ruler
    )


@pytest.mark.slow
@pytest.mark.doc_command(VERIFY)
def test_verify_as_printed_finds_every_record_true_and_a_changed_file(run_copy):
    verified = run_printed(VERIFY, run_copy)
    output = verified.stdout + verified.stderr
    assert verified.returncode == 0 and re.search(r"^\d{3,} records checked, 0 problems$", output, re.M), output[-3000:]
    # A score replaced (not rewritten in place: its hard link to the shared run is cut).
    score = "results/scores/diversity/tiny_llama/ce/poems.json"
    edited = json.loads((run_copy / score).read_text())
    edited["distinct"] = 99.0
    (run_copy / score).unlink()
    (run_copy / score).write_text(json.dumps(edited))
    changed = run_printed(VERIFY, run_copy)
    assert changed.returncode == 1
    assert f"{score}: modified after it was made" in changed.stdout.splitlines(), changed.stdout[-3000:]


@pytest.mark.slow
@pytest.mark.doc_command(COST)
@pytest.mark.doc_command(COST_JSON)
def test_the_cost_commands_as_printed(run_copy):
    table = _ran(COST, run_copy)
    assert re.search(r"^\s*total\s", table, re.M), table
    assert re.search(r"^results/tables/gem cost [\d.]+ GPU-hours", table.splitlines()[-1]), table[-500:]
    rows = {row["stage"]: row for row in json.loads(_ran(COST_JSON, run_copy))}
    # The model's lineage: its tokenizer and base model, its dataset's sources and build, its finetune.
    assert {"pretrain", "finetune", "total"} <= set(rows)
    assert rows["finetune"]["jobs"] == 1 and rows["total"]["GPU hours"] == 0
    assert rows["total"]["CPU hours"] > rows["finetune"]["CPU hours"] > 0


@pytest.mark.slow
@pytest.mark.doc_command(PROGRESS)
def test_progress_as_printed_lists_the_jobs_of_the_last_two_hours(run_copy):
    started = dt.datetime.now().astimezone()
    lines = _ran(PROGRESS, run_copy).splitlines()
    recent = set()
    for record in [
        *(run_copy / "results").rglob("*provenance.json"),
        *(run_copy / "resources").rglob("*provenance.json"),
    ]:
        content = json.loads(record.read_text())
        if dt.datetime.fromisoformat(content["finished"]) > started - dt.timedelta(hours=2, minutes=-1):
            recent.add((content["rule"], ",".join(f"{k}={v}" for k, v in content["wildcards"].items())))
    *jobs, total = lines
    listed = {(words[2], words[3] if len(words) > 3 else "") for words in map(str.split, jobs)}
    # Every job of the run that finished since then, each done, none twice, and their count.
    assert recent <= listed and len(listed) == len(jobs), jobs[:10]
    assert all(line.split()[0] == "done" for line in jobs), jobs[:10]
    assert total == f"{len(jobs)} done", total


@pytest.mark.slow
@pytest.mark.doc_command(EXPO_SFT)
@pytest.mark.doc_command(EXPO_DPO)
def test_the_expo_commands_as_printed_build_the_extrapolated_models(default_run, run_copy):
    for command in (EXPO_SFT, EXPO_DPO):
        model = command.split()[-1]
        # The model removed from the copy (its files are hard links to the shared run's).
        shutil.rmtree(run_copy / model)
        result = run_printed(command, run_copy)
        output = result.stdout + result.stderr
        assert result.returncode == 0 and re.search(r"^extrapolate\s+1$", output, re.M), output[-3000:]
        assert re.search(r"^total\s+1$", output, re.M), output[-3000:]
        # The same weights as the default run's: the extrapolation is deterministic.
        weights = sorted(path.name for path in (default_run / model).glob("*.safetensors"))
        assert weights and weights == sorted(path.name for path in (run_copy / model).glob("*.safetensors"))
        for name in weights:
            assert (run_copy / model / name).read_bytes() == (default_run / model / name).read_bytes(), name


@pytest.mark.slow
@pytest.mark.doc_command(MAKE_RUN)
def test_make_run_as_printed_in_a_finished_run_writes_the_report(run_copy):
    """`make run` in a copy of the session's default run (made by the Snakemake command `make
    run` runs): `make setup` finds the suite's venv installed, Snakemake nothing to do, and the
    report is written."""
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(REPO / name, run_copy / name)
    for name in ("requirements", "scripts"):
        shutil.copytree(REPO / name, run_copy / name)
    (run_copy / ".venv").symlink_to(VENV_BIN.parent)
    # Never an install into the suite's own venv: it must be the one this checkout's lock made.
    setup = subprocess.run(["make", "-n", "setup"], cwd=run_copy, capture_output=True, text=True, check=True)
    assert "Nothing to be done for 'setup'" in setup.stdout, (
        f"{VENV_BIN.parent} is not set up from this lock: `make setup`"
    )
    report = run_copy / "results/report.html"
    assert not report.exists()
    result = run_printed(MAKE_RUN, run_copy, timeout=1200)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "Nothing to be done for 'setup'" not in output  # a prerequisite up to date is silent
    assert len(re.findall(r"Nothing to be done \(all requested files", output)) == 1, output[-4000:]
    assert report.stat().st_size > 100_000


# --- docs/cluster.md's rehearsal, on the test SLURM cluster ---

REHEARSE = "reprolm rehearse --configfile my-paper.yaml --profile slurm"
# A researcher's config as docs/cluster.md has them write it: paper.yaml with the cluster's
# routing (step 4), here the test cluster's rehearsal partitions (tests/slurm_cluster.py).
MY_PAPER = {
    "extends": "config/paper.yaml",
    "resources": {
        "default": {"slurm_partition": "gpu_a100", "gpu_model": "a100"},
        "extrapolate": {"slurm_partition": "cpu_long"},
    },
    # LM-Harmony's 14B train-before-test asks for more time than gpu_a100 gives.
    "base_models": {
        "qwen2_5_14b": {"resources": {"train_before_test": {"slurm_partition": "gpu_h100", "gpu_model": "h100"}}}
    },
}


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.doc_command(REHEARSE)
def test_the_rehearsal_as_printed_judges_every_request_through_the_profile_named_slurm(slurm_cluster, tmp_path):
    """The profile by name, as `make slurm-profile` registers it (in a Snakemake config folder
    of the test's own), and the config beside the workflow."""
    work = scratch_copy(tmp_path / "work")
    (work / "my-paper.yaml").write_text(yaml.safe_dump(MY_PAPER))
    xdg = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    registered = run_printed("make slurm-profile", REPO, env=xdg)
    assert registered.returncode == 0 and registered.stdout.strip() == "slurm", registered.stderr
    result = run_printed(REHEARSE, work, env={**xdg, **slurm_cluster.env}, timeout=580)
    out = result.stdout
    assert out.startswith("Submissions: every distinct sbatch request"), out[-3000:] + result.stderr[-3000:]
    rows = [line.split() for line in out.splitlines()[2:] if re.match(r"^\s*\w+\s+\d+\s", line)]
    judged = [row for row in rows if "sized at run time" not in " ".join(row)]
    # Each request went through profiles/slurm, found by its name (its `slurm-requeue: true`),
    # with the config's routing, and the cluster judged it.
    assert judged and all("--requeue" in row for row in judged), "\n".join(map(" ".join, judged))
    assert {row[2] for row in judged if row[0] == "finetune"} == {"gpu_a100"}, judged
    assert sum("accepted" in row for row in judged) > len(judged) / 2, "\n".join(map(" ".join, judged))
    # Its verdict: ready (exit 0), or what will fail (exit 1).
    verdict = "ready" if result.returncode == 0 else "not ready:"
    assert result.returncode in (0, 1) and re.search(rf"^{verdict}", out, re.M), out[-3000:]
