"""Folders replaced in place since their record (new weights under a checkpoint's name),
noticed at the workflow's start so that what was made from the old content reruns."""

from __future__ import annotations

import json
import os
from pathlib import Path

from reprolm.provenance.hashing import PROVENANCE_NAME, SNAKEMAKE_MARKER, content_files, file_sha256


def changed_since_record(folder: str | os.PathLike, root: str | os.PathLike = ".") -> bool | None:
    """Whether a recorded folder's content differs from its record (files replaced in place,
    added or removed); None when there is no record with a manifest to compare with. Costs
    one stat per file, and a hash of each file whose size or time differs. ``folder`` is
    relative to ``root``, where the workflow runs (records name outputs by such paths: one
    job's record lists all its outputs, e.g. a study's tables and its plots)."""
    record_path = Path(root) / folder / PROVENANCE_NAME
    if not record_path.is_file():
        return None
    outputs = json.loads(record_path.read_text()).get("outputs", [])
    target = Path(folder).as_posix()
    recorded = next((o.get("files") for o in outputs if Path(o["path"]).as_posix() == target), None)
    if recorded is None:
        return None
    current = dict(content_files(Path(root) / folder))
    if set(current) != set(recorded):
        return True
    for relative, item in current.items():
        size, mtime_ns, sha256 = recorded[relative]
        stat = item.stat()
        if (stat.st_size, stat.st_mtime_ns) != (size, mtime_ns) and file_sha256(item) != sha256:
            return True
    return False


# Where the workflow's folder outputs live (models, raw sources, tokenizers, tables).
FOLDER_RECORDS = (
    "resources/*/*/" + PROVENANCE_NAME,
    "results/*/*/" + PROVENANCE_NAME,
    "results/*/*/*/" + PROVENANCE_NAME,
)


def mark_replaced_folders(root: str | os.PathLike = ".") -> list[str]:
    """Folders whose content was replaced in place since their record, each marked as new
    (Snakemake's timestamp marker touched) so that everything made from the old content
    reruns; Snakemake itself dates a folder by that marker only."""
    root = Path(root)
    replaced = []
    for pattern in FOLDER_RECORDS:
        for record in sorted(root.glob(pattern)):
            folder = record.parent.relative_to(root)
            marker = root / folder / SNAKEMAKE_MARKER
            if marker.is_file() and changed_since_record(folder, root):
                os.utime(marker)
                replaced.append(folder.as_posix())
    return replaced
