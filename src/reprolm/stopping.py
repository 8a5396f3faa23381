"""Jobs that SLURM stops before they finish: at its time limit, or to preempt it.

SLURM sends SIGTERM to every process of the job step (with ``--signal=TERM@SECONDS`` that
many seconds before the time limit; with preemption, ``GraceTime`` before the kill), then
SIGKILL after ``KillWait``. A long job (finetune, train-before-test, generation) installs
:func:`watch_for_stop` early; the handler only notes the signal, and the job's loop looks at
:data:`stop_request` at its next safe point (the end of a training step, a finished shard
of generations), saves its progress there and raises :class:`JobStopped`. The job then
exits with a failure, so that Snakemake's retry starts it again, and it resumes from what it
saved. A preempted job instead waits for SLURM to end it and requeue it (see
:func:`wait_for_requeue`), so that it runs once, not twice.

:func:`record_stop` notes the stopped attempt (when, which signal, the SLURM job, what it
had used) in a small log kept beside the checkpoints; when the job at last succeeds,
:func:`stopped_attempts` hands those notes to its provenance record, and the log goes.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM,)
# Where stopped attempts are noted until their job succeeds (relative to the workflow's folder).
STOPS_ROOT = Path("results/checkpoints/stopped_attempts")
# A launched worker's exit status when it stopped on request after saving its progress.
STOPPED_EXIT_STATUS = 75  # EX_TEMPFAIL: try again later


class JobStopped(RuntimeError):
    """The job was asked to stop, saved its progress and stopped; a rerun resumes."""

    def __init__(self, signal_name: str, progress: str):
        super().__init__(
            f"stopped by {signal_name} after saving its progress ({progress}); a retry of this job resumes from there"
        )
        self.signal_name = signal_name
        self.progress = progress


class StopRequest:
    """Whether this process has been asked to stop, and by which signal."""

    def __init__(self) -> None:
        self.signal_name: str | None = None

    @property
    def requested(self) -> bool:
        return self.signal_name is not None

    def handle(self, signum, _frame=None) -> None:
        # Only the first signal counts: SLURM may send TERM again at the limit itself.
        if self.signal_name is None:
            self.signal_name = signal.Signals(signum).name
            log.warning("%s received: stopping at the next point where progress can be saved", self.signal_name)

    def clear(self) -> None:
        self.signal_name = None


stop_request = StopRequest()


def watch_for_stop() -> StopRequest:
    """Catch the stop signals in this process (from the main thread; elsewhere a no-op)."""
    if threading.current_thread() is threading.main_thread():
        for signum in STOP_SIGNALS:
            signal.signal(signum, stop_request.handle)
    return stop_request


def being_preempted(job_id: str | None = None) -> bool:
    """Whether SLURM chose this job for preemption (its ``PreemptTime`` is set): then SLURM
    requeues it itself once it ends, under the same job id."""
    job_id = job_id or os.environ.get("SLURM_JOB_ID")
    if not job_id:
        return False
    try:
        shown = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    match = re.search(r"\bPreemptTime=(\S+)", shown.stdout)
    return bool(match) and match.group(1) not in ("None", "Unknown")


def wait_for_requeue(poll_s: float = 1.0) -> None:
    """A preempted job that has saved its progress waits for SLURM to end it (GraceTime
    after the preemption): were it to exit with a failure instead, Snakemake would submit a
    retry while SLURM requeues the original, and the job would run twice."""
    log.warning("preempted: progress saved; waiting for SLURM to requeue this job")
    while True:
        time.sleep(poll_s)


def stop_log_path(rule: str, outputs: Iterable[str]) -> Path:
    """One log per job, named by its rule and outputs (what a retry of it shares)."""
    key = hashlib.sha256("\n".join(sorted(str(o) for o in outputs)).encode()).hexdigest()[:16]
    return STOPS_ROOT / rule / f"{key}.jsonl"


def record_stop(rule: str, outputs: Iterable[str], stop: JobStopped, usage: dict, preempted: bool) -> Path:
    """Note a stopped attempt of the job; returns the log's path."""
    path = stop_log_path(rule, outputs)
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {
        "signal": stop.signal_name,
        "cause": "preemption" if preempted else "time limit or cancel",
        "progress": stop.progress,
        "stopped": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "slurm_restart_count": os.environ.get("SLURM_RESTART_COUNT"),
        "usage": usage,
    }
    with path.open("a") as stream:
        stream.write(json.dumps(entry, sort_keys=True) + "\n")
    return path


def stopped_attempts(rule: str, outputs: Iterable[str]) -> list[dict]:
    """The job's stopped attempts noted so far (oldest first)."""
    path = stop_log_path(rule, outputs)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def forget_stops(rule: str, outputs: Iterable[str]) -> None:
    stop_log_path(rule, outputs).unlink(missing_ok=True)
