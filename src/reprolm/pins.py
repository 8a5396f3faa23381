"""What a download needs of the lock (:mod:`reprolm.lock`): a hub repository's commit, a
file fetched and its sha256 checked, an lm-eval task's tasks. Kept apart from the lock itself,
which reads the config, so that the download code imports no config lookups."""

from __future__ import annotations

import hashlib
import re
import urllib.request
from pathlib import Path

SHA = re.compile(r"^[0-9a-f]{40}$")
# Seconds the hub or a file server has to answer one question.
TIMEOUT_S = 30.0
CHUNK = 1 << 20


class LockError(ValueError):
    """The lock and a download disagree, or the lock cannot be read."""


def hub_commit(kind: str, repo: str, ref: str | None, timeout: float = TIMEOUT_S) -> str:
    """The hub's commit sha of ``repo`` at ``ref`` (its default branch when None)."""
    from huggingface_hub import HfApi

    ask = HfApi().model_info if kind == "model" else HfApi().dataset_info
    return ask(repo, revision=ref, timeout=timeout).sha


def pinned_commit(kind: str, repo: str, revision: str | None) -> str:
    """``revision`` where it is a commit sha (as the lock gives it), else the hub's commit of
    ``repo`` at that reference now (an unpinned run's download records what it read)."""
    return revision if revision and SHA.match(revision) else hub_commit(kind, repo, revision)


def fetch_locked_file(url: str, destination: Path, locked: str | None, where: str) -> str:
    """``url``'s content into ``destination``, its sha256 checked against the lock's
    (``locked``; None for an unpinned run): a file that differs fails naming both hashes, and
    leaves nothing behind. Returns the sha256 read."""
    digest, _ = fetch_url(url, destination)
    if locked and digest != locked:
        destination.unlink(missing_ok=True)
        raise LockError(
            f"{where}: {url}: content sha256 {digest} differs from the lock's {locked}: the file changed "
            f"upstream since it was locked (re-lock it deliberately: reprolm lock --update {url})"
        )
    return digest


def fetch_url(url: str, destination: Path | None = None, timeout: float = TIMEOUT_S) -> tuple[str, dict]:
    """The sha256 of ``url``'s content and the server's ETag and size, the content written to
    ``destination`` where one is given (else only hashed)."""
    digest = hashlib.sha256()
    request = urllib.request.Request(url, headers={"User-Agent": "reprolm"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        headers = {"etag": response.headers.get("ETag"), "size": 0}
        sink = destination.open("wb") if destination is not None else None
        try:
            for block in iter(lambda: response.read(CHUNK), b""):
                digest.update(block)
                headers["size"] += len(block)
                if sink is not None:
                    sink.write(block)
        finally:
            if sink is not None:
                sink.close()
    return digest.hexdigest(), headers


def url_etag(url: str, timeout: float = TIMEOUT_S) -> str | None:
    """The ETag a HEAD request of ``url`` answers (no content read)."""
    request = urllib.request.Request(url, method="HEAD", headers={"User-Agent": "reprolm"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.headers.get("ETag")
