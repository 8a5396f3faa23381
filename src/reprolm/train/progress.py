"""A training run's progress in its job log: step/total, epoch, loss, learning rate,
throughput and ETA, at the job's interval (reprolm.progress). The Trainer's tqdm bar stays
off: in a log file it is one ever-growing line of carriage returns."""

from __future__ import annotations

import logging
import time

from transformers import TrainerCallback

from reprolm.progress import Interval, duration, eta, interval

log = logging.getLogger(__name__)


class TrainingProgress(TrainerCallback):
    """When a line is due at the end of a step, asks the Trainer to log that step (so the
    line carries the loss averaged up to it, not an older one) and writes the line from
    that log. Rates count from the first step of this attempt, so a resumed run's ETA is
    not skewed by the steps an earlier attempt did."""

    def __init__(self, every: Interval | None = None):
        self.every = every or interval()
        self.line_due = False

    def on_train_begin(self, args, state, control, **kwargs):
        self.first_step = state.global_step
        self.started = self.last_line = time.monotonic()
        self.samples_per_step = args.train_batch_size * args.gradient_accumulation_steps * args.world_size

    def on_step_end(self, args, state, control, **kwargs):
        if self.every.due(state.global_step, state.max_steps, time.monotonic() - self.last_line):
            self.line_due = True
            control.should_log = True

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not self.line_due or "loss" not in (logs or {}):
            return
        self.line_due = False
        now = time.monotonic()
        self.last_line = now
        if state.is_world_process_zero:
            log.info("%s", self.line(state, logs, now - self.started))

    def line(self, state, logs: dict, elapsed: float) -> str:
        step, total = state.global_step, state.max_steps
        done = step - self.first_step
        samples_per_second = done * self.samples_per_step / elapsed if elapsed > 0 else float("inf")
        epochs = f"/{state.num_train_epochs}" if state.num_train_epochs else ""
        return (
            f"step {step}/{total} ({100 * step / total:.0f}%), epoch {state.epoch or 0:.2f}{epochs}, "
            f"loss {logs['loss']:.4g}, lr {logs.get('learning_rate', float('nan')):.3g}, "
            f"{samples_per_second:.3g} samples/s, elapsed {duration(elapsed)}, "
            f"ETA {eta(done, total - self.first_step, elapsed)}"
        )
