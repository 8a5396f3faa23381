"""Provenance records and atomic outputs.

Every rule's script runs inside :func:`tracked_step`, which logs to the rule's log file and,
when the body succeeds, writes one ``provenance.json`` per output: inside an output folder,
or as a ``<file>.provenance.json`` sidecar beside an output file.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import logging
import os
import platform
import subprocess
import sys
from collections.abc import Iterator, Mapping
from functools import cache
from importlib import metadata
from pathlib import Path

from reprolm.io import atomic_path

PROVENANCE_NAME = "provenance.json"
# Snakemake marks directory outputs with this file after the job; it is not content.
SNAKEMAKE_MARKER = ".snakemake_timestamp"
SIDECAR_SUFFIX = ".provenance.json"
SECRET_MARKERS = ("token", "secret", "password", "api_key", "apikey", "credential")
TRACKED_PACKAGES = (
    "reprolm", "torch", "transformers", "tokenizers", "datasets", "trl", "peft",
    "deepspeed", "lm_eval", "vllm", "snakemake", "pandas", "pyarrow", "numpy", "scipy",
)
PROJECT_ROOT = Path(__file__).resolve().parents[3]

log = logging.getLogger(__name__)


def provenance_path(output: str | os.PathLike) -> Path:
    path = Path(output)
    return path / PROVENANCE_NAME if path.is_dir() else path.with_name(path.name + SIDECAR_SUFFIX)


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _content_files(folder: Path) -> list[tuple[str, Path]]:
    """A folder's content files by relative path: its own provenance record, Snakemake's
    timestamp marker and Trainer checkpoints are left out, so a hash of them names the
    artifact's content, not when or how it was made."""
    return [(item.relative_to(folder).as_posix(), item) for item in sorted(p for p in folder.rglob("*") if p.is_file())
            if item.relative_to(folder).as_posix() not in (PROVENANCE_NAME, SNAKEMAKE_MARKER)
            and not item.relative_to(folder).as_posix().startswith("checkpoint-")]


def folder_manifest(folder: str | os.PathLike) -> dict[str, list]:
    """Each content file's ``[size, mtime_ns, sha256]``: the record a later check compares
    with a stat per file, hashing again only files whose size or time changed."""
    manifest = {}
    for relative, item in _content_files(Path(folder)):
        stat = item.stat()
        manifest[relative] = [stat.st_size, stat.st_mtime_ns, _file_sha256(item)]
    return manifest


def _manifest_hash(manifest: Mapping[str, list]) -> str:
    digest = hashlib.sha256()
    for relative in sorted(manifest):
        digest.update(relative.encode() + b"\0" + manifest[relative][2].encode() + b"\0")
    return digest.hexdigest()


def content_hash(path: str | os.PathLike) -> str:
    """sha256 of a file, or of a folder's relative paths and content-file hashes."""
    path = Path(path)
    if path.is_file():
        return _file_sha256(path)
    return _manifest_hash({relative: [0, 0, _file_sha256(item)] for relative, item in _content_files(path)})


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
    current = dict(_content_files(Path(root) / folder))
    if set(current) != set(recorded):
        return True
    for relative, item in current.items():
        size, mtime_ns, sha256 = recorded[relative]
        stat = item.stat()
        if (stat.st_size, stat.st_mtime_ns) != (size, mtime_ns) and _file_sha256(item) != sha256:
            return True
    return False


# Where the workflow's folder outputs live (models, raw sources, tokenizers, tables).
FOLDER_RECORDS = ("resources/*/*/" + PROVENANCE_NAME, "results/*/*/" + PROVENANCE_NAME,
                  "results/*/*/*/" + PROVENANCE_NAME)


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


def _output_entry(path: str) -> dict:
    if Path(path).is_dir():
        manifest = folder_manifest(path)
        return {"path": path, "sha256": _manifest_hash(manifest), "files": manifest}
    return {"path": path, "sha256": content_hash(path)}


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


@cache
def code_version() -> dict:
    def git(*args):
        return subprocess.run(
            ["git", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, check=False
        )

    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        return {"commit": None, "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}


@cache
def package_versions() -> dict:
    versions = {"python": platform.python_version()}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = metadata.version(name.replace("_", "-"))
        except metadata.PackageNotFoundError:
            continue
    return versions


def _gpu_model() -> str | None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return None


def _first(env: Mapping, *names: str) -> str | None:
    return next((env[name] for name in names if env.get(name)), None)


def execution_host() -> dict:
    """Where this ran: host, GPU, and the SLURM job when there is one.

    Under the Snakemake SLURM executor a rule runs in a job step: the batch script's SLURM
    variables are removed before its ``srun -n1``, and srun sets the step's own, among them
    SLURM_JOB_ID, SLURMD_NODENAME and, for a GPU request, SLURM_STEP_GPUS (the node's
    indices of the granted GPUs; SLURM_GPUS_ON_NODE is only their count) and
    CUDA_VISIBLE_DEVICES (the indices as the process sees them, which device cgroups
    renumber from 0). SLURM_JOB_GPUS and the node lists cover a workflow run as a whole
    inside an allocation's batch script, where no step variables are set.
    """
    env = os.environ
    return {
        "host": platform.node(),
        "gpu": _gpu_model(),
        "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES"),
        "slurm_job_id": env.get("SLURM_JOB_ID"),
        "slurm_node": _first(env, "SLURMD_NODENAME", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
                             "SLURM_NODELIST"),
        "slurm_gpus": _first(env, "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"),
    }


def is_secret_key(key: str) -> bool:
    lowered = key.lower()
    return any(marker in lowered for marker in SECRET_MARKERS)


def redact(value):
    """A JSON-ready copy of ``value`` with every secret-looking key's value removed."""
    if isinstance(value, Mapping):
        return {
            str(k): ("<redacted>" if is_secret_key(str(k)) else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _named(items) -> dict:
    """Snakemake's Namedlist as a plain dict of its named entries."""
    return {name: value for name, value in items.items()}


def build_record(
    *, rule: str, wildcards: Mapping, params: Mapping, inputs: Mapping[str, list[str]],
    outputs: list[str], seed, started: str, finished: str,
) -> dict:
    return {
        "rule": rule,
        "wildcards": dict(wildcards),
        "params": redact(dict(params)),
        "inputs": {
            name: [{"path": p, "sha256": content_hash(p)} for p in paths]
            for name, paths in inputs.items()
        },
        "outputs": [_output_entry(p) for p in outputs],
        "code": code_version(),
        "packages": package_versions(),
        "execution": execution_host(),
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
    log_path = Path(smk.log[0]) if len(smk.log) else None
    params = _named(smk.params)
    if seed is None:
        seed = params.get("seed", smk.config.get("seed"))
    stack = contextlib.ExitStack()
    with stack:
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
        started = _now()
        step_log = logging.getLogger(f"reprolm.rule.{smk.rule}")
        step_log.info("rule %s wildcards %s", smk.rule, dict(_named(smk.wildcards)))
        yield step_log
        record = build_record(
            rule=smk.rule,
            wildcards=_named(smk.wildcards),
            params=params,
            inputs=_input_groups(smk),
            outputs=[str(p) for p in smk.output],
            seed=seed,
            started=started,
            finished=_now(),
        )
        for output in smk.output:
            write_record(record, str(output))


