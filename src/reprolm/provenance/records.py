"""Provenance records: every rule's script runs inside :func:`tracked_step`, which logs to
the rule's log file and, when the body succeeds, writes one ``provenance.json`` per output:
inside an output folder, or as a ``<file>.provenance.json`` sidecar beside an output file."""

from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import json
import logging
import os
import time
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path

from reprolm.gpu_check import check_gpus, claim_local_gpus
from reprolm.io import atomic_path
from reprolm.oserrors import os_fault
from reprolm.progress import configure as configure_progress
from reprolm.provenance.environment import code_version, execution_host, job_usage, package_versions
from reprolm.provenance.hashing import content_hash, folder_manifest, manifest_hash, provenance_path
from reprolm.provenance.redaction import REDACTED, is_secret_key, redact, redact_text
from reprolm.stopping import JobStopped, being_preempted, forget_stops, record_stop, stopped_attempts, wait_for_requeue

log = logging.getLogger(__name__)
# What the running step's library code adds to its record (note): facts known only once the
# job runs, such as the tokens that ended a generation's samples.
_STEP_NOTES: contextvars.ContextVar[dict | None] = contextvars.ContextVar("step_notes", default=None)


def note(section: str, facts: Mapping) -> None:
    """Add ``facts`` under ``section`` to the record of the step running (redacted as params
    are); outside :func:`tracked_step` (a library call of its own) there is no record."""
    notes = _STEP_NOTES.get()
    if notes is not None:
        notes[section] = dict(facts)


def note_read(item: Mapping) -> None:
    """Add ``item`` (a remote input as the step read it: its repository and commit, or URL
    and sha256) to the ``read`` list of the running step's record."""
    notes = _STEP_NOTES.get()
    if notes is not None:
        notes.setdefault("read", []).append(dict(item))


def _output_entry(path: str) -> dict:
    if Path(path).is_dir():
        manifest = folder_manifest(path)
        return {"path": path, "sha256": manifest_hash(manifest), "files": manifest}
    return {"path": path, "sha256": content_hash(path)}


def _without_secrets(text: str) -> str:
    """``text`` with the value of every secret environment variable (hub tokens, API keys) and
    anything else that looks like a credential masked, should an error message quote one."""
    for name, value in os.environ.items():
        if is_secret_key(name) and len(value) >= 8:
            text = text.replace(value, REDACTED)
    return redact_text(text)


def _named(items) -> dict:
    """Snakemake's Namedlist as a plain dict of its named entries."""
    return {name: value for name, value in items.items()}


def build_record(
    *,
    rule: str,
    wildcards: Mapping,
    params: Mapping,
    inputs: Mapping[str, list[str]],
    outputs: list[str],
    seed,
    started: str,
    finished: str,
    usage: dict,
    notes: Mapping | None = None,
) -> dict:
    return {
        **redact(dict(notes or {})),
        "rule": rule,
        "wildcards": dict(wildcards),
        "params": redact(dict(params)),
        "inputs": {name: [{"path": p, "sha256": content_hash(p)} for p in paths] for name, paths in inputs.items()},
        "outputs": [_output_entry(p) for p in outputs],
        "code": code_version(),
        "packages": package_versions(),
        "execution": {**execution_host(), "usage": usage},
        "seed": seed,
        "started": started,
        "finished": finished,
    }


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _input_groups(smk) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    named = set()
    for name, value in smk.input.items():
        paths = [value] if isinstance(value, str) else list(value)
        groups[name] = [str(p) for p in paths]
        named.update(groups[name])
    unnamed = [str(p) for p in smk.input if str(p) not in named]
    if unnamed:
        groups["_"] = unnamed
    return groups


def write_record(record: dict, output: str) -> None:
    target = provenance_path(output)
    with atomic_path(target) as tmp:
        tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


@contextlib.contextmanager
def tracked_step(smk, seed=None) -> Iterator[logging.Logger]:
    """Run a rule's body with logging to its log file, then record provenance.

    ``smk`` is the ``snakemake`` object of a script. Yields a logger for the step.
    """
    # Numeric libraries read these at import, so a job uses exactly the cores it was given.
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[variable] = str(smk.threads)
    # How often the job logs its progress (reprolm.progress), for it and its launched workers.
    configure_progress(smk.config.get("tracking", {}).get("progress", {}))
    log_path = Path(smk.log[0]) if len(smk.log) else None
    params = _named(smk.params)
    if seed is None:
        seed = params.get("seed", smk.config.get("seed"))
    notes: dict = {}
    stack = contextlib.ExitStack()
    with stack:
        stack.callback(_STEP_NOTES.reset, _STEP_NOTES.set(notes))
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            stream = stack.enter_context(log_path.open("a", buffering=1))
            stack.enter_context(contextlib.redirect_stdout(stream))
            stack.enter_context(contextlib.redirect_stderr(stream))
            handler = logging.StreamHandler(stream)
            handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
            root = logging.getLogger()
            root.addHandler(handler)
            root.setLevel(logging.INFO)
            stack.callback(root.removeHandler, handler)
        started, clock = _now(), time.monotonic()
        step_log = logging.getLogger(f"reprolm.rule.{smk.rule}")
        step_log.info("rule %s wildcards %s", smk.rule, dict(_named(smk.wildcards)))
        outputs = [str(p) for p in smk.output]
        # The GPUs the rule asked for: a local GPU job first takes its own of the machine's, then
        # checks that they can run it (driver, devices, bfloat16); its usage counts only these.
        asked = int(getattr(smk.resources, "gpu", 0) or 0)
        try:
            if asked:
                stack.enter_context(claim_local_gpus(asked))
                check_gpus(asked, params.get("precision"))
            yield step_log
        except JobStopped as stop:
            preempted = being_preempted()
            noted = record_stop(
                smk.rule, outputs, stop, job_usage(time.monotonic() - clock, smk.threads, asked), preempted
            )
            step_log.warning("%s; noted in %s", stop, noted)
            if preempted:
                wait_for_requeue()
            raise
        except Exception as error:
            # Logged here, while the log is still this job's: the log Snakemake points the
            # user to ends with the exception, not only the terminal. An OS fault on one of
            # the outputs is named in words (reprolm.oserrors).
            fault = os_fault(error, outputs) or error
            if fault is not error:
                fault.__cause__ = error
            trace = "".join(traceback.format_exception(fault)).rstrip()
            step_log.error("rule %s failed\n%s", smk.rule, _without_secrets(trace))
            if fault is error:
                raise
            raise fault from error
        record = build_record(
            rule=smk.rule,
            wildcards=_named(smk.wildcards),
            params=params,
            inputs=_input_groups(smk),
            outputs=[str(p) for p in smk.output],
            seed=seed,
            started=started,
            finished=_now(),
            usage=job_usage(time.monotonic() - clock, smk.threads, asked),
            notes=notes,
        )
        # Attempts that SLURM stopped (time limit, preemption) before this one finished.
        stops = stopped_attempts(smk.rule, outputs)
        if stops:
            record["execution"]["stopped_attempts"] = stops
        for output in smk.output:
            write_record(record, str(output))
        forget_stops(smk.rule, outputs)
