"""Progress lines a researcher can watch in a job's log: done/total, rate, elapsed time and
ETA, one line every N units (training steps, generation batches) and at least every M
seconds while work goes on, and one at the end.

N and M come from the config's ``tracking.progress`` (``every_steps``, ``every_seconds``);
``configure`` puts them in the environment, so that launched training workers and forked
job scripts read the same values. Like ``tracking.report_to`` they never rerun a job.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

from tqdm import tqdm

log = logging.getLogger(__name__)
STEPS_VARIABLE, SECONDS_VARIABLE = "REPROLM_PROGRESS_STEPS", "REPROLM_PROGRESS_SECONDS"
DEFAULT_EVERY_STEPS, DEFAULT_EVERY_SECONDS = 50, 300.0


@dataclass(frozen=True)
class Interval:
    """A line at every multiple of ``steps`` done, and whenever ``seconds`` have passed since
    the last line; always one when the work is done."""

    steps: int = DEFAULT_EVERY_STEPS
    seconds: float = DEFAULT_EVERY_SECONDS

    def due(self, done: int, total: int | None, seconds_since_line: float) -> bool:
        return done % self.steps == 0 or done == total or seconds_since_line >= self.seconds


def configure(settings: Mapping) -> None:
    """Make ``settings`` (the config's ``tracking.progress``) this job's interval."""
    if "every_steps" in settings:
        os.environ[STEPS_VARIABLE] = str(settings["every_steps"])
    if "every_seconds" in settings:
        os.environ[SECONDS_VARIABLE] = str(settings["every_seconds"])


def interval() -> Interval:
    """The job's interval: the config's (``configure``) or the defaults."""
    return Interval(
        steps=int(os.environ.get(STEPS_VARIABLE, DEFAULT_EVERY_STEPS)),
        seconds=float(os.environ.get(SECONDS_VARIABLE, DEFAULT_EVERY_SECONDS)),
    )


def duration(seconds: float) -> str:
    return tqdm.format_interval(seconds)


def eta(done: int, total: int, elapsed: float) -> str:
    """Time left at the rate so far; ``?`` before anything is done."""
    return duration(elapsed / done * (total - done)) if done else "?"


class ProgressCounter:
    """Counts ``unit`` done of ``total`` and logs ``what: unit done/total (pct), rate,
    elapsed, ETA`` at ``every`` (default: the job's interval)."""

    def __init__(
        self,
        what: str,
        total: int,
        unit: str = "batches",
        every: Interval | None = None,
        logger: logging.Logger = log,
    ):
        self.what, self.total, self.unit = what, total, unit
        self.every = every or interval()
        self.logger = logger
        self.done = 0
        self.started = self.last_line = time.monotonic()

    def advance(self, count: int = 1) -> None:
        self.done += count
        now = time.monotonic()
        if self.every.due(self.done, self.total, now - self.last_line):
            self.last_line = now
            self.logger.info("%s", self.line(now - self.started))

    def line(self, elapsed: float) -> str:
        share = 100 * self.done / self.total if self.total else 100
        rate = self.done / elapsed if elapsed > 0 else float("inf")
        return (
            f"{self.what}: {self.unit} {self.done}/{self.total} ({share:.0f}%), {rate:.3g} {self.unit}/s, "
            f"elapsed {duration(elapsed)}, ETA {eta(self.done, self.total, elapsed)}"
        )
