"""Data and CPU scoring jobs measured at the papers' sizes against what they ask SLURM for.

Each ``dataset`` job of the DAG is run once, outside Snakemake, the way its script runs it
(``build_split`` with the job's params), on schema-true records the project's fixtures
generate (``make_fixture``) at each source's row count: the count of the downloaded source
where ``resources/raw/{source}`` holds it, else the one given (``--rows SOURCE=N``), with
the fixture settings of the source, or of the embedded default's source of the same schema
(``DEFAULT_CONFIG``: a hub source has none, and some fixtures need theirs). The
records are written by one process and the build runs in another, so the build's peak
resident memory (``wait4``'s ``ru_maxrss``) and wall time are its own. Its request is the
job's own where the DAG fixes it, else the one the workflow makes from the data it reads
(``build_request`` on the generated sources).

A dataset built from a policy's judged samples (``from_generations``: FLR's online pairs)
is measured on generations of its prompt set's measured build, as a score job's below, each
sample with a random grade.

Each ``score`` job is measured the same way on generations made from its prompt set's
dataset as measured above: every row answered ``n`` times (the prompt set's samples) with a
text of up to ``max_new_tokens`` words, scored by the job's metric with the job's settings
and the files it reads (``compute``; a sentence encoder, the generating model's tokenizer,
NLTK data: where one is not there yet, the job is not measured and the note says which). A
score job that asks for a GPU (a metric that runs a sentence encoder) is measured where it
will run: one SLURM job with the job's own request, as the installed plugin builds it
(``sbatch --wait``), in a scratch folder inside the workflow's folder (the file system the
nodes share); one that fails there (its time limit, its memory) is flagged with SLURM's
words. Score jobs alike in metric, prompt set and request are measured once and the figure
stands for each of them.

A job that a study says streams a dataset's rows through a judge (``Study.streamed_job``:
a model ranking that scores every answer x follow-up pair, 3.7 million of WildBench's) is
modelled, its host memory only: the job's own code runs here on a tiny stand-in judge over
evenly spaced rows of the dataset's measured build, as many as make each of two counts of
its units (``STREAMED_UNITS``), and the peak at the larger grows by the slope between them
to the build's full count (the real judge's weights, which the stand-in's leave out, go to
its GPU).

A job whose need is over ``FLAGGED_SHARE`` of its request is flagged, with the key that
sizes it; the figures are kept in ``MEASURED`` (per rule and job) for ``reprolm plan``.
"""

from __future__ import annotations

import inspect
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from reprolm.config import overlays
from reprolm.config.lookups import promptset_spec
from reprolm.config.resources import build_request
from reprolm.data.fixture_world import passage, question
from reprolm.data.upstream import UPSTREAM_SCHEMAS
from reprolm.io import atomic_path
from reprolm.need import MEASURED
from reprolm.rehearse.submissions import JOB_NAMING, config_key, sbatch_options
from reprolm.score.metrics import metric_stage
from reprolm.studies.base import streamed_job

FLAGGED_SHARE = 0.8
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
import reprolm.studies  # the studies register their own dataset builders
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
# Generations of a built dataset as the generate rule writes them: the row, its prompt, the
# sample's index and its text (a fixture passage, ending in a number for the answer metrics).
WRITE_GENERATIONS = """
import sys, json, random, pyarrow as pa, pyarrow.parquet as pq
from reprolm.data.fixture_world import passage
dataset, samples, words, output, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
rng = random.Random(seed)
rows = pq.read_table(dataset).to_pylist()
made = [
    {**row, "prompt": str(row.get("Instruction") or row.get("instruction") or ""), "sample": index,
     "text": passage(rng, rng.randint(1, words)) + f" The answer is {rng.randint(0, 999)}."}
    for row in rows
    for index in range(samples)
]
pq.write_table(pa.Table.from_pylist(made), output)
"""
# A judge's grades of such generations, one per sample, as the grade rule writes them.
WRITE_GRADES = """
import sys, json, random, pyarrow.parquet as pq
generations, output, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(seed)
ids = pq.read_table(generations, columns=["id"]).column("id").to_pylist()
json.dump({"ids": ids, "grades": [[rng.random()] for _ in ids]}, open(output, "w"))
"""
SCORE = """
import sys, json
import pyarrow.parquet as pq
from reprolm.score.metrics import compute
job = json.loads(sys.argv[1])
compute(job["metric"], pq.read_table(job["generations"]).to_pylist(), job["context"])
"""
# Inside a SLURM measurement job: the score measured as above, its figures written as JSON.
MEASURE_IN_JOB = """
import json, sys
from reprolm.rehearse.sizes import SCORE, peak_mb_and_seconds
spec, result = sys.argv[1], sys.argv[2]
peak_mb, seconds = peak_mb_and_seconds([sys.executable, "-c", SCORE, open(spec).read()], "scoring")
json.dump({"peak_mb": peak_mb, "seconds": seconds}, open(result, "w"))
"""
# A streamed job's code (a study's "module:function") on a stand-in judge over some rows.
RUN_STREAMED = """
import importlib, json, sys
job = json.loads(sys.argv[1])
module, function = job["run"].split(":")
getattr(importlib.import_module(module), function)(job["judge"], job["rows"], job["options"])
"""
# The two counts of a streamed job's units it is run at; the stand-in judge's sizes.
STREAMED_UNITS = (2_000, 20_000)
STAND_IN_JUDGE = {
    "architecture": "llama",
    "hidden_size": 32,
    "num_layers": 2,
    "num_heads": 2,
    "intermediate_size": 64,
    "max_positions": 8192,
}
# The scratch folder of the measurement jobs, inside the workflow's folder.
CLUSTER_SCRATCH = Path(".snakemake") / "rehearsal-sizes"
MEASUREMENT_JOB_NAME = "reprolm-rehearsal-sizes"
# How long a measurement job may wait in the queue before the rehearsal gives up on it.
QUEUE_WAIT_S = 1800
# The score job's inputs a measurement reads, as the score script hands them to the metric.
SCORE_ASSETS = {"encoder": "encoder_dir", "model": "tokenizer_dir"}


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
    # A dataset of judged samples: the prompt set's dataset and split, samples per row and
    # words per sample.
    from_generations: dict | None = None


@dataclass
class ScoreJob:
    """Score jobs alike in metric, prompt set, settings and request, from the DAG."""

    jobs: list[str]
    metric: str
    promptset: str
    dataset: str
    split: str
    samples: int
    words: int
    context: dict
    mem_mb: int
    runtime_min: int
    # The config stage that sizes them, and the keys that set their memory and time.
    stage: str
    keys: set
    # The files the job reads besides its generations (``SCORE_ASSETS``, ``nltk_data``).
    assets: dict = field(default_factory=dict)
    # GPUs it asks for, and its sbatch command line as the plugin builds it: measured there.
    gpus: int = 0
    call: str = ""


@dataclass
class Measurement:
    job: str
    rows: dict
    peak_mb: float
    seconds: float
    mem_mb: int
    runtime_min: int
    rule: str = "dataset"
    # Only its memory is modelled (its wall time is a GPU's, not measured here).
    memory_only: bool = False
    # The DAG's jobs the figure stands for (the job itself unless alike jobs share it).
    jobs: list[str] | None = None
    # The config keys to change for a flagged request (none: the profile sizes the job).
    change: str = ""
    # Where it was measured: here, or the SLURM job that ran it with the job's request.
    where: str = "here"
    # Why a measurement job ended without figures (SLURM's words: its time or memory limit).
    failed: str = ""

    @property
    def flags(self) -> list[str]:
        if self.failed:
            return [f"failed with its request on the cluster: {self.failed}"]
        flags = []
        if self.peak_mb > FLAGGED_SHARE * self.mem_mb:
            flags.append(f"peak memory {self.peak_mb:.0f} MB is over {FLAGGED_SHARE:.0%} of mem_mb {self.mem_mb}")
        if not self.memory_only and self.seconds > FLAGGED_SHARE * self.runtime_min * 60:
            flags.append(f"{self.seconds:.0f} s is over {FLAGGED_SHARE:.0%} of runtime {self.runtime_min} min")
        return flags


@dataclass
class StreamedJob:
    """A job that streams a dataset's rows through a judge, from the DAG and its study."""

    job: str
    rule: str
    dataset: str
    run: str
    options: dict
    units_per_row: int
    unit: str
    mem_mb: int
    runtime_min: int
    change: str


def source_splits_of(spec: Mapping) -> list[str]:
    """The splits a source's spec names (a hub dataset's, or its files')."""
    if "hub" in spec:
        return list(spec["hub"].get("splits") or [spec["hub"].get("split", "train")])
    if "files" in spec:
        return list(spec["files"])
    return ["train"]


def fixture_options(source: str, config: Mapping, default: Mapping) -> dict:
    """Fixture settings (but its size and seed) for generating a source's records; a fixture
    that makes several splits makes those the source names (a hub source's)."""
    schema = config["sources"][source]["schema"]
    own = [config["sources"][source]]
    alike = [spec for spec in default.get("sources", {}).values() if spec.get("schema") == schema]
    options = next(
        (
            {key: value for key, value in spec["fixture"].items() if key not in ("n", "seed")}
            for spec in own + alike
            if "fixture" in spec
        ),
        {},
    )
    fixture = UPSTREAM_SCHEMAS.get(schema).fixture
    if "hub" in own[0] and fixture is not None and "splits" in inspect.signature(fixture).parameters:
        options["splits"] = source_splits_of(own[0])
    return options


def _judged_samples(config: Mapping, dataset: str) -> dict | None:
    online = config["datasets"][dataset].get("from_generations")
    if online is None:
        return None
    spec = promptset_spec(config, online["promptset"])
    return {
        "dataset": f"{spec['dataset']}/{spec['split']}",
        "samples": spec["sampling"].get("n", 1),
        "words": spec["sampling"]["max_new_tokens"],
    }


def data_jobs(dag) -> list[DataJob]:
    """The DAG's dataset builds."""
    default_path = dag.workdir / DEFAULT_CONFIG
    default = overlays.load(default_path, default_path.parents[1]) if default_path.is_file() else {}
    jobs = []
    for job in dag.jobs:
        if job.rule.name != "dataset":
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
                from_generations=_judged_samples(dag.config, job.wildcards_dict["dataset"]),
            )
        )
    return jobs


def score_jobs(dag, requests: Sequence = ()) -> list[ScoreJob]:
    """The DAG's score jobs, alike ones together; ``requests``: each job's sbatch request as
    the plugin builds it (``plugin_requests``, in the order of the DAG's jobs)."""
    config = dag.config
    calls = [request.call for request in requests]
    groups: dict[tuple, ScoreJob] = {}
    for index, job in enumerate(dag.jobs):
        if job.rule.name != "score":
            continue
        wildcards = dict(job.wildcards_dict)
        metric, promptset = wildcards["metric"], wildcards["promptset"]
        spec = promptset_spec(config, promptset)
        assets = {"nltk_data": list(getattr(job.input, "nltk_data", []))}
        assets |= {name: files[0] for key, name in SCORE_ASSETS.items() if (files := getattr(job.input, key, []))}
        context = {"length_targets": job.params.length_targets, **job.params.settings}
        gpus = int(job.resources.get("gpu") or 0)
        request = (job.resources.get("mem_mb"), job.resources.get("runtime"), gpus)
        key = (metric, promptset, json.dumps([context, assets], sort_keys=True, default=str), request)
        if key not in groups:
            groups[key] = ScoreJob(
                jobs=[],
                metric=metric,
                promptset=promptset,
                dataset=spec["dataset"],
                split=spec["split"],
                samples=spec["sampling"].get("n", 1),
                words=spec["sampling"]["max_new_tokens"],
                context=context,
                mem_mb=request[0],
                runtime_min=request[1],
                stage=metric_stage(metric),
                keys=set(),
                assets=assets,
                gpus=gpus,
                call=calls[index] if index < len(calls) else "",
            )
        group = groups[key]
        group.jobs.append("/".join(wildcards.values()))
        group.keys |= {
            config_key(config, wildcards["base"], group.stage, resource) for resource in ("mem_mb", "runtime")
        }
    return list(groups.values())


def streamed_jobs(dag) -> list[StreamedJob]:
    """The DAG's jobs that a study says stream a dataset's rows (``Study.streamed_job``)."""
    jobs = []
    for job in dag.jobs:
        wildcards = dict(job.wildcards_dict)
        streamed = streamed_job(dag.config, job.rule.name, wildcards, job.params, job.input, dag.workdir)
        if streamed is None:
            continue
        jobs.append(
            StreamedJob(
                job="/".join(wildcards.values()),
                rule=job.rule.name,
                dataset=streamed["dataset"],
                run=streamed["run"],
                options=streamed["options"],
                units_per_row=streamed["units_per_row"],
                unit=streamed["unit"],
                mem_mb=job.resources.get("mem_mb"),
                runtime_min=job.resources.get("runtime"),
                change=config_key(dag.config, streamed["base"], streamed["stage"], "mem_mb"),
            )
        )
    return jobs


@dataclass
class StreamedMemory:
    """A streamed job's peak host memory (MB) at two counts of its units, and the growth per unit."""

    units: tuple[int, int]
    peak_mb: tuple[float, float]

    @property
    def kib_per_unit(self) -> float:
        return max(0.0, (self.peak_mb[1] - self.peak_mb[0]) * 1024 / (self.units[1] - self.units[0]))

    def at(self, units: int) -> float:
        return self.peak_mb[1] + self.kib_per_unit / 1024 * max(0, units - self.units[1])


def stand_in_judge(folder: Path) -> Path:
    """A tiny randomly initialised judge with a BPE tokenizer and a chat template."""
    from reprolm.models.tiny import build_tiny_model
    from reprolm.models.tokenizer import train_bpe_tokenizer

    rng = random.Random(SEED)
    tokenizer = train_bpe_tokenizer([passage(rng, 40) for _ in range(200)] + [question(rng) for _ in range(200)], 400)
    build_tiny_model(STAND_IN_JUDGE, tokenizer, seed=SEED).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def streamed_memory(job: StreamedJob, rows: Path, units: Sequence[int], folder: Path, judge: Path) -> StreamedMemory:
    """Peak host memory of ``job``'s code with ``judge`` over evenly spaced rows of ``rows``,
    as many as make each count of ``units``."""
    table = pq.read_table(rows)
    peaks, counted = [], []
    for wanted in units:
        count = min(table.num_rows, -(-wanted // job.units_per_row))
        subset = folder / f"rows-{count}.parquet"
        pq.write_table(table.take([k * table.num_rows // count for k in range(count)]), subset)
        spec = {"run": job.run, "judge": str(judge), "rows": str(subset), "options": job.options}
        command = [sys.executable, "-c", RUN_STREAMED, json.dumps(spec)]
        peaks.append(peak_mb_and_seconds(command, f"{job.rule} {job.job} on {count} rows")[0])
        counted.append(count * job.units_per_row)
    return StreamedMemory(tuple(counted), tuple(peaks))


def measure_streamed(job: StreamedJob, rows: Path, scratch: Path) -> Measurement:
    """A streamed job's peak host memory at its build's full count of units, modelled from
    the stand-in's at ``STREAMED_UNITS``."""
    folder = scratch / "streamed" / job.job.replace("/", "_")
    folder.mkdir(parents=True)
    memory = streamed_memory(job, rows, STREAMED_UNITS, folder, stand_in_judge(folder / "judge"))
    count = pq.ParquetFile(rows).metadata.num_rows
    units = count * job.units_per_row
    return Measurement(
        job.job,
        {"rows": count, job.unit: units},
        memory.at(units),
        0.0,
        job.mem_mb,
        job.runtime_min,
        rule=job.rule,
        memory_only=True,
        jobs=[job.job],
        change=job.change,
        where=(
            f"here, modelled: a tiny stand-in judge at {memory.units[0]:,} and {memory.units[1]:,} {job.unit} "
            f"({memory.peak_mb[0]:.0f} and {memory.peak_mb[1]:.0f} MB, {memory.kib_per_unit:.2f} KiB per {job.unit[:-1]})"
        ),
    )


def _known(value) -> int | None:
    return value if isinstance(value, int) else None


def downloaded_rows(source: str, workdir: Path) -> int | None:
    """Rows of the largest split of a downloaded source, or None where it is not there."""
    files = sorted((workdir / "resources" / "raw" / source).glob("*.parquet"))
    return max((pq.ParquetFile(path).metadata.num_rows for path in files), default=None)


def peak_mb_and_seconds(command: list[str], what: str) -> tuple[float, float]:
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
    peak_mb, seconds = peak_mb_and_seconds([sys.executable, "-c", BUILD, json.dumps(spec)], f"building {job.job}")
    return Measurement(
        job.job,
        {s: rows[s] for s in job.schemas},
        peak_mb,
        seconds,
        job.mem_mb or request["mem_mb"],
        job.runtime_min or request["runtime"],
        jobs=[job.job],
    )


def _write_generations(built: Path, samples: int, words: int, folder: Path) -> Path:
    folder.mkdir(parents=True)
    generations = folder / "generations.parquet"
    command = [sys.executable, "-c", WRITE_GENERATIONS, str(built), str(samples), str(words)]
    subprocess.run(command + [str(generations), str(SEED)], check=True)
    return generations


def measure_judged(job: DataJob, built: Path, scratch: Path) -> Measurement:
    """A build from judged samples: its peak memory and wall time on generations of the
    prompt set's built dataset, each sample graded."""
    online = job.from_generations
    folder = scratch / job.job.replace("/", "_")
    generations = _write_generations(built, online["samples"], online["words"], folder)
    grades = folder / "grades.json"
    subprocess.run([sys.executable, "-c", WRITE_GRADES, str(generations), str(grades), str(SEED)], check=True)
    folders = {"generations": str(generations), "grades": str(grades)}
    spec = {**asdict(job), "folders": folders, "output": str(folder / "built.parquet")}
    peak_mb, seconds = peak_mb_and_seconds([sys.executable, "-c", BUILD, json.dumps(spec)], f"building {job.job}")
    request = build_request([str(generations), str(grades)])
    return Measurement(
        job.job,
        {"generations": pq.ParquetFile(generations).metadata.num_rows},
        peak_mb,
        seconds,
        job.mem_mb or request["mem_mb"],
        job.runtime_min or request["runtime"],
        jobs=[job.job],
    )


def measure_score(
    group: ScoreJob, built: Path, scratch: Path, on_cluster: bool = False, env: Mapping | None = None
) -> Measurement:
    """A score job's peak memory and wall time on generations of the built dataset: here, or
    (``on_cluster``, ``scratch`` on the nodes' shared file system) in a SLURM job with the
    job's own request."""
    folder = scratch / "score" / group.jobs[0].replace("/", "_")
    generations = _write_generations(built, group.samples, group.words, folder)
    spec = {"metric": group.metric, "generations": str(generations), "context": {**group.context, **group.assets}}
    measured = Measurement(
        group.jobs[0],
        {"generations": pq.ParquetFile(generations).metadata.num_rows},
        0.0,
        0.0,
        group.mem_mb,
        group.runtime_min,
        rule="score",
        jobs=group.jobs,
        change=", ".join(sorted(group.keys)),
    )
    if not on_cluster:
        command = [sys.executable, "-c", SCORE, json.dumps(spec, default=str)]
        measured.peak_mb, measured.seconds = peak_mb_and_seconds(command, f"scoring {group.jobs[0]}")
        return measured
    (folder / "spec.json").write_text(json.dumps(spec, default=str))
    result, log = folder / "measured.json", folder / "slurm-%j.log"
    command = shlex.join([sys.executable, "-c", MEASURE_IN_JOB, str(folder / "spec.json"), str(result)])
    environment = None if env is None else dict(env)
    with tempfile.TemporaryFile(mode="w+") as said:
        submitted = subprocess.Popen(
            measurement_job(group.call, log, command),
            cwd=folder,
            stdout=said,
            stderr=subprocess.STDOUT,
            env=environment,
        )
        try:
            submitted.wait(timeout=group.runtime_min * 60 + QUEUE_WAIT_S)
            waited = True
        except subprocess.TimeoutExpired:
            submitted.kill()
            submitted.wait()
            waited = False
        said.seek(0)
        told = [line.strip() for line in said.read().splitlines() if line.strip()]
    job_id = told[0].split(";")[0] if told and told[0].split(";")[0].isdigit() else ""
    measured.where = f"SLURM job {job_id}" if job_id else "SLURM"
    if not waited:
        if job_id:
            subprocess.run(["scancel", job_id], capture_output=True, env=environment)
        measured.failed = (
            f"did not end within its runtime ({group.runtime_min} min) and {QUEUE_WAIT_S // 60} min in the queue"
        )
    elif result.is_file():
        figures = json.loads(result.read_text())
        measured.peak_mb, measured.seconds = figures["peak_mb"], figures["seconds"]
    else:
        logged = [line.strip() for path in sorted(folder.glob("slurm-*.log")) for line in path.read_text().splitlines()]
        told = [line for line in logged if line] + told[1 if job_id else 0 :]
        measured.failed = told[-1] if told else f"sbatch exited {submitted.returncode}"
    return measured


def measurement_job(call: str, log: Path, command: str) -> list[str]:
    """An sbatch command line that runs ``command`` with the resources of ``call`` (a job's
    request as the plugin builds it: partition, account, GPUs, CPUs, memory, time) and waits
    for it to end."""
    words = shlex.split(call)
    asked = [word for option, value in sbatch_options(call) if option not in JOB_NAMING for word in (option, value)]
    return [
        words[0],
        "--parsable",
        "--wait",
        f"--job-name={MEASUREMENT_JOB_NAME}",
        f"--output={log}",
        *[word for word in asked if word is not None],
        f"--wrap={command}",
    ]


def missing_assets(group: ScoreJob, workdir: Path) -> list[str]:
    """The files a score job reads that are not made yet (the workflow fetches or makes them
    before the job: its encoder, the generating model, NLTK data)."""
    paths = [group.assets.get(name) for name in SCORE_ASSETS.values()] + list(group.assets.get("nltk_data", []))
    return [path for path in paths if path and not (workdir / path).exists()]


def measure_all(
    jobs: list[DataJob],
    rows: Mapping[str, int],
    workdir: Path,
    scores: list[ScoreJob] = (),
    on_cluster: bool = False,
    env: Mapping | None = None,
    streamed: list[StreamedJob] = (),
) -> tuple[list[Measurement], list[str]]:
    """Measurements of the dataset jobs whose sources have a row count, then of the score
    jobs on what those built (``on_cluster``: those asking for a GPU in a SLURM job each, with
    ``env``), then the streamed jobs' modelled memory, and the jobs skipped or failed
    (why: a failure's exception)."""
    measurements, skipped, built = [], [], {}
    with tempfile.TemporaryDirectory(prefix="reprolm-sizes-") as scratch:
        for job in jobs:
            if job.from_generations:
                continue
            unmade = sorted(
                source for source, schema in job.schemas.items() if UPSTREAM_SCHEMAS.get(schema).fixture is None
            )
            if unmade:
                skipped.append(f"{job.job}: no schema-true generator (fixture) for {', '.join(unmade)}")
                continue
            counts = {source: rows.get(source) or downloaded_rows(source, workdir) for source in job.schemas}
            missing = sorted(source for source, count in counts.items() if not count)
            if missing:
                skipped.append(f"{job.job}: no row count for {', '.join(missing)} (give --rows SOURCE=N)")
                continue
            try:
                measurements.append(measure(job, counts, Path(scratch)))
            except RuntimeError as error:
                skipped.append(f"{job.job}: {_last_line(error)}")
                continue
            built[job.job] = Path(scratch) / job.job.replace("/", "_") / "built.parquet"
        for job in jobs:
            if not job.from_generations:
                continue
            prompts = job.from_generations["dataset"]
            if prompts not in built:
                skipped.append(f"{job.job}: its prompt set's dataset {prompts} was not built")
                continue
            try:
                measurements.append(measure_judged(job, built[prompts], Path(scratch)))
            except RuntimeError as error:
                skipped.append(f"{job.job}: {_last_line(error)}")
        for group in scores:
            dataset = f"{group.dataset}/{group.split}"
            missing = missing_assets(group, workdir)
            if dataset not in built:
                skipped.append(f"score {group.jobs[0]} ({len(group.jobs)} jobs): its dataset {dataset} was not built")
            elif missing:
                skipped.append(
                    f"score {group.jobs[0]} ({len(group.jobs)} jobs): reads {', '.join(missing)}, not made yet "
                    f"(make it first, snakemake {' '.join(missing)}, then rehearse again)"
                )
            elif group.gpus and not group.call:
                skipped.append(
                    f"score {group.jobs[0]} ({len(group.jobs)} jobs): the SLURM plugin built no request for it "
                    "(see the submissions)"
                )
            elif group.gpus and not on_cluster:
                skipped.append(
                    f"score {group.jobs[0]} ({len(group.jobs)} jobs): asks for a GPU, measured on the cluster only"
                )
            elif group.gpus:
                shared = workdir / CLUSTER_SCRATCH
                shutil.rmtree(shared, ignore_errors=True)
                try:
                    measurements.append(measure_score(group, built[dataset], shared, on_cluster=True, env=env))
                finally:
                    shutil.rmtree(shared, ignore_errors=True)
            else:
                try:
                    measurements.append(measure_score(group, built[dataset], Path(scratch)))
                except RuntimeError as error:
                    skipped.append(f"score {group.jobs[0]}: {_last_line(error)}")
        for job in streamed:
            if job.dataset not in built:
                skipped.append(f"{job.rule} {job.job}: its dataset {job.dataset} was not built")
                continue
            try:
                measurements.append(measure_streamed(job, built[job.dataset], Path(scratch)))
            except RuntimeError as error:
                skipped.append(f"{job.rule} {job.job}: {_last_line(error)}")
    return measurements, skipped


def _last_line(error: RuntimeError) -> str:
    """What failed and the failing process's last line (its exception)."""
    lines = str(error).strip().splitlines()
    return f"{lines[0]} {lines[-1]}" if len(lines) > 1 else lines[0]


def save(measurements: list[Measurement], workdir: Path) -> Path:
    """The figures for ``reprolm plan``: per rule and job, seconds and peak memory (a
    measurement's figure for each job it stands for)."""
    path = workdir / MEASURED
    path.parent.mkdir(parents=True, exist_ok=True)
    figures: dict[str, dict] = {}
    for m in measurements:
        if m.failed or m.memory_only:
            continue
        for job in m.jobs or [m.job]:
            figures.setdefault(m.rule, {})[job] = {"seconds": m.seconds, "peak_mb": m.peak_mb}
    with atomic_path(path) as tmp:
        Path(tmp).write_text(json.dumps(figures))
    return path
