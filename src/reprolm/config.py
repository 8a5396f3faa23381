"""Config lookups the workflow uses: cross-reference checks, paths, and what each study needs.

The JSON-Schema checks shapes and types; :func:`check_references` checks that every name
one section uses is declared in another, so a typo fails before any job runs, naming the
key and the allowed values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from reprolm.score.length import TargetSet

PRETRAINED = "pretrained"  # the recipe name of a base model used as it is
STUDIES = ("ruler", "harmony", "expo", "flr", "gem")


class ConfigError(ValueError):
    pass


def _require(name, allowed: Mapping | list, where: str) -> None:
    if name not in allowed:
        raise ConfigError(f"{where}: {name!r} is not declared; allowed: {sorted(allowed)}")


def _require_recipe(config: Mapping, recipe: str, allowed: list, where: str) -> None:
    """A declared recipe, or ``{recipe}+expo{alpha}`` of one that has an ExPO reference
    (``pretrained+expo{alpha}``'s reference depends on the base; it is checked per model)."""
    plain, alpha = split_expo(recipe)
    _require(plain, allowed, where)
    if alpha is not None and plain != PRETRAINED:
        expo_reference(config, plain)


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
        for source in spec.get("sources", []):
            _require(source, sources, f"datasets.{name}.sources")
        online = spec.get("from_generations")
        if online:
            _require_model(config, online["model"], f"datasets.{name}.from_generations.model")
            _require(online["promptset"], config.get("promptsets", {}), f"datasets.{name}.from_generations.promptset")
            _require(online["judge"], config.get("judges", {}), f"datasets.{name}.from_generations.judge")
    for name, spec in recipes.items():
        _require(spec["dataset"], datasets, f"recipes.{name}.dataset")
        if "init" in spec:
            _require(spec["init"], [other for other in recipes if other != name], f"recipes.{name}.init")
    for aligned, reference in config.get("expo", {}).get("references", {}).items():
        _require(aligned, recipes, "expo.references")
        _require(reference, list(recipes) + [PRETRAINED], f"expo.references.{aligned}")
    for index, name in enumerate(config.get("expo", {}).get("models", [])):
        base, recipe = name.split("/", 1)
        _require(base, config["base_models"], f"expo.models[{index}]")
        if split_expo(recipe)[0] == PRETRAINED:
            expo_reference_dir(config, base, split_expo(recipe)[0])
        else:
            _require_recipe(config, recipe, list(recipes), f"expo.models[{index}]")
    for aligned, reference in config.get("expo", {}).get("base_references", {}).items():
        _require(aligned, config["base_models"], "expo.base_references")
        _require(reference, config["base_models"], f"expo.base_references.{aligned}")
    for name, spec in config.get("promptsets", {}).items():
        _require(spec["dataset"], datasets, f"promptsets.{name}.dataset")
    for name, suite in config.get("lm_eval_suites", {}).items():
        for index, task in enumerate(suite["tasks"]):
            if task.get("source"):
                _require(task["source"], sources, f"lm_eval_suites.{name}.tasks[{index}].source")
    for name, spec in config.get("judges", {}).items():
        if spec["kind"] in LOCAL_JUDGES:
            _require_model(config, spec["model"], f"judges.{name}.model")
    for name, spec in config.get("promptsets", {}).items():
        reference = spec.get("reference", "dataset")
        if "/" in reference:
            _require_model(config, reference, f"promptsets.{name}.reference")
        elif reference != "dataset":
            _require_recipe(config, reference, list(recipes) + [PRETRAINED], f"promptsets.{name}.reference")
    for study in config["studies"]:
        _require(study, STUDIES, "studies")
        spec = config.get(study)
        if spec is None:
            raise ConfigError(f"study {study!r} is enabled but the config has no {study!r} section")
        for base in spec.get("bases", []) + spec.get("baselines", []):
            _require(base, config["base_models"], f"{study}.bases")
        # Ruler evaluates base models as they are through `baselines`; the others through recipes.
        allowed = list(recipes) + ([PRETRAINED] if study in ("harmony", "expo") else [])
        for recipe in spec.get("recipes", []):
            _require_recipe(config, recipe, allowed, f"{study}.recipes")
        for index, task in enumerate(spec.get("tasks", [])):
            if task.get("source"):
                _require(task["source"], sources, f"{study}.tasks[{index}].source")
        for index, evaluation in enumerate(spec.get("evaluations", [])):
            _require(evaluation["promptset"], config.get("promptsets", {}), f"{study}.evaluations[{index}].promptset")
            for recipe in evaluation.get("recipes", []):
                _require_recipe(config, recipe, list(recipes) + [PRETRAINED], f"{study}.evaluations[{index}].recipes")
        suite = spec.get("lm_eval_suite")
        if suite:
            _require(suite, config.get("lm_eval_suites", {}), f"{study}.lm_eval_suite")
    if "expo" in config["studies"]:
        _check_expo_study(config)
    if "flr" in config["studies"]:
        _check_flr_study(config)
    if "gem" in config["studies"]:
        _check_gem_study(config)
    if config.get("leaderboard"):
        _require(config["leaderboard"]["promptset"], config.get("promptsets", {}), "leaderboard.promptset")
        _require(config["leaderboard"]["judge"], config.get("judges", {}), "leaderboard.judge")
    if "ruler" in config["studies"]:
        if "length_targets" not in config:
            raise ConfigError("the ruler study needs length_targets ('paper' or a list)")
        TargetSet.from_config(config["length_targets"])


def _require_model(config: Mapping, name: str, where: str) -> None:
    """``name`` is ``{base}/{recipe}`` of a declared base model and recipe (or pretrained)."""
    base, _, recipe = name.partition("/")
    _require(base, config["base_models"], where)
    _require_recipe(config, recipe, list(config.get("recipes", {})) + [PRETRAINED], where)


def _check_expo_study(config: Mapping) -> None:
    spec = config["expo"]
    _require(spec["judge"], config.get("judges", {}), "expo.judge")
    if spec.get("benchmark_judge"):
        _require(spec["benchmark_judge"], config.get("judges", {}), "expo.benchmark_judge")
    for key in ("win_rate", "single_grade"):
        _require(spec[key], config.get("promptsets", {}), f"expo.{key}")
    _require(spec["alpha_search"]["promptset"], config.get("promptsets", {}), "expo.alpha_search.promptset")
    if spec.get("judge_validation"):
        _require(spec["judge_validation"], config.get("datasets", {}), "expo.judge_validation")
    for base, recipe in study_models(config, "expo"):
        if recipe == PRETRAINED:
            expo_reference_dir(config, base, recipe)
        else:
            expo_reference(config, recipe)


def _check_flr_study(config: Mapping) -> None:
    spec, datasets = config["flr"], config.get("datasets", {})
    for judge in spec["judges"]:
        _require(judge, config.get("judges", {}), "flr.judges")
    for key in ("pairwise", "ratings"):
        for dataset in spec.get(key, []):
            _require(dataset, datasets, f"flr.{key}")
    if spec.get("ranking"):
        _require(spec["ranking"]["dataset"], datasets, "flr.ranking.dataset")
    alignment = spec.get("alignment")
    if alignment:
        for base in alignment["bases"]:
            _require(base, config["base_models"], "flr.alignment.bases")
        _require(alignment["start"], list(config.get("recipes", {})) + [PRETRAINED], "flr.alignment.start")
        for recipe in alignment["recipes"]:
            _require(recipe, config.get("recipes", {}), "flr.alignment.recipes")
        _require(alignment["promptset"], config.get("promptsets", {}), "flr.alignment.promptset")
        for judge in [alignment["judge"]] + alignment.get("graders", []):
            _require(judge, config.get("judges", {}), "flr.alignment")


def _check_gem_study(config: Mapping) -> None:
    spec = config["gem"]
    for base, recipes in spec.get("recipes_by_base", {}).items():
        _require(base, spec["bases"], "gem.recipes_by_base")
        for recipe in recipes:
            _require(recipe, config.get("recipes", {}), f"gem.recipes_by_base.{base}")
    for recipe in spec.get("labels", {}):
        _require(recipe, sorted({r for _, r in study_models(config, "gem")}), "gem.labels")
    best_of_n = spec.get("best_of_n")
    if best_of_n:
        _require(best_of_n["promptset"], config.get("promptsets", {}), "gem.best_of_n.promptset")
        _require(best_of_n["judge"], config.get("judges", {}), "gem.best_of_n.judge")
        samples = config["promptsets"][best_of_n["promptset"]]["sampling"].get("n", 1)
        if max(best_of_n["ns"]) > samples:
            raise ConfigError(f"gem.best_of_n.ns asks for best-of-{max(best_of_n['ns'])}, but promptset "
                              f"{best_of_n['promptset']!r} samples n={samples} answers per prompt")
    _check_sampled_evaluations(config, spec.get("evaluations", []), "gem.evaluations")
    if spec.get("judge_validation"):
        _require(spec["judge_validation"], config.get("datasets", {}), "gem.judge_validation")
        if not best_of_n:
            raise ConfigError("gem.judge_validation validates gem.best_of_n's judge, but gem.best_of_n is not set")


def _check_sampled_evaluations(config: Mapping, evaluations: list, where: str) -> None:
    """Metrics over many samples per prompt need that many: maj@k / pass@k at the largest k
    of ``metrics.answer_voting.ks``, diversity at least two."""
    ks = config.get("metrics", {}).get("answer_voting", {}).get("ks")
    for index, evaluation in enumerate(evaluations):
        samples = config["promptsets"][evaluation["promptset"]]["sampling"].get("n", 1)
        if evaluation["metric"] == "answer_voting" and ks and max(ks) > samples:
            raise ConfigError(f"{where}[{index}]: metrics.answer_voting.ks asks for @{max(ks)}, but promptset "
                              f"{evaluation['promptset']!r} samples n={samples} answers per prompt")
        if evaluation["metric"] == "diversity" and samples < 2:
            raise ConfigError(f"{where}[{index}]: diversity compares a prompt's samples, but promptset "
                              f"{evaluation['promptset']!r} samples n={samples}; set sampling.n to 2 or more")


def gem_scores(config: Mapping) -> list[str]:
    """Besides the evaluations and lm-eval suite: the reward model's grades of every sample
    for best-of-n, and its accuracy on held-out preference pairs."""
    spec = config["gem"]
    best_of_n = spec.get("best_of_n")
    if not best_of_n:
        return []
    paths = [grade_path(best_of_n["judge"], base, recipe, best_of_n["promptset"])
             for base, recipe in study_models(config, "gem") if recipe in best_of_n.get("recipes", [recipe])]
    if spec.get("judge_validation"):
        paths.append(f"results/scores/pair_accuracy/{best_of_n['judge']}/{spec['judge_validation']}/test.json")
    return paths


def flr_scores(config: Mapping) -> list[str]:
    """Score files of the FLR tables: every judge on every reward-model benchmark, then the
    aligned policies against their starting policy."""
    spec = config["flr"]
    paths = []
    for judge in spec["judges"]:
        paths += [f"results/scores/pair_accuracy/{judge}/{d}/test.json" for d in spec.get("pairwise", [])]
        paths += [f"results/scores/rating_agreement/{judge}/{d}/test.json" for d in spec.get("ratings", [])]
        if spec.get("ranking"):
            paths.append(f"results/scores/model_ranking/{judge}/{spec['ranking']['dataset']}/test.json")
    alignment = spec.get("alignment")
    if alignment:
        promptset = alignment["promptset"]
        for base in alignment["bases"]:
            for recipe in alignment["recipes"]:
                paths.append(f"results/scores/win_rate_{alignment['judge']}/{base}/{recipe}/{promptset}.json")
            for recipe in [alignment["start"]] + alignment["recipes"]:
                paths += [grade_path(judge, base, recipe, promptset) for judge in alignment.get("graders", [])]
    return paths


def reference_generations(config: Mapping, promptset: str, base: str) -> str | None:
    """The reference answers' generations for win rates on ``promptset``: a model
    ``{base}/{recipe}``, or a bare recipe on the evaluated model's own base (an aligned
    policy against the policy it started from); None for the benchmark's own answers."""
    reference = config["promptsets"][promptset].get("reference", "dataset")
    if reference == "dataset":
        return None
    model = reference if "/" in reference else f"{base}/{reference}"
    return f"results/generations/{model}/{promptset}.parquet"


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


EXPO_SUFFIX = re.compile(r"^(?P<recipe>[A-Za-z0-9_.-]+)\+expo(?P<alpha>[0-9]+(?:\.[0-9]+)?)$")


def split_expo(recipe: str) -> tuple[str, float | None]:
    """``"dpo+expo0.5"`` -> ``("dpo", 0.5)``: an extrapolated model names the recipe it
    extrapolates and alpha; a plain recipe gives ``(recipe, None)``."""
    match = EXPO_SUFFIX.match(recipe)
    return (match["recipe"], float(match["alpha"])) if match else (recipe, None)


def expo_reference(config: Mapping, recipe: str) -> str:
    """The recipe (or ``pretrained``) that ``recipe``'s model is extrapolated away from."""
    references = config.get("expo", {}).get("references", {})
    if recipe not in references:
        raise ConfigError(f"expo.references has no entry for recipe {recipe!r}, so '{recipe}+expo<alpha>' "
                          f"cannot be built; declared: {sorted(references)}")
    return references[recipe]


def expo_reference_dir(config: Mapping, base: str, recipe: str) -> str:
    """The checkpoint ``{base}/{recipe}+expo{alpha}`` is extrapolated away from: for a recipe,
    its reference recipe on the same base; for an aligned model used as it is
    (``pretrained``), the SFT base model named in ``expo.base_references``."""
    if recipe == PRETRAINED:
        references = config.get("expo", {}).get("base_references", {})
        if base not in references:
            raise ConfigError(f"expo.base_references has no entry for base model {base!r}, so "
                              f"'{base}/{PRETRAINED}+expo<alpha>' cannot be built; declared: {sorted(references)}")
        return base_model_dir(references[base])
    return model_dir(base, expo_reference(config, recipe))


def finetune_start(config: Mapping, base: str, recipe: str) -> str:
    """The checkpoint a recipe's finetune starts from: the base model, or the model of the
    recipe named in ``init`` (e.g. DPO from an SFT model)."""
    init = config["recipes"][recipe].get("init")
    return model_dir(base, init) if init else base_model_dir(base)


def model_dir(base: str, recipe: str) -> str:
    return base_model_dir(base) if recipe == PRETRAINED else f"results/models/{base}/{recipe}"


def expo_name(recipe: str, alpha: float) -> str:
    """The model name of ``recipe`` extrapolated by ``alpha`` (``0.30`` and ``0.3`` name one model)."""
    return f"{recipe}+expo{alpha:g}"


LOCAL_JUDGES = ("reward_model", "flr")


def judge_files(config: Mapping, judge: str) -> dict[str, str]:
    """What a judge's jobs read: the checkpoint of a local judge (reward model, FLR's LM)
    and FLR's follow-ups file (so that editing it reruns what it scored); nothing for an
    endpoint."""
    spec = config["judges"][judge]
    files = {}
    if spec["kind"] in LOCAL_JUDGES:
        files["judge_model"] = model_dir(*spec["model"].split("/", 1))
    if spec["kind"] == "flr":
        files["followups"] = spec["followups"]
    return files


def grade_path(judge: str, base: str, recipe: str, promptset: str) -> str:
    return f"results/scores/grade_{judge}/{base}/{recipe}/{promptset}.json"


def judged_generations(online: Mapping) -> dict[str, str]:
    """A policy's samples on a prompt set and the judge's grades of them."""
    base, recipe = online["model"].split("/", 1)
    return {"generations": f"results/generations/{base}/{recipe}/{online['promptset']}.parquet",
            "grades": grade_path(online["judge"], base, recipe, online["promptset"])}


def alpha_search_grades(config: Mapping, base: str, recipe: str) -> dict[str, str]:
    """The judge's grades of ``recipe``'s model (alpha 0) and of each extrapolation in the
    grid, on the search prompts, by alpha as text."""
    spec = config["expo"]
    search = spec["alpha_search"]
    models = {"0": recipe, **{f"{alpha:g}": expo_name(recipe, alpha) for alpha in search["alphas"]}}
    return {alpha: grade_path(spec["judge"], base, model, search["promptset"]) for alpha, model in models.items()}


def alpha_search_path(config: Mapping, base: str, recipe: str) -> str:
    return f"results/scores/alpha_search/{base}/{recipe}/{config['expo']['alpha_search']['promptset']}.json"


def expo_scores(config: Mapping, base: str, recipe: str, alpha: float) -> list[str]:
    """Score files of the ExPO tables for one aligned model and its chosen extrapolation:
    win rate and single-answer grades under the benchmark judge (default: the search's),
    and the lm-eval suite."""
    spec = config["expo"]
    judge = spec.get("benchmark_judge", spec["judge"])
    paths = []
    for model in (recipe, expo_name(recipe, alpha)):
        paths.append(f"results/scores/win_rate_{judge}/{base}/{model}/{spec['win_rate']}.json")
        paths.append(grade_path(judge, base, model, spec["single_grade"]))
        if spec.get("lm_eval_suite"):
            paths.append(f"results/scores/lm_eval/{base}/{model}/{spec['lm_eval_suite']}.json")
    return paths


def judge_validation_path(config: Mapping) -> list[str]:
    """The study judge's accuracy on the held-out pairs of ``expo.judge_validation``, if set."""
    spec = config["expo"]
    dataset = spec.get("judge_validation")
    return [f"results/scores/pair_accuracy/{spec['judge']}/{dataset}/test.json"] if dataset else []


def expo_models(config: Mapping) -> list[str]:
    """Folders of the extrapolated checkpoints listed in ``expo.models``."""
    return [model_dir(*name.split("/", 1)) for name in config.get("expo", {}).get("models", [])]


def study_models(config: Mapping, study: str) -> list[tuple[str, str]]:
    """(base, recipe) pairs a study evaluates: each base under each recipe (a base model as
    it is when no recipes are given), then baselines used as they are."""
    spec = config[study]
    if study == "flr":
        alignment = spec.get("alignment") or {"bases": [], "start": None, "recipes": []}
        return [(b, r) for b in alignment["bases"] for r in [alignment["start"]] + alignment["recipes"]]
    if study == "gem":
        return [(b, r) for b in spec["bases"] for r in spec.get("recipes_by_base", {}).get(b, spec["recipes"])]
    recipes = spec.get("recipes") or [PRETRAINED]
    return [(b, r) for b in spec["bases"] for r in recipes] + [
        (b, PRETRAINED) for b in spec.get("baselines", [])
    ]


def leaderboard_models(config: Mapping) -> list[tuple[str, str]]:
    """Every finetuned model of the enabled studies (base models used as they are left out),
    in study order, each once."""
    models: dict[tuple[str, str], None] = {}
    for study in config["studies"]:
        for base, recipe in study_models(config, study):
            if split_expo(recipe)[0] != PRETRAINED:
                models[(base, recipe)] = None
    return list(models)


def leaderboard_grades(config: Mapping) -> list[str]:
    """The leaderboard judge's grades of each finetuned model on the leaderboard prompts."""
    spec = config["leaderboard"]
    return [grade_path(spec["judge"], base, recipe, spec["promptset"]) for base, recipe in leaderboard_models(config)]


def length_prompt(config: Mapping, recipe: str) -> str:
    """How a model is asked for a length: ``mlt`` if its recipe taught MLTs."""
    plain = split_expo(recipe)[0]
    if plain == PRETRAINED:
        return "instruction"
    return config["recipes"][plain].get("length_prompt", "instruction")


def study_scores(config: Mapping, study: str) -> list[str]:
    if study == "flr":
        return flr_scores(config)
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
    if study == "gem":
        paths += gem_scores(config)
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


STAGE_DEFAULTS = {"gpus": 0, "threads": 1, "mem_mb": 4000, "runtime": 60, "launcher": "none",
                  "precision": "float32", "tensor_parallel": False}


def model_settings(config: Mapping, base: str, stage: str) -> dict:
    """Per-base-model settings of a stage (finetune, generate, evaluate), with defaults."""
    spec = config["base_models"][base].get("resources", {})
    return {**STAGE_DEFAULTS, **spec.get("default", {}), **spec.get(stage, {})}


def judge_settings(config: Mapping, judge: str) -> dict:
    """Resources of a judge's jobs: its reward model's evaluate settings; an endpoint's
    defaults (it only makes requests)."""
    spec = config["judges"][judge]
    if spec["kind"] in LOCAL_JUDGES:
        return model_settings(config, spec["model"].split("/", 1)[0], "evaluate")
    return dict(STAGE_DEFAULTS)


def chosen_alpha(search_path: str) -> float:
    """The alpha an alpha search chose (its JSON's ``best_alpha``)."""
    import json
    from pathlib import Path

    return float(json.loads(Path(search_path).read_text())["best_alpha"])


def study_settings(config: Mapping, study: str) -> dict:
    """The top-level settings a study's tables use besides its own section."""
    if study == "ruler":
        return {"length_targets": config["length_targets"]}
    if study == "expo":
        spec = config["expo"]
        return {"judges": {name: config["judges"][name]
                           for name in {spec["judge"], spec.get("benchmark_judge", spec["judge"])}}}
    if study == "flr":
        return {"judges": {name: config["judges"][name] for name in config["flr"]["judges"]}}
    if study == "gem":
        return {"models": study_models(config, "gem")}
    return {}
