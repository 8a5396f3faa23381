"""ExPO: model extrapolation expedites alignment (docs/studies/expo.md, seed 004).

Each aligned model in ``bases`` x ``recipes`` is extrapolated over an alpha grid; an alpha
search (a Snakemake checkpoint) picks the alpha its judge grades highest, and the tables
evaluate the model beside its extrapolation at the alpha its model card names
(``card_alphas``), else at that chosen alpha. Beside this module: its config section's schema
(schema.yaml), the alpha search's rule (rules.smk) and its table writer (tables.py). The
extrapolation itself is a stage any study's models may use (``{recipe}+expo{alpha}``:
reprolm.merge, workflow/rules/extrapolate.smk)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

from reprolm.config.lookups import expo_reference, expo_reference_dir
from reprolm.config.references import require_grader
from reprolm.errors import ConfigError, require
from reprolm.paths import (
    PRETRAINED,
    expo_name,
    grade_path,
    judge_score_path,
    score_path,
    win_rate_path,
)
from reprolm.stages import RuleStage
from reprolm.studies.base import CheckpointOutput, Study, register_study, section_schema

# The Open LLM Leaderboard v2 through lm-eval's own ``leaderboard`` tasks: each column's task
# and metric, and the random baseline its score is normalised against (None: not
# normalised; "choices": each member task's own, one over its number of choices, which the
# per-document log shows as the number of scored continuations; a mapping: each member
# task's, the leaderboard's own figures for MuSR).
LEADERBOARD_V2 = {
    "IFEval": ("leaderboard_ifeval", ("inst_level_strict_acc,none", "prompt_level_strict_acc,none"), None),
    "BBH": ("leaderboard_bbh", ("acc_norm,none",), "choices"),
    "MATH Lvl 5": ("leaderboard_math_hard", ("exact_match,none",), None),
    "GPQA": ("leaderboard_gpqa", ("acc_norm,none",), 1 / 4),
    "MuSR": (
        "leaderboard_musr",
        ("acc_norm,none",),
        {
            "leaderboard_musr_murder_mysteries": 1 / 2,
            "leaderboard_musr_object_placements": 1 / 5,
            "leaderboard_musr_team_allocation": 1 / 3,
        },
    ),
    "MMLU-PRO": ("leaderboard_mmlu_pro", ("acc,none",), 1 / 10),
}


class Expo(Study):
    name = "expo"
    tables = "reprolm.studies.expo.tables:write_expo_tables"
    rule_stages = {"alpha_search": RuleStage("extrapolate", host=True)}
    schema = section_schema(__file__)
    caption = """\
        ``alpha_search``: the judge's mean grade of each extrapolation alpha on held-out prompts (the
        search's pick and the model card's alpha marked), a table of its own. "+ ExPO" in every
        other table is at the alpha of the pair's published model card where one is configured,
        else at the searched alpha (each row's ``alpha from`` says which). ``alpaca_eval``: win
        rate and length-controlled win rate against the reference answers, original and + ExPO,
        with mean answer lengths in characters, the judge, its protocol and the LC method.
        ``mt_bench``: the mean single-answer grade over both turns. ``lm_eval``: the suite's tasks.
        ``open_llm_leaderboard_v1`` / ``_v2``: those leaderboards' columns and averages, each as
        that leaderboard defines it. ``judge``: the judge's accuracy on held-out preference pairs.
        Every figure has its 95% percentile bootstrap interval in the ``lo`` and ``hi`` columns
        beside it (1000 draws of the prompts, a prompt's turns drawn together; of the documents
        of each lm-eval task; of the pairs for ``judge``); the length-controlled win rate's
        regression, or the package's GLM, is refitted on every draw (its ``lc_standard_error`` is
        not used). A model and its extrapolation, and the alphas of one search, are judged on the
        same prompts and drawn alike, so their differences are paired. The alpha plot's error
        bars are these intervals.
    """
    table_captions = {
        "alpha_search": """\
            ExPO's alpha search, as its code runs it: the judge's mean grade (a reward model's
            reward) of each extrapolation alpha's answers to the held-out search prompts (alpha 0:
            the aligned model itself). ``chosen``: the alpha above 0 graded highest; ``model
            card``: the alpha of the pair's published ExPO model, at which the other tables put
            "+ ExPO". ``lo`` / ``hi``: 95% percentile bootstrap interval over prompts (1000 draws);
            the alphas of one search are judged on the same prompts and drawn alike.
        """,
        "alpaca_eval": """\
            ``Win Rate``: the judge's mean preference for the answer over the reference answer,
            x100 (AlpacaEval 2.0's ``win_rate``: the mean of its weighted annotator's preference).
            ``LC Win Rate``: with an ``alpaca_eval`` judge, AlpacaEval 2.0's
            ``length_controlled_winrate`` (its GLM ``length_controlled_v1``: length difference and
            instruction difficulty, regularised to the gamed baselines), the seed table's LC
            column. Its instruction difficulties and the gamed baselines' verdicts it is
            regularised to come from ``df_gamed.csv``, which GPT-4 Turbo made: a successor's LC
            mixes its own verdicts with those retired-judge parts of the fit. With another judge, the project's regression on the length difference alone
            (no published figure is of that definition). Original and + ExPO, mean answer lengths
            in characters, the judge, its protocol, the LC method and ``alpha from`` (the model
            card's alpha or the search's). ``lo`` / ``hi``: 95% percentile bootstrap interval over
            prompts, the LC fit refitted on every draw; a model and its extrapolation are drawn
            alike (paired).
        """,
        "mt_bench": """\
            The judge's mean single-answer grade (1-10) over all graded turns of both rounds,
            original and + ExPO: FastChat's MT-Bench score (``show_result.py``'s mean of the
            ``gpt-4_single`` judgments, the seed table's column) when the judge grades with
            FastChat's prompts. ``lo`` / ``hi``: 95% percentile bootstrap interval over prompts, a
            prompt's turns drawn together.
        """,
        "lm_eval": """\
            Each task of the suite: lm-eval's reported metric (the suite's ``metric``) x100,
            original and + ExPO. ``lo`` / ``hi``: 95% percentile bootstrap interval over each
            task's documents.
        """,
        "open_llm_leaderboard_v1": """\
            The Open LLM Leaderboard v1 as ExPO's Figure 4 averages it: ARC (25-shot,
            acc_norm), HellaSwag (10-shot, acc_norm), MMLU (5-shot, the plain mean of its
            subjects' accuracies, not lm-eval's question-weighted group figure), TruthfulQA
            (0-shot, mc2), Winogrande (5-shot, acc) and GSM8K (5-shot, strict-match exact match),
            x100, and ``Average``, their plain mean; original and + ExPO. Written only where the
            suite runs all six at those shots. ``lo`` / ``hi``: 95% percentile bootstrap interval
            over documents, each task (each MMLU subject) drawn on its own.
        """,
        "open_llm_leaderboard_v2": """\
            The Open LLM Leaderboard v2 from lm-eval's ``leaderboard`` tasks, normalised as that
            leaderboard normalises (the seed model card's row): IFEval, the mean of
            instruction- and prompt-level strict accuracy x100; BBH (3-shot) and MuSR (0-shot),
            the mean over member tasks of (acc_norm - 1/choices) / (1 - 1/choices) x100, 0 below
            the random baseline; MATH Lvl 5 (4-shot), exact match x100; GPQA (0-shot, acc_norm,
            baseline 1/4) and MMLU-PRO (5-shot, acc, baseline 1/10) normalised likewise; and
            ``Average``, their plain mean; original and + ExPO. ``lo`` / ``hi``: 95% percentile
            bootstrap interval over documents, each task drawn on its own.
        """,
        "judge": """\
            The judge's accuracy on held-out preference pairs (the preferred answer graded
            higher). ``lo`` / ``hi``: 95% percentile bootstrap interval over pairs.
        """,
    }
    pretrained_recipes = True

    def check_section(self, config: Mapping) -> None:
        spec, judges, promptsets = config["expo"], config.get("judges", {}), config.get("promptsets", {})
        require_grader(spec["judge"], judges, "expo.judge")
        for key in ("benchmark_judge", "single_grade_judge"):
            if spec.get(key):
                require(spec[key], judges, f"expo.{key}")
        where = "expo.single_grade_judge" if spec.get("single_grade_judge") else "expo.benchmark_judge"
        require_grader(single_grade_judge(spec), judges, f"{where} (MT-Bench's single-answer grades)")
        for key in ("win_rate", "single_grade"):
            require(spec[key], promptsets, f"expo.{key}")
        require(spec["alpha_search"]["promptset"], promptsets, "expo.alpha_search.promptset")
        if spec.get("judge_validation"):
            require(spec["judge_validation"], config.get("datasets", {}), "expo.judge_validation")
        if spec.get("leaderboard_v2_suite"):
            check_leaderboard_v2_suite(config, spec["leaderboard_v2_suite"])
        pairs = {f"{base}/{recipe}" for base, recipe in self.models(config)}
        for pair in spec.get("card_alphas", {}):
            if pair not in pairs:
                raise ConfigError(
                    f"expo.card_alphas.{pair}: not a studied pair (expo.bases x expo.recipes); studied: {sorted(pairs)}"
                )
        for base, recipe in self.models(config):
            if recipe == PRETRAINED:
                expo_reference_dir(config, base, recipe)
            else:
                expo_reference(config, recipe)
        # The table sets each aligned model beside its extrapolation; replicates of one side
        # only would pool seeds on one side and not the other.
        for recipe in spec.get("recipes", []):
            if len(config.get("recipes", {}).get(recipe, {}).get("seeds", [])) > 1:
                raise ConfigError(
                    f"recipes.{recipe}.seeds: {recipe!r} is extrapolated by the expo study, and "
                    "replicates of extrapolated models are not made; give it one seed"
                )
        search = spec["alpha_search"]["promptset"]
        if len(promptsets[search].get("seeds", [])) > 1:
            raise ConfigError(
                f"promptsets.{search}.seeds: the expo alpha search chooses one alpha on one sampling; give it one seed"
            )

    def score_paths(self, config: Mapping) -> list[str]:
        """Known before any alpha search: the study judge's accuracy on held-out pairs."""
        spec = config["expo"]
        dataset = spec.get("judge_validation")
        return [judge_score_path("pair_accuracy", spec["judge"], dataset)] if dataset else []

    def table_inputs(self, config: Mapping, checkpoint_output: CheckpointOutput) -> list[str]:
        paths = self.score_paths(config)
        for base, recipe in self.models(config):
            search = checkpoint_output(
                "alpha_search", base=base, recipe=recipe, promptset=config["expo"]["alpha_search"]["promptset"]
            )
            paths += [search] + evaluation_scores(config, base, recipe, evaluated_alpha(config, base, recipe, search))
        return paths

    def targets(self, config: Mapping) -> list[str]:
        # Every alpha search named up front, so they are scheduled at once rather than one
        # per re-evaluation of the checkpoint-dependent table inputs; likewise the
        # evaluations at the model cards' alphas, which no search decides.
        cards = config["expo"].get("card_alphas", {})
        paths = [alpha_search_path(config, base, recipe) for base, recipe in self.models(config)]
        for base, recipe in self.models(config):
            if f"{base}/{recipe}" in cards:
                paths += evaluation_scores(config, base, recipe, float(cards[f"{base}/{recipe}"]))
        return paths

    def settings(self, config: Mapping) -> dict:
        spec = config["expo"]
        return {
            "judges": {
                name: config["judges"][name] for name in {spec["judge"], win_rate_judge(spec), single_grade_judge(spec)}
            }
        }

    def table_judges(self, config: Mapping) -> dict[str, list[str]]:
        spec = config["expo"]
        return {
            "alpha_search": [spec["judge"]],
            "alpaca_eval": [win_rate_judge(spec)],
            "mt_bench": [single_grade_judge(spec)],
            "judge": [spec["judge"]] if spec.get("judge_validation") else [],
        }


def alpha_search_grades(config: Mapping, base: str, recipe: str) -> dict[str, str]:
    """The judge's grades of ``recipe``'s model (alpha 0) and of each extrapolation in the
    grid, on the search prompts, by alpha as text."""
    spec = config["expo"]
    search = spec["alpha_search"]
    models = {"0": recipe, **{f"{alpha:g}": expo_name(recipe, alpha) for alpha in search["alphas"]}}
    return {alpha: grade_path(spec["judge"], base, model, search["promptset"]) for alpha, model in models.items()}


def alpha_search_path(config: Mapping, base: str, recipe: str) -> str:
    return score_path("alpha_search", base, recipe, config["expo"]["alpha_search"]["promptset"])


def chosen_alpha(search_path: str) -> float:
    """The alpha an alpha search chose (its JSON's ``best_alpha``)."""
    return float(json.loads(Path(search_path).read_text())["best_alpha"])


def evaluated_alpha(config: Mapping, base: str, recipe: str, search_path: str) -> float:
    """The alpha of a pair's "+ ExPO" column: its model card's (``expo.card_alphas``), else
    the one its alpha search chose."""
    card = config["expo"].get("card_alphas", {}).get(f"{base}/{recipe}")
    return float(card) if card is not None else chosen_alpha(search_path)


def choose_alpha(grades: Mapping[float, Mapping]) -> dict:
    """The alpha whose extrapolated model the judge grades highest on the search prompts.

    ``grades`` maps alpha to a grade result; alpha 0 (the aligned model itself) is part of
    the curve for comparison but is not a candidate: the study evaluates an extrapolation.
    Each point keeps its per-prompt grades (``ids``, ``grades``) for the table's interval.
    """
    curve = [
        {
            "alpha": alpha,
            "mean_grade": grades[alpha]["mean"],
            "ids": grades[alpha]["ids"],
            "grades": grades[alpha]["grades"],
        }
        for alpha in sorted(grades)
    ]
    candidates = [point for point in curve if point["alpha"] > 0 and not math.isnan(point["mean_grade"])]
    if not candidates:
        raise ValueError(f"alpha search: no alpha above 0 has a usable grade; curve {curve}")
    best = max(candidates, key=lambda point: point["mean_grade"])
    return {"curve": curve, "best_alpha": best["alpha"], "best_mean_grade": best["mean_grade"]}


def win_rate_judge(spec: Mapping) -> str:
    """The judge of the win rates: the benchmark judge, else the alpha search's."""
    return spec.get("benchmark_judge", spec["judge"])


def single_grade_judge(spec: Mapping) -> str:
    """The judge of the single-answer grades (MT-Bench's is GPT-4 with FastChat's prompts,
    AlpacaEval 2.0's GPT-4 Turbo): its own, else the win rates'."""
    return spec.get("single_grade_judge", win_rate_judge(spec))


def evaluation_scores(config: Mapping, base: str, recipe: str, alpha: float) -> list[str]:
    """Score files of the ExPO tables for one aligned model and its chosen extrapolation:
    win rate and single-answer grades under their judges, and the lm-eval suites."""
    spec = config["expo"]
    paths = []
    for model in (recipe, expo_name(recipe, alpha)):
        paths.append(win_rate_path(win_rate_judge(spec), base, model, spec["win_rate"]))
        paths.append(grade_path(single_grade_judge(spec), base, model, spec["single_grade"]))
        for key in ("lm_eval_suite", "leaderboard_v2_suite"):
            if spec.get(key):
                paths.append(score_path("lm_eval", base, model, spec[key]))
    return paths


def check_leaderboard_v2_suite(config: Mapping, suite: str) -> None:
    """``expo.leaderboard_v2_suite`` names a suite that runs each of lm-eval's Open LLM
    Leaderboard v2 tasks."""
    suites = config.get("lm_eval_suites", {})
    require(suite, suites, "expo.leaderboard_v2_suite")
    runs = {task["task"] for task in suites[suite]["tasks"]}
    missing = [task for task, _, _ in LEADERBOARD_V2.values() if task not in runs]
    if missing:
        raise ConfigError(
            f"expo.leaderboard_v2_suite: lm_eval_suites.{suite} lacks the leaderboard's lm-eval tasks {missing}"
        )


register_study(Expo())
