"""Ruler: length control with Meta Length Tokens (docs/studies/ruler.md, seed 000): its\nconfig section's schema (schema.yaml) and table writer (tables.py) beside it."""

from __future__ import annotations

from collections.abc import Mapping

from reprolm.config.lookups import chat_template_name, promptset_spec
from reprolm.errors import ConfigError, require
from reprolm.paths import PRETRAINED, score_path
from reprolm.score.task_facts import refuse_metrics_not_reported
from reprolm.studies.base import Study, register_study, section_schema

# The builders that read OpenHermes' single-turn dialogues (one rule must serve both: the
# training set leaves out the TLG set's rows of the same shuffle).
SINGLE_TURN_BUILDERS = ("ruler_tlg", "ruler_train")
# How Ruler's builders pick OpenHermes' single-turn dialogues (param ``single_turn``): the
# original's raw_openhermes_process.py keeps every conversation of exactly two turns,
# whoever speaks them; ``human_then_gpt`` also asks that a human asks and gpt answers.
SINGLE_TURN_RULES = {
    "two_turns": lambda turns: len(turns) == 2,
    "human_then_gpt": lambda turns: len(turns) == 2 and turns[0]["from"] == "human" and turns[1]["from"] == "gpt",
}


class Ruler(Study):
    name = "ruler"
    tables = "reprolm.studies.ruler.tables:write_ruler_tables"
    builders = {
        "ruler_tlg": "reprolm.studies.ruler.builders:build_tlg",
        "ruler_train": "reprolm.studies.ruler.builders:build_ruler_train",
        "ruler_multi_mlt": "reprolm.studies.ruler.builders:build_multi_mlt",
        "ruler_self_mlt": "reprolm.studies.ruler.builders:build_self_mlt",
    }
    schema = section_schema(__file__)
    caption = """\
        **PM** (precise match) and **FM** (flexible match) are the percentages of outputs whose word
        count (``\\w+`` tokens) lies in the target's PM or FM window; windows are half-open,
        ``lo < words <= hi``. Level and ``All`` rows pool the in/out counts of their targets; they
        are not means of per-target percentages. ``multi_mlt`` gives FM per target and their plain
        mean; ``self_mlt`` counts the MLT each Ruler model chose for itself, FM against that MLT's
        window and the mean word count; ``length_errors`` the exact-length rate and RMSE (open-ended
        targets excluded); ``ttest`` compares the lengths of Ruler and vanilla outputs (Welch's test by
        default, Student's with ``compat: original``); ``general`` the lm-eval suite (x100). The
        length tables' ``at max_new_tokens`` column is the percentage of a row's outputs that never
        stopped and ran to the prompt set's ``max_new_tokens``: where it is high, their lengths
        measure the budget rather than the model, and the table's page warns of every model at 20%
        or more (empty where the generations predate the flag). Every
        figure (not the in/out and MLT counts, nor the t-test) has ``lo`` / ``hi`` columns: its 95%
        percentile bootstrap interval over prompts (over documents for lm-eval; a multi-MLT prompt's
        outputs at every target are drawn together), paired across models on the same prompts.
        Each length table's ``definition`` column says what made its row: ``template=`` the chat
        template the model was trained and asked with (``ruler_custom``: the original's one
        template for every base; ``own``: the base's own, as the instruct baselines are asked in
        the original too) and ``single_turn=`` how the TLG prompts were picked (``two_turns``: the
        original's, any two-turn OpenHermes dialogue; ``human_then_gpt``: a human's question and
        gpt's answer only). The ``general`` columns name their lm-eval metric.
    """
    table_captions = {
        "tlg_levels": """\
            **PM** (precise match) and **FM** (flexible match) per model and target level: the
            percentage of outputs whose word count (``\\w+`` tokens) lies in the target's PM or FM
            window, windows half-open (``lo < words <= hi``); a level's and ``All``'s figures pool the
            in/out counts of their targets (not a mean of per-target percentages), with those counts
            beside them. ``at max_new_tokens``: the percentage of the level's outputs that ran to
            the prompt set's ``max_new_tokens`` without stopping (their lengths measure the budget,
            not the model; empty where the generations predate the flag). ``lo`` / ``hi``: 95%
            percentile bootstrap interval over prompts (1000 draws), paired across models on the
            same prompts. ``definition``: the row's chat template (``ruler_custom`` is the
            original's) and TLG prompt rule (``two_turns`` is the original's).
        """,
        "tlg_targets": """\
            PM and FM (percent of outputs whose word count lies in the target's half-open window,
            ``lo < words <= hi``) per model and target length, with the in/out counts. ``lo`` /
            ``hi``: 95% percentile bootstrap interval over prompts, paired across models.
            ``definition``: the row's chat template and TLG prompt rule, as in ``tlg_levels``.
        """,
        "length_errors": """\
            Per model, the exact-length rate (percent of outputs with exactly the target's word
            count) and the RMSE of word count against the target, open-ended targets ("more than
            N") excluded; ``at max_new_tokens``: the percentage of all the model's TLG outputs that
            ran to ``max_new_tokens`` without stopping (empty where the generations predate the
            flag). ``lo`` / ``hi``: 95% percentile bootstrap interval over prompts.
            ``definition``: the row's chat template and TLG prompt rule, as in ``tlg_levels``.
        """,
        "multi_mlt": """\
            One prompt answered at every target (multi-MLT): FM per target (percent within the
            target's half-open FM window) and their plain mean; ``at max_new_tokens``: the
            percentage of the outputs that ran to ``max_new_tokens`` without stopping (empty where
            the generations predate the flag). ``lo`` / ``hi``: 95% percentile bootstrap interval
            over prompts, a prompt's outputs at every target drawn together.
            ``definition``: the chat template the row's model was trained and asked with
            (``ruler_custom`` is the original's).
        """,
        "self_mlt": """\
            Ruler models choosing their own MLT: how often each MLT was chosen (counts, no
            interval), FM against the chosen MLT's window and the mean word count; ``at
            max_new_tokens``: the percentage of outputs that ran to ``max_new_tokens`` without
            stopping (empty where the generations predate the flag). ``lo`` / ``hi``: 95%
            percentile bootstrap interval over prompts. ``definition``: the chat template the
            row's model was trained and asked with.
        """,
        "ttest": """\
            Output lengths (words) of the Ruler model against vanilla SFT: means, the t statistic,
            degrees of freedom and two-sided p-value of Welch's test (Student's with ``compat:
            original``). A test, so no bootstrap interval; p-values at full precision.
            ``definition``: the chat template and TLG prompt rule of the compared models.
        """,
        "general": """\
            The lm-eval suite (accuracies x100) of each model, to show that length control costs
            no general ability. Each column is ``entry (metric)``: the lm-eval metric it reports,
            the original's where ``ruler.lm_eval_metrics`` names it (``acc`` for ARC and
            HellaSwag, not the leaderboard's ``acc_norm``; GSM8K under both filters, which the
            original's one figure does not tell apart). ``lo`` / ``hi``: 95% percentile bootstrap
            interval over each task's documents.
        """,
    }
    plots_caption = (
        "PM and FM per target length, one panel per model, with their 95% bootstrap intervals "
        "(see the tables for the windows)."
    )

    def check_section(self, config: Mapping) -> None:
        # The windows themselves are checked with the rest of the config.
        if "length_targets" not in config:
            raise ConfigError("the ruler study needs length_targets ('paper' or a list)")
        spec = config["ruler"]
        specs = [
            task["name"]
            for task in config.get("lm_eval_suites", {}).get(spec.get("lm_eval_suite"), {}).get("tasks", [])
        ]
        for name in spec.get("lm_eval_metrics", {}):
            require(name, specs, "ruler.lm_eval_metrics")
        for base in spec.get("tlg_only", []):
            require(base, spec.get("baselines", []), "ruler.tlg_only")
        _check_single_turn(config)

    def score_paths(self, config: Mapping) -> list[str]:
        """Every model's evaluations, less all but the TLG ones (and the lm-eval suite) for
        the ``tlg_only`` baselines."""
        spec = config["ruler"]
        tlg_only = set(spec.get("tlg_only", []))
        dropped = {
            score_path(evaluation["metric"], base, recipe, evaluation["promptset"])
            for base, recipe in self.models(config)
            if base in tlg_only
            for evaluation in spec.get("evaluations", [])
            if evaluation["metric"] != "length_levels"
        }
        if spec.get("lm_eval_suite"):
            dropped |= {score_path("lm_eval", base, PRETRAINED, spec["lm_eval_suite"]) for base in tlg_only}
        return [path for path in super().score_paths(config) if path not in dropped]

    def preflight(self, config: Mapping, task_cache: str) -> None:
        tasks = {
            task["name"]: task
            for task in config["lm_eval_suites"].get(config["ruler"].get("lm_eval_suite"), {}).get("tasks", [])
        }
        wanted = {
            f"ruler.lm_eval_metrics.{name}[{index}]": {"task": tasks[name]["task"], "metric": metric}
            for name, metrics in lm_eval_metrics(config["ruler"]).items()
            for index, metric in enumerate(metrics)
        }
        try:
            refuse_metrics_not_reported(wanted, task_cache)
        except ValueError as error:
            raise ConfigError(str(error)) from None

    def settings(self, config: Mapping) -> dict:
        spec = config["ruler"]
        # Every recipe: a Ruler model may be a replicate, an extrapolation or an ``init``'s.
        recipes = set(config.get("recipes", {}))
        datasets = config.get("datasets", {})
        single_turn, prompt_bos = {}, {}
        for evaluation in spec.get("evaluations", []):
            promptset = promptset_spec(config, evaluation["promptset"])
            prompt_bos[evaluation["promptset"]] = promptset.get("prompt_bos", "one")
            dataset = datasets.get(promptset["dataset"], {})
            if dataset.get("builder") == "ruler_tlg":
                single_turn[evaluation["promptset"]] = dataset.get("params", {}).get("single_turn", "two_turns")
        return {
            "length_targets": config["length_targets"],
            # What each table's ``definition`` column says: the template each recipe's
            # models were trained and asked with, and how the TLG prompts were chosen.
            "chat_templates": {recipe: chat_template_name(config, recipe) for recipe in sorted(recipes)},
            "single_turn": single_turn,
            "prompt_bos": prompt_bos,
            "lm_eval_metrics": lm_eval_metrics(spec),
        }


def lm_eval_metrics(spec: Mapping) -> dict[str, list[str]]:
    """``ruler.lm_eval_metrics`` as lists: the lm-eval metric keys the general table reports
    per suite entry, where they differ from the suite's own."""
    return {
        name: [metrics] if isinstance(metrics, str) else list(metrics)
        for name, metrics in spec.get("lm_eval_metrics", {}).items()
    }


def _check_single_turn(config: Mapping) -> None:
    """Each single-turn rule is known, and the TLG set and the training set that leaves its
    rows out read the same source by the same rule."""
    rules = {}
    for name, dataset in config.get("datasets", {}).items():
        if dataset.get("builder") not in SINGLE_TURN_BUILDERS:
            continue
        rule = dataset.get("params", {}).get("single_turn", "two_turns")
        require(rule, list(SINGLE_TURN_RULES), f"datasets.{name}.params.single_turn")
        source = dataset.get("params", {}).get("conversations_source", "openhermes")
        rules.setdefault(source, {})[name] = rule
    for source, by_dataset in rules.items():
        if len(set(by_dataset.values())) > 1:
            raise ConfigError(
                f"datasets.*.params.single_turn: the datasets built from {source!r} pick its single-turn "
                f"dialogues differently ({by_dataset}); the training set leaves out the TLG set's rows only "
                "when both use one rule"
            )


register_study(Ruler())
