"""Test-only, on the PYTHONPATH of the test cluster's clients and jobs (tests/slurm_cluster.py).

Outside a SLURM job: the Snakemake that submits to the test cluster waits less between its
steps. snakemake-executor-plugin-slurm waits 10 s longer before each status check that finds
no job finished (1, 11, 21, 31 s ... up to 180 s), with no setting for it. The test cluster's
jobs take seconds, so most of a SLURM test's time went to that wait. Here it is capped at
``REPROLM_TEST_SLURM_STATUS_CHECK_S`` seconds; what the plugin submits, and what it does with
each status it finds, are its own.

Inside a SLURM job, where ``REPROLM_TEST_PACED_STEP_S`` is set: a finetune that does not resume
from a checkpoint takes at least that many seconds per optimizer step. A test that needs a
training to outlive its time limit (SLURM ends a one-minute job 60-90 s after it started) can
then train a few hundred real steps, sleeping between them, instead of burning a core for
those 90 s on thousands; its retry, resumed from the stopped attempt's checkpoint, trains at
full speed.

In processes that never import the plugin or transformers' Trainer, this does nothing.
"""

import importlib.abc
import importlib.util
import os
import sys
import time

PLUGIN = "snakemake_executor_plugin_slurm"
TRAINER = "transformers.trainer"


def _shorten_waits(plugin, cap: float) -> None:
    waits = plugin.Executor.next_seconds_between_status_checks
    plugin.Executor.next_seconds_between_status_checks = property(
        waits.fget, lambda executor, seconds: waits.fset(executor, min(seconds, cap))
    )


def _pace_first_attempts(trainer_module, step_s: float) -> None:
    trainer = trainer_module.Trainer
    train, training_step = trainer.train, trainer.training_step

    def first_attempt_train(self, *args, **kwargs):
        self._reprolm_test_paced = not kwargs.get("resume_from_checkpoint")
        return train(self, *args, **kwargs)

    def paced_training_step(self, *args, **kwargs):
        started = time.monotonic()
        loss = training_step(self, *args, **kwargs)
        if getattr(self, "_reprolm_test_paced", False):
            time.sleep(max(0.0, step_s - (time.monotonic() - started)))
        return loss

    trainer.train, trainer.training_step = first_attempt_train, paced_training_step


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls ``change(module)`` once the module ``name`` has been executed."""

    def __init__(self, name: str, change):
        self.name, self.change = name, change

    def find_spec(self, name, path, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            self.change(module)

        spec.loader.exec_module = exec_module
        return spec


_cap = os.environ.get("REPROLM_TEST_SLURM_STATUS_CHECK_S")
_step_s = os.environ.get("REPROLM_TEST_PACED_STEP_S")
if _cap and "SLURM_JOB_ID" not in os.environ:
    sys.meta_path.insert(0, _AfterImport(PLUGIN, lambda plugin: _shorten_waits(plugin, float(_cap))))
if _step_s and "SLURM_JOB_ID" in os.environ:
    sys.meta_path.insert(0, _AfterImport(TRAINER, lambda trainer: _pace_first_attempts(trainer, float(_step_s))))
