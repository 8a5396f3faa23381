"""What a study declares to the workflow, and the registry the workflow asks.

A study is one folder, ``reprolm/studies/<name>/``: a :class:`Study` registered in
:data:`STUDIES` by its ``__init__.py``, beside it the JSON-Schema of its config section
(``schema.yaml``), its table writer and anything else only it uses. The workflow never
branches on a study's name; it asks the study for its config section's schema and check,
the models it evaluates, the score files its tables read, any extra targets, the settings
its table writer needs besides its own section, the writer itself, and any paper figures of
its own. A study outside the package (a researcher's own) is a Python file named in the
config's ``study_modules``; loading it registers its study.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from reprolm.aggregate.tables import load_scores
from reprolm.config.lookups import endpoint_models
from reprolm.config.references import require_recipe
from reprolm.config.schema import validate_with_defaults
from reprolm.data.builder_registry import BUILDERS
from reprolm.errors import ConfigError, require
from reprolm.io import atomic_path, collected_tables, read_yaml
from reprolm.paths import PRETRAINED, grade_path, score_path, split_expo
from reprolm.registry import Registry
from reprolm.stages import RULE_STAGES, RuleStage

# (rule, wildcards) -> that checkpoint's output path; inside Snakemake it raises until the
# checkpoint has run, which is how a study's table inputs can depend on a checkpoint.
CheckpointOutput = Callable[..., str]


def listing_key(section, value: str, where: str) -> str | None:
    """The dotted key under ``where`` of the first list in ``section`` that holds ``value``
    (``ruler.bases``, ``flr.alignment.bases``); None where none does."""
    if isinstance(section, list) and value in section:
        return where
    if isinstance(section, Mapping):
        for key, item in section.items():
            found = listing_key(item, value, f"{where}.{key}")
            if found:
                return found
    return None


class Study:
    """Defaults serve a study whose section has ``bases`` x ``recipes`` (plus ``baselines``
    used as they are), scored by ``evaluations`` (a metric on a prompt set) and an
    ``lm_eval_suite``; a study overrides what differs. A baseline asked through an endpoint
    (no weights) gets the evaluations that allow ``endpoint_models`` and no lm-eval suite."""

    name: str = ""
    # "package.module:function" of the table writer, imported only by the job that writes
    # tables: listing and fingerprinting studies stays cheap. A study from a file of its own
    # overrides :meth:`table_writer` instead.
    tables: str = ""
    # The study's own dataset builders, name -> "package.module:function", registered lazily
    # in :data:`reprolm.data.builder_registry.BUILDERS` (``datasets.*.builder`` names them): the
    # builders stay in the study's folder and listing them imports none.
    builders: Mapping[str, str] = {}
    # The stage of each rule of the study's own steps (rules.smk), registered in
    # :data:`reprolm.stages.RULE_STAGES`: what cost, plan and resources count it under.
    rule_stages: Mapping[str, RuleStage] = {}
    # What the report says under the study's tables and plots (reStructuredText): what
    # each table holds and how each metric is computed.
    caption: str = ""
    plots_caption: str = ""
    # The report's caption of each table (reStructuredText) by table name, or by a name
    # prefix ending in ``*`` for tables named after config entries: its columns, their
    # definitions and intervals. A table without one gets ``caption``.
    table_captions: Mapping[str, str] = {}
    # The paper's figures and effects the paper comparison sets beside the study's tables,
    # in the entry format of config/paper_headlines.yaml's ``headlines`` and ``directions``
    # less the ``study`` key (this study is implied): how a study from its own file gives
    # them. The package's studies keep theirs in that file.
    headlines: Sequence[Mapping] = ()
    directions: Sequence[Mapping] = ()
    # Whether ``recipes`` may name ``pretrained`` (a base model evaluated as it is).
    pretrained_recipes: bool = False
    # The JSON-Schema of the study's config section (:func:`section_schema` reads a package
    # study's from its folder): merged into the workflow's schema for the keys page, and
    # checked, its defaults filled in, before any other config check.
    schema: Mapping | None = None
    # The file a study registered from ``study_modules`` was loaded from: an input of its
    # table job, so that editing it reruns the tables (the code fingerprint follows only
    # the package's own code).
    loaded_from: str | None = None

    # ---- config ----
    def check(self, config: Mapping) -> None:
        """Cross-reference checks of the study's section, before any job runs."""
        spec = config.get(self.name)
        if spec is None:
            raise ConfigError(f"study {self.name!r} is enabled but the config has no {self.name!r} section")
        self.validate_section(config)
        self.check_bases(config)
        recipes = list(config.get("recipes", {}))
        for base in sorted(set(spec.get("bases", [])) & endpoint_models(config)):
            raise ConfigError(
                f"{self.name}.bases: {base!r} is asked through an endpoint (base_models.{base}.endpoint) and "
                f"has no weights to finetune or evaluate with lm-eval; name it in {self.name}.baselines"
            )
        allowed = recipes + ([PRETRAINED] if self.pretrained_recipes else [])
        for recipe in spec.get("recipes", []):
            require_recipe(config, recipe, allowed, f"{self.name}.recipes")
        for index, evaluation in enumerate(spec.get("evaluations", [])):
            require(
                evaluation["promptset"], config.get("promptsets", {}), f"{self.name}.evaluations[{index}].promptset"
            )
            for recipe in evaluation.get("recipes", []):
                require_recipe(config, recipe, recipes + [PRETRAINED], f"{self.name}.evaluations[{index}].recipes")
        suite = spec.get("lm_eval_suite")
        if suite:
            require(suite, config.get("lm_eval_suites", {}), f"{self.name}.lm_eval_suite")
        self.check_section(config)

    def check_bases(self, config: Mapping) -> None:
        """Every base model the study's models name is declared in ``base_models``; run before
        any other check reads a model's settings, so that a misspelt base is named with its
        key (``<study>.bases``, ``<study>.baselines``, or wherever the section lists it)."""
        declared = config["base_models"]
        for base in dict.fromkeys(base for base, _ in self.models(config)):
            if base not in declared:
                require(base, declared, listing_key(config[self.name], base, self.name) or self.name)

    def validate_section(self, config: Mapping) -> None:
        """The study's section, where the config has one, against :attr:`schema`; the
        schema's defaults are filled in where the section leaves a key out."""
        if self.schema is not None and config.get(self.name) is not None:
            validate_with_defaults(config[self.name], self.schema, self.name)

    def check_section(self, config: Mapping) -> None:
        """Checks particular to the study."""

    def preflight(self, config: Mapping, task_cache: str) -> None:
        """Checks that ask installed tools (lm-eval's task index), run by the workflow before
        any job; what lm-eval answers is cached in ``task_cache``."""

    # ---- what the workflow makes for it ----
    def models(self, config: Mapping) -> list[tuple[str, str]]:
        """(base, recipe) pairs the study evaluates: each base under each recipe (a base model
        as it is when no recipes are given), then baselines used as they are."""
        spec = config[self.name]
        recipes = spec.get("recipes") or [PRETRAINED]
        return [(b, r) for b in spec["bases"] for r in recipes] + [(b, PRETRAINED) for b in spec.get("baselines", [])]

    def score_paths(self, config: Mapping) -> list[str]:
        """The score files the study's tables read."""
        spec = config[self.name]
        endpoints = endpoint_models(config)
        paths = []
        for base, recipe in self.models(config):
            for evaluation in spec.get("evaluations", []):
                if base in endpoints and not evaluation.get("endpoint_models", True):
                    continue
                if recipe in evaluation.get("recipes", [recipe]):
                    paths.append(score_path(evaluation["metric"], base, recipe, evaluation["promptset"]))
            if spec.get("lm_eval_suite") and base not in endpoints:
                paths.append(score_path("lm_eval", base, recipe, spec["lm_eval_suite"]))
        return paths

    def table_inputs(self, config: Mapping, checkpoint_output: CheckpointOutput) -> list[str]:
        """What the table job reads; a study whose inputs depend on a checkpoint's result
        (ExPO's chosen alpha) asks ``checkpoint_output`` for it."""
        return self.score_paths(config)

    def table_files(self, config: Mapping) -> list[str]:
        """Files besides score files that the table writer reads (a paper's published
        results): inputs of the table job, so that editing one reruns the tables."""
        return []

    def targets(self, config: Mapping) -> list[str]:
        """Outputs asked for besides the tables and plots (named up front so that Snakemake
        schedules them at once)."""
        return []

    def job_flops(self, config: Mapping, rule: str, wildcards: Mapping, parameters: int) -> float | None:
        """The FLOPs of a job of one of the study's own rules, for a model of ``parameters``
        (``reprolm plan``'s time estimate); None for a rule it does not estimate."""
        return None

    def streamed_job(self, config: Mapping, rule: str, wildcards: Mapping, params, inputs, root: Path) -> dict | None:
        """A job of one of the study's own rules that streams a dataset's rows through a
        judge, for ``reprolm rehearse --sizes`` to model its memory (reprolm.rehearse.sizes):
        ``dataset`` ("name/split"), ``run`` ("module:function" called with a judge's folder,
        a rows file and ``options``: the job's code on that judge), ``options``,
        ``units_per_row`` and ``unit`` (what the job's memory could grow with), ``base`` and
        ``stage`` (whose resources size it); None for a rule it does not stream. The job's
        ``inputs`` are relative to the workflow's folder ``root``."""
        return None

    def settings(self, config: Mapping) -> dict:
        """Settings outside the study's section that its table writer uses."""
        return {}

    def table_judges(self, config: Mapping) -> dict[str, list[str]]:
        """The tables made from a judge's verdicts, by table name (or a name prefix ending in
        ``*``), each with the ``judges`` entries whose verdicts make it as ``config`` names them
        (the config as written: a retired judge by its own name, its successor acting for it):
        the report's caption of each names its judges and their agreement with any retired one."""
        return {}

    def rules_file(self) -> str | None:
        """The Snakemake rules of the steps only this study takes: ``rules.smk`` beside the
        file that defines the study (its folder's ``__init__.py``, or a researcher's study
        file); None where it has none. The workflow includes every registered study's."""
        path = Path(self.loaded_from or inspect.getfile(type(self))).resolve().with_name("rules.smk")
        return str(path) if path.is_file() else None

    def script(self, name: str) -> str:
        """The path of the job script ``scripts/<name>`` beside the file that defines the
        study: the scripts of its own rules live in its folder."""
        return str(Path(self.loaded_from or inspect.getfile(type(self))).resolve().parent / "scripts" / name)

    # ---- tables ----
    def captions(self) -> dict:
        """The report's captions, dedented: of all tables (``tables``), of the plots
        (``plots``) and of each table (``table``, by :attr:`table_captions`' keys)."""
        return {
            "tables": inspect.cleandoc(self.caption),
            "plots": inspect.cleandoc(self.plots_caption),
            "table": {name: inspect.cleandoc(text) for name, text in self.table_captions.items()},
        }

    def write_tables(self, score_paths, study_config: Mapping, settings: Mapping, tables: str, plots: str) -> None:
        """The writer's tables and plots, each folder written whole or not at all. Where
        recipes have replicate seeds, the writer runs once per replicate set and its tables
        are pooled over the sets (:mod:`reprolm.aggregate.replicates`); the plots are the
        default seed's."""
        import tempfile

        from reprolm.aggregate.replicates import pool_tables, replicate_sets

        writer = self.table_writer()
        sets = replicate_sets(load_scores(score_paths))
        with atomic_path(tables) as tables_tmp, atomic_path(plots) as plots_tmp:
            tables_tmp.mkdir()
            plots_tmp.mkdir()
            if len(sets) == 1:
                writer(sets[0], study_config, settings, tables_tmp, plots_tmp)
                return
            runs = []
            with tempfile.TemporaryDirectory() as unused_plots:
                for index, scores in enumerate(sets):
                    with collected_tables() as collected:
                        writer(
                            scores, study_config, settings, tables_tmp, plots_tmp if index == 0 else Path(unused_plots)
                        )
                    runs.append(collected)
            for table in pool_tables(runs):
                table.write()

    def table_writer(self) -> Callable:
        """``writer(scores, study_config, settings, tables, plots)``: the study's tables
        and plots from its scores (:class:`reprolm.aggregate.tables.Score`)."""
        module, _, function = self.tables.partition(":")
        return getattr(importlib.import_module(module), function)

    def table_code(self) -> tuple[str, str] | None:
        """The writer as a (module, name) reference, for the job's code fingerprint; None
        for a study from its own file, which is an input of the job instead."""
        if not self.tables:
            return None
        module, _, function = self.tables.partition(":")
        return module, function


STUDIES: Registry[Study] = Registry("study", per_job=True)


def register_study(study: Study) -> Study:
    if not study.name:
        raise ValueError(f"{type(study).__name__} must set 'name'")
    if not study.tables and type(study).table_writer is Study.table_writer:
        raise ValueError(f"study {study.name!r} must set 'tables' or override table_writer()")
    for name, reference in study.builders.items():
        BUILDERS.register_lazy(name, reference)
    for rule, entry in study.rule_stages.items():
        RULE_STAGES.register(rule, entry)
    return STUDIES.register(study.name, study)


_LOADED: dict[str, str] = {}


def load_study_modules(paths: list[str], root: str | Path = ".") -> None:
    """Import each study file named in ``study_modules`` (once per process), which registers
    its study."""
    for index, path in enumerate(paths):
        file = (Path(root) / path).resolve()
        if not file.is_file():
            raise ConfigError(f"study_modules[{index}]: {path} does not exist")
        if str(file) in _LOADED:
            continue
        module_name = "reprolm_study_" + hashlib.sha256(str(file).encode()).hexdigest()[:12]
        spec = importlib.util.spec_from_file_location(module_name, file)
        module = importlib.util.module_from_spec(spec)
        before = set(STUDIES.names())
        spec.loader.exec_module(module)
        added = set(STUDIES.names()) - before
        if not added:
            raise ConfigError(f"study_modules[{index}]: {path} registers no study (call register_study)")
        for name in added:
            STUDIES[name].loaded_from = path
        _LOADED[str(file)] = path


def enabled_studies(config: Mapping) -> list[Study]:
    """The studies ``config['studies']`` enables, loading ``study_modules`` first."""
    load_study_modules(config.get("study_modules", []))
    return [STUDIES.get(name, "studies") for name in config["studies"]]


def study(config: Mapping, name: str) -> Study:
    """The registered study ``name``, loading the config's ``study_modules`` first."""
    load_study_modules(config.get("study_modules", []))
    return STUDIES.get(name, "studies")


def study_rules() -> list[str]:
    """The rules files of the registered studies' own steps (:meth:`Study.rules_file`)."""
    return [STUDIES[name].rules_file() for name in STUDIES.names() if STUDIES[name].rules_file()]


def job_flops(config: Mapping, rule: str, wildcards: Mapping, parameters: int) -> float | None:
    """The first registered study's estimate of a job's FLOPs (:meth:`Study.job_flops`)."""
    for name in STUDIES.names():
        flops = STUDIES[name].job_flops(config, rule, wildcards, parameters)
        if flops is not None:
            return flops
    return None


def streamed_job(config: Mapping, rule: str, wildcards: Mapping, params, inputs, root: Path) -> dict | None:
    """The first registered study's model of a streaming job (:meth:`Study.streamed_job`)."""
    for name in STUDIES.names():
        streamed = STUDIES[name].streamed_job(config, rule, wildcards, params, inputs, root)
        if streamed is not None:
            return streamed
    return None


def leaderboard_models(config: Mapping) -> list[tuple[str, str]]:
    """Every finetuned model of the enabled studies (base models used as they are left out),
    in study order, each once."""
    models: dict[tuple[str, str], None] = {}
    for study in enabled_studies(config):
        for base, recipe in study.models(config):
            if split_expo(recipe)[0] != PRETRAINED:
                models[(base, recipe)] = None
    return list(models)


def leaderboard_grades(config: Mapping) -> list[str]:
    """The leaderboard judge's grades of each finetuned model on the leaderboard prompts."""
    spec = config["leaderboard"]
    return [grade_path(spec["judge"], base, recipe, spec["promptset"]) for base, recipe in leaderboard_models(config)]


def section_schema(module_file: str | Path) -> dict:
    """The JSON-Schema of a package study's config section: ``schema.yaml`` in its folder."""
    return read_yaml(Path(module_file).with_name("schema.yaml"))


def with_study_sections(schema: Mapping) -> dict:
    """The workflow's config schema with each registered study's section schema added under
    ``properties`` (after the shared keys, in registration order)."""
    merged = dict(schema)
    merged["properties"] = dict(schema.get("properties", {}))
    for name in STUDIES.names():
        if STUDIES[name].schema is not None:
            merged["properties"].setdefault(name, STUDIES[name].schema)
    return merged
