"""reprolm is a package: ``pip install -e .`` into a clean environment installs what it declares
(pyproject.toml reads requirements/base.txt), and that is enough for the ``reprolm`` command and a
dry run of the embedded default.

The environment is new; the packages come from the installer's cache (uv's where uv is there, as
``make setup`` does, with requirements/overrides.txt; else pip's) at the CPU lock's versions,
torch's CPU build from where requirements/torch-cpu-wheels.sh says. With uv's cache filled it
takes about half a minute.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

from workflow_helpers import JOB_HEADER, REPO, scratch_copy, snakemake_env

pytestmark = pytest.mark.install

CPU_LOCK = REPO / "requirements" / "cpu-lock.txt"
OVERRIDES = REPO / "requirements" / "overrides.txt"


def uv() -> str | None:
    """uv on PATH or beside this interpreter (requirements/dev.txt installs it)."""
    beside = Path(sys.executable).with_name("uv")
    return shutil.which("uv") or (str(beside) if beside.is_file() else None)


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{' '.join(command)} exited {result.returncode}:\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def clean_install(tmp_path_factory) -> Path:
    """A new venv with reprolm installed editable from this checkout, by its declared
    dependencies alone; its bin folder."""
    venv = tmp_path_factory.mktemp("install") / "venv"
    python = venv / "bin" / "python"
    torch_cpu_wheels = run(["bash", str(REPO / "requirements" / "torch-cpu-wheels.sh")]).stdout.strip()
    install = ["--find-links", torch_cpu_wheels, "-c", str(CPU_LOCK), "-e", str(REPO)]
    started = time.monotonic()
    installer = uv()
    if installer:
        run([installer, "venv", "-q", "--python", sys.executable, str(venv)])
        run([installer, "pip", "install", "-q", "--python", str(python), "--override", str(OVERRIDES), *install])
    else:
        # pip cannot apply the overrides: as make setup does, it installs the complete lock as it is.
        run([sys.executable, "-m", "venv", str(venv)])
        run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--find-links",
                torch_cpu_wheels,
                "-r",
                str(CPU_LOCK),
            ]
        )
        run([str(python), "-m", "pip", "install", "-q", *install])
    print(f"clean venv with reprolm installed by {installer or 'pip'} in {time.monotonic() - started:.0f} s")
    return venv / "bin"


def test_reprolm_command_runs_from_a_clean_install(clean_install):
    bin_dir = clean_install
    usage = run([str(bin_dir / "reprolm"), "--help"]).stdout
    assert "lineage" in usage and "verify" in usage, usage


def test_default_config_dry_runs_from_a_clean_install(clean_install, tmp_path):
    bin_dir = clean_install
    work = scratch_copy(tmp_path)
    env = {**snakemake_env(work), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    dry = run([str(bin_dir / "snakemake"), "-n", "--cores", "2"], cwd=work, env=env)
    rules = Counter(header.group(1) for header in map(JOB_HEADER.match, dry.stdout.splitlines()) if header)
    # The whole default DAG, from the tokenizer and the base model to the report's tables.
    assert rules["all"] == 1 and rules["finetune"] >= 4 and sum(rules.values()) > 50, dict(rules)


def test_make_run_needs_no_root_and_no_system_package():
    """`make run` as a user without root on a machine with Python: its set-up is the venv
    alone (SLURM, MariaDB, munge and Chromium are the tests', installed by `make test`). Run as
    `nobody` where the tests run as root, in a copy of the repository's make files that user
    owns, with the venv already there (its stamp, named by make itself, makes the install a
    no-op): `make setup` ends at once and `make -n run` runs only Snakemake."""
    folder = Path(tempfile.mkdtemp(prefix="reprolm-nonroot-"))
    try:
        for name in ("Makefile", "pyproject.toml"):
            shutil.copy(REPO / name, folder / name)
        for name in ("requirements", "scripts"):
            shutil.copytree(REPO / name, folder / name)
        fresh = run(["make", "-n", "setup"], cwd=folder).stdout
        [stamp] = [line.split()[-1] for line in fresh.splitlines() if line.startswith("touch .venv/.installed-")]
        (folder / ".venv").mkdir()
        (folder / stamp).touch()
        as_user: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(folder, "nobody")
            for path in folder.rglob("*"):
                shutil.chown(path, "nobody")
            as_user = ["runuser", "-u", "nobody", "--"]
        env = {key: value for key, value in os.environ.items() if key not in ("HF_TOKEN", "HF_TOKEN_PATH")}
        setup = run([*as_user, "make", "setup"], cwd=folder, env=env)
        assert "Nothing to be done for 'setup'" in setup.stdout, setup.stdout + setup.stderr
        commands = run([*as_user, "make", "--no-print-directory", "-n", "run"], cwd=folder, env=env).stdout.splitlines()
        snakemake = [line for line in commands if line.startswith(".venv/bin/snakemake --cores 2 ")]
        assert len(commands) == 2 and snakemake == commands, commands
        # The test system packages come with `make test`.
        assert "bash scripts/install-system-deps.sh" in run(["make", "-n", "test"], cwd=folder).stdout
    finally:
        shutil.rmtree(folder)
