"""Test-only, on the PYTHONPATH of the test cluster's clients (tests/slurm_cluster.py): the
Snakemake that submits to the test cluster waits less between its steps.

snakemake-executor-plugin-slurm waits 10 s longer before each status check that finds no job
finished (1, 11, 21, 31 s ... up to 180 s), with no setting for it. The test cluster's jobs
take seconds, so most of a SLURM test's time went to that wait. Here it is capped at
``REPROLM_TEST_SLURM_STATUS_CHECK_S`` seconds; what the plugin submits, and what it does with
each status it finds, are its own.

Inside a SLURM job (``SLURM_JOB_ID`` set), and in processes that never import the plugin,
this does nothing.
"""

import importlib.abc
import importlib.util
import os
import sys

PLUGIN = "snakemake_executor_plugin_slurm"


def _shorten_waits(plugin, cap: float) -> None:
    waits = plugin.Executor.next_seconds_between_status_checks
    plugin.Executor.next_seconds_between_status_checks = property(
        waits.fget, lambda executor, seconds: waits.fset(executor, min(seconds, cap))
    )


class _PluginFinder(importlib.abc.MetaPathFinder):
    """Shortens the plugin's waits once its module has been executed."""

    def __init__(self, cap: float):
        self.cap = cap

    def find_spec(self, name, path, target=None):
        if name != PLUGIN:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            _shorten_waits(module, self.cap)

        spec.loader.exec_module = exec_module
        return spec


_cap = os.environ.get("REPROLM_TEST_SLURM_STATUS_CHECK_S")
if _cap and "SLURM_JOB_ID" not in os.environ:
    sys.meta_path.insert(0, _PluginFinder(float(_cap)))
