"""Job packing: the submissions a cluster run of a config makes, counted against one
submission a job.

A packed rule's jobs (:data:`reprolm.stages.RULE_STAGES`' ``pack``) of one model or judge
share a submission, a Snakemake group job of at most the profile's ``group-components`` jobs,
run one after another; its request is its largest member's GPUs, memory and CPUs and the sum
of their runtimes. A ``host`` rule's jobs run on the submitting host. Before packing, each of
those jobs was a submission of its own: :func:`packing` counts both on the same DAG, and
judges each submission's runtime request against the need ``reprolm plan`` models for its
jobs.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field

from reprolm.need import PlannedJob, job_device
from reprolm.plan import estimate
from reprolm.rehearse.dag import ClusterDag
from reprolm.stages import rule_stage, stage_of

# A runtime request more than this many times the modelled need wastes the partition's
# backfill (issue 49's bound).
NEED_FACTOR = 4


@dataclass
class Submission:
    """One sbatch: a group job's members, or one job."""

    name: str
    rules: Counter
    # Minutes the submission asks for (a group's: its members' sum), None where it is sized
    # from inputs not made yet.
    runtime_min: float | None
    # Each job's requested minutes (None: sized at run time) and the seconds ``reprolm plan``
    # models for it, and on what bases.
    members: list[tuple[float | None, float]] = field(default_factory=list)
    bases: set[str] = field(default_factory=set)

    @property
    def need_s(self) -> float:
        return sum(need for _, need in self.members)

    @property
    def over_need(self) -> float | None:
        """The request over the modelled need."""
        if self.runtime_min is None or not self.need_s:
            return None
        return self.runtime_min * 60 / self.need_s


@dataclass
class Packing:
    """What a cluster run submits (``submissions``), and the jobs of host rules run on the
    submitting host (``hosted``), which were submissions of their own before packing."""

    submissions: list[Submission]
    hosted: int

    @property
    def unpacked(self) -> int:
        """The submissions of the same jobs, one a job."""
        return sum(len(submission.members) for submission in self.submissions) + self.hosted

    @property
    def packed(self) -> int:
        return len(self.submissions)

    def by_rule(self) -> Counter:
        """Submissions by the rule of their jobs."""
        return Counter(rule for submission in self.submissions for rule in submission.rules)

    def over_need(self, factor: float = NEED_FACTOR) -> list[Submission]:
        """The submissions whose runtime request is over ``factor`` times their need."""
        return [s for s in self.submissions if s.over_need is not None and s.over_need > factor]


def _runtime(resources) -> float | None:
    value = resources.get("runtime")
    return float(value) if isinstance(value, int | float) else None


def _planned(job) -> PlannedJob:
    gpus = job.resources.get("gpu")
    return PlannedJob(
        job.rule.name,
        dict(job.wildcards_dict),
        [str(path) for path in job.input],
        [str(path) for path in job.output],
        gpus=gpus if isinstance(gpus, int) else 0,
        runtime_min=_runtime(job.resources) or 0.0,
        stage=stage_of(job.rule.name),
    )


def packing(dag: ClusterDag, excluded_rules: Collection[str] = ()) -> Packing:
    """The submissions of the cluster DAG but the jobs of ``excluded_rules``, each with its
    modelled need (:mod:`reprolm.plan`, uncalibrated) on the device its request is sized for
    (:func:`reprolm.need.job_device`: its GPU type, else the slowest GPU the model knows)."""
    jobs = [job for job in dag.jobs if job.rule.name not in excluded_rules]
    planned = {job: _planned(job) for job in jobs}
    by_device: dict[str, list[PlannedJob]] = defaultdict(list)
    for job, plan in planned.items():
        by_device[job_device({"gpus": plan.gpus, "gpu_model": job.resources.get("gpu_model")})].append(plan)
    for device, members in by_device.items():
        estimate(members, dag.config, dag.workdir, device, made=set(), calibrated=False)
    submissions: dict[object, Submission] = {}
    for job in jobs:
        group = dag.groups.get(job)
        unit = group if group is not None else job
        if unit not in submissions:
            name = f"group {group.groupid}" if group is not None else job.rule.name
            submissions[unit] = Submission(name, Counter(), _runtime(unit.resources))
        submission = submissions[unit]
        submission.rules[job.rule.name] += 1
        submission.members.append((_runtime(job.resources), planned[job].seconds))
        submission.bases.add(planned[job].basis)
    hosted = sum(
        count for rule, count in dag.local_jobs.items() if rule_stage(rule).host and rule not in excluded_rules
    )
    return Packing(list(submissions.values()), hosted)
