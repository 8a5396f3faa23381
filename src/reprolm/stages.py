"""The workflow's rules by stage: the one registry the cost report (``reprolm cost``), the
plan (``reprolm plan``), the rehearsal of a cluster's requests and the config checks read.

The shared rules are registered here; a study registers its own rules' entries from its
folder (``Study.rule_stages``), so that what reads the registry has imported
:mod:`reprolm.studies`. Every rule of the workflow has an entry, and every entry a rule:
``tests/test_stages.py`` reads the rule names from the rule files and fails on either. A rule's stage is the step of
the pipeline its jobs' cost is counted under; its ``resources`` is the stage of the config's
``resources`` block (and ``base_models.*.resources``) that sizes its jobs for the base model
its ``base`` wildcard names, None where the profile sizes them or another model's settings
do (a judge's jobs: its model's ``evaluate``; a score job's: its metric's stage,
:func:`reprolm.score.metrics.scored_on`).

Packing on a cluster: a rule's ``pack`` names the wildcards its jobs share a submission by
(one model, so one resource class: :func:`pack_group` makes the Snakemake group), and a
``host`` rule is a short CPU job run on the submitting host (a local rule) rather than
submitted.
"""

from __future__ import annotations

from dataclasses import dataclass

from reprolm.registry import Registry


@dataclass(frozen=True)
class RuleStage:
    stage: str
    resources: str | None = None
    # The job trains a model: it holds the optimiser's state beside the weights.
    trains: bool = False
    # The job only sends requests to an API, on the submitting host: it runs no model.
    api: bool = False
    # The job runs a model forward on its GPUs (generation, evaluation): its ``resources``
    # stage is checked for the model's inference memory before any job.
    inference: bool = False
    # The wildcards whose jobs run in one cluster submission, one after another: jobs of one
    # model (or judge) and so of one resource class. Local runs ignore groups.
    pack: tuple[str, ...] = ()
    # A short CPU job (tables, pages, picking an alpha): run on the submitting host.
    host: bool = False
    # A stopped job saves its progress on SLURM's warning (``stop_warning_s``) and its next
    # attempt goes on from there: a job longer than the partition allows runs as attempts.
    resumes: bool = False
    # What a model judge's job judges, for its need (:mod:`reprolm.need`): the wildcard
    # naming it (``promptset``: a model's generations of the prompt set; ``dataset``: the
    # dataset's rows), and the answers judged per row (a pair's two, an answer and its
    # reference). Empty: not modelled.
    judged: str = ""
    answers: int = 1


def local_and_api(
    rule: str, stage: str, pack: tuple[str, ...] = ("judge",), judged: str = "", answers: int = 1
) -> dict[str, RuleStage]:
    """A step of two rules (common.smk: judge_rule): ``{rule}`` for a model run by the
    workflow (its jobs packed per judge model), ``{rule}_api`` for one behind an API."""
    return {
        rule: RuleStage(stage, pack=pack, judged=judged, answers=answers),
        f"{rule}_api": RuleStage(stage, api=True),
    }


# A model's jobs: its base model and recipe (the checkpoint).
MODEL = ("base", "recipe")
RULE_STAGES: Registry[RuleStage] = Registry("rule")
SHARED_RULE_STAGES = {
    "raw_source": RuleStage("download"),
    "released_file": RuleStage("download"),
    "download_base_model": RuleStage("download"),
    "local_base_model": RuleStage("download"),
    "download_hub_model": RuleStage("download"),
    "lm_eval_task_data": RuleStage("download"),
    "nltk_data": RuleStage("download"),
    # Merging a researcher's adapter into its base: weight arithmetic, sized as extrapolate's.
    "adapter_base_model": RuleStage("merge", resources="extrapolate"),
    "dataset": RuleStage("data"),
    "tokenizer": RuleStage("data"),
    "build_base_model": RuleStage("pretrain", trains=True),
    "finetune": RuleStage("finetune", resources="finetune", trains=True, resumes=True),
    "extrapolate": RuleStage("extrapolate", resources="extrapolate", pack=MODEL),
    "generate": RuleStage("generate", resources="generate", inference=True, pack=MODEL, resumes=True),
    "generate_api": RuleStage("generate", api=True),
    "lm_eval": RuleStage("evaluate", resources="evaluate", inference=True, pack=MODEL),
    # A score job's resource class is its metric's (an encoder on a GPU, or a CPU).
    "score": RuleStage("evaluate", pack=("metric", *MODEL)),
    # Per judge, base model and prompt set (its checkpoints' grades: an alpha search's grid):
    # a judge's grades of one prompt set can feed a finetune whose generations it grades on
    # another (FLR's online feedback), and a group may not sit on both ends of a path.
    **local_and_api("grade", "judge", ("judge", "base", "promptset"), judged="promptset"),
    **local_and_api("win_rate", "judge", ("judge", "base", "promptset"), judged="promptset", answers=2),
    **local_and_api("pair_accuracy", "judge", judged="dataset", answers=2),
    **local_and_api("rating_agreement", "judge", judged="dataset"),
    **local_and_api("judge_released", "judge"),
    **local_and_api("judge_released_grades", "judge"),
    # Tables, pages and costs: short CPU jobs, run on the submitting host.
    **{
        rule: RuleStage("report", host=True)
        for rule in (
            "judge_agreement",
            "study_tables",
            "table_pages",
            "judge_agreement_page",
            "headline_summary",
            "paper_comparison",
            "paper_comparison_pages",
            "leaderboard",
            "leaderboard_page",
            "provenance_index",
            "provenance_page",
            "study_cost",
            "cost_page",
        )
    },
}
for rule, entry in SHARED_RULE_STAGES.items():
    RULE_STAGES.register(rule, entry)


def rule_stage(rule: str) -> RuleStage:
    """The rule's entry; a rule the table does not know (one a record names that has since
    been renamed) is a stage of its own, sized by the profile."""
    return RULE_STAGES[rule] if rule in RULE_STAGES else RuleStage(rule)


def stage_of(rule: str) -> str:
    return rule_stage(rule).stage


def inference_stages() -> list[str]:
    """The ``resources`` stages of the rules that run a model forward on GPUs, in
    registration order."""
    return list(dict.fromkeys(RULE_STAGES[rule].resources for rule in RULE_STAGES if RULE_STAGES[rule].inference))


def pack_group(rule: str) -> str | None:
    """The Snakemake group of the rule's jobs: ``{rule}`` and its ``pack`` wildcards, so one
    group per model (or judge) and rule; None for a rule not packed. The profile's
    ``group-components`` names each of these to say how many jobs share a submission."""
    entry = rule_stage(rule)
    if not entry.pack:
        return None
    return "_".join([rule, *(f"{{{wildcard}}}" for wildcard in entry.pack)])


def pack_groups() -> dict[str, str]:
    """Each packed rule's group, by rule."""
    return {rule: group for rule in RULE_STAGES if (group := pack_group(rule))}


def host_rules() -> list[str]:
    """The short CPU rules run on the submitting host."""
    return [rule for rule in RULE_STAGES if RULE_STAGES[rule].host]
