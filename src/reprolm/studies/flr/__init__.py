"""FLR: follow-up likelihood as reward (docs/studies/flr.md, seed 001). Its judges are compared on
reward-model benchmarks, and its online loop aligns a policy with FLR's own preferences. Beside
this module: its config section's schema (schema.yaml), table writer (tables.py) and the rule of
the step only it takes (rules.smk: judges ranking models against their arena ELO)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from reprolm.config.references import require_grader
from reprolm.config.resources import judge_base
from reprolm.errors import require
from reprolm.paths import PRETRAINED, grade_path, judge_score_path, win_rate_path
from reprolm.score.flr import load_followups
from reprolm.stages import local_and_api
from reprolm.studies.base import Study, register_study, section_schema


class Flr(Study):
    name = "flr"
    tables = "reprolm.studies.flr.tables:write_flr_tables"
    builders = {"feedback_conversations": "reprolm.studies.flr.builders:build_feedback_conversations"}
    rule_stages = local_and_api("model_ranking", "judge", judged="dataset")
    schema = section_schema(__file__)
    caption = """\
        ``reward_models``: each judge's pair accuracy (the chosen answer scored strictly higher), and
        Pearson, Spearman and Kendall correlations with human ratings and, on WildBench, of each
        model's mean score with its arena ELO. ``model_ranking``: the mean score per model under
        each judge beside its ELO. ``alignment``: policies aligned on FLR-judged pairs of their own
        samples against the policy they started from (win rate and length-controlled win rate
        under the alignment judge, mean grades). Every figure has its 95% percentile bootstrap
        interval in the ``lo`` and ``hi`` columns beside it, from 1000 draws of its units, the
        figure recomputed (a correlation or length-control regression refitted) on each: the
        pairs for accuracy, the rated items for the rating correlations, the models for the
        ranking correlations, a model's answers for its mean score, the prompts (a prompt's samples
        and turns together) for win rates and grades. Figures over the same units (judges on one
        benchmark, policies on the same prompts) are drawn alike, so their differences are
        paired. The ranking plot's error bars are the mean scores' intervals.
    """
    table_captions = {
        "reward_models": """\
            Each judge's pair accuracy (the chosen answer scored strictly higher), and Pearson,
            Spearman and Kendall correlations with human ratings and, on WildBench, of each model's
            mean score with its arena ELO. ``lo`` / ``hi``: 95% percentile bootstrap interval (1000
            draws, the figure recomputed on each) over the pairs for accuracy, the rated items for
            rating correlations, the models for ranking correlations; judges on one benchmark are
            drawn alike (paired).
        """,
        "model_ranking": """\
            Each model's mean score under each judge beside its LMSYS arena ELO. ``lo`` / ``hi``:
            95% percentile bootstrap interval over the model's answers.
        """,
        "alignment": """\
            Policies aligned on FLR-judged pairs of their own samples against the policy they
            started from: win rate and length-controlled win rate under the alignment judge, and
            mean grades. ``lo`` / ``hi``: 95% percentile bootstrap interval over prompts (a
            prompt's samples and turns together), paired across policies.
        """,
    }

    def check_section(self, config: Mapping) -> None:
        spec, datasets, judges = config["flr"], config.get("datasets", {}), config.get("judges", {})
        for judge in spec["judges"]:
            require_grader(judge, judges, "flr.judges")
        for key in ("pairwise", "ratings"):
            for dataset in spec.get(key, []):
                require(dataset, datasets, f"flr.{key}")
        if spec.get("ranking"):
            require(spec["ranking"]["dataset"], datasets, "flr.ranking.dataset")
        alignment = spec.get("alignment")
        if alignment:
            for base in alignment["bases"]:
                require(base, config["base_models"], "flr.alignment.bases")
            require(alignment["start"], list(config.get("recipes", {})) + [PRETRAINED], "flr.alignment.start")
            for recipe in alignment["recipes"]:
                require(recipe, config.get("recipes", {}), "flr.alignment.recipes")
            require(alignment["promptset"], config.get("promptsets", {}), "flr.alignment.promptset")
            require(alignment["judge"], judges, "flr.alignment.judge")
            for judge in alignment.get("graders", []):
                require_grader(judge, judges, "flr.alignment.graders")

    def models(self, config: Mapping) -> list[tuple[str, str]]:
        """The online loop's starting policy and the policies aligned from it."""
        alignment = config["flr"].get("alignment")
        if not alignment:
            return []
        return [(b, r) for b in alignment["bases"] for r in [alignment["start"]] + alignment["recipes"]]

    def score_paths(self, config: Mapping) -> list[str]:
        """Every judge on every reward-model benchmark, then the aligned policies against
        their starting policy."""
        spec = config["flr"]
        paths = []
        for judge in spec["judges"]:
            paths += [judge_score_path("pair_accuracy", judge, d) for d in spec.get("pairwise", [])]
            paths += [judge_score_path("rating_agreement", judge, d) for d in spec.get("ratings", [])]
            if spec.get("ranking"):
                paths.append(judge_score_path("model_ranking", judge, spec["ranking"]["dataset"]))
        alignment = spec.get("alignment")
        if alignment:
            promptset = alignment["promptset"]
            for base in alignment["bases"]:
                for recipe in alignment["recipes"]:
                    paths.append(win_rate_path(alignment["judge"], base, recipe, promptset))
                for recipe in [alignment["start"]] + alignment["recipes"]:
                    paths += [grade_path(judge, base, recipe, promptset) for judge in alignment.get("graders", [])]
        return paths

    def streamed_job(self, config: Mapping, rule: str, wildcards: Mapping, params, inputs, root: Path) -> dict | None:
        """A model ranking by a judge scoring as the original code does, which runs every
        answer x follow-up pair through its model (ranking.py streams them)."""
        spec = getattr(params, "judge", None) or {}
        if rule != "model_ranking" or spec.get("kind") != "flr" or spec.get("compat") != "original":
            return None
        followups_file = Path(root) / inputs.followups
        followups = load_followups(followups_file, spec.get("categories"))
        return {
            "dataset": f"{wildcards['dataset']}/{wildcards['split']}",
            "run": "reprolm.studies.flr.ranking:rank_answers",
            "options": {
                "followups": str(followups_file),
                "categories": spec.get("categories"),
                "compat": spec["compat"],
                "format": spec.get("format", "chat"),
            },
            "units_per_row": sum(len(u) for sides in followups.values() for u in sides.values()),
            "unit": "pairs",
            "base": judge_base(config, wildcards["judge"]),
            "stage": "evaluate",
        }

    def settings(self, config: Mapping) -> dict:
        return {"judges": {name: config["judges"][name] for name in config["flr"]["judges"]}}

    def table_judges(self, config: Mapping) -> dict[str, list[str]]:
        spec = config["flr"]
        judged = {"reward_models": list(spec["judges"])}
        if spec.get("ranking"):
            judged["model_ranking"] = list(spec["judges"])
        if spec.get("alignment"):
            alignment = spec["alignment"]
            judged["alignment"] = list(dict.fromkeys([alignment["judge"], *alignment.get("graders", [])]))
        return judged


register_study(Flr())
