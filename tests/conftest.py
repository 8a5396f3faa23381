"""Shared pytest fixtures."""

import pytest

import slurm_cluster as slurm


def pytest_configure(config):
    config.addinivalue_line("markers", "slurm: real jobs on the test SLURM cluster (tests/slurm_cluster.py)")


@pytest.fixture(scope="session")
def slurm_cluster():
    """A real single-node SLURM cluster with two fake GPUs, started once per test session."""
    missing = slurm.missing_binaries()
    if missing:
        pytest.skip(f"SLURM not installed (missing {', '.join(missing)}); `make setup` installs it "
                    "via scripts/install-system-deps.sh")
    cluster = slurm.start()
    yield cluster
    slurm.stop(cluster)
