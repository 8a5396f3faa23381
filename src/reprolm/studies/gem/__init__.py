"""GEM: entropy-regularised SFT preserves output diversity (docs/studies/gem.md, seed 003): its\nconfig section's schema (schema.yaml) and table writer (tables.py) beside it."""

from __future__ import annotations

from collections.abc import Mapping

from reprolm.config.references import check_sampled_evaluations, require_grader
from reprolm.errors import ConfigError, require
from reprolm.paths import grade_path, judge_score_path
from reprolm.studies.base import Study, register_study, section_schema


class Gem(Study):
    name = "gem"
    tables = "reprolm.studies.gem.tables:write_gem_tables"
    schema = section_schema(__file__)
    caption = """\
        ``ifeval``: lm-eval's IFEval accuracies x100 (prompt and instruction level, strict and loose;
        ``Prompt-Level`` and ``Instruction-Level`` are the loose ones) and their mean; ``not scored``
        names prompts whose checks could not run here and why. ``gsm8k``: greedy accuracy, majority
        voting and best-of-N (the reference among the first k samples, i.e. pass@k) at the largest
        k; ``gsm8k_scaling`` every k. ``chat``: the reward model's mean score of the best of n
        samples per prompt at the seed's n (``gem.best_of_n.headline``), columns marked ``[judge]``
        by the judges graded beside (``gem.best_of_n.beside``); ``chat_best_of_n`` best-of-n and
        mean-of-n for every n and judge. ``diversity_*``: the n-gram distinct ratio (unique /
        all n-grams across a prompt's samples, mean over n = 1, 2, 3, x100), self-BLEU diversity
        (100 - mean BLEU of each sample against the others) and sentence-embedding diversity ((1 -
        mean pairwise cosine) x 100), each the mean over prompts. In ``gsm8k`` and ``diversity_*``
        the seed's columns follow the definition in the row's ``definition`` column (``original``:
        the original code's, e.g. diversity of the chat-template text of prompt and answer;
        ``paper``: the paper's, e.g. diversity of the answers alone); a column marked ``[paper]``
        or ``[original]`` holds the same figure by that other definition. Every figure has ``lo`` / ``hi`` columns: its 95% percentile bootstrap interval over prompts
        (over documents for lm-eval's IFEval), paired across models on the same prompts; the plots
        show these intervals as bands and error bars.
    """
    table_captions = {
        "ifeval": """\
            lm-eval's IFEval accuracies x100: prompt and instruction level, strict and loose
            (``Prompt-Level`` and ``Instruction-Level`` are the loose ones), and their mean, by
            the suite's first IFEval task, whose decoding ``protocol`` names (greedy, or sampled
            with one answer kept as the original GEM evaluation did); columns marked ``[task]``:
            the same by another IFEval task of the suite (another protocol); ``not scored``
            names prompts whose checks could not run here and why. ``lo`` / ``hi``:
            95% percentile bootstrap interval over the prompts, paired across models.
        """,
        "gsm8k": """\
            GSM8K accuracy x100: greedy, majority voting and best-of-N (the reference answer among
            the first k samples, i.e. pass@k) at the largest k, answers read by the row's
            ``definition`` (``original``: as the original code's ``evaluation/utils/gsm8k.py``;
            ``paper``: the number after the last "The answer is"); columns marked ``[paper]`` or
            ``[original]``: the same by that other reading. ``lo`` / ``hi``: 95% percentile
            bootstrap interval over problems, paired across models.
        """,
        "gsm8k_scaling": """\
            Majority-voting and best-of-N accuracy x100 at every k samples. ``lo`` / ``hi``: 95%
            percentile bootstrap interval over problems.
        """,
        "chat": """\
            The reward model's mean score of the best of n samples per chat prompt, the best of
            the first n of each prompt's samples, at each n of ``gem.best_of_n.headline`` (the
            seed's is 8). Columns marked ``[judge]``: the same by a judge graded beside
            (``gem.best_of_n.beside``), e.g. the reward model read at the answer's end of turn
            where the headline judge reads it after an extra assistant header as the original
            ``evaluation_reward.py`` does. ``lo`` / ``hi``: 95% percentile bootstrap interval over
            prompts, paired across models.
        """,
        "chat_best_of_n": """\
            Best-of-n and mean-of-n reward scores for every n, by each judge (``judge``). ``lo`` / ``hi``: 95% percentile
            bootstrap interval over prompts.
        """,
        "reward_model": """\
            The reward model's pair accuracy on held-out preference pairs (the chosen answer
            scored strictly higher). ``lo`` / ``hi``: 95% percentile bootstrap interval over pairs.
        """,
        "diversity_*": """\
            Diversity of each model's samples on one prompt set, the mean over prompts of: the
            n-gram distinct ratio (unique / all n-grams across a prompt's samples, mean over n = 1,
            2, 3, x100), self-BLEU diversity (100 - mean BLEU of each sample against the others)
            and sentence-embedding diversity ((1 - mean pairwise cosine) x 100). The unmarked
            columns follow the row's ``definition``: ``original``, the original
            ``evaluation_diversity.py``'s (each sample as the chat template's rendering of the
            prompt and the answer, NLTK word tokens, self-BLEU against the first other sample
            only), which made the seed's figures; ``paper``, the answers alone (whitespace words,
            self-BLEU against every other sample). Columns marked ``[paper]`` or ``[original]``:
            the same scores by that other definition. ``lo`` / ``hi``: 95% percentile bootstrap
            interval over prompts, paired across models.
        """,
    }

    def check_section(self, config: Mapping) -> None:
        spec = config["gem"]
        for base, recipes in spec.get("recipes_by_base", {}).items():
            require(base, spec["bases"], "gem.recipes_by_base")
            for recipe in recipes:
                require(recipe, config.get("recipes", {}), f"gem.recipes_by_base.{base}")
        for recipe in spec.get("labels", {}):
            require(recipe, sorted({r for _, r in self.models(config)}), "gem.labels")
        best_of_n = spec.get("best_of_n")
        if best_of_n:
            require(best_of_n["promptset"], config.get("promptsets", {}), "gem.best_of_n.promptset")
            require_grader(best_of_n["judge"], config.get("judges", {}), "gem.best_of_n.judge")
            for judge in best_of_n.get("beside", []):
                require_grader(judge, config.get("judges", {}), "gem.best_of_n.beside")
            samples = config["promptsets"][best_of_n["promptset"]]["sampling"].get("n", 1)
            if max(best_of_n["ns"]) > samples:
                raise ConfigError(
                    f"gem.best_of_n.ns asks for best-of-{max(best_of_n['ns'])}, but promptset "
                    f"{best_of_n['promptset']!r} samples n={samples} answers per prompt"
                )
            for n in best_of_n.get("headline", []):
                if n not in best_of_n["ns"]:
                    raise ConfigError(f"gem.best_of_n.headline: n={n} is not one of gem.best_of_n.ns {best_of_n['ns']}")
        check_sampled_evaluations(config, spec.get("evaluations", []), "gem.evaluations")
        if spec.get("judge_validation"):
            require(spec["judge_validation"], config.get("datasets", {}), "gem.judge_validation")
            if not best_of_n:
                raise ConfigError("gem.judge_validation validates gem.best_of_n's judge, but gem.best_of_n is not set")

    def models(self, config: Mapping) -> list[tuple[str, str]]:
        """Each base under its own recipes (``recipes_by_base``) or the study's."""
        spec = config["gem"]
        return [(b, r) for b in spec["bases"] for r in spec.get("recipes_by_base", {}).get(b, spec["recipes"])]

    def score_paths(self, config: Mapping) -> list[str]:
        """Besides the evaluations and lm-eval suite: the reward model's grades of every sample
        for best-of-n, and its accuracy on held-out preference pairs."""
        spec = config["gem"]
        paths = super().score_paths(config)
        best_of_n = spec.get("best_of_n")
        if not best_of_n:
            return paths
        paths += [
            grade_path(judge, base, recipe, best_of_n["promptset"])
            for judge in [best_of_n["judge"], *best_of_n.get("beside", [])]
            for base, recipe in self.models(config)
            if recipe in best_of_n.get("recipes", [recipe])
        ]
        if spec.get("judge_validation"):
            paths.append(judge_score_path("pair_accuracy", best_of_n["judge"], spec["judge_validation"]))
        return paths

    def settings(self, config: Mapping) -> dict:
        return {"models": self.models(config)}

    def table_judges(self, config: Mapping) -> dict[str, list[str]]:
        best_of_n = config["gem"].get("best_of_n")
        if not best_of_n:
            return {}
        graders = [best_of_n["judge"], *best_of_n.get("beside", [])]
        return {"chat": graders, "chat_best_of_n": graders, "reward_model": [best_of_n["judge"]]}


register_study(Gem())
