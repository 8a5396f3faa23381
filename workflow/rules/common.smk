import os
import re

from snakemake.utils import validate

from reprolm import config as lookups
from reprolm.score.length import TargetSet

# Hub caches live inside the project, never in the user's home.
os.environ.setdefault("HF_HOME", os.path.abspath("resources/hf_home"))

validate(config, schema="../schemas/config.schema.yaml")
lookups.check_references(config)
if "harmony" in config["studies"]:
    from reprolm.score.task_splits import refuse_tasks_without_training_split

    refuse_tasks_without_training_split(
        config["harmony"]["tasks"],
        "resources/lm_eval_task_splits.json",
        "harmony.tasks",
    )


wildcard_constraints:
    source=r"[A-Za-z0-9_]+",
    tokenizer=r"[A-Za-z0-9_]+",
    base=r"[A-Za-z0-9_]+",
    recipe=r"[A-Za-z0-9_.+-]+",
    dataset=r"[A-Za-z0-9_]+",
    split=r"[A-Za-z0-9_]+",
    promptset=r"[A-Za-z0-9_]+",
    metric=r"(?!lm_eval/|train_before_test/)[A-Za-z0-9_]+",
    task=r"[A-Za-z0-9_]+",
    suite=r"[A-Za-z0-9_]+",
    study=r"[A-Za-z0-9_]+",


def all_targets():
    return (
        [f"results/tables/{study}" for study in config["studies"]]
        + [f"results/plots/{study}" for study in config["studies"]]
        + lookups.expo_models(config)
    )


def raw_dir(source):
    return f"resources/raw/{source}"


def tokenizer_inputs(wildcards):
    return [raw_dir(s) for s in config["tokenizers"][wildcards.tokenizer]["corpus"]]


def tokenizer_schemas(wildcards):
    corpus = config["tokenizers"][wildcards.tokenizer]["corpus"]
    return lookups.canonical({s: config["sources"][s]["schema"] for s in corpus})


def base_names(kind):
    """A wildcard regex matching exactly the base models whose config has ``kind`` (build or hub)."""
    names = [re.escape(n) for n, spec in config["base_models"].items() if kind in spec]
    # An empty alternation would match the empty string; (?!) matches nothing.
    return "|".join(names) if names else "(?!)"


def build_base_model_inputs(wildcards):
    build = config["base_models"][wildcards.base]["build"]
    return {
        "tokenizer": f"resources/tokenizers/{build['tokenizer']}",
        "corpus": [raw_dir(s) for s in build["pretrain"]["corpus"]],
    }


def base_model_schemas(wildcards):
    corpus = config["base_models"][wildcards.base]["build"]["pretrain"]["corpus"]
    return lookups.canonical({s: config["sources"][s]["schema"] for s in corpus})


def dataset_inputs(wildcards):
    return {s: raw_dir(s) for s in config["datasets"][wildcards.dataset]["sources"]}


def source_schemas(dataset):
    return {
        s: config["sources"][s]["schema"]
        for s in config["datasets"][dataset]["sources"]
    }


def model_dir(wildcards):
    return lookups.model_dir(wildcards.base, wildcards.recipe)


def expo_reference_dir(wildcards):
    return lookups.expo_reference_dir(config, wildcards.base, wildcards.recipe)


def finetune_start(wildcards):
    return lookups.finetune_start(config, wildcards.base, wildcards.recipe)


def recipe_train_file(wildcards):
    return f"results/datasets/{config['recipes'][wildcards.recipe]['dataset']}/train.parquet"


def deepspeed_config(wildcards):
    path = config["recipes"][wildcards.recipe].get("deepspeed")
    return [path] if path else []


def promptset_file(wildcards):
    spec = config["promptsets"][wildcards.promptset]
    return f"results/datasets/{spec['dataset']}/{spec['split']}.parquet"


def stage_resource(stage, key):
    def lookup(wildcards, attempt):
        value = lookups.model_settings(config, wildcards.base, stage)[key]
        # A retry after an out-of-memory or time-out asks for more.
        return value * attempt if key in ("mem_mb", "runtime") else value

    return lookup


def stage_threads(stage):
    def lookup(wildcards):
        return lookups.model_settings(config, wildcards.base, stage)["threads"]

    return lookup


def lm_eval_inputs(wildcards):
    suite = config["lm_eval_suites"][wildcards.suite]
    return {
        "model": model_dir(wildcards),
        "docs": [raw_dir(t["source"]) for t in suite["tasks"] if t.get("source")],
    }


def lm_eval_sources(wildcards):
    tasks = config["lm_eval_suites"][wildcards.suite]["tasks"]
    return lookups.canonical(
        {t["source"]: raw_dir(t["source"]) for t in tasks if t.get("source")}
    )


def harmony_task_docs(wildcards):
    source = lookups.harmony_task(config, wildcards.task).get("source")
    return [raw_dir(source)] if source else []


def study_table_inputs(wildcards):
    return lookups.study_scores(config, wildcards.study)
