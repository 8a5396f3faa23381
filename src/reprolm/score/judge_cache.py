"""API judges' verdicts kept on disk, so that a rerun (after a failure halfway, or after an
upstream change that left some answers as they were) never pays for a request twice.

A verdict is keyed by the sha256 of the judge's spec (its config entry, without the settings
that never change an answer), the exact request sent and the sha256 of each model output
it judges. The cache lives under ``resources/judge_cache/{judge}/``; it is neither an input
nor an output of any rule, so it never makes Snakemake rerun anything.

Each verdict is one JSON file, ``{key[:2]}/{key}.json``, written to a temporary sibling and
renamed into place. Several jobs of one judge (other models' answers) write the same folder
at once: a rename is atomic, so no reader ever sees half an entry and no writer needs a lock,
where a shared append-only JSONL could interleave concurrent appends and keep a torn last
line after a kill. An entry that cannot be read is ignored and asked for again.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from reprolm.io import atomic_path

log = logging.getLogger(__name__)

CACHE_ROOT = "resources/judge_cache"
# Settings that change how a judge is reached or what is made of its verdicts, never the
# verdicts: renaming the key's variable, retrying more or another length-control source
# re-requests nothing.
# Succession fields date and replace a judge; they change none of its verdicts.
NOT_IN_KEY = ("api_key_env", "max_retries", "length_control", "as_of", "successor", "released_verdicts")
_MISSING = object()  # no usable entry (a verdict may itself be None)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def cache_dir(root: str | Path, judge: str) -> Path:
    """Where the judge named ``judge`` keeps its verdicts (not a DAG artifact, so not in
    :mod:`reprolm.paths`)."""
    return Path(root) / judge


class JudgeCache:
    """The verdicts of one judge, and how many of this job's came from the cache or were
    requested. ``folder=None`` keeps nothing (a judge used outside the workflow)."""

    def __init__(self, spec: Mapping, folder: str | Path | None = None):
        self.folder = Path(folder) if folder is not None else None
        self.spec = {key: value for key, value in spec.items() if key not in NOT_IN_KEY}
        self.cached = self.requested = 0

    def key(self, request: Mapping, judged: Sequence[str]) -> str:
        """``request``: everything sent but the credentials; ``judged``: the model outputs it
        judges."""
        return sha256_text(
            json.dumps(
                {"judge": self.spec, "request": request, "judged": [sha256_text(text) for text in judged]},
                sort_keys=True,
                ensure_ascii=False,
            )
        )

    def fetch(self, request: Mapping, judged: Sequence[str], ask: Callable[[], Any]) -> Any:
        """The cached verdict on ``request``, else ``ask()``'s, stored."""
        return self.fetch_many([(request, judged)], lambda _positions: [ask()])[0]

    def fetch_many(
        self,
        requests: Sequence[tuple[Mapping, Sequence[str]]],
        ask: Callable[[list[int]], list],
        per_call: int | None = None,
        keep: Callable[[Any], bool] = lambda verdict: True,
    ) -> list:
        """Each request's cached verdict; the others from ``ask(positions)``, at most
        ``per_call`` positions a call, each call's verdicts stored (those ``keep`` accepts)
        before the next, so a job killed halfway keeps what it paid for."""
        keys = [self.key(request, judged) for request, judged in requests]
        verdicts = [self._read(key) for key in keys]
        missing = [i for i, verdict in enumerate(verdicts) if verdict is _MISSING]
        self.cached += len(keys) - len(missing)
        step = per_call or len(missing) or 1
        for start in range(0, len(missing), step):
            positions = missing[start : start + step]
            answers = ask(positions)
            self.requested += len(positions)
            for position, verdict in zip(positions, answers, strict=True):
                verdicts[position] = verdict
                if keep(verdict):
                    self._write(keys[position], verdict)
        return verdicts

    def counts(self) -> dict[str, int]:
        return {"cached": self.cached, "requested": self.requested}

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def _read(self, key: str):
        if self.folder is None:
            return _MISSING
        path = self._path(key)
        try:
            entry = json.loads(path.read_text())
        except FileNotFoundError:
            return _MISSING
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            log.warning("%s: unreadable judge cache entry (%s); asking again", path, error)
            return _MISSING
        if not isinstance(entry, dict) or entry.get("key") != key or "verdict" not in entry:
            log.warning("%s: judge cache entry is not a verdict keyed %s; asking again", path, key)
            return _MISSING
        return entry["verdict"]

    def _write(self, key: str, verdict) -> None:
        if self.folder is None:
            return
        with atomic_path(self._path(key)) as tmp:
            tmp.write_text(json.dumps({"key": key, "verdict": verdict}, ensure_ascii=False))
