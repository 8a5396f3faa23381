"""One run per folder: a folder's results are recorded as its base config's, and a run of
another base config there is refused before its first job (a dry run warns)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from reprolm.config.run_folder import RECORD, base_config, other_run, record_run, refuse_other_run, run_files
from reprolm.errors import ConfigError
from workflow_helpers import REPO, SNAKEMAKE, scratch_copy, snakemake, snakemake_env, tree_state


def _write(path: Path, config: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def configs(tmp_path) -> Path:
    _write(tmp_path / "config" / "config.yaml", {"seed": 1})
    _write(tmp_path / "config" / "paper.yaml", {"seed": 2})
    _write(tmp_path / "variant.yaml", {"extends": "config/config.yaml", "seed": 3})
    _write(tmp_path / "variants" / "deeper.yaml", {"extends": "../variant.yaml", "seed": 4})
    _write(tmp_path / "mine.yaml", {"seed": 5})
    return tmp_path


def test_a_run_is_named_by_the_file_its_config_files_are_laid_on(configs):
    root = configs
    assert base_config([], root) == "config/config.yaml"
    assert base_config([root / "config" / "config.yaml"], root) == "config/config.yaml"
    assert base_config(["config/paper.yaml"], root) == "config/paper.yaml"
    # An overlay, and an overlay of an overlay, are the default's.
    assert base_config(["variant.yaml"], root) == "config/config.yaml"
    assert base_config([root / "variants" / "deeper.yaml"], root) == "config/config.yaml"
    assert run_files([root / "variants" / "deeper.yaml"], root) == [
        "variants/deeper.yaml",
        "variant.yaml",
        "config/config.yaml",
    ]
    # Several files without `extends`: Snakemake merges the others over the first.
    assert base_config(["config/config.yaml", "mine.yaml"], root) == "config/config.yaml"
    assert base_config(["mine.yaml", "variant.yaml"], root) == "config/config.yaml"
    # A file outside the folder is named by its whole path.
    outside = _write(root.parent / f"{root.name}-outside.yaml", {"seed": 6})
    assert base_config([outside], root) == str(outside.resolve())


def test_another_base_config_is_refused_where_a_run_is_recorded_and_overlays_are_not(configs):
    root = configs
    assert other_run(["config/paper.yaml"], root) is None  # nothing recorded yet
    record_run([], root)
    record = yaml.safe_load((root / RECORD).read_text())
    assert record == {"config": "config/config.yaml", "files": ["config/config.yaml"]}
    for same in (
        [],
        ["config/config.yaml"],
        ["variant.yaml"],
        ["variants/deeper.yaml"],
        ["config/config.yaml", "mine.yaml"],
    ):
        assert other_run(same, root) is None, same
        refuse_other_run(same, root)
    refusal = other_run(["config/paper.yaml"], root)
    assert refusal == (
        "results/run_config.yaml: this folder holds the results of config/config.yaml, which a run of "
        "config/paper.yaml would replace under the same names: run it in a folder of its own (`snakemake "
        "--directory DIR --configfile config/paper.yaml` with config/ copied to DIR; docs/configuration.md, "
        "One run per folder), or make it an overlay (`extends: config/config.yaml`) to change this run"
    )
    assert "\n" not in refusal
    with pytest.raises(ConfigError, match=re.escape(refusal)):
        refuse_other_run(["config/paper.yaml"], root)
    assert other_run(["mine.yaml"], root) is not None


def test_the_record_is_rewritten_only_when_it_changes(configs):
    root = configs
    record_run([], root)
    before = (root / RECORD).stat()
    record_run(["config/config.yaml"], root)
    assert (root / RECORD).stat().st_ino == before.st_ino and (root / RECORD).stat().st_mtime_ns == before.st_mtime_ns
    record_run(["variants/deeper.yaml"], root)
    record = yaml.safe_load((root / RECORD).read_text())
    assert record == {
        "config": "config/config.yaml",
        "files": ["variants/deeper.yaml", "variant.yaml", "config/config.yaml"],
    }
    assert list((root / "results").iterdir()) == [root / RECORD]  # no temporary left


def test_a_broken_record_is_named(configs):
    root = configs
    (root / "results").mkdir()
    (root / RECORD).write_text("- config/config.yaml\n")
    with pytest.raises(ConfigError, match=r"results/run_config\.yaml: expected `config: FILE`"):
        other_run([], root)


# The cheapest real job of the default config: a fixture source.
TARGET = "resources/raw/alpaca_eval"


@pytest.mark.workflow
@pytest.mark.slow
def test_snakemake_records_the_run_and_refuses_another_base_config_before_any_job(tmp_path):
    work = scratch_copy(tmp_path)
    snakemake(work, TARGET)
    assert yaml.safe_load((work / RECORD).read_text())["config"] == "config/config.yaml"
    # An overlay of the default changes this run: it runs, and the record names its files.
    variant = {"extends": "config/config.yaml", "sources": {"alpaca_eval": {"fixture": {"n": 12}}}}
    (work / "variant.yaml").write_text(yaml.safe_dump(variant))
    rerun = snakemake(work, TARGET, "--configfile", "variant.yaml")
    assert "Finished jobid" in rerun.stdout + rerun.stderr
    assert yaml.safe_load((work / RECORD).read_text()) == {
        "config": "config/config.yaml",
        "files": ["variant.yaml", "config/config.yaml"],
    }
    before = tree_state(work, ("results", "resources"))
    # paper.yaml: a dry run shows its DAG and says a real run would be refused ...
    dry = snakemake(work, "-n", "--configfile", "config/paper.yaml")
    dry_output = dry.stdout + dry.stderr
    assert "results/run_config.yaml: this folder holds the results of config/config.yaml" in dry_output
    assert "a real run is refused before its first job" in dry_output
    assert re.search(r"^total\s+\d{4,}$", dry_output, re.M)
    # ... and a real run is refused before any job, its one-line reason last but the trace.
    refused = snakemake(work, TARGET, "--configfile", "config/paper.yaml", check=False)
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0
    assert re.search(
        r"^results/run_config\.yaml: this folder holds the results of config/config\.yaml, which a run of "
        r"config/paper\.yaml would replace under the same names: .*`extends: config/config\.yaml`\) to change "
        r"this run$",
        output,
        re.M,
    ), output[-3000:]
    assert "Finished jobid" not in output
    assert tree_state(work, ("results", "resources")) == before


# docs/configuration.md, "One run per folder": the commands as printed there.
DOCS_COMMANDS = re.compile(r"## One run per folder\n.*?```bash\n(.*?)```", re.S)


@pytest.mark.workflow
@pytest.mark.slow
@pytest.mark.doc_command("mkdir -p ../reprolm-paper && cp -r config ../reprolm-paper/")
@pytest.mark.doc_command("snakemake -n --directory ../reprolm-paper --configfile config/paper.yaml")
def test_the_docs_commands_run_another_config_in_a_folder_of_its_own(tmp_path):
    commands = DOCS_COMMANDS.search((REPO / "docs" / "configuration.md").read_text()).group(1)
    work = scratch_copy(tmp_path / "reprolm")
    record_run([], work)
    env = snakemake_env(work)
    env["PATH"] = f"{Path(SNAKEMAKE).parent}{os.pathsep}{env['PATH']}"
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", commands], cwd=work, env=env, capture_output=True, text=True, timeout=900
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "run_config.yaml" not in output
    assert re.search(r"^download_base_model\s+\d+$", output, re.M), output[-3000:]  # the paper DAG
    assert sorted(path.name for path in (tmp_path / "reprolm-paper").iterdir()) == [".snakemake", "config", "resources"]
    assert yaml.safe_load((work / RECORD).read_text())["config"] == "config/config.yaml"
