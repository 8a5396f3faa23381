"""Questions asked of the provenance records: what is behind an artifact (its lineage), and
which recorded artifacts are no longer what was recorded (verification)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from reprolm.io import atomic_path
from reprolm.provenance import PROVENANCE_NAME, SIDECAR_SUFFIX, content_hash, provenance_path

# What a lineage shows of each record: enough to say what ran, how, from which code, where.
SHOWN_FIELDS = ("rule", "wildcards", "params", "code", "execution", "seed", "started", "finished")


def read_record(path: str | Path) -> dict | None:
    record_path = provenance_path(path)
    return json.loads(record_path.read_text()) if record_path.is_file() else None


def _key(path: str | Path) -> str:
    return Path(path).as_posix()


def _recorded_output_hash(record: dict, path: str) -> str | None:
    outputs = record.get("outputs", [])
    matching = [o["sha256"] for o in outputs if _key(o["path"]) == path]
    if not matching and len(outputs) == 1:
        matching = [outputs[0]["sha256"]]
    return matching[0] if matching else None


def lineage(path: str | Path, root: str | Path = ".") -> dict:
    """The artifacts behind ``path``, as ``{"root": path, "artifacts": {path: entry}}``.

    Each entry holds the record's rule, wildcards, params, code version, execution host
    (SLURM job where there was one), times and the artifact's recorded ``sha256``, and its
    ``inputs`` as paths that are themselves keys of ``artifacts``. Inputs without a record
    (configuration files, files made outside the workflow) appear with their current hash
    and ``"rule": None``. Paths are relative to ``root``, where the workflow ran.
    """
    root = Path(root)
    requested = _key(path)
    start = recorded_artifact(requested, root)
    artifacts: dict[str, dict] = {}
    pending = [start]
    while pending:
        current = pending.pop()
        if current in artifacts:
            continue
        record = read_record(root / current)
        if record is None:
            exists = (root / current).exists()
            artifacts[current] = {
                "rule": None,
                "sha256": content_hash(root / current) if exists else None,
                "inputs": [],
                "note": "no provenance record" if exists else "missing",
            }
            continue
        inputs = [_key(item["path"]) for group in record.get("inputs", {}).values() for item in group]
        artifacts[current] = {
            **{name: record.get(name) for name in SHOWN_FIELDS},
            # The remote inputs a download read: each repository's commit, each file's sha256.
            **({"read": record["read"]} if record.get("read") else {}),
            "sha256": _recorded_output_hash(record, current),
            "inputs": inputs,
        }
        pending.extend(reversed(inputs))
    graph = {"root": start, "artifacts": artifacts}
    if requested != start:
        graph["requested"] = {"path": requested, "sha256": content_hash(root / requested), "inside": start}
    return graph


def recorded_artifact(path: str, root: Path) -> str:
    """``path`` if it has a record, else the recorded folder it lies in (a study's tables are
    one folder with one record, say), else an error naming both misses."""
    if read_record(root / path) is not None:
        return path
    if (root / path).exists():
        for folder in Path(path).parents:
            if folder != Path(".") and (root / folder / PROVENANCE_NAME).is_file():
                return _key(folder)
    raise FileNotFoundError(
        f"{path}: no provenance record ({provenance_path(root / path)} is missing), and no recorded folder holds it"
    )


def _describe(path: str, entry: dict) -> str:
    if entry["rule"] is None:
        digest = (entry["sha256"] or "")[:12]
        return f"{path}  ({entry['note']}{', sha256 ' + digest if digest else ''})"
    wildcards = " ".join(f"{k}={v}" for k, v in sorted((entry.get("wildcards") or {}).items()))
    code = entry.get("code") or {}
    commit = (code.get("commit") or "unknown")[:10] + (" dirty" if code.get("dirty") else "")
    execution = entry.get("execution") or {}
    where = execution.get("host") or "?"
    if execution.get("slurm_job_id"):
        where += f", SLURM job {execution['slurm_job_id']} on {execution.get('slurm_node')}"
        if execution.get("slurm_gpus"):
            where += f" GPUs {execution['slurm_gpus']}"
    return (
        f"{path}  [rule {entry['rule']}{' ' + wildcards if wildcards else ''}]  "
        f"sha256 {(entry['sha256'] or '?')[:12]}  code {commit}  {entry.get('finished')} on {where}"
    )


def describe_read(item: dict) -> str:
    """A remote input as a step read it: a hub repository at its commit, a file by its sha256."""
    if item.get("revision"):
        subset = f" ({item['name']})" if item.get("name") else ""
        return f"{item.get('kind')} {item.get('repo')}{subset} at commit {item['revision']}"
    return f"{item.get('kind')} {item.get('url') or item.get('package')} sha256 {item.get('sha256')}"


def format_tree(graph: dict, show_params: bool = False) -> str:
    """The lineage as an indented tree, each artifact described and expanded once: a shared
    ancestor's later mentions only name it."""
    artifacts, lines, expanded = graph["artifacts"], [], set()
    requested = graph.get("requested")
    if requested:
        lines.append(
            f"{requested['path']}  sha256 {requested['sha256'][:12]}  (in {requested['inside']}, whose record follows)"
        )

    def visit(path: str, prefix: str, connector: str, child_prefix: str) -> None:
        entry = artifacts[path]
        if path in expanded:
            lines.append(prefix + connector + path + "  (shown above)")
            return
        lines.append(prefix + connector + _describe(path, entry))
        expanded.add(path)
        for item in entry.get("read") or []:
            lines.append(prefix + child_prefix + "    read: " + describe_read(item))
        if show_params and entry.get("params"):
            lines.append(prefix + child_prefix + "    params: " + json.dumps(entry["params"], sort_keys=True))
        for index, child in enumerate(entry["inputs"]):
            last = index == len(entry["inputs"]) - 1
            visit(child, prefix + child_prefix, "└── " if last else "├── ", "    " if last else "│   ")

    # Under the requested file, its folder's record is the one child.
    visit(graph["root"], "", "└── " if requested else "", "    " if requested else "")
    return "\n".join(lines)


@dataclass
class Finding:
    path: str
    problem: str


@dataclass
class Verification:
    checked: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings


def record_files(paths: Iterable[str | Path]) -> list[Path]:
    """Every provenance record at or under ``paths`` (an artifact, its record, or a folder)."""
    found = set()
    for path in map(Path, paths):
        if path.name == PROVENANCE_NAME or path.name.endswith(SIDECAR_SUFFIX):
            found.add(path)
        elif provenance_path(path).is_file():
            found.add(provenance_path(path))
        if path.is_dir():
            found.update(path.rglob(PROVENANCE_NAME))
            found.update(path.rglob(f"*{SIDECAR_SUFFIX}"))
    return sorted(found)


def verify(paths: Iterable[str | Path], root: str | Path = ".") -> Verification:
    """Re-hash every recorded artifact under ``paths``: an output whose content is no longer
    the recorded one was modified after it was made; an input whose content changed since
    the record means the output is out of date. Each file is hashed once."""
    root = Path(root)
    hashes: dict[str, str | None] = {}

    def current(path: str) -> str | None:
        if path not in hashes:
            hashes[path] = content_hash(root / path) if (root / path).exists() else None
        return hashes[path]

    result = Verification()
    found: dict[tuple[str, str], None] = {}  # ordered, and a job's record in each of its outputs counts once
    for record_path in record_files(root / p for p in paths):
        record = json.loads(record_path.read_text())
        result.checked += 1
        for output in record.get("outputs", []):
            now = current(_key(output["path"]))
            if now is None:
                found[(output["path"], "missing")] = None
            elif now != output["sha256"]:
                found[(output["path"], "modified after it was made")] = None
        changed = [
            item["path"]
            for group in record.get("inputs", {}).values()
            for item in group
            if current(_key(item["path"])) != item["sha256"]
        ]
        if changed:
            for output in record.get("outputs", []):
                found[(output["path"], f"inputs changed since it was made: {', '.join(changed)}")] = None
    result.findings = [Finding(path, problem) for path, problem in found]
    return result


def _read_key(item: dict) -> str:
    return f"{item.get('kind')} {item.get('repo') or item.get('url') or item.get('package')}"


def _read_value(item: dict) -> str:
    return str(item.get("revision") or item.get("sha256"))


def verify_downloads(paths: Iterable[str | Path], against: str | Path, root: str | Path = ".") -> Verification:
    """Check the downloads under ``paths`` (records that name what they ``read``: a fresh
    download, say, in a new run folder at ``root``) against the records of the same artifacts
    in the run folder ``against``: each input read at the same commit (or sha256), and each
    downloaded file of the same content."""
    root, against = Path(root), Path(against)
    result = Verification()
    for record_path in record_files(root / p for p in paths):
        record = json.loads(record_path.read_text())
        if not record.get("read"):
            continue
        result.checked += 1
        for output in record.get("outputs", []):
            original = read_record(against / output["path"])
            if original is None:
                result.findings.append(Finding(output["path"], f"no record of it in {against}"))
                continue
            read_then = {_read_key(item): _read_value(item) for item in original.get("read") or []}
            for item in record["read"]:
                then = read_then.get(_read_key(item))
                if then != _read_value(item):
                    result.findings.append(
                        Finding(
                            output["path"], f"read {_read_key(item)} at {_read_value(item)}, the original at {then}"
                        )
                    )
            recorded = {o["path"]: o for o in original.get("outputs", [])}.get(output["path"], {})
            if recorded.get("sha256") != output["sha256"]:
                files, then_files = output.get("files") or {}, recorded.get("files") or {}
                differing = sorted(
                    name
                    for name in set(files) | set(then_files)
                    if (files.get(name) or [None] * 3)[2] != (then_files.get(name) or [None] * 3)[2]
                )
                shown = f": {', '.join(differing)}" if differing else ""
                result.findings.append(Finding(output["path"], f"content differs from the original's{shown}"))
    return result


def provenance_table(paths: Iterable[str | Path], root: str | Path = ".") -> list[dict]:
    """One row per artifact behind ``paths`` (their lineages merged): what made it, from
    which code, where and when, and its content hash."""
    artifacts: dict[str, dict] = {}
    for path in paths:
        artifacts.update(lineage(path, root=root)["artifacts"])
    rows = []
    for path in sorted(artifacts):
        entry = artifacts[path]
        code = entry.get("code") or {}
        execution = entry.get("execution") or {}
        rows.append(
            {
                "artifact": path,
                "rule": entry["rule"],
                "wildcards": " ".join(f"{k}={v}" for k, v in sorted((entry.get("wildcards") or {}).items())),
                "sha256": entry["sha256"],
                "commit": code.get("commit"),
                "dirty": code.get("dirty"),
                "library code": ((entry.get("params") or {}).get("code") or "")[:16] or None,
                "host": execution.get("host"),
                "slurm job": execution.get("slurm_job_id"),
                "gpus": execution.get("slurm_gpus") or execution.get("cuda_visible_devices"),
                "cpu seconds": (execution.get("usage") or {}).get("cpu_seconds"),
                "peak memory MB": (execution.get("usage") or {}).get("max_rss_mb"),
                "finished": entry.get("finished"),
                "inputs": len(entry["inputs"]),
            }
        )
    return rows


def write_provenance_table(paths: Iterable[str | Path], output: str | Path, root: str | Path = ".") -> int:
    """:func:`provenance_table` as a CSV, written atomically; returns its row count."""
    import pandas as pd

    rows = provenance_table(paths, root=root)
    with atomic_path(output) as tmp:
        pd.DataFrame(rows).to_csv(tmp, index=False)
    return len(rows)
