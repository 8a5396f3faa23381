"""What a change will rerun, and what that costs, before anything runs: ``reprolm impact``.

A change is a config (``--configfile``, or ``--config KEY=VALUE`` laid over the current one)
or code (the working tree against a git revision, ``--rev``). Both sides are read the way
Snakemake reads them: the workflow is parsed and its whole DAG built (Snakemake's own API, in
one process), and every job is described by what Snakemake's rerun triggers compare
(:data:`TRIGGERS`): its params (the library code's fingerprint, ``params.code``, apart), its
input files, its rule's code and its software environment. A job of the changed side reruns
when one of these differs from the same job (the same outputs) of the current side, when it
is new, or when a job it reads from reruns (``upstream``): what ``snakemake -n`` would say
after a finished run of the current side.

The cost of the rerun jobs is ``reprolm plan``'s model of them (:mod:`reprolm.plan`),
calibrated on the records of this run's artifacts where there are any.

Both sides are read by :mod:`reprolm.dag_jobs`; ``--rev`` describes the jobs of another
revision's tree by running that module with the tree's package (:func:`reprolm.dag_jobs.job_states`).
"""

from __future__ import annotations

import io
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from reprolm.config.overlays import load
from reprolm.dag_jobs import SNAKEFILE, JobState, dag_states, job_states
from reprolm.provenance.hashing import provenance_path
from reprolm.stages import RULE_STAGES, stage_of

# Snakemake's rerun triggers, in the words of `--rerun-triggers` (``code`` here also covers
# the library code a job runs, its ``params.code``), then what a dry run adds.
TRIGGERS = ("params", "input", "code", "software-env")
NEW, UPSTREAM = "new", "upstream"
# The rules whose jobs the summary line counts, by what they make.
RETRAINS = ("finetune", "train_before_test", "build_base_model", "extrapolate")
REGENERATES = ("generate", "generate_api")
RESCORES = ("score", "lm_eval")


@dataclass
class Rerun:
    """A job the change reruns, and why: Snakemake's triggers (:data:`TRIGGERS`), ``new``
    (its outputs are not made by the current side), or ``upstream`` alone."""

    key: str
    state: JobState
    reasons: list[str]


def reruns(current: Mapping[str, JobState], changed: Mapping[str, JobState]) -> list[Rerun]:
    """The jobs of ``changed`` that rerun after a finished run of ``current``, in DAG order."""
    own: dict[str, list[str]] = {}
    for key, state in changed.items():
        before = current.get(key)
        if before is None:
            own[key] = [NEW]
            continue
        reasons = [
            trigger
            for trigger, differs in (
                ("params", before.params != state.params),
                ("input", before.inputs != state.inputs),
                ("code", before.code != state.code),
                ("software-env", before.software != state.software),
            )
            if differs
        ]
        if reasons:
            own[key] = reasons
    rerun: dict[str, list[str]] = {}

    def visit(key: str) -> bool:
        if key not in rerun:
            rerun[key] = []  # a placeholder while its needs are visited
            upstream = any([visit(need) for need in changed[key].needs if need in changed])
            reasons = own.get(key, []) + ([UPSTREAM] if upstream and key not in own else [])
            rerun[key] = reasons
        return bool(rerun[key])

    for key in changed:
        visit(key)
    return [Rerun(key, changed[key], reasons) for key, reasons in rerun.items() if reasons]


def rules_rerun(found: Iterable[Rerun]) -> Counter:
    return Counter(job.state.rule for job in found)


def rules_triggered(found: Iterable[Rerun]) -> set[str]:
    """The rules with a job rerun by one of its own triggers (not only by a job upstream)."""
    return {job.state.rule for job in found if job.reasons != [UPSTREAM]}


def run_configfile(root: Path) -> str | None:
    """The base config of the run in ``root`` (its record, ``results/run_config.yaml``), as
    ``--configfile`` takes it; None for the embedded default or a folder with no run."""
    record = root / "results" / "run_config.yaml"
    if not record.is_file():
        return None
    import yaml

    recorded = (yaml.safe_load(record.read_text()) or {}).get("config")
    return None if recorded in (None, "config/config.yaml") else recorded


def with_assignments(config: Mapping, assignments: Sequence[str]) -> dict:
    """``config`` with each ``KEY=VALUE`` set: ``KEY`` dotted (a list's items by position,
    ``length_targets.5.pm``), ``VALUE`` read as YAML. An assignment to a key the config does
    not have is refused, naming it."""
    import copy

    import yaml

    result = copy.deepcopy(dict(config))
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        if not sep or not key:
            raise ValueError(f"--config {assignment!r}: expected KEY=VALUE (KEY dotted, e.g. seed=7)")
        parts = key.split(".")
        target = result
        for depth, part in enumerate(parts):
            index = int(part) if isinstance(target, list) and part.lstrip("-").isdigit() else part
            known = 0 <= index < len(target) if isinstance(index, int) else isinstance(target, dict) and index in target
            if not known and not (depth == len(parts) - 1 and isinstance(target, dict)):
                raise ValueError(f"--config {assignment!r}: the config has no {'.'.join(parts[: depth + 1])}")
            if depth == len(parts) - 1:
                target[index] = yaml.safe_load(value)
            else:
                target = target[index]
    return result


def estimated(found: Sequence[Rerun], config: Mapping, root: Path, device: str) -> list:
    """The rerun jobs as ``reprolm plan`` estimates them (:func:`reprolm.plan.estimate`),
    calibrated on the records of the artifacts they would replace."""
    from reprolm.need import PlannedJob
    from reprolm.plan import estimate

    jobs = [
        PlannedJob(
            job.state.rule,
            job.state.wildcards,
            job.state.inputs,
            job.state.outputs,
            gpus=job.state.gpus,
            runtime_min=job.state.runtime_min,
        )
        for job in found
    ]
    made_by = {output: index for index, job in enumerate(jobs) for output in job.outputs}
    for job in jobs:
        job.stage = stage_of(job.rule)
        job.after = sorted({made_by[path] for path in job.inputs if path in made_by})
    made = {
        path
        for job in found
        for path in job.state.outputs
        if (root / path).exists() and provenance_path(root / path).is_file()
    }
    estimate(jobs, config, root, device, made)
    return jobs


@dataclass
class Impact:
    found: list[Rerun]
    jobs: list  # reprolm.need.PlannedJob, one per rerun job
    width: int
    device: str

    def _count(self, rules: Sequence[str]) -> int:
        return sum(1 for job in self.found if job.state.rule in rules)

    def gpu_hours(self, jobs=None) -> float:
        return sum(job.gpu_seconds for job in (self.jobs if jobs is None else jobs)) / 3600

    def summary(self) -> str:
        from reprolm.plan import makespan

        return (
            f"retrains {self._count(RETRAINS)} models, regenerates {self._count(REGENERATES)} prompt sets, "
            f"rescores {self._count(RESCORES)} score jobs: {self.gpu_hours():.1f} GPU-h "
            f"({len(self.found)} jobs, about {makespan(self.jobs, self.width) / 3600:.2g} h of wall time "
            f"on {self.width} {self.device} GPUs)"
        )

    def rules(self) -> list[str]:
        """Per rule: its jobs, why they rerun (each reason with its job count) and their cost."""
        from reprolm.plan import makespan

        by_rule: dict[str, list[int]] = {}
        for index, job in enumerate(self.found):
            by_rule.setdefault(job.state.rule, []).append(index)
        # In the pipeline's order (the stages table's), a rule it does not know last.
        order = list(RULE_STAGES)
        lines = []
        for rule, indices in sorted(
            by_rule.items(), key=lambda item: (order.index(item[0]) if item[0] in order else len(order), item[0])
        ):
            reasons = Counter(reason for index in indices for reason in self.found[index].reasons)
            jobs = [self.jobs[index] for index in indices]
            for job in jobs:
                job.after = []  # each rule's wall time on its own
            why = ", ".join(f"{reason} {count}" for reason, count in reasons.most_common())
            lines.append(
                f"  {rule:<24} {len(indices):>4} jobs {self.gpu_hours(jobs):>8.2f} GPU-h {makespan(jobs, self.width) / 3600:>8.2f} h  {why}"
            )
        return lines

    def report(self) -> str:
        if not self.found:
            return self.summary() + "\nnothing reruns"
        header = f"  {'rule':<24} {'jobs':>9} {'GPU-h':>14} {'wall time':>10}  why (Snakemake's rerun triggers)"
        return "\n".join([self.summary(), header, *self.rules()])


def tree_at(root: Path, rev: str, into: Path) -> Path:
    """The workflow, config and package of the git revision ``rev`` of ``root``, written under
    ``into``; the lm-eval task answers of ``root`` copied beside them (asked anew they take
    seconds). Raises ValueError naming ``rev`` where git does not know it."""
    import shutil
    import tarfile

    archive = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", rev], capture_output=True)
    if archive.returncode != 0:
        raise ValueError(f"--rev {rev}: {archive.stderr.decode().strip() or 'git archive failed'}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    answers = root / "resources" / "lm_eval_tasks.json"
    if answers.is_file():
        (into / "resources").mkdir(exist_ok=True)
        shutil.copy(answers, into / "resources" / answers.name)
    return into


def impact(
    root: str | Path = ".",
    configfile: str | None = None,
    assignments: Sequence[str] = (),
    rev: str | None = None,
    width: int = 8,
    device: str = "h100",
) -> Impact:
    """What the change reruns in the run folder ``root`` and what it costs: the config
    ``configfile`` or the run's config with ``assignments`` (``KEY=VALUE``), against the
    run's config; or, with ``rev``, the working tree's code and config against the revision's."""
    root = Path(root).resolve()
    if not (root / SNAKEFILE).is_file():
        raise FileNotFoundError(f"{root} is not the workflow's folder (no {SNAKEFILE} there): give --root")
    current_file = run_configfile(root)
    package = root if (root / "src" / "reprolm").is_dir() else None
    if rev is not None:
        with tempfile.TemporaryDirectory(prefix="reprolm-impact-") as scratch:
            # Only the rerun jobs' sizes are priced: the side before the change goes unsized.
            before = job_states(tree_at(root, rev, Path(scratch)), current_file, package=scratch, sized=False)
        after = job_states(root, current_file, package=package)
    else:
        before = dag_states(root, current_file, sized=False)
        if configfile is not None:
            if not (root / configfile).is_file() and not Path(configfile).is_file():
                raise FileNotFoundError(f"no config file {configfile}")
            after = dag_states(root, Path(configfile).resolve() if Path(configfile).is_file() else root / configfile)
        else:
            written = load(root / (current_file or "config/config.yaml"), root)
            after = dag_states(root, current_file, config=with_assignments(written, assignments))
    found = reruns(before.states, after.states)
    return Impact(found, estimated(found, after.config, root, device), width, device)
