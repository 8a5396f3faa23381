"""What a stage's jobs need, looked up in the config: where a finetune starts, which tokens a
recipe adds, how a model is asked for a length, what an extrapolation is pushed away from,
what a judge reads, the models the leaderboard ranks, and the hub data a job would
otherwise fetch on its node."""

from __future__ import annotations

from collections.abc import Mapping

from reprolm.data.upstream import nltk_data_needed
from reprolm.errors import ConfigError
from reprolm.generate.prompts import PROMPTSET_KEYS as GENERATION_PROMPTSET_KEYS
from reprolm.generate.prompts import RECIPE_KEYS as GENERATION_RECIPE_KEYS
from reprolm.length import TargetSet
from reprolm.models.templates import OWN_TEMPLATE, named_template
from reprolm.paths import (
    PRETRAINED,
    base_model_dir,
    generations_file,
    grade_path,
    hub_model_dir,
    lm_eval_data_dir,
    lm_eval_samples_path,
    model_dir,
    nltk_data_dir,
    parse_score_path,
    raw_dir,
    score_path,
    seed_name,
    split_expo,
    split_seed,
)
from reprolm.score.definitions import chosen_definitions
from reprolm.score.judges import judge_kind


def _without_seeds(spec: Mapping) -> dict:
    # Which replicates exist is no setting of any one of them: adding a seed reruns nothing.
    return {key: value for key, value in spec.items() if key != "seeds"}


def recipe_spec(config: Mapping, name: str) -> dict:
    """The recipe a model name was trained by (a replicate ``{recipe}-seed{n}`` is its
    recipe's), less its ``seeds``."""
    return _without_seeds(config["recipes"][split_seed(name)[0]])


def promptset_spec(config: Mapping, name: str) -> dict:
    """The prompt set a generation's name samples (``{promptset}-seed{n}`` is its prompt
    set's), less its ``seeds``."""
    return _without_seeds(config["promptsets"][split_seed(name)[0]])


def finetune_spec(config: Mapping, name: str) -> dict:
    """What a finetune reads of its recipe (:func:`recipe_spec`): all of it but the keys
    only generation reads (:data:`reprolm.generate.prompts.RECIPE_KEYS`)."""
    return {key: value for key, value in recipe_spec(config, name).items() if key not in GENERATION_RECIPE_KEYS}


def generation_spec(config: Mapping, name: str) -> dict:
    """What a generation reads of its prompt set (:func:`promptset_spec`): the keys
    :data:`reprolm.generate.prompts.PROMPTSET_KEYS` names; its dataset and split are its
    input file, its ``reference`` is read by the judges only."""
    return {key: value for key, value in promptset_spec(config, name).items() if key in GENERATION_PROMPTSET_KEYS}


def _seed_of(config: Mapping, name: str) -> int:
    seed = split_seed(name)[1]
    return config["seed"] if seed is None else seed


def recipe_seed(config: Mapping, name: str) -> int:
    """The seed a finetune of ``name`` trains with: a replicate's own, else the config's ``seed``."""
    return _seed_of(config, name)


def sampling_seed(config: Mapping, name: str) -> int:
    """The seed a generation on prompt set ``name`` samples with: a replicate's own, else the
    config's ``seed``."""
    return _seed_of(config, name)


def _replicates(config: Mapping, section: str, name: str) -> list[str]:
    seeds = config.get(section, {}).get(name, {}).get("seeds")
    if not seeds:
        return [name]
    return [name if seed == config["seed"] else seed_name(name, seed) for seed in seeds]


def replicate_names(config: Mapping, recipe: str) -> list[str]:
    """The model names of a recipe's replicates, one per seed in its ``seeds``: the config's
    ``seed`` keeps the plain name (so a single seed's paths never change), others are
    ``{recipe}-seed{n}``. A recipe without ``seeds`` (or ``pretrained``) is one model."""
    return _replicates(config, "recipes", recipe)


def replicate_promptsets(config: Mapping, promptset: str) -> list[str]:
    """The names of a prompt set's sampling replicates, named as :func:`replicate_names` names
    a recipe's; anything that is not a prompt set with ``seeds`` (an lm-eval suite) as it is."""
    return _replicates(config, "promptsets", promptset)


def replicate_score_paths(config: Mapping, paths: list[str]) -> list[str]:
    """Each score path of a model whose recipe, or of a prompt set whose sampling, has
    replicate seeds, as one path per replicate (every recipe seed with every sampling seed; a
    study's tables pool them); other paths as they are."""
    expanded = []
    for path in paths:
        parsed = parse_score_path(path)
        if parsed.base not in config.get("base_models", {}):
            expanded.append(path)  # a judge's score on a dataset: no model in it
            continue
        expanded += [
            score_path(parsed.metric, parsed.base, recipe, name)
            for recipe in replicate_names(config, parsed.recipe)
            for name in replicate_promptsets(config, parsed.name)
        ]
    return list(dict.fromkeys(expanded))


def lm_eval_samples_logs(paths: list[str]) -> list[str]:
    """The per-document logs beside the lm-eval scores among ``paths`` (the tables draw
    their intervals from them)."""
    return [lm_eval_samples_path(path) for path in paths if parse_score_path(path).metric == "lm_eval"]


def finetune_start(config: Mapping, base: str, recipe: str) -> str:
    """The checkpoint a recipe's finetune starts from: the base model, or the model of the
    recipe named in ``init`` (e.g. DPO from an SFT model). A replicate starts from the init
    recipe's replicate of the same seed where that recipe has one, else from its default."""
    init = recipe_spec(config, recipe).get("init")
    if not init:
        return base_model_dir(base)
    seed = split_seed(recipe)[1]
    if seed is not None and seed_name(init, seed) in replicate_names(config, init):
        return model_dir(base, seed_name(init, seed))
    return model_dir(base, init)


def finetune_tokens(config: Mapping, recipe: str) -> list[str]:
    """Tokens a recipe adds to the tokenizer: its named chat template's special tokens, then
    (``add_tokens: mlt``) one per length target."""
    spec = recipe_spec(config, recipe)
    template = named_template(spec.get("chat_template"), f"recipes.{recipe}.chat_template")
    tokens = list(template.special_tokens) if template else []
    if spec.get("add_tokens") == "mlt":
        tokens += TargetSet.from_config(config["length_targets"]).mlt_tokens
    return tokens


def finetune_chat_template(config: Mapping, recipe: str) -> str | None:
    """The chat template (Jinja) a recipe's finetune trains with and saves with its model;
    None keeps the starting checkpoint's own."""
    template = named_template(recipe_spec(config, recipe).get("chat_template"), f"recipes.{recipe}.chat_template")
    return template.jinja if template else None


def chat_template_name(config: Mapping, recipe: str) -> str:
    """The named template a model was trained with (``own``: its base's), following
    replicates, extrapolations and ``init`` recipes (whose template their model keeps)."""
    name = split_expo(recipe)[0]
    while name != PRETRAINED:
        spec = recipe_spec(config, name)
        if spec.get("chat_template", OWN_TEMPLATE) != OWN_TEMPLATE:
            return spec["chat_template"]
        if "init" not in spec:
            break
        name = spec["init"]
    return OWN_TEMPLATE


def endpoint_models(config: Mapping) -> set[str]:
    """The base models asked through an OpenAI-compatible endpoint: no weights here."""
    return {name for name, spec in config["base_models"].items() if "endpoint" in spec}


def length_prompt(config: Mapping, recipe: str) -> str:
    """How a model is asked for a length: ``mlt`` if its recipe taught MLTs."""
    plain = split_expo(recipe)[0]
    if plain == PRETRAINED:
        return "instruction"
    return recipe_spec(config, plain).get("length_prompt", "instruction")


def extrapolation(config: Mapping) -> Mapping:
    """The extrapolate stage's settings (the ``extrapolation`` section: what each model is
    extrapolated away from, which extrapolated models to build); empty where there are none."""
    return config.get("extrapolation") or {}


def extrapolated_models(config: Mapping) -> list[str]:
    """Folders of the extrapolated checkpoints ``extrapolation.models`` asks for, whichever
    studies are enabled."""
    return [model_dir(*name.split("/", 1)) for name in extrapolation(config).get("models", [])]


def expo_reference(config: Mapping, recipe: str) -> str:
    """The recipe (or ``pretrained``) that ``recipe``'s model is extrapolated away from."""
    references = extrapolation(config).get("references", {})
    if recipe not in references:
        raise ConfigError(
            f"extrapolation.references has no entry for recipe {recipe!r}, so '{recipe}+expo<alpha>' "
            f"cannot be built; declared: {sorted(references)}"
        )
    return references[recipe]


def expo_reference_dir(config: Mapping, base: str, recipe: str) -> str:
    """The checkpoint ``{base}/{recipe}+expo{alpha}`` is extrapolated away from: for a recipe,
    its reference recipe on the same base; for an aligned model used as it is
    (``pretrained``), the SFT base model named in ``extrapolation.base_references``."""
    if recipe == PRETRAINED:
        references = extrapolation(config).get("base_references", {})
        if base not in references:
            raise ConfigError(
                f"extrapolation.base_references has no entry for base model {base!r}, so "
                f"'{base}/{PRETRAINED}+expo<alpha>' cannot be built; declared: {sorted(references)}"
            )
        return base_model_dir(references[base])
    return model_dir(base, expo_reference(config, recipe))


def judge_files(config: Mapping, judge: str) -> dict[str, str]:
    """What a judge's jobs read, as its kind declares: the checkpoint of a local judge (a
    reward model, a follow-up likelihood LM), a follow-ups file (so that editing it reruns
    what it scored), an endpoint's FastChat judge prompts and AlpacaEval's length-control
    data (sources' folders)."""
    spec = config["judges"][judge]
    return judge_kind(spec, f"judges.{judge}.kind").files(spec)


def judged_generations(online: Mapping) -> dict[str, str]:
    """A policy's samples on a prompt set and the judge's grades of them."""
    base, recipe = online["model"].split("/", 1)
    return {
        "generations": generations_file(base, recipe, online["promptset"]),
        "grades": grade_path(online["judge"], base, recipe, online["promptset"]),
    }


def reference_generations(config: Mapping, promptset: str, base: str) -> str | None:
    """The reference answers' generations for win rates on ``promptset``: a model
    ``{base}/{recipe}``, or a bare recipe on the evaluated model's own base (an aligned
    policy against the policy it started from); None for the benchmark's own answers."""
    reference = promptset_spec(config, promptset).get("reference", "dataset")
    if reference == "dataset":
        return None
    model = reference if "/" in reference else f"{base}/{reference}"
    return generations_file(*model.split("/", 1), promptset)


def task_data(task: Mapping) -> str:
    """Where an lm-eval task's documents come from: its configured source, or else the hub
    datasets its own YAML names, fetched by a download rule."""
    return raw_dir(task["source"]) if task.get("source") else lm_eval_data_dir(task["task"])


def nltk_data(suite: Mapping) -> list[str]:
    """The NLTK data folders a suite's checks read: its ``nltk_data`` packages, by default
    those its tasks need (IFEval's sentence counts: punkt_tab)."""
    packages = suite.get("nltk_data")
    if packages is None:
        packages = {
            resource.rsplit("/", 1)[-1]
            for task in suite["tasks"]
            for resource in nltk_data_needed(task["task"]).values()
        }
    return [nltk_data_dir(package) for package in sorted(packages)]


def hub_encoder(settings: Mapping) -> str | None:
    """A metric's sentence encoder when it is a hub model (``org/name``), fetched by a
    download rule; None for the packaged one or a local folder."""
    from pathlib import Path

    name = settings.get("encoder", "packaged")
    if name == "packaged" or Path(name).exists():
        return None
    return hub_model_dir(name)


def definition_inputs(metric: str, settings: Mapping, base: str, recipe: str) -> dict[str, list[str]]:
    """What a score job reads besides the generations to score by the definitions the
    metric's settings choose (``compat`` and ``variants``, :mod:`reprolm.score.definitions`):
    the generating model's folder where one renders text through its chat template, and the
    NLTK data their tokenizers read; empty lists otherwise."""
    chosen = chosen_definitions(metric, settings)
    return {
        "model": [model_dir(base, recipe)] if any(definition.reads_model for definition in chosen) else [],
        "nltk_data": [nltk_data_dir(name) for name in sorted({name for d in chosen for name in d.nltk_data})],
    }


def hub_model_repo(config: Mapping, folder: str) -> str:
    """The hub id of a ``resources/hub_models/`` folder, from the metrics that name it."""
    for settings in config.get("metrics", {}).values():
        if hub_encoder(settings) == folder:
            return settings["encoder"]
    raise ConfigError(f"{folder}: no metric names this hub model")
