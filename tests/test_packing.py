"""Job packing on a cluster: config/paper.yaml's submissions through the SLURM profile, with
its GPU stages routed as docs/cluster.md's step 4 routes them."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter

import pytest
import yaml

from reprolm.rehearse.dag import inspect_cluster_dag, snakemake_arguments
from reprolm.rehearse.packing import NEED_FACTOR, packing
from reprolm.rehearse.submissions import (
    ACCEPTED,
    OVER_LIMIT,
    Partition,
    attempt_problems,
    group_shapes,
    limit_problems,
    packed_problems,
    plugin_requests,
)
from reprolm.stages import RULE_STAGES, host_rules, pack_groups
from workflow_helpers import REPO, dry_run_jobs, scratch_copy

pytestmark = [pytest.mark.workflow, pytest.mark.beside_slurm]

PROFILE = REPO / "profiles" / "slurm" / "config.yaml"
# Each train-before-test model's 24 tasks are not packed (issue 49 counts without them).
UNPACKED_STUDY_RULES = {"train_before_test"}


def docs_routing() -> dict:
    """The `resources:` block of docs/cluster.md's step 4, as printed."""
    text = (REPO / "docs" / "cluster.md").read_text()
    block = re.search(r"### 4\. Where model jobs go.*?```yaml\n(.*?)```", text, re.S).group(1)
    return {"resources": yaml.safe_load(block)["resources"]}


@pytest.fixture(scope="module")
def paper_cluster(tmp_path_factory):
    """The packing and the packed sbatch requests of a cluster run of config/paper.yaml."""
    work = scratch_copy(tmp_path_factory.mktemp("paper"))
    routing = docs_routing()
    # The plugin checks an account against SLURM's accounting, where there is one.
    routing["resources"]["default"].pop("slurm_account")
    (work / "routing.yaml").write_text(yaml.safe_dump(routing))
    arguments = snakemake_arguments(
        [str(work / "config" / "paper.yaml"), str(work / "routing.yaml")], None, str(work / "profiles" / "slurm")
    )
    arguments += ["--directory", str(work), "--snakefile", str(work / "workflow" / "Snakefile")]

    def read(dag):
        # The attempts the profile's retries give, and one retry only.
        short = (attempt_problems(dag), attempt_problems(dataclasses.replace(dag, attempts=2)))
        return packing(dag, UNPACKED_STUDY_RULES), group_shapes(plugin_requests(dag, packed=True)), dag.config, short

    return inspect_cluster_dag(arguments, read)


def test_the_paper_dag_makes_at_most_half_the_submissions_it_made_one_a_job(paper_cluster):
    """Generations, grades, scores, lm-eval suites and merges of one model (or judge) share
    submissions; tables and pages run on the submitting host."""
    result, _, _, _ = paper_cluster
    by_rule = result.by_rule()
    jobs = Counter()
    for submission in result.submissions:
        jobs.update(submission.rules)
    # Counted as issue 49 counted them (about 600 then): all but train-before-test.
    assert result.unpacked == sum(jobs.values()) + result.hosted and result.unpacked > 600
    assert result.hosted >= 20  # tables, pages and costs of the five studies at least
    assert result.packed <= result.unpacked / 2, (result.packed, result.unpacked, by_rule)
    # Every packed rule's jobs share submissions; no report rule is submitted.
    for rule in ("generate", "grade", "score", "lm_eval", "extrapolate"):
        assert by_rule[rule] < jobs[rule], (rule, by_rule[rule], jobs[rule])
    assert not set(by_rule) & set(host_rules())
    # The ExPO reward model's grades of its alpha search: 14 models x 6 alphas, a
    # submission a model.
    expo = [s for s in result.submissions if s.name.startswith("group grade_expo_rm_")]
    assert len(expo) == 14 and all(s.rules == {"grade": 6} for s in expo)


def test_a_packed_submission_asks_for_its_largest_job_and_the_sum_of_their_runtimes(paper_cluster):
    result, shapes, _, _ = paper_cluster
    packs = [s for s in result.submissions if len(s.members) > 1 and s.runtime_min is not None]
    assert len(packs) > 50
    for submission in packs:
        # One job after another (one pack_slot each): the members' runtimes add up.
        assert submission.runtime_min == sum(runtime for runtime, _ in submission.members)
        # So a pack asks for no more time over its modelled need than its worst job alone.
        worst = max(runtime * 60 / need for runtime, need in submission.members)
        assert submission.over_need <= worst + 1e-9
    # The sbatch request of every packed shape: one model's GPUs, never the members' sum.
    gpus = {shape.value("--gpus") for shape in shapes if shape.rule.startswith(("generate", "lm_eval", "grade"))}
    assert gpus and gpus <= {"a100:1", "a100:2", "a100:4"}


def test_every_submission_asks_for_at_most_four_times_its_modelled_need(paper_cluster):
    """config/paper.yaml sizes runtime requests from need (runtime_over_need: 2) on the GPU
    docs/cluster.md routes them to (a100): no submission asks for more than NEED_FACTOR times
    what reprolm plan models for its jobs (105 did when every stage asked for its runtime)."""
    result, _, _, _ = paper_cluster
    assert not result.over_need(), [(s.name, s.runtime_min, s.need_s) for s in result.over_need()[:5]]
    # A CPU score job (the per-job figure: 30 s and its start) asks for twice that, 3 minutes.
    scores = [s for s in result.submissions if "score" in s.rules and s.bases == {"per-job figure"}]
    assert len(scores) > 50 and all(s.runtime_min == 3 * len(s.members) for s in scores)
    assert NEED_FACTOR == 4


def test_a_long_train_before_test_runs_as_attempts_the_profiles_retries_give(paper_cluster):
    """The 12-14B models' train-before-test (up to ~33 h modelled on an A100) asks for the
    one-day runtime_limit and resumes: the profile's 3 retries give the attempts; one retry
    would not, and the rehearsal says so."""
    *_, (enough, one_retry) = paper_cluster
    assert enough == []
    assert one_retry[0].startswith("- train_before_test (") and "needs up to 3 attempts" in one_retry[0]
    assert one_retry[0].endswith("the profile's retries give 2")
    assert one_retry[1] == "  change: the profile's retries (to 2), or runtime_limit if a partition allows longer"


def test_a_model_judges_jobs_ask_for_what_their_judges_model_needs(paper_cluster):
    """The ExPO reward model (7B) grades each of 1,000 alpha-search answers once: ~7 min on
    an A100 with its start and its weights' read, so 15 min at runtime_over_need 2; a
    model's six alphas share a submission of 90 min (they asked 6 x 480 before judges were
    sized). A judge of a set of unknown size (FLASK's reviews) still asks for its runtime."""
    result, _, _, _ = paper_cluster
    expo = [s for s in result.submissions if s.name.startswith("group grade_expo_rm_")]
    assert len(expo) == 14
    for submission in expo:
        assert submission.bases == {"tokens x parameters"}
        assert submission.runtime_min == 6 * 15 and all(6 * 60 < need < 7.5 * 60 for _, need in submission.members)
    ratings = next(s for s in result.submissions if s.name == "group rating_agreement_skywork_rm")
    assert ratings.bases == {"tokens x parameters", "requested"}
    assert sorted(runtime for runtime, _ in ratings.members) == [25, 41, 480, 480]


def test_a_packed_submission_past_its_partitions_maxtime_is_a_verdict_line(paper_cluster):
    """The 70B model's two lm-eval suites (each asks for a day: lm-eval is not modelled)
    ask for two days packed, past a one-day MaxTime that each alone fits."""
    _, shapes, config, _ = paper_cluster
    day = Partition("gpu", max_minutes=1440, max_nodes=None, max_mem_per_node_mb=None, default=False)
    judged = []
    for shape in shapes:
        shape = dataclasses.replace(shape)
        problems = limit_problems(shape, day) if shape.value("-p") == "gpu" else []
        shape.verdict = OVER_LIMIT if problems else ACCEPTED
        shape.answer = "; ".join(why for _, why in problems)
        shape.problem_options = tuple(option for option, _ in problems)
        judged.append(shape)
    lines = packed_problems(judged, config, "profiles/slurm")
    suites = lines.index(
        "- lm_eval, packed (2 submissions: lm_eval_tulu_2_dpo_70b_pretrained_lm_eval, "
        "lm_eval_tulu_2_dpo_70b_pretrained+expo0.5_lm_eval): "
        "over limit: runtime 2880 min is over partition gpu's MaxTime of 1440 min"
    )
    assert lines[suites + 1] == (
        "  change: base_models.tulu_2_dpo_70b.resources.evaluate.runtime (a packed submission asks for the sum of its jobs' runtimes), "
        "or a smaller count for its group in profiles/slurm's group-components"
    )
    # A model's generations, one of them a resuming generation capped at the one-day
    # runtime_limit: that cap is what fits the pack (its runtime is not read).
    generations = lines.index(next(line for line in lines if line.startswith("- generate, packed (1 submissions: ")))
    assert "generate_llama3_8b_instruct_pretrained" in lines[generations]
    assert lines[generations + 1].startswith("  change: resources.default.runtime_limit (a packed submission")
    # No judge's pack is among them now that judges are sized from need.
    assert not [line for line in lines if line.startswith(("- grade", "- rating_agreement"))]
    assert not packed_problems([dataclasses.replace(shape, verdict=ACCEPTED) for shape in judged], config, "p")


def test_the_profile_packs_every_packed_rules_group_and_the_registry_names_the_host_rules():
    profile = yaml.safe_load(PROFILE.read_text())
    assert set(profile["group-components"]) == set(pack_groups().values())
    assert profile["resources"]["pack_slot"] == 1 and profile["set-resource-scopes"] == {"pack_slot": "local"}
    assert all(not RULE_STAGES[rule].api for rule in pack_groups())


def test_local_runs_compute_the_same_jobs_with_packing_in_the_rules(tmp_path):
    """Groups are Snakemake's for cluster runs only: the default's dry run lists the same
    jobs as with no rule packed."""
    work = scratch_copy(tmp_path / "work")
    packed = sorted(map(repr, dry_run_jobs(work, "--forceall")))
    common = work / "workflow" / "rules" / "common.smk"
    common.write_text(common.read_text() + "\n\ndef pack_group(rule):\n    return None\n")
    unpacked = sorted(map(repr, dry_run_jobs(work, "--forceall")))
    assert packed == unpacked and len(packed) > 200
