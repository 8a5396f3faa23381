import os
import re

from snakemake.logging import logger
from snakemake.utils import validate

from reprolm import config as lookups
from reprolm.aggregate.studies import STUDY_TABLES
from reprolm.data.builders import BUILDERS
from reprolm.provenance import mark_replaced_folders
from reprolm.provenance.fingerprint import entry_of, job_code
from reprolm.score.length import TargetSet
from reprolm.score.metrics import METRICS

# Hub caches live inside the project, never in the user's home.
os.environ.setdefault("HF_HOME", os.path.abspath("resources/hf_home"))

validate(config, schema="../schemas/config.schema.yaml")
lookups.check_references(config)
# Results are keyed by content: a checkpoint replaced in place reruns what used it.
for replaced in mark_replaced_folders():
    logger.warning(
        f"{replaced}: content differs from its provenance record (replaced in place); "
        "everything made from it will rerun"
    )
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
    metric="|".join(METRICS),
    task=r"[A-Za-z0-9_]+",
    suite=r"[A-Za-z0-9_]+",
    study=r"[A-Za-z0-9_]+",
    judge=r"[A-Za-z0-9_]+",


# The library code each job runs, as a param: editing src/reprolm reruns exactly the jobs
# whose code changed (Snakemake's code trigger sees only the rule's script).
SCRIPTS = os.path.join(workflow.basedir, "scripts")


def library_code(script):
    return job_code(os.path.join(SCRIPTS, script))


def metric_code(wildcards):
    return job_code(
        os.path.join(SCRIPTS, "score.py"), entry_of(METRICS[wildcards.metric])
    )


def builder_code(wildcards):
    builder = BUILDERS[config["datasets"][wildcards.dataset]["builder"]]
    return job_code(os.path.join(SCRIPTS, "dataset.py"), entry_of(builder))


def study_tables_code(wildcards):
    writer = STUDY_TABLES[wildcards.study]
    return job_code(os.path.join(SCRIPTS, "study_tables.py"), entry_of(writer))


def report_inputs():
    """The report's tables and plots (the provenance index lists what is behind them)."""
    return (
        [f"results/tables/{study}" for study in config["studies"]]
        + [f"results/plots/{study}" for study in config["studies"]]
        + ["results/report/paper_headlines.csv", "results/report/effect_directions.csv"]
        + (["results/report/leaderboard.csv"] if config.get("leaderboard") else [])
    )


def all_targets():
    return (
        report_inputs()
        + ["results/report/provenance.csv"]
        + lookups.expo_models(config)
        # Named up front so that every alpha search is scheduled at once, not one per
        # re-evaluation of the checkpoint-dependent table inputs.
        + [
            lookups.alpha_search_path(config, base, recipe)
            for base, recipe in (
                lookups.study_models(config, "expo")
                if "expo" in config["studies"]
                else []
            )
        ]
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
    spec = config["datasets"][wildcards.dataset]
    if "from_generations" in spec:
        return lookups.judged_generations(spec["from_generations"])
    return {s: raw_dir(s) for s in spec["sources"]}


def source_schemas(dataset):
    return {
        s: config["sources"][s]["schema"]
        for s in config["datasets"][dataset].get("sources", [])
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


def judge_spec(wildcards):
    return lookups.canonical(config["judges"][wildcards.judge])


def judge_inputs(wildcards):
    return lookups.judge_files(config, wildcards.judge)


def judge_resource(key):
    """A judge job's resources are those its own model needs (none for an endpoint)."""

    def lookup(wildcards, attempt):
        value = lookups.judge_settings(config, wildcards.judge)[key]
        return value * attempt if key in ("mem_mb", "runtime") else value

    return lookup


def judge_threads(wildcards):
    return lookups.judge_settings(config, wildcards.judge)["threads"]


def win_rate_inputs(wildcards):
    inputs = {
        **judge_inputs(wildcards),
        "answers": f"results/generations/{wildcards.base}/{wildcards.recipe}/{wildcards.promptset}.parquet",
    }
    reference = lookups.reference_generations(
        config, wildcards.promptset, wildcards.base
    )
    if reference:
        inputs["reference"] = reference
    return inputs


def judged_dataset_inputs(wildcards):
    return {
        **judge_inputs(wildcards),
        "rows": f"results/datasets/{wildcards.dataset}/{wildcards.split}.parquet",
    }


def alpha_search_grades(wildcards):
    return list(
        lookups.alpha_search_grades(config, wildcards.base, wildcards.recipe).values()
    )


def expo_table_inputs():
    """The ExPO tables evaluate each aligned model's chosen extrapolation, known only after
    its alpha search (a checkpoint) has run."""
    paths = lookups.judge_validation_path(config)
    for base, recipe in lookups.study_models(config, "expo"):
        search = checkpoints.alpha_search.get(
            base=base,
            recipe=recipe,
            promptset=config["expo"]["alpha_search"]["promptset"],
        ).output[0]
        best = lookups.chosen_alpha(search)
        paths += [search] + lookups.expo_scores(config, base, recipe, best)
    return paths


def study_table_inputs(wildcards):
    if wildcards.study == "expo":
        return expo_table_inputs()
    return lookups.study_scores(config, wildcards.study)
