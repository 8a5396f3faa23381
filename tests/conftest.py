"""Shared pytest fixtures: the test SLURM cluster and the finished default run."""

from __future__ import annotations

import gc
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# Run outside the project's environment (a bare `pytest` on the system Python), every test
# module would fail to import with a different missing package; say once what to run instead.
if importlib.util.find_spec("reprolm") is None or importlib.util.find_spec("torch") is None:
    pytest.exit(
        f"{sys.executable} has no reprolm or torch installed: run the suite with `make test` "
        "(it sets up .venv and runs .venv/bin/python -m pytest), or `.venv/bin/python -m pytest` "
        "after `make setup`",
        returncode=4,
    )

# As the Makefile sets it, for a bare `pytest` too; before torch loads OpenMP, which reads it once.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Collection imports torch, transformers and lm-eval (millions of objects), and many tests train
# or score in process: a young-generation collection every 10,000 allocations instead of
# Python's 700 (a tiny finetune's collections: 1.4 -> 0.6 s of CPU).
gc.set_threshold(10_000, *gc.get_threshold()[1:])

import slurm_cluster as slurm  # noqa: E402
from chat_endpoint_standin import chat_endpoint  # noqa: E402, F401 (the recording stand-in API endpoint, a fixture)
from workflow_helpers import RUN_OUTPUTS, copy_run, scratch_copy, snakemake, tree_state  # noqa: E402

# A developer's shortcut, never set by `make test`: a finished default run (e.g. one `make run`
# made) whose outputs the session uses instead of making its own, if a dry run of the current
# workflow and default config in a copy of it has nothing to do.
REUSE_RUN = "REPROLM_TEST_DEFAULT_RUN"


def pytest_configure(config):
    # Registered here, not in pyproject.toml: the Makefile names its venv stamp by that file's content.
    config.addinivalue_line(
        "markers",
        "key_scan: the rerun scope of every leaf key of the default config (tests/test_rerun_scope.py), "
        "part of make test; `make test-rerun-scope` runs it alone",
    )
    config.addinivalue_line(
        "markers",
        "doc_command(command, ...): runs these commands of README.md/docs exactly as printed "
        "(tests/doc_commands.py; tests/test_doc_commands.py checks every printed command has one)",
    )


def pytest_collection_modifyitems(items):
    """Marks ``default_run`` every test that reads the session's default run (directly or through
    ``run_copy``): `make test` runs those in a pytest process of their own, since the fixture
    makes the run once per process."""
    for item in items:
        if "default_run" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.default_run)


def pytest_collection_finish(session):
    """Collection imported every test module's libraries (torch, transformers, lm-eval, ...):
    frozen, the garbage collections of the tests that follow skip their objects (about 5% of
    the CPU of a process running in-process tests)."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session")
def slurm_cluster():
    """A real single-node SLURM cluster with two fake GPUs, started once per test session."""
    missing = slurm.missing_binaries()
    if missing:
        pytest.skip(
            f"SLURM not installed (missing {', '.join(missing)}); `make test` (`make system-deps`) installs it "
            "via scripts/install-system-deps.sh"
        )
    cluster = slurm.start()
    yield cluster
    slurm.stop(cluster)


@pytest.fixture(scope="session")
def default_run(tmp_path_factory) -> Path:
    """The whole default configuration (config/config.yaml), run once per session with real
    Snakemake in a scratch copy of the workflow.

    No test may change it: a test that runs Snakemake for anything but a dry run, or edits a
    file, works on its own copy (the ``run_copy`` fixture, or ``copy_run``). When the session
    ends, every file and folder under results, resources, config and workflow must be as the
    run left it (size, mtime, inode), or the tests that shared it fail at teardown.
    """
    work = scratch_copy(tmp_path_factory.mktemp("default_run"))
    reuse = os.environ.get(REUSE_RUN)
    if reuse:
        for name in RUN_OUTPUTS:
            if (Path(reuse) / name).exists():
                shutil.rmtree(work / name, ignore_errors=True)
                subprocess.run(["cp", "-a", str(Path(reuse) / name), str(work / name)], check=True)
        dry = snakemake(work, "-n")
        assert "Nothing to be done" in dry.stdout + dry.stderr, (
            f"{REUSE_RUN}={reuse} is not a finished run of this workflow and default config:\n{dry.stdout[-3000:]}"
        )
    else:
        snakemake(work)
    before = tree_state(work)
    yield work
    after = tree_state(work)
    changed = sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))
    assert changed == [], f"tests changed the shared default run: {changed[:20]}"


@pytest.fixture
def run_copy(default_run, tmp_path) -> Path:
    """A private copy of the finished default run (hard-linked outputs: nothing in results or
    resources may be rewritten in place; use ``copy_run(..., writable=...)`` for that)."""
    return copy_run(default_run, tmp_path / "run")
