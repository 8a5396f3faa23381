"""The workflow's GPU path on a real GPU, in one command: ``bash bench/gpu_smoke/run --out DIR``.

Steps, each with its own time limit inside one budget (``--budget``: 470 s on a GPU), each recorded in
``DIR/gpu_smoke.json`` as ok, failed (with the end of its error) or skipped:

1. ``environment``: the interpreter, torch, the device (``--device auto``: CUDA where torch
   sees it, else the CPU);
2. ``install``: the wheels in ``--wheels`` (``.gpu-wheels``, made by ``make gpu-smoke-wheels``)
   into a folder put first on PYTHONPATH, without their dependencies, so the machine's own
   torch and transformers stay; then the versions the jobs will import;
3. ``finetune_1b:paper``: one finetune configuration of a 1.24B Llama-shaped model at
   sequence length 2048 with the paper's recipe shape (bench/gpu_smoke/finetune_1b.py): tokens
   per second, MFU against the GPU's dense bf16 peak, peak GPU memory against the memory models;
4. ``workflow``: the embedded default's GPU-routed jobs for one tiny base (tiny_llama) through
   Snakemake with the transformers backend (bench/gpu_smoke/config.yaml: ExPO on the DPO model
   plus one train-before-test job): finetunes in bf16 through torchrun (SFT, DPO, a reward
   model), generation, lm-eval, reward-model grading, extrapolation and the study's tables;
   then its outputs checked: the files, every GPU-routed job's provenance naming the GPU, the
   tables' rows;
5. ``finetune_1b:no_checkpointing``: the same without gradient checkpointing, in what the
   budget has left;
6. ``imports`` (``--record-imports``): every distribution the run's processes imported, each on
   the image's list, in wheels.txt or named optional there.

On the CPU (``--device cpu``, or ``auto`` without a GPU) the same steps run at tiny sizes
(bench/gpu_smoke/config-cpu.yaml; the measured model 2 layers at sequence length 128).
This file imports only the standard library: it reports a broken install instead of failing
with it. The run's logs come back beside the JSON: ``workflow.log`` (Snakemake's output) and
``logs.tar.gz`` (every job's log and the measurements' logs).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
REPORT = "gpu_smoke.json"
SCHEMA = "gpu_smoke/1"
BASE = "tiny_llama"
CONFIG = {"cuda": "bench/gpu_smoke/config.yaml", "cpu": "bench/gpu_smoke/config-cpu.yaml"}
# The one train-before-test job, asked for beside the ExPO study's tables (rule all).
TARGETS = ["all", f"results/scores/train_before_test/{BASE}/pretrained/arc_easy.json"]
# What each GPU path leaves behind, by what it exercises.
OUTPUTS = {
    "finetune (SFT)": f"results/models/{BASE}/sft",
    "finetune (DPO)": f"results/models/{BASE}/dpo",
    "finetune (reward model)": f"results/models/{BASE}/reward",
    "generation": f"results/generations/{BASE}/dpo/alpaca_eval.parquet",
    "lm-eval": f"results/scores/lm_eval/{BASE}/dpo/general.json",
    "reward-model grading": f"results/scores/grade_tiny_rm/{BASE}/dpo/mt_bench.json",
    "win rate": f"results/scores/win_rate_tiny_rm/{BASE}/dpo/alpaca_eval.json",
    "train-before-test": TARGETS[1],
    "extrapolation": f"results/models/{BASE}/dpo+expo0.3",
}
TABLES = ("alpaca_eval", "mt_bench", "lm_eval", "alpha_search", "judge")
# Rules whose jobs ask for the base model's GPUs in this config (its finetune, generate and
# evaluate settings; the reward model's judge jobs take its evaluate settings).
GPU_ROUTED = (
    "finetune",
    "generate",
    "lm_eval",
    "grade",
    "win_rate",
    "pair_accuracy",
    "judge_released",
    "train_before_test",
)
# Seconds each step may take (it is also cut to what is left of the budget). A 1B finetune
# builds and loads 5 GB of weights and writes a ~15 GB checkpoint besides its 10 timed steps.
LIMITS = {
    "cuda": {"environment": 60, "install": 90, "workflow": 240, "finetune_1b": 120},
    "cpu": {"environment": 60, "install": 90, "workflow": 600, "finetune_1b": 120},
}
# The whole run's budget: under 8 minutes on a GPU (a lent GPU's session has 15); a shared
# 2-core CPU takes longer over the same steps at tiny sizes.
BUDGET = {"cuda": 470.0, "cpu": 1200.0}
MEASURED_VARIANTS = ("paper", "no_checkpointing")
# Jobs at once: GPU jobs of tiny models share the one GPU two at a time.
GPU_JOBS = 2
# The packages whose versions the report gives (the machine's or the carried ones).
VERSIONS = (
    "torch",
    "transformers",
    "accelerate",
    "peft",
    "huggingface_hub",
    "tokenizers",
    "safetensors",
    "numpy",
    "pandas",
    "pyarrow",
    "snakemake",
    "trl",
    "datasets",
    "lm_eval",
)
# What the jobs import that the machine's image lacks: a broken install shows up here first.
CARRIED_MODULES = ("snakemake", "trl", "datasets", "lm_eval", "jsonschema", "nltk", "evaluate", "reprolm")
# How long a step past its limit has to stop on SIGTERM before it is killed.
STOP_GRACE_S = 15
ERROR_TAIL = 3000
LOG_TAIL_LINES = 40
PROBE = """
import json, sys
from importlib import metadata
report = {"python": sys.version.split()[0], "executable": sys.executable, "versions": {}, "import_errors": {}}
for name in NAMES:
    try:
        report["versions"][name] = metadata.version(name.replace("_", "-"))
    except metadata.PackageNotFoundError:
        report["versions"][name] = None
for name in MODULES:
    try:
        __import__(name)
    except Exception as error:
        report["import_errors"][name] = f"{type(error).__name__}: {error}"
try:
    import torch
    report["cuda"] = torch.cuda.is_available()
    if report["cuda"]:
        properties = torch.cuda.get_device_properties(0)
        report["gpu"] = {
            "name": torch.cuda.get_device_name(0),
            "count": torch.cuda.device_count(),
            "capability": ".".join(map(str, torch.cuda.get_device_capability(0))),
            "memory_gib": round(properties.total_memory / 2**30, 1),
            "torch_cuda": torch.version.cuda,
        }
except Exception as error:
    report["import_errors"]["torch"] = f"{type(error).__name__}: {error}"
print(json.dumps(report))
"""
IMPORT_MAP = """
import json, sys
from importlib import metadata
from pathlib import Path
folder = Path(sys.argv[1])
names = set()
for record in folder.iterdir():
    names.update(line.strip() for line in record.read_text().splitlines() if line.strip())
owners = metadata.packages_distributions()
third_party = sorted(name for name in names if name not in sys.stdlib_module_names and name in owners)
print(json.dumps({"distributions": sorted({dist for name in third_party for dist in owners[name]})}))
"""


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def tail(text: str, limit: int = ERROR_TAIL) -> str:
    return text[-limit:]


def read_names(path: Path) -> list[str]:
    """The names in a list file: one per line, ``#`` comments and blank lines left out, a
    ``==VERSION`` pin dropped."""
    names = []
    for line in path.read_text().splitlines():
        entry = line.split("#", 1)[0].strip()
        if entry:
            names.append(entry.split("==", 1)[0].strip())
    return names


def canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


class Smoke:
    def __init__(self, args):
        self.args = args
        self.out = args.out
        self.work = args.work
        self.started = time.monotonic()
        # Until the environment step says which: its own limit is the same for both.
        self.device = "cpu"
        self.report: dict = {
            "schema": SCHEMA,
            "started": now(),
            "command": ["bash", "bench/gpu_smoke/run", *args.argv],
            "budget_seconds": args.budget or BUDGET["cpu"],
            "device": {"requested": args.device},
            "steps": {},
            "failures": [],
            "not_covered": read_not_covered(),
        }
        self.env = dict(os.environ)
        self.env.update(
            HF_HUB_OFFLINE="1",
            HF_DATASETS_OFFLINE="1",
            TOKENIZERS_PARALLELISM="false",
            OMP_WAIT_POLICY=self.env.get("OMP_WAIT_POLICY", "PASSIVE"),
            PYTHONUNBUFFERED="1",
        )
        self.python_path = [str(REPO / "src")]
        if args.record_imports:
            self.imports = self.work / "imports"
            self.imports.mkdir(parents=True, exist_ok=True)
            self.env["REPROLM_SMOKE_IMPORTS"] = str(self.imports)
        self.set_python_path()

    # The environment every step's processes get.
    def set_python_path(self, extra: list[str] = ()) -> None:
        recorder = [str(HERE / "record_imports")] if self.args.record_imports else []
        inherited = [p for p in self.env.get("PYTHONPATH", "").split(os.pathsep) if p]
        self.python_path = [*extra, *self.python_path]
        self.env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*recorder, *self.python_path, *inherited]))

    @property
    def budget(self) -> float:
        return self.args.budget or BUDGET[self.device]

    def left(self) -> float:
        return self.budget - (time.monotonic() - self.started)

    def limit(self, step: str) -> float:
        return min(LIMITS[self.device][step.split(":")[0]], self.left())

    def save(self) -> None:
        """The report as it stands (after every step: a run cut short still leaves one)."""
        self.report["wall_seconds"] = round(time.monotonic() - self.started, 1)
        self.report["budget_seconds"] = self.budget
        self.report["within_budget"] = self.report["wall_seconds"] <= self.budget
        target = self.out / REPORT
        partial = target.with_suffix(".json.partial")
        partial.write_text(json.dumps(self.report, indent=2, sort_keys=False) + "\n")
        os.replace(partial, target)

    def record(self, step: str, status: str, seconds: float, error: str | None = None, **details) -> None:
        entry = {"status": status, "seconds": round(seconds, 1), **details}
        if error:
            entry["error"] = tail(error)
            self.report["failures"].append({"step": step, "error": tail(error, 600)})
        self.report["steps"][step] = entry
        self.save()
        print(
            f"[gpu_smoke] {step}: {status} in {seconds:.1f} s" + (f"\n{tail(error, 1500)}" if error else ""), flush=True
        )

    def call(self, command: list[str], limit: float, cwd: Path = REPO, log: Path | None = None):
        """Run a command to its end or its limit (then its whole process group is killed);
        (exit status or None when killed, its output)."""
        with tempfile.TemporaryFile("w+") as output:
            process = subprocess.Popen(
                command, cwd=cwd, env=self.env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
            )
            try:
                status = process.wait(timeout=max(1.0, limit))
            except subprocess.TimeoutExpired:
                # SIGTERM first: Snakemake stops its jobs, and a finetune's launcher passes the
                # stop on to the torchrun workers it started in sessions of their own.
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    pass
                # Whatever of its process group is left.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                status = None
            output.seek(0)
            text = output.read()
        if log is not None:
            log.write_text(text)
        return status, text

    # 1. The interpreter and the device.
    def environment(self) -> None:
        clock = time.monotonic()
        probe = PROBE.replace("NAMES", repr(VERSIONS)).replace("MODULES", "()")
        status, text = self.call([sys.executable, "-c", probe], self.limit("environment"))
        try:
            found = json.loads(text.strip().splitlines()[-1])
        except (ValueError, IndexError):
            found = None
        if status != 0 or found is None:
            self.device = "cpu" if self.args.device == "auto" else self.args.device
            self.report["device"].update(kind=self.device, name=self.device)
            self.record("environment", "failed", time.monotonic() - clock, text or f"exit status {status}")
            return
        if self.args.device == "auto":
            self.device = "cuda" if found.get("cuda") else "cpu"
        else:
            self.device = self.args.device
        gpu = found.get("gpu") or {}
        self.report["device"].update(kind=self.device, name=gpu.get("name", "cpu") if self.device == "cuda" else "cpu")
        self.report["device"].update({key: value for key, value in gpu.items() if key != "name"})
        self.report["host"] = {"python": found["python"], "executable": found["executable"], "cpus": os.cpu_count()}
        error = None
        if self.device == "cuda" and not found.get("cuda"):
            error = "--device cuda, but torch sees no CUDA device"
        self.record("environment", "failed" if error else "ok", time.monotonic() - clock, error)

    # 2. The carried wheels, and what the jobs will import.
    def install(self) -> None:
        """Where there are wheels: install them, then import what the jobs need from the image
        and the wheels together, and ask pip whether their requirements hold. Without wheels
        the environment is the one the jobs have always had: only its versions are read."""
        clock = time.monotonic()
        wheels = sorted(self.args.wheels.glob("*.whl")) if self.args.wheels.is_dir() else []
        details: dict = {"wheels": len(wheels), "wheels_folder": str(self.args.wheels)}
        if wheels:
            site = self.work / "site"
            command = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-cache-dir"]
            status, text = self.call([*command, "--target", str(site), *map(str, wheels)], self.limit("install"))
            if status != 0:
                self.record("install", "failed", time.monotonic() - clock, text or "pip install: time limit")
                return
            self.set_python_path([str(site)])
            check_status, check = self.call([sys.executable, "-m", "pip", "check"], self.limit("install"))
            # pip's view of the merged environment: the image's packages and the carried ones.
            details["pip_check"] = tail(check.strip(), 2000) if check_status else "ok"
        else:
            details["note"] = f"no wheels in {self.args.wheels}: this environment's packages are used"
        modules = CARRIED_MODULES if wheels else ()
        probe = PROBE.replace("NAMES", repr(VERSIONS)).replace("MODULES", repr(modules))
        status, text = self.call([sys.executable, "-c", probe], self.limit("install"))
        try:
            found = json.loads(text.strip().splitlines()[-1])
        except (ValueError, IndexError):
            self.record("install", "failed", time.monotonic() - clock, text, **details)
            return
        self.report["packages"] = found["versions"]
        errors = found["import_errors"]
        error = "\n".join(f"import {name}: {message}" for name, message in errors.items()) or None
        self.record("install", "failed" if error else "ok", time.monotonic() - clock, error, **details)

    # 3. The workflow's GPU path, and its outputs.
    def workflow(self) -> None:
        clock = time.monotonic()
        run = self.work / "run"
        for name in ("workflow", "config", "profiles"):
            shutil.copytree(REPO / name, run / name)
        (run / "bench" / "gpu_smoke").mkdir(parents=True)
        for config in HERE.glob("config*.yaml"):
            shutil.copy(config, run / "bench" / "gpu_smoke" / config.name)
        self.env["HF_HOME"] = str(run / "resources" / "hf_home")
        cores = os.cpu_count() if self.device == "cuda" else 2
        command = [sys.executable, "-m", "snakemake", "--cores", str(cores), "--resources", f"gpu={GPU_JOBS}"]
        command += ["--keep-going", "--configfile", CONFIG[self.device], "--", *TARGETS]
        status, text = self.call(command, self.limit("workflow"), cwd=run, log=self.out / "workflow.log")
        self.run_dir = run
        seconds = time.monotonic() - clock
        checks = self.check_outputs(run)
        error = None
        if status != 0:
            error = "snakemake: " + ("time limit reached" if status is None else f"exit status {status}")
            error += "\n" + failed_job_logs(text, run) + tail(text, 1500)
        problems = checks.pop("problems")
        if problems:
            error = "\n".join(filter(None, [error, *problems]))
        self.report["workflow"] = checks
        self.record("workflow", "failed" if error else "ok", seconds, error, exit_status=status)

    def check_outputs(self, run: Path) -> dict:
        problems = []
        outputs = {what: (run / path).exists() for what, path in OUTPUTS.items()}
        problems += [f"missing output of {what}: {OUTPUTS[what]}" for what, found in outputs.items() if not found]
        expected_gpu = self.report["device"]["name"] if self.device == "cuda" else None
        by_rule: dict[str, dict] = {}
        # One record per output: a job with two outputs is counted once.
        jobs = {}
        for path, record in provenance_records(run):
            key = (record.get("rule"), json.dumps(record.get("wildcards"), sort_keys=True), record.get("started"))
            jobs.setdefault(key, (path, record))
        for path, record in jobs.values():
            rule = record.get("rule")
            usage = record.get("execution", {}).get("usage", {})
            entry = by_rule.setdefault(rule, {"jobs": 0, "wall_seconds": 0.0, "gpu_seconds": 0.0, "gpus": set()})
            entry["jobs"] += 1
            entry["wall_seconds"] += usage.get("wall_seconds") or 0.0
            entry["gpu_seconds"] += usage.get("gpu_seconds") or 0.0
            entry["gpus"].add(usage.get("gpus"))
            if rule not in GPU_ROUTED:
                continue
            named = record.get("execution", {}).get("gpu")
            granted = usage.get("gpus") or 0
            if named != expected_gpu or usage.get("gpu_model") != expected_gpu or bool(granted) != bool(expected_gpu):
                problems.append(
                    f"{path}: rule {rule} ran with gpu {named!r} (usage: {granted} GPUs, "
                    f"{usage.get('gpu_model')!r}); expected {expected_gpu!r}"
                )
        for entry in by_rule.values():
            entry["wall_seconds"] = round(entry["wall_seconds"], 1)
            entry["gpu_seconds"] = round(entry["gpu_seconds"], 1)
            entry["gpus"] = sorted(g for g in entry["gpus"] if g is not None)
        gpu_routed = [rule for rule in GPU_ROUTED if rule in by_rule]
        # A job no GPU was asked for holds none, although every local job sees the GPU: its
        # record must not bill GPU-seconds (the first H200 run found 9 such rules).
        unrouted = sorted(
            rule for rule, entry in by_rule.items() if rule not in GPU_ROUTED and entry["gpu_seconds"] > 0
        )
        problems += [f"rule {rule} asked for no GPU but its records count GPU-seconds" for rule in unrouted]
        tables = {}
        for name in TABLES:
            path = run / "results" / "tables" / "expo" / f"{name}.csv"
            if not path.exists():
                problems.append(f"missing table {path.relative_to(run)}")
                continue
            with path.open() as stream:
                rows = list(csv.DictReader(stream))
            if not rows:
                problems.append(f"table {path.relative_to(run)} has no rows")
            tables[name] = rows
        return {
            "jobs": len(jobs),
            "outputs": outputs,
            "by_rule": by_rule,
            "gpu_routed_rules": gpu_routed,
            "unrouted_rules_with_gpu_seconds": unrouted,
            "tables": tables,
            "problems": problems,
        }

    # 4. One finetune configuration at a useful size.
    def finetune_1b(self, variant: str) -> None:
        step = f"finetune_1b:{variant}"
        if self.left() < 20:
            self.record(step, "skipped", 0.0, note=f"{self.left():.0f} s of the budget left")
            return
        clock = time.monotonic()
        result = self.work / f"finetune_1b_{variant}.json"
        command = [sys.executable, str(HERE / "finetune_1b.py"), "--device", self.device, "--variant", variant]
        command += ["--size", "large" if self.device == "cuda" else "tiny"]
        command += ["--work", str(self.work / f"finetune_1b_{variant}"), "--result", str(result)]
        log = self.work / f"finetune_1b_{variant}.log"
        status, text = self.call(command, self.limit(step), log=log)
        # Its own clean-up does not run when it is killed: ~20 GB of weights and checkpoints.
        shutil.rmtree(self.work / f"finetune_1b_{variant}", ignore_errors=True)
        seconds = time.monotonic() - clock
        if result.exists():
            # Written at the last step, then again at the end: figures even from a run stopped
            # while it saved its final checkpoint.
            self.report.setdefault("finetune_1b", {})[variant] = json.loads(result.read_text())
        if status != 0:
            why = "time limit reached" if status is None else f"exit status {status}"
            self.record(step, "failed", seconds, f"{why}\n{tail(text)}")
            return
        self.record(step, "ok", seconds)

    # With --record-imports: every distribution the run's processes imported.
    def imported(self) -> None:
        clock = time.monotonic()
        env = dict(self.env)
        env.pop("REPROLM_SMOKE_IMPORTS", None)
        recorder = str(HERE / "record_imports")
        env["PYTHONPATH"] = os.pathsep.join(p for p in env["PYTHONPATH"].split(os.pathsep) if p != recorder)
        found = subprocess.run(
            [sys.executable, "-c", IMPORT_MAP, str(self.imports)], env=env, capture_output=True, text=True
        )
        if found.returncode != 0:
            self.record("imports", "failed", time.monotonic() - clock, found.stderr)
            return
        imports = json.loads(found.stdout)
        covered = {canonical(name) for name in read_names(HERE / "image-packages.txt")}
        covered |= {canonical(name) for name in read_names(HERE / "wheels.txt")}
        covered |= {canonical(name) for name in optional_names()}
        imports["not_covered"] = sorted(
            dist for dist in imports["distributions"] if canonical(dist) not in covered | {"reprolm"}
        )
        self.report["imports"] = imports
        error = None
        if imports["not_covered"]:
            error = "imported, but neither on the image nor in wheels.txt: " + ", ".join(imports["not_covered"])
        self.record("imports", "failed" if error else "ok", time.monotonic() - clock, error)

    def logs(self) -> None:
        """Every job's log and the measurements' logs, in one archive beside the report."""
        with tarfile.open(self.out / "logs.tar.gz", "w:gz") as archive:
            run = getattr(self, "run_dir", None)
            if run is not None and (run / "logs").is_dir():
                archive.add(run / "logs", arcname="logs")
            for log in sorted(self.work.glob("finetune_1b_*.log")):
                archive.add(log, arcname=f"finetune_1b/{log.name}")

    def main(self) -> int:
        self.environment()
        if self.report["steps"]["environment"]["status"] == "ok":
            self.install()
        if self.report["steps"].get("install", {}).get("status") == "ok":
            # The paper's recipe first: its MFU is the figure the issue asks for; the variant
            # without gradient checkpointing takes what the budget has left.
            self.finetune_1b(MEASURED_VARIANTS[0])
            self.workflow()
            for variant in MEASURED_VARIANTS[1:]:
                self.finetune_1b(variant)
            if self.args.record_imports:
                self.imported()
        self.logs()
        self.report["finished"] = now()
        self.save()
        print(f"[gpu_smoke] {self.out / REPORT}: {len(self.report['failures'])} failure(s)", flush=True)
        return 1 if self.report["failures"] else 0


def marked_lines(marker: str) -> list[str]:
    """The text after ``marker`` on each of wheels.txt's lines that start with it."""
    lines = (HERE / "wheels.txt").read_text().splitlines()
    return [line[len(marker) :].strip() for line in lines if line.startswith(marker)]


def read_not_covered() -> list[str]:
    """What the carried wheels leave out (wheels.txt's ``# not covered:`` lines)."""
    return marked_lines("# not covered:")


def optional_names() -> list[str]:
    """Distributions imported where installed, not needed on the GPU machine (wheels.txt's
    ``# optional: NAME, NAME -- why`` lines)."""
    return [name.strip() for line in marked_lines("# optional:") for name in line.split("--", 1)[0].split(",")]


def provenance_records(run: Path) -> list[tuple[Path, dict]]:
    records = []
    for folder in ("results", "resources"):
        for path in sorted((run / folder).rglob("*provenance.json")):
            if "checkpoints" in path.parts:
                continue
            try:
                records.append((path.relative_to(run), json.loads(path.read_text())))
            except (OSError, ValueError):
                continue
    return records


def failed_job_logs(output: str, run: Path) -> str:
    """The end of each failed job's log, from Snakemake's ``Error in rule`` blocks."""
    parts, rule = [], None
    for line in output.splitlines():
        stripped = line.strip()
        if stripped.startswith("Error in rule "):
            rule = stripped.removeprefix("Error in rule ").rstrip(":")
        elif rule and stripped.startswith("log: "):
            for name in stripped.removeprefix("log: ").split(" (check log")[0].split(", "):
                path = run / name.strip()
                if path.is_file():
                    lines = path.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
                    parts.append(f"--- rule {rule}: {name.strip()} (last lines)\n" + "\n".join(lines))
            rule = None
    return "\n".join(parts) + ("\n" if parts else "")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/gpu_smoke/run", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=os.environ.get("OUT"), help="folder for gpu_smoke.json")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--wheels", type=Path, default=REPO / ".gpu-wheels", help="carried wheels to install")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a new temporary one)")
    parser.add_argument("--budget", type=float, help="seconds for all steps together (470 on a GPU, 1200 on a CPU)")
    parser.add_argument("--record-imports", action="store_true", help="list every distribution the run imports")
    args = parser.parse_args(argv)
    if args.out is None:
        parser.error("--out DIR (or OUT in the environment) is required")
    args.argv = argv
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    args.out.mkdir(parents=True, exist_ok=True)
    keep = args.work is not None
    args.work = (args.work or Path(tempfile.mkdtemp(prefix="gpu_smoke-"))).resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    try:
        return Smoke(args).main()
    finally:
        if not keep:
            shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
