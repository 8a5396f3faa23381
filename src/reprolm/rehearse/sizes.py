"""Dataset builds measured at the papers' sizes against what their jobs ask SLURM for.

Each ``dataset`` job of the DAG is run once, outside Snakemake, the way its script runs it
(``build_split`` with the job's params), on schema-true records the project's fixtures
generate (``make_fixture``) at each source's row count: the count of the downloaded source
where ``resources/raw/{source}`` holds it, else the one given (``--rows SOURCE=N``), with
the fixture settings of the source, or of the embedded default's source of the same schema
(``DEFAULT_CONFIG``: a hub source has none, and some fixtures need theirs). The
records are written by one process and the build runs in another, so the build's peak
resident memory (``wait4``'s ``ru_maxrss``) and wall time are its own. Its request is the
job's own where the DAG fixes it, else the one the workflow makes from the data it reads
(``build_request`` on the generated sources). A job whose need is over ``FLAGGED_SHARE`` of
its request is flagged; the figures are kept in ``MEASURED`` for
``reprolm plan``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow.parquet as pq
import yaml

from reprolm.config.resources import build_request
from reprolm.io import atomic_path

FLAGGED_SHARE = 0.8
MEASURED = Path("results") / "rehearsal" / "sizes.json"
SEED = 0
DEFAULT_CONFIG = Path("config") / "config.yaml"
WRITE_SOURCE = """
import sys, json, pyarrow as pa, pyarrow.parquet as pq
from pathlib import Path
from reprolm.data.sources import SPLIT_ORDER
from reprolm.data.upstream import make_fixture
schema, rows, splits, folder = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), Path(sys.argv[4])
made = make_fixture(schema, n=rows, seed=int(sys.argv[5]), **json.loads(sys.argv[6]))
by_split = made if isinstance(made, dict) else {split: made for split in splits}
for split, records in by_split.items():
    pq.write_table(pa.Table.from_pylist(records), folder / f"{split}.parquet")
(folder / SPLIT_ORDER).write_text(json.dumps(list(by_split)))
"""
BUILD = """
import sys, json
from pathlib import Path
from reprolm.data.builders import BuildContext, build_split
from reprolm.length import configured_targets
job = json.loads(sys.argv[1])
context = BuildContext(
    sources={name: Path(path) for name, path in job["folders"].items()},
    schemas=job["schemas"],
    params=job["options"],
    targets=configured_targets(job["length_targets"]),
)
build_split(job["builder"], context, job["split"], job["output"])
"""


@dataclass
class DataJob:
    """What a dataset job builds and asks for, from the DAG."""

    job: str
    dataset: str
    split: str
    builder: str
    options: dict
    schemas: dict
    splits: dict
    fixtures: dict
    length_targets: object
    # None where the job's request comes from its inputs (a dry run has not got them).
    mem_mb: int | None
    runtime_min: int | None


@dataclass
class Measurement:
    job: str
    rows: dict
    peak_mb: float
    seconds: float
    mem_mb: int
    runtime_min: int

    @property
    def flags(self) -> list[str]:
        flags = []
        if self.peak_mb > FLAGGED_SHARE * self.mem_mb:
            flags.append(f"peak memory {self.peak_mb:.0f} MB is over {FLAGGED_SHARE:.0%} of mem_mb {self.mem_mb}")
        if self.seconds > FLAGGED_SHARE * self.runtime_min * 60:
            flags.append(f"{self.seconds:.0f} s is over {FLAGGED_SHARE:.0%} of runtime {self.runtime_min} min")
        return flags


def source_splits_of(spec: Mapping) -> list[str]:
    """The splits a source's spec names (a hub dataset's, or its files')."""
    if "hub" in spec:
        return list(spec["hub"].get("splits") or [spec["hub"].get("split", "train")])
    if "files" in spec:
        return list(spec["files"])
    return ["train"]


def fixture_options(source: str, config: Mapping, default: Mapping) -> dict:
    """Fixture settings (but its size and seed) for generating a source's records."""
    schema = config["sources"][source]["schema"]
    own = [config["sources"][source]]
    alike = [spec for spec in default.get("sources", {}).values() if spec.get("schema") == schema]
    for spec in own + alike:
        if "fixture" in spec:
            return {key: value for key, value in spec["fixture"].items() if key not in ("n", "seed")}
    return {}


def data_jobs(dag) -> list[DataJob]:
    """The DAG's dataset builds from raw sources (not those from generations)."""
    default_path = dag.workdir / DEFAULT_CONFIG
    default = yaml.safe_load(default_path.read_text()) if default_path.is_file() else {}
    jobs = []
    for job in dag.jobs:
        if job.rule.name != "dataset" or not job.params.schemas:
            continue
        sources = dag.config["sources"]
        jobs.append(
            DataJob(
                job=f"{job.wildcards_dict['dataset']}/{job.wildcards_dict['split']}",
                dataset=job.wildcards_dict["dataset"],
                split=job.wildcards_dict["split"],
                builder=job.params.builder,
                options=dict(job.params.options),
                schemas=dict(job.params.schemas),
                splits={name: source_splits_of(sources[name]) for name in job.params.schemas},
                fixtures={name: fixture_options(name, dag.config, default) for name in job.params.schemas},
                length_targets=job.params.length_targets,
                mem_mb=_known(job.resources.get("mem_mb")),
                runtime_min=_known(job.resources.get("runtime")),
            )
        )
    return jobs


def _known(value) -> int | None:
    return value if isinstance(value, int) else None


def downloaded_rows(source: str, workdir: Path) -> int | None:
    """Rows of the largest split of a downloaded source, or None where it is not there."""
    files = sorted((workdir / "resources" / "raw" / source).glob("*.parquet"))
    return max((pq.ParquetFile(path).metadata.num_rows for path in files), default=None)


def _peak_mb_and_seconds(command: list[str], what: str) -> tuple[float, float]:
    # The child's output goes to a file: a full pipe would stall it while wait4 waits.
    with tempfile.TemporaryFile(mode="w+") as output:
        start = time.monotonic()
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.monotonic() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            output.seek(0)
            raise RuntimeError(f"{what} failed (exit {process.returncode}):\n{output.read()[-3000:]}")
    # ru_maxrss is in KiB on Linux.
    return usage.ru_maxrss / 1024, seconds


def measure(job: DataJob, rows: Mapping[str, int], scratch: Path) -> Measurement:
    """The build's peak memory and wall time on generated sources of ``rows`` rows."""
    folders = {}
    for source, schema in job.schemas.items():
        folder = scratch / job.job.replace("/", "_") / source
        folder.mkdir(parents=True)
        command = [sys.executable, "-c", WRITE_SOURCE, schema, str(rows[source])]
        options = [json.dumps(job.splits[source]), str(folder), str(SEED), json.dumps(job.fixtures[source])]
        subprocess.run(command + options, check=True)
        folders[source] = str(folder)
    # As the workflow asks at run time, from the data it reads, unless the job's is fixed.
    request = build_request(list(folders.values()))
    spec = {**asdict(job), "folders": folders, "output": str(scratch / job.job.replace("/", "_") / "built.parquet")}
    peak_mb, seconds = _peak_mb_and_seconds([sys.executable, "-c", BUILD, json.dumps(spec)], f"building {job.job}")
    return Measurement(
        job.job,
        {s: rows[s] for s in job.schemas},
        peak_mb,
        seconds,
        job.mem_mb or request["mem_mb"],
        job.runtime_min or request["runtime"],
    )


def measure_all(jobs: list[DataJob], rows: Mapping[str, int], workdir: Path) -> tuple[list[Measurement], list[str]]:
    """Measurements of the jobs whose sources have a row count, and the jobs skipped (why)."""
    measurements, skipped = [], []
    with tempfile.TemporaryDirectory(prefix="reprolm-sizes-") as scratch:
        for job in jobs:
            counts = {source: rows.get(source) or downloaded_rows(source, workdir) for source in job.schemas}
            missing = sorted(source for source, count in counts.items() if not count)
            if missing:
                skipped.append(f"{job.job}: no row count for {', '.join(missing)} (give --rows SOURCE=N)")
                continue
            measurements.append(measure(job, counts, Path(scratch)))
    return measurements, skipped


def save(measurements: list[Measurement], workdir: Path) -> Path:
    """The figures for ``reprolm plan``: per rule and job, seconds and peak memory."""
    path = workdir / MEASURED
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        Path(tmp).write_text(
            json.dumps({"dataset": {m.job: {"seconds": m.seconds, "peak_mb": m.peak_mb} for m in measurements}})
        )
    return path
