"""Config checks that run before any job, beyond what the JSON-Schema can say: every name a
section uses is declared in another, every enabled study is registered and its own section
checks out, and values the schema cannot relate are consistent (a model's hidden size and
heads). Each error names the key and what is allowed.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from reprolm.config.references import check_extrapolation, require_grader, require_model, require_recipe
from reprolm.config.resources import model_settings, setting_key, stage_gpu_needs
from reprolm.data.builder_registry import BUILDERS
from reprolm.data.released_ratings import check_released
from reprolm.data.upstream import UPSTREAM_SCHEMAS
from reprolm.errors import ConfigError, require
from reprolm.generate.prompts import PROMPT_BUILDERS
from reprolm.io import read_yaml
from reprolm.length import TargetSet, needs_length_targets
from reprolm.models.local import local_checkpoint_problem
from reprolm.models.parameters import model_parameters
from reprolm.models.templates import template_names
from reprolm.paths import PRETRAINED, split_expo, split_seed
from reprolm.score.judges import judge_kind
from reprolm.score.task_facts import refuse_metrics_not_reported
from reprolm.stages import inference_stages
from reprolm.studies import STUDIES, enabled_studies
from reprolm.train.finetune import PEFT_OWN_KEYS, PROJECT_ARGUMENTS, PROJECT_PEFT_KEYS, RECIPE_ARGUMENTS
from reprolm.train.objectives import objective_of
from reprolm.train.precision import PRECISIONS
from reprolm.train.tracking import reporters

log = logging.getLogger(__name__)
# Full finetunes of models this large rarely survive learning rates above this (their
# published recipes use 1e-6 to 2e-5); the tiny default models train at 3e-3.
LARGE_MODEL_PARAMETERS, LARGE_MODEL_MAX_LEARNING_RATE = 1e9, 1e-4


def check_config(config: Mapping, schema_file: str | os.PathLike) -> None:
    """Everything but the schema's own checks. Top-level keys the schema file does not
    describe must be registered studies' sections, each checked against its study's schema
    (defaults filled in) before anything reads it."""
    if not config["studies"]:
        raise ConfigError(f"studies: the list is empty; enable at least one of {STUDIES.names()}")
    try:
        studies = enabled_studies(config)
    except KeyError as error:
        raise ConfigError(str(error)) from None
    schema_sections = read_yaml(schema_file)["properties"]
    known = sorted(set(schema_sections) | set(STUDIES.names()))
    for key in config:
        if not key.startswith("_"):
            require(key, known, "top-level config key")
    for name in STUDIES.names():
        STUDIES[name].validate_section(config)
    # Before any check reads a base model's settings (a misspelt base would be a KeyError).
    for study in studies:
        study.check_bases(config)
    _check_sources(config)
    _check_references(config)
    check_extrapolation(config)
    _check_base_models(config)
    _check_recipe_options(config, studies)
    reporters(config.get("tracking", {}))
    check_gpu_memory(config, Path.cwd())
    for study in studies:
        study.check(config)
    _check_length_targets(config, studies)


def check_gpu_memory(config: Mapping, root: Path) -> None:
    """Refuse, before any job, a base model whose GPU jobs need more memory per GPU than the
    ``gpu_mem_gb`` their settings give. Skipped where ``gpu_mem_gb`` is unset, for CPU jobs,
    and for a model whose size neither its checkpoint, the config (``parameters``) nor its
    hub name tells. A finetune is checked under each recipe the enabled studies train the
    model with."""
    trained = {(base, recipe) for study in enabled_studies(config) for base, recipe in study.models(config)}
    for base in config["base_models"]:
        stages = [
            stage
            for stage in ("finetune", *inference_stages())
            if model_settings(config, base, stage)["gpus"] and model_settings(config, base, stage).get("gpu_mem_gb")
        ]
        parameters, source = model_parameters(config, base, root) if stages else (None, "")
        if not parameters:
            continue
        for stage in stages:
            needs = stage_gpu_needs(config, base, stage, parameters, trained, root)
            if not needs:
                continue
            what, need = max(needs.items(), key=lambda item: item[1])
            available = model_settings(config, base, stage)["gpu_mem_gb"]
            if need > available:
                raise ConfigError(
                    f"{base} {what} ({parameters / 1e9:.1f}B parameters from its {source}); "
                    f"{setting_key(config, base, stage, 'gpu_mem_gb')} is {available}: raise gpus or choose a larger GPU"
                )


# What lm-eval's task index answered (training splits, reported metrics), per lm-eval version.
LM_EVAL_TASK_CACHE = "resources/lm_eval_tasks.json"


def preflight(config: Mapping, task_cache: str = LM_EVAL_TASK_CACHE) -> None:
    """Checks that ask lm-eval's task index, run by the workflow before any job: every
    configured lm-eval task reports the metric the config reads, and each enabled study's
    own (:meth:`reprolm.studies.Study.preflight`)."""
    configured = {
        f"lm_eval_suites.{name}.tasks[{index}]": task
        for name, suite in config.get("lm_eval_suites", {}).items()
        for index, task in enumerate(suite["tasks"])
    }
    try:
        refuse_metrics_not_reported(configured, task_cache)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    for study in enabled_studies(config):
        study.preflight(config, task_cache)


def _check_sources(config: Mapping) -> None:
    """Every source's schema is one the pipeline knows, a fixture source's schema has a
    fixture (a misspelt schema would otherwise fail only in the job that reads the source),
    a files source's files exist in formats it reads, and a released source names its
    format's files (whether they are downloaded is asked when the DAG is built)."""
    from reprolm.data.sources import file_splits

    for name, spec in config["sources"].items():
        try:
            schema = UPSTREAM_SCHEMAS.get(spec["schema"], f"sources.{name}.schema")
        except KeyError as error:
            raise ConfigError(str(error)) from None
        if "fixture" in spec and schema.fixture is None:
            raise ConfigError(
                f"sources.{name}.fixture: schema {schema.name!r} has no fixture; name a hub dataset for this source"
            )
        if "files" in spec:
            try:
                file_splits(name, spec["files"])
            except (ValueError, FileNotFoundError) as error:
                raise ConfigError(str(error)) from None
        if "released" in spec:
            try:
                check_released(name, spec)
            except ValueError as error:
                raise ConfigError(str(error)) from None


def _check_references(config: Mapping) -> None:
    sources, datasets, recipes = config["sources"], config.get("datasets", {}), config.get("recipes", {})
    for name, spec in config.get("tokenizers", {}).items():
        for source in spec["corpus"]:
            require(source, sources, f"tokenizers.{name}.corpus")
    for name, spec in config["base_models"].items():
        build = spec.get("build")
        if build:
            require(build["tokenizer"], config.get("tokenizers", {}), f"base_models.{name}.build.tokenizer")
            for source in build["pretrain"]["corpus"]:
                require(source, sources, f"base_models.{name}.build.pretrain.corpus")
    for name, spec in datasets.items():
        for source in spec.get("sources", []):
            require(source, sources, f"datasets.{name}.sources")
        online = spec.get("from_generations")
        if online:
            require_model(config, online["model"], f"datasets.{name}.from_generations.model")
            require(online["promptset"], config.get("promptsets", {}), f"datasets.{name}.from_generations.promptset")
            require_grader(online["judge"], config.get("judges", {}), f"datasets.{name}.from_generations.judge")
    for name, spec in recipes.items():
        require(spec["dataset"], datasets, f"recipes.{name}.dataset")
        if "chat_template" in spec:
            require(spec["chat_template"], template_names(), f"recipes.{name}.chat_template")
        if "init" in spec:
            require(spec["init"], [other for other in recipes if other != name], f"recipes.{name}.init")
    for name, spec in config.get("promptsets", {}).items():
        require(spec["dataset"], datasets, f"promptsets.{name}.dataset")
        reference = spec.get("reference", "dataset")
        if "/" in reference:
            require_model(config, reference, f"promptsets.{name}.reference")
        elif reference != "dataset":
            require_recipe(config, reference, list(recipes) + [PRETRAINED], f"promptsets.{name}.reference")
    for name, suite in config.get("lm_eval_suites", {}).items():
        if suite.get("fewshot_as_multiturn") and not suite.get("apply_chat_template"):
            raise ConfigError(
                f"lm_eval_suites.{name}.fewshot_as_multiturn: few-shot examples become chat turns only "
                "through the chat template; set apply_chat_template: true"
            )
        for index, task in enumerate(suite["tasks"]):
            if task.get("source"):
                require(task["source"], sources, f"lm_eval_suites.{name}.tasks[{index}].source")
    for name, spec in config.get("judges", {}).items():
        for role, dataset in spec.get("released_grades", {}).items():
            require(dataset, datasets, f"judges.{name}.released_grades.{role}")
        # What a judge reads: a model of the workflow's own, or sources of the one schema each can read.
        for given in judge_kind(spec, f"judges.{name}.kind").inputs:
            if not spec.get(given.field):
                continue
            key = f"judges.{name}.{given.field}"
            if given.reads == "model":
                require_model(config, spec[given.field], key)
            if given.reads != "source":
                continue
            require(spec[given.field], sources, key)
            schema = sources[spec[given.field]]["schema"]
            if schema != given.schema:
                raise ConfigError(
                    f"{key}: source {spec[given.field]!r} has schema {schema!r}; {given.reader} reads schema "
                    f"{given.schema!r}"
                )
    if config.get("leaderboard"):
        require(config["leaderboard"]["promptset"], config.get("promptsets", {}), "leaderboard.promptset")
        require_grader(config["leaderboard"]["judge"], config.get("judges", {}), "leaderboard.judge")


def _check_recipe_options(config: Mapping, studies: list) -> None:
    """``recipes.*.trainer_args`` and ``recipes.*.peft`` set fields of the objective's settings
    class (TrainingArguments, DPOConfig, ...) and of peft's LoraConfig that the project does not
    set itself; QLoRA only where the recipe's finetunes get GPUs; a full finetune of a model
    over 1B parameters at a tiny model's learning rate is warned about."""
    trained = _trained_models(config, studies)
    for name, recipe in config.get("recipes", {}).items():
        where = f"recipes.{name}"
        if "trainer_args" in recipe:
            _check_trainer_args(recipe, where)
        if "peft" in recipe:
            _check_peft(config, recipe, where, [base for base, trained_recipe in trained if trained_recipe == name])
        if "peft" in recipe or recipe["learning_rate"] <= LARGE_MODEL_MAX_LEARNING_RATE:
            continue
        for base in sorted(base for base, trained_recipe in trained if trained_recipe == name):
            parameters, source = model_parameters(config, base, Path.cwd())
            if parameters and parameters > LARGE_MODEL_PARAMETERS:
                log.warning(
                    "%s.learning_rate: %g for a full %s finetune of %s (%.1fB parameters, from its %s) is a tiny "
                    "model's rate; above %g such finetunes tend to diverge: lower it, or train LoRA with %s.peft",
                    where,
                    recipe["learning_rate"],
                    objective_of(recipe).name,
                    base,
                    parameters / 1e9,
                    source,
                    LARGE_MODEL_MAX_LEARNING_RATE,
                    where,
                )


def _trained_models(config: Mapping, studies: list) -> set[tuple[str, str]]:
    """(base, recipe) of each finetune the enabled studies need, the recipes their models start
    from (``init``) included."""
    recipes = config.get("recipes", {})
    trained, pending = (
        set(),
        [(base, split_seed(split_expo(recipe)[0])[0]) for s in studies for base, recipe in s.models(config)],
    )
    while pending:
        base, recipe = pending.pop()
        if recipe in recipes and (base, recipe) not in trained:
            trained.add((base, recipe))
            if "init" in recipes[recipe]:
                pending.append((base, recipes[recipe]["init"]))
    return trained


def _require_field(key: str, fields: list[str], owned: Mapping, where: str, what: str) -> None:
    """``key`` is a field of ``what`` that the project leaves to the config."""
    if key in owned:
        raise ConfigError(f"{where}.{key}: the project sets it ({owned[key]}); leave it out")
    if key not in fields:
        close = difflib.get_close_matches(key, fields, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"{where}: {key!r} is not a setting of {what}{hint}")


def _check_trainer_args(recipe: Mapping, where: str) -> None:
    objective = objective_of(recipe, f"{where}.objective")
    fields = [field.name for field in dataclasses.fields(objective.arguments_class())]
    what = ".".join(objective.arguments)
    for key in recipe["trainer_args"]:
        _require_field(key, fields, PROJECT_ARGUMENTS, f"{where}.trainer_args", what)
        if key in RECIPE_ARGUMENTS:
            raise ConfigError(f"{where}.trainer_args.{key}: a recipe key; set it as {where}.{key}")
        if key == "warmup_steps" and "warmup_ratio" in recipe:
            raise ConfigError(f"{where}.trainer_args.warmup_steps: {where}.warmup_ratio sets it; keep one of the two")


def _check_peft(config: Mapping, recipe: Mapping, where: str, bases: list[str]) -> None:
    from peft import LoraConfig

    peft = recipe["peft"]
    fields = [field.name for field in dataclasses.fields(LoraConfig)] + list(PEFT_OWN_KEYS)
    for key in peft:
        _require_field(key, fields, PROJECT_PEFT_KEYS, f"{where}.peft", "peft.LoraConfig")
    objective = objective_of(recipe, f"{where}.objective")
    if objective.scores_sequences and peft.get("save") == "adapter":
        raise ConfigError(
            f"{where}.peft.save: judges read a reward model as one checkpoint; use 'merged' for objective {objective.name}"
        )
    if peft.get("quantization"):
        for base in sorted(bases):
            if not model_settings(config, base, "finetune")["gpus"]:
                raise ConfigError(
                    f"{where}.peft.quantization: QLoRA's 4-bit weights need a GPU (bitsandbytes' kernels are "
                    f"CUDA's), and {base}'s finetune runs on the CPU "
                    f"({setting_key(config, base, 'finetune', 'gpus')} is 0); leave quantization out to train "
                    "LoRA in full precision"
                )


def _check_length_targets(config: Mapping, studies: list) -> None:
    """The windows are sound, and a config without ``length_targets`` has nothing that reads
    them (whose job would otherwise fail only when it runs): a dataset builder, prompt kind or
    an enabled study's metric marked :func:`reprolm.length.reads_length_targets`, or a recipe
    adding one token per target."""
    if "length_targets" in config:
        try:
            TargetSet.from_config(config["length_targets"])
        except ValueError as error:
            raise ConfigError(str(error)) from None
        return
    reader = next(_length_target_readers(config, studies), None)
    if reader:
        where, name = reader
        raise ConfigError(
            f"{where}: {name!r} needs length_targets ('paper' or a list of targets), which the "
            "config does not set; set it, or leave out what needs it"
        )


def _length_target_readers(config: Mapping, studies: list):
    """(config key, value) of each entry that reads the length targets."""
    from reprolm.score.metrics import METRICS

    for name, spec in config.get("datasets", {}).items():
        if needs_length_targets(BUILDERS.get(spec["builder"], f"datasets.{name}.builder")):
            yield f"datasets.{name}.builder", spec["builder"]
    for name, spec in config.get("promptsets", {}).items():
        # multi_turn is asked turn by turn, with no prompt builder.
        if spec["prompt"] in PROMPT_BUILDERS and needs_length_targets(PROMPT_BUILDERS[spec["prompt"]]):
            yield f"promptsets.{name}.prompt", spec["prompt"]
    for name, spec in config.get("recipes", {}).items():
        if spec.get("add_tokens") == "mlt":
            yield f"recipes.{name}.add_tokens", "mlt"
    for study in studies:
        for index, evaluation in enumerate(config[study.name].get("evaluations", [])):
            metric = evaluation["metric"]
            if needs_length_targets(METRICS.get(metric, f"{study.name}.evaluations[{index}].metric")):
                yield f"{study.name}.evaluations[{index}].metric", metric


def _check_base_models(config: Mapping) -> None:
    """A finetune's precision must be one training can use; a built model's attention heads
    must split its hidden size (and its key-value heads its heads); a local checkpoint
    folder holds a config and a tokenizer; otherwise the build fails only when its job runs."""
    for name, spec in config["base_models"].items():
        precision = model_settings(config, name, "finetune")["precision"]
        if precision not in PRECISIONS:
            raise ConfigError(
                f"base_models.{name}.resources.finetune.precision: {precision!r} cannot train; "
                f"choose from {list(PRECISIONS)}"
            )
        problem = "path" in spec and local_checkpoint_problem(spec["path"], config["base_models"], name)
        if problem:
            raise ConfigError(f"base_models.{name}.path: {problem}")
        build = spec.get("build")
        if not build:
            continue
        hidden, heads, kv_heads = build["hidden_size"], build["num_heads"], build.get("num_kv_heads")
        if hidden % heads:
            raise ConfigError(
                f"base_models.{name}.build: hidden_size {hidden} is not divisible by "
                f"num_heads {heads}; use a num_heads that divides it"
            )
        if kv_heads and heads % kv_heads:
            raise ConfigError(
                f"base_models.{name}.build: num_heads {heads} is not divisible by "
                f"num_kv_heads {kv_heads}; use a num_kv_heads that divides it"
            )
