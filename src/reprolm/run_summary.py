"""One line per job of a run, for ``reprolm progress``: rule, wildcards, status, wall time,
and for a job still running the last progress line of its log (reprolm.progress).

A finished job is known by its provenance record; a running, failed or stopped one by its
log, whose attempts each begin with ``rule R wildcards W`` and end, when they fail or are
stopped, with the error or the stop (reprolm.provenance.records.tracked_step). By default
the run is the latest ``snakemake`` invocation in the folder (its log in .snakemake/log).
"""

from __future__ import annotations

import ast
import datetime as dt
import json
import re
from dataclasses import dataclass
from pathlib import Path

from reprolm.progress import duration

RECORD_FOLDERS = ("results", "resources")
ATTEMPT_START = re.compile(r"^\S+ \S+ reprolm\.rule\.\S+ INFO rule (\S+) wildcards (\{.*\})$")
LOG_TIME = "%Y-%m-%d %H:%M:%S,%f"
SNAKEMAKE_LOG_TIME = "%Y-%m-%dT%H%M%S.%f"
PROGRESS_MARK = ", ETA "


@dataclass
class Job:
    rule: str
    wildcards: dict
    status: str  # done, running, failed, stopped
    started: dt.datetime
    wall_seconds: float
    note: str = ""
    finished: dt.datetime | None = None

    def line(self) -> str:
        wildcards = ",".join(f"{name}={value}" for name, value in self.wildcards.items())
        return f"{self.status:<8} {duration(self.wall_seconds):>8}  {self.rule}  {wildcards}  {self.note}".rstrip()


def latest_run_start(root: Path) -> dt.datetime | None:
    """When the folder's latest ``snakemake`` invocation started (its log file's name)."""
    logs = sorted((root / ".snakemake" / "log").glob("*.snakemake.log"))
    if not logs:
        return None
    stamp = logs[-1].name.removesuffix(".snakemake.log")
    return dt.datetime.strptime(stamp, SNAKEMAKE_LOG_TIME).astimezone()


def parse_since(text: str, now: dt.datetime) -> dt.datetime:
    """``2h``, ``30m``, ``45s`` ago, or an ISO date and time (local unless it says)."""
    amount = re.fullmatch(r"(\d+(?:\.\d+)?)([hms])", text)
    if amount:
        unit = {"h": "hours", "m": "minutes", "s": "seconds"}[amount.group(2)]
        return now - dt.timedelta(**{unit: float(amount.group(1))})
    return dt.datetime.fromisoformat(text).astimezone()


def _key(rule: str, wildcards: dict) -> str:
    return json.dumps([rule, wildcards], sort_keys=True)


def recorded_jobs(root: Path, since: dt.datetime) -> dict[str, Job]:
    """Jobs finished since ``since``, from their provenance records (one per job, however
    many outputs carry it)."""
    jobs: dict[str, Job] = {}
    for folder in RECORD_FOLDERS:
        for path in sorted((root / folder).rglob("*provenance.json")):
            record = json.loads(path.read_text())
            finished = dt.datetime.fromisoformat(record["finished"])
            if finished < since:
                continue
            wall = record["execution"]["usage"]["wall_seconds"]
            started = dt.datetime.fromisoformat(record["started"])
            jobs[_key(record["rule"], record["wildcards"])] = Job(
                record["rule"], record["wildcards"], "done", started, wall, finished=finished
            )
    return jobs


def _line_time(line: str) -> dt.datetime:
    """When a log line was written (local time, as the job's log formatter writes it)."""
    return dt.datetime.strptime(" ".join(line.split(" ", 2)[:2]), LOG_TIME).astimezone()


def logged_attempt(path: Path, now: dt.datetime) -> Job | None:
    """The last attempt in a job's log: failed or stopped where it says so, else running."""
    attempt = None
    for line in path.read_text(errors="replace").splitlines():
        start = ATTEMPT_START.match(line)
        if start:
            attempt = Job(start.group(1), ast.literal_eval(start.group(2)), "running", _line_time(line), 0.0)
        elif attempt is None:
            continue
        elif f" rule {attempt.rule} failed" in line:
            attempt.status, attempt.note = "failed", f"see {path}"
            attempt.wall_seconds = (_line_time(line) - attempt.started).total_seconds()
        elif " noted in " in line and " WARNING " in line:
            attempt.status, attempt.note = "stopped", line.split(" WARNING ", 1)[1]
            attempt.wall_seconds = (_line_time(line) - attempt.started).total_seconds()
        elif PROGRESS_MARK in line and attempt.status == "running":
            attempt.note = line.split(" INFO ", 1)[-1]
    if attempt is not None and attempt.status == "running":
        attempt.wall_seconds = (now - attempt.started).total_seconds()
    return attempt


def run_jobs(root: str | Path = ".", since: dt.datetime | None = None, now: dt.datetime | None = None) -> list[Job]:
    """Every job of the run since ``since`` (default: the latest invocation's start), in the
    order they started."""
    root = Path(root)
    now = now or dt.datetime.now().astimezone()
    since = since or latest_run_start(root) or dt.datetime.min.replace(tzinfo=dt.timezone.utc)
    jobs = recorded_jobs(root, since)
    for path in sorted((root / "logs").rglob("*.log")):
        attempt = logged_attempt(path, now)
        if attempt is None or attempt.started < since:
            continue
        recorded = jobs.get(_key(attempt.rule, attempt.wildcards))
        # Records keep whole seconds; an attempt that began before its record's end is the
        # one that wrote it.
        if recorded is None or recorded.finished < attempt.started.replace(microsecond=0):
            jobs[_key(attempt.rule, attempt.wildcards)] = attempt
    return sorted(jobs.values(), key=lambda job: job.started)


def run_summary(jobs: list[Job]) -> str:
    counts: dict[str, int] = {}
    for job in jobs:
        counts[job.status] = counts.get(job.status, 0) + 1
    tally = ", ".join(f"{count} {status}" for status, count in sorted(counts.items())) or "no jobs"
    return "\n".join([*(job.line() for job in jobs), tally])
