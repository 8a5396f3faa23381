"""Config lookups the workflow uses: cross-reference checks, paths, and what each study needs.

The JSON-Schema checks shapes and types; :func:`check_references` checks that every name
one section uses is declared in another, so a typo fails before any job runs, naming the
key and the allowed values.
"""

from __future__ import annotations

from collections.abc import Mapping

from reprolm.score.length import TargetSet

PRETRAINED = "pretrained"  # the recipe name of a base model used as it is
STUDIES = ("ruler", "harmony")


class ConfigError(ValueError):
    pass


def _require(name, allowed: Mapping | list, where: str) -> None:
    if name not in allowed:
        raise ConfigError(f"{where}: {name!r} is not declared; allowed: {sorted(allowed)}")


def check_references(config: Mapping) -> None:
    sources, datasets, recipes = config["sources"], config.get("datasets", {}), config.get("recipes", {})
    for name, spec in config.get("tokenizers", {}).items():
        for source in spec["corpus"]:
            _require(source, sources, f"tokenizers.{name}.corpus")
    for name, spec in config["base_models"].items():
        build = spec.get("build")
        if build:
            _require(build["tokenizer"], config.get("tokenizers", {}), f"base_models.{name}.build.tokenizer")
            for source in build["pretrain"]["corpus"]:
                _require(source, sources, f"base_models.{name}.build.pretrain.corpus")
    for name, spec in datasets.items():
        for source in spec["sources"]:
            _require(source, sources, f"datasets.{name}.sources")
    for name, spec in recipes.items():
        _require(spec["dataset"], datasets, f"recipes.{name}.dataset")
    for name, spec in config.get("promptsets", {}).items():
        _require(spec["dataset"], datasets, f"promptsets.{name}.dataset")
    for name, suite in config.get("lm_eval_suites", {}).items():
        for index, task in enumerate(suite["tasks"]):
            if task.get("source"):
                _require(task["source"], sources, f"lm_eval_suites.{name}.tasks[{index}].source")
    for study in config["studies"]:
        _require(study, STUDIES, "studies")
        spec = config.get(study)
        if spec is None:
            raise ConfigError(f"study {study!r} is enabled but the config has no {study!r} section")
        for base in spec["bases"] + spec.get("baselines", []):
            _require(base, config["base_models"], f"{study}.bases")
        # Ruler evaluates base models as they are through `baselines`; harmony through recipes.
        allowed = list(recipes) + ([PRETRAINED] if study == "harmony" else [])
        for recipe in spec.get("recipes", []):
            _require(recipe, allowed, f"{study}.recipes")
        for index, task in enumerate(spec.get("tasks", [])):
            if task.get("source"):
                _require(task["source"], sources, f"{study}.tasks[{index}].source")
        for index, evaluation in enumerate(spec.get("evaluations", [])):
            _require(evaluation["promptset"], config.get("promptsets", {}), f"{study}.evaluations[{index}].promptset")
            for recipe in evaluation.get("recipes", []):
                _require(recipe, list(recipes) + [PRETRAINED], f"{study}.evaluations[{index}].recipes")
        suite = spec.get("lm_eval_suite")
        if suite:
            _require(suite, config.get("lm_eval_suites", {}), f"{study}.lm_eval_suite")
    if "ruler" in config["studies"]:
        if "length_targets" not in config:
            raise ConfigError("the ruler study needs length_targets ('paper' or a list)")
        TargetSet.from_config(config["length_targets"])


def canonical(value):
    """``value`` with every mapping's keys sorted, recursively.

    Snakemake compares params by their text, so a reordered config file would otherwise
    rerun jobs whose settings did not change.
    """
    if isinstance(value, Mapping):
        return {key: canonical(value[key]) for key in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [canonical(item) for item in value]
    return value


def base_model_dir(base: str) -> str:
    return f"resources/models/{base}"


def model_dir(base: str, recipe: str) -> str:
    return base_model_dir(base) if recipe == PRETRAINED else f"results/models/{base}/{recipe}"


def study_models(config: Mapping, study: str) -> list[tuple[str, str]]:
    """(base, recipe) pairs a study evaluates: each base under each recipe (a base model as
    it is when no recipes are given), then baselines used as they are."""
    spec = config[study]
    recipes = spec.get("recipes") or [PRETRAINED]
    return [(b, r) for b in spec["bases"] for r in recipes] + [
        (b, PRETRAINED) for b in spec.get("baselines", [])
    ]


def length_prompt(config: Mapping, recipe: str) -> str:
    """How a model is asked for a length: ``mlt`` if its recipe taught MLTs."""
    if recipe == PRETRAINED:
        return "instruction"
    return config["recipes"][recipe].get("length_prompt", "instruction")


def study_scores(config: Mapping, study: str) -> list[str]:
    spec = config[study]
    paths = []
    for base, recipe in study_models(config, study):
        for evaluation in spec.get("evaluations", []):
            if recipe in evaluation.get("recipes", [recipe]):
                paths.append(
                    f"results/scores/{evaluation['metric']}/{base}/{recipe}/{evaluation['promptset']}.json"
                )
        if spec.get("lm_eval_suite"):
            paths.append(f"results/scores/lm_eval/{base}/{recipe}/{spec['lm_eval_suite']}.json")
        for task in spec.get("tasks", []):
            paths.append(f"results/scores/train_before_test/{base}/{recipe}/{task['name']}.json")
    return paths


def harmony_task(config: Mapping, name: str) -> dict:
    """A train-before-test task's settings by its short name."""
    for task in config["harmony"]["tasks"]:
        if task["name"] == name:
            return task
    raise KeyError(f"harmony.tasks has no task named {name!r}")


def finetune_tokens(config: Mapping, recipe: str) -> list[str]:
    """Tokens a recipe adds to the tokenizer (``mlt``: one per length target)."""
    if config["recipes"][recipe].get("add_tokens") == "mlt":
        return TargetSet.from_config(config["length_targets"]).mlt_tokens
    return []


def model_settings(config: Mapping, base: str, stage: str) -> dict:
    """Per-base-model settings of a stage (finetune, generate, evaluate), with defaults."""
    defaults = {"gpus": 0, "threads": 1, "mem_mb": 4000, "runtime": 60, "launcher": "none",
                "precision": "float32", "tensor_parallel": False}
    spec = config["base_models"][base].get("resources", {})
    return {**defaults, **spec.get("default", {}), **spec.get(stage, {})}


def study_settings(config: Mapping, study: str) -> dict:
    """The top-level settings a study's tables use besides its own section."""
    return {"length_targets": config["length_targets"]} if study == "ruler" else {}
