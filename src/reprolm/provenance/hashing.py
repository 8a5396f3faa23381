"""Content hashes of outputs (files, and folders by their files' paths and hashes) and where
each output's provenance record lives."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

PROVENANCE_NAME = "provenance.json"


# Snakemake marks directory outputs with this file after the job; it is not content.
SNAKEMAKE_MARKER = ".snakemake_timestamp"


SIDECAR_SUFFIX = ".provenance.json"


def provenance_path(output: str | os.PathLike) -> Path:
    path = Path(output)
    return path / PROVENANCE_NAME if path.is_dir() else path.with_name(path.name + SIDECAR_SUFFIX)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def content_files(folder: Path) -> list[tuple[str, Path]]:
    """A folder's content files by relative path: its own provenance record, Snakemake's
    timestamp marker and Trainer checkpoints are left out, so a hash of them names the
    artifact's content, not when or how it was made."""
    return [
        (item.relative_to(folder).as_posix(), item)
        for item in sorted(p for p in folder.rglob("*") if p.is_file())
        if item.relative_to(folder).as_posix() not in (PROVENANCE_NAME, SNAKEMAKE_MARKER)
        and not item.relative_to(folder).as_posix().startswith("checkpoint-")
    ]


def folder_manifest(folder: str | os.PathLike) -> dict[str, list]:
    """Each content file's ``[size, mtime_ns, sha256]``: the record a later check compares
    with a stat per file, hashing again only files whose size or time changed."""
    manifest = {}
    for relative, item in content_files(Path(folder)):
        stat = item.stat()
        manifest[relative] = [stat.st_size, stat.st_mtime_ns, file_sha256(item)]
    return manifest


def manifest_hash(manifest: Mapping[str, list]) -> str:
    digest = hashlib.sha256()
    for relative in sorted(manifest):
        digest.update(relative.encode() + b"\0" + manifest[relative][2].encode() + b"\0")
    return digest.hexdigest()


def content_hash(path: str | os.PathLike) -> str:
    """sha256 of a file, or of a folder's relative paths and content-file hashes."""
    path = Path(path)
    if path.is_file():
        return file_sha256(path)
    return manifest_hash({relative: [0, 0, file_sha256(item)] for relative, item in content_files(path)})


def recorded_hash(path: str | os.PathLike) -> str | None:
    """The content hash ``path``'s own provenance record gives it (None without a record):
    reading it costs nothing, where hashing a multi-GB checkpoint again would not."""
    record_path = provenance_path(path)
    if not record_path.exists():
        return None
    outputs = json.loads(record_path.read_text()).get("outputs", [])
    target = Path(path).as_posix()
    matching = [item["sha256"] for item in outputs if Path(item["path"]).as_posix() == target]
    # Records hold paths relative to where the rule ran; a folder's record has one output.
    if not matching and len(outputs) == 1:
        matching = [outputs[0]["sha256"]]
    return matching[0] if matching else None
