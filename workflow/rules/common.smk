import os
import re
from pathlib import Path

from snakemake.logging import logger

from reprolm import paths
from reprolm.aggregate.judge_notes import judge_caption, table_judge_notes
from reprolm.aggregate.paper_comparison import claim_settings, study_headlines
from reprolm.config import lookups
from reprolm.checks import LM_EVAL_TASK_CACHE, check_config, preflight
from reprolm.errors import REAL_RUN_REFUSED
from reprolm.config.hub_ids import check_hub_ids
from reprolm.config.overlays import naming_the_file
from reprolm.config.schema import validate_config
from reprolm.score.task_facts import task_yamls
from reprolm.config.params import canonical
from reprolm.config.run_folder import other_run
from reprolm.config.resources import (
    attempt_size,
    build_request,
    check_gpu_routing,
    cluster_submission,
    command_line_resource,
    judge_base,
    job_routing,
    judge_settings,
    model_settings,
    node_count,
    routed_keys,
    routing,
    score_settings,
    stop_signal,
    TASKS_PER_GPU,
)
from reprolm.data.builder_registry import BUILDERS
from reprolm.generate.prompts import PROMPT_BUILDERS
from reprolm.length import targets_read
from reprolm.hub_token import hub_environment
from reprolm.lock import lock_path, read_lock, refuse_unlocked, released_checksum
from reprolm.provenance import mark_replaced_folders
from reprolm.data.released_ratings import released_files
from reprolm.data.sources import source_file_paths
from reprolm.data.upstream import schema_entries, schemas_read, task_schemas
from reprolm.provenance.fingerprint import entry_of, job_code
from reprolm.score.judges import judge_name_regex, successors
from reprolm.score.metrics import METRICS, metric_stage
from reprolm.need import job_size
from reprolm.stages import host_rules, pack_group
from reprolm.studies import (
    enabled_studies,
    leaderboard_grades,
    leaderboard_models,
    study,
    study_rules,
)

# Short CPU jobs (tables, pages, an alpha's pick: the registry's `host` rules) run on the
# submitting host, not as a cluster job of their own.
workflow.localrules(*host_rules())

# Hub caches live inside the project, never in the user's home; the token of the user's
# `huggingface-cli login` stays found (HF_TOKEN_PATH) by this process and every job.
os.environ.update(hub_environment(os.environ, os.path.abspath("resources/hf_home")))
# Cluster jobs read the hubs only through what the download rules (local rules, on the
# submitting host) put in resources/: many compute nodes have no internet, where a library
# reaching for the hub would wait on timeouts or fail. Local jobs keep the caller's setting.
if workflow.remote_exec:
    os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")

SCHEMA = os.path.join(workflow.basedir, "schemas", "config.schema.yaml")
# A refused key is named with the config file (or --config) that set it.
with naming_the_file(
    workflow.config_settings.configfiles or ["config/config.yaml"],
    workflow.config_settings.config,
):
    validate_config(config, SCHEMA)
    check_config(config, SCHEMA)
    preflight(config)
    # On the submitting host: cluster jobs parse the workflow too, and read no hub.
    if not workflow.remote_exec:
        check_hub_ids(config, warn=logger.warning)
# Every remote input at the revision the lock beside the config pins (reprolm.lock): the
# download rules pass it. Inputs not locked are named here (whether this is a dry run is not
# known yet); a real run of such a config is refused before its first job (onstart), unless
# the config says `allow_unpinned: true`.
CONFIGFILES = [os.path.relpath(path) for path in workflow.config_settings.configfiles]
LOCK_PATH = lock_path(CONFIGFILES)
LOCK = read_lock(LOCK_PATH)
if not workflow.remote_exec:
    refuse_unlocked(config, LOCK_PATH, True, logger.warning, " ".join(CONFIGFILES[-1:]))
STUDIES = enabled_studies(config)
# One run per folder: a run of another base config than the one that made results/ would
# replace its results (reprolm.config.run_folder). A dry run says so here; a real run is
# refused before its first job (onstart).
if (other := other_run(workflow.config_settings.configfiles)) is not None:
    logger.warning(f"{other}; {REAL_RUN_REFUSED}")
# Results are keyed by content: a checkpoint replaced in place reruns what used it.
for replaced in mark_replaced_folders():
    logger.warning(
        f"{replaced}: content differs from its provenance record (replaced in place); "
        "everything made from it will rerun"
    )


wildcard_constraints:
    source=r"[A-Za-z0-9_]+",
    tokenizer=r"[A-Za-z0-9_]+",
    base=r"[A-Za-z0-9_]+",
    recipe=r"[A-Za-z0-9_.+-]+",
    dataset=r"[A-Za-z0-9_]+",
    split=r"[A-Za-z0-9_]+",
    promptset=r"[A-Za-z0-9_]+(?:-seed[0-9]+)?",
    metric="|".join(METRICS),
    task=r"[A-Za-z0-9_]+",
    suite=r"[A-Za-z0-9_]+",
    study=r"[A-Za-z0-9_]+",
    judge=r"[A-Za-z0-9_]+",
    package=r"[A-Za-z0-9_]+",
    repo=r"[A-Za-z0-9_.-]+",


# The library code each job runs, as a param: editing src/reprolm reruns exactly the jobs
# whose code changed (Snakemake's code trigger sees only the rule's script).
SCRIPTS = os.path.join(workflow.basedir, "scripts")
# The conda environments, by absolute path for rules files outside workflow/ (a study's own).
ENVS = os.path.join(workflow.basedir, "envs")


def library_code(script):
    return job_code(os.path.join(SCRIPTS, script))


def reading_code(script, sources, *entries):
    """The code fingerprint of a job that reads ``sources`` (names): its script's library
    code and the upstream schemas (check, fixture, adapters) those sources are read by.
    """
    schemas = schemas_read({name: config["sources"][name] for name in sources})
    return job_code(os.path.join(SCRIPTS, script), *entries, *schema_entries(schemas))


def task_reading_code(script, tasks):
    """The code fingerprint of an lm-eval job: its script's library code and the schemas
    its tasks' documents are checked against."""
    return job_code(os.path.join(SCRIPTS, script), *schema_entries(task_schemas(tasks)))


def raw_source_code(wildcards):
    return reading_code("raw_source.py", [wildcards.source])


def tokenizer_code(wildcards):
    return reading_code(
        "tokenizer.py", config["tokenizers"][wildcards.tokenizer]["corpus"]
    )


def base_model_code(wildcards):
    corpus = config["base_models"][wildcards.base]["build"]["pretrain"]["corpus"]
    return reading_code("build_base_model.py", corpus)


def lm_eval_code(wildcards):
    tasks = config["lm_eval_suites"][wildcards.suite]["tasks"]
    return task_reading_code("lm_eval.py", [t["task"] for t in tasks])


def lm_eval_yamls(tasks):
    """Where lm-eval's YAML of each task is (reprolm.score.task_facts): the evaluating job
    reads it instead of building lm-eval's index of every task (about 6 s of CPU a job).
    """
    return task_yamls([t["task"] for t in tasks], LM_EVAL_TASK_CACHE)


def metric_code(wildcards):
    return job_code(
        os.path.join(SCRIPTS, "score.py"), entry_of(METRICS[wildcards.metric])
    )


def generation_code(wildcards):
    """A generation's library code with its prompt kind's builder (the multi-turn kind's
    code is the script's own)."""
    kind = lookups.promptset_spec(config, wildcards.promptset)["prompt"]
    builders = [entry_of(PROMPT_BUILDERS[kind])] if kind in PROMPT_BUILDERS else []
    return job_code(os.path.join(SCRIPTS, "generate.py"), *builders)


def builder_code(wildcards):
    spec = config["datasets"][wildcards.dataset]
    return reading_code(
        "dataset.py", spec.get("sources", []), entry_of(BUILDERS[spec["builder"]])
    )


# What of the length targets a job reads, as its builder, prompt kind or metric declares it
# (reprolm.length.reads_length_targets): editing a window reruns only the jobs that read it.
def builder_targets(wildcards):
    builder = BUILDERS[config["datasets"][wildcards.dataset]["builder"]]
    return canonical(targets_read(builder, config.get("length_targets")))


def prompt_targets(wildcards):
    kind = lookups.promptset_spec(config, wildcards.promptset)["prompt"]
    builder = PROMPT_BUILDERS[kind] if kind in PROMPT_BUILDERS else None
    return canonical(targets_read(builder, config.get("length_targets")))


def metric_targets(wildcards):
    return canonical(
        targets_read(METRICS[wildcards.metric], config.get("length_targets"))
    )


def study_tables_code(wildcards):
    writer = study(config, wildcards.study).table_code()
    return job_code(
        os.path.join(SCRIPTS, "study_tables.py"), *([writer] if writer else [])
    )


def report_inputs():
    """The report's tables and plots (the provenance index lists what is behind them)."""
    return (
        [paths.tables_dir(s.name) for s in STUDIES]
        + [paths.plots_dir(s.name) for s in STUDIES]
        + ["results/report/paper_headlines.csv", "results/report/effect_directions.csv"]
        + (["results/report/leaderboard.csv"] if config.get("leaderboard") else [])
    )


def report_pages():
    """The cross-study tables as pages of the report, each beside its CSV."""
    return (
        ["results/report/paper_headlines.html", "results/report/effect_directions.html"]
        + (["results/report/leaderboard.html"] if config.get("leaderboard") else [])
        + ["results/report/provenance.html"]
        + [f"results/report/cost/{s.name}.html" for s in STUDIES]
    )


def all_targets():
    return (
        report_inputs()
        + ["results/report/provenance.csv"]
        + ["results/report/headlines.html"]
        + [f"results/report/tables/{s.name}" for s in STUDIES]
        + [f"results/report/cost/{s.name}.csv" for s in STUDIES]
        + report_pages()
        + lookups.extrapolated_models(config)
        + [target for s in STUDIES for target in s.targets(config)]
    )


raw_dir = paths.raw_dir


def raw_source_files(wildcards):
    """A files or released source's own files: editing one reruns the source and what reads
    it. Released files not there yet are downloaded (rule released_file)."""
    return source_file_paths(config["sources"][wildcards.source])


def released_downloads():
    """The released sources' files not at their paths yet, by path
    (reprolm.data.released_ratings.ReleasedFile). One already there (downloaded, copied by
    hand, or in the repository) has no rule: Snakemake would see no record of its making and
    download it again."""
    return {
        file.path: file
        for name, spec in config["sources"].items()
        if "released" in spec
        for file in released_files(name, spec)
        if not os.path.isfile(file.path)
    }


RELEASED_FILES = released_downloads()


def released_file_paths():
    """A wildcard regex matching exactly the released files to download."""
    names = [re.escape(path) for path in RELEASED_FILES]
    return "|".join(names) if names else "(?!)"


def tokenizer_inputs(wildcards):
    return [raw_dir(s) for s in config["tokenizers"][wildcards.tokenizer]["corpus"]]


def tokenizer_schemas(wildcards):
    corpus = config["tokenizers"][wildcards.tokenizer]["corpus"]
    return canonical({s: config["sources"][s]["schema"] for s in corpus})


def base_names(*kinds):
    """A wildcard regex matching exactly the base models whose config has one of ``kinds``
    (build, hub, path, endpoint)."""
    names = [
        re.escape(n)
        for n, spec in config["base_models"].items()
        if any(kind in spec for kind in kinds)
    ]
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
    return canonical({s: config["sources"][s]["schema"] for s in corpus})


def local_base_names(adapters):
    """A wildcard regex of the base models given as a local folder (``path``): LoRA adapter
    folders (``adapters`` true, merged by adapter_base_model) or checkpoints (linked in).
    """
    from reprolm.models.local import is_adapter

    names = [
        re.escape(n)
        for n, spec in config["base_models"].items()
        if "path" in spec and is_adapter(spec["path"]) == adapters
    ]
    return "|".join(names) if names else "(?!)"


def adapter_base_model_inputs(wildcards):
    """An adapter's base when it is a configured base model (its folder is built, downloaded
    or linked first); a checkpoint folder outside the config is hashed as a param instead.
    """
    from reprolm.models.local import adapter_base

    base = adapter_base(config["base_models"], wildcards.base)
    return {"base": base.folder} if base.name else {}


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
    return paths.model_dir(wildcards.base, wildcards.recipe)


def expo_reference_dir(wildcards):
    return lookups.expo_reference_dir(config, wildcards.base, wildcards.recipe)


def finetune_start(wildcards):
    return lookups.finetune_start(config, wildcards.base, wildcards.recipe)


def recipe_train_file(wildcards):
    dataset = lookups.recipe_spec(config, wildcards.recipe)["dataset"]
    return f"results/datasets/{dataset}/train.parquet"


def deepspeed_config(wildcards):
    path = lookups.recipe_spec(config, wildcards.recipe).get("deepspeed")
    return [path] if path else []


def generation_inputs(wildcards):
    """The prompt set's dataset, and the model's folder unless it is asked through an endpoint."""
    inputs = {"prompts": promptset_file(wildcards)}
    if wildcards.base not in lookups.endpoint_models(config):
        inputs["model"] = model_dir(wildcards)
    return inputs


def generation_job(api):
    """A generation's settings and resources besides those of its prompt set. A model with
    weights (``api`` False): the backend and the model's placement, GPUs, memory and time.
    A model behind an endpoint: its endpoint settings (the key's variable name, never the
    key) and one ``api_requests`` (``--resources api_requests=N`` caps how many run at once),
    so that a change of backend or placement never resends what was paid for."""
    if api:
        params = {
            "endpoint": lambda wildcards: canonical(
                config["base_models"][wildcards.base]["endpoint"]
            )
        }
        return {"params": params, "resources": {"api_requests": 1}}
    params = {
        "backend": config["generation"]["backend"],
        "batch_size": config["generation"]["batch_size"],
        "precision": lambda wildcards: model_settings(
            config, wildcards.base, "generate"
        )["precision"],
    }
    resources = {
        **stage_routing("generate"),
        "gpu": stage_resource("generate", "gpus"),
        "nodes": stage_nodes("generate"),
        "mem_mb": stage_resource("generate", "mem_mb"),
        "runtime": stage_resource("generate", "runtime"),
        "slurm_extra": stage_stop_signal("generate"),
    }
    return {"params": params, "resources": resources}


def promptset_file(wildcards):
    spec = lookups.promptset_spec(config, wildcards.promptset)
    return f"results/datasets/{spec['dataset']}/{spec['split']}.parquet"


def stage_resource(stage, key):
    def lookup(wildcards, attempt, rulename):
        if key == "gpus":
            check_gpu_partition(wildcards.base, stage, rulename)
        return sized(
            model_settings(config, wildcards.base, stage),
            key,
            rulename,
            wildcards,
            attempt,
        )

    return lookup


def sized(settings, key, rule, wildcards, attempt):
    return job_size(
        config, key, rule, dict(wildcards.items()), settings, attempt, Path(".")
    )


def check_gpu_partition(base, stage, rule):
    """Through a cluster executor, a GPU job that would run on the CPU jobs' partition is
    refused (before any submission: refuse_unrouted_gpu_jobs)."""
    if base and cluster_submission(workflow):
        given = workflow.resource_settings
        check_gpu_routing(
            config,
            base,
            stage,
            command_line_resource(given.default_resources, "slurm_partition"),
            command_line_resource(
                given.overwrite_resources.get(rule), "slurm_partition"
            ),
        )


def refuse_unrouted_gpu_jobs():
    """Snakemake evaluates a job's resources only once the job is ready to run: evaluating
    those of every GPU rule's job now (onstart) runs check_gpu_partition before the first
    submission. A dry run evaluates every job's anyway."""
    for job in workflow.dag.needrun_jobs():
        if "gpu" in job.rule.resources:
            job.rule.expand_resources(job.wildcards_dict, job.input, job.attempt)


def routing_lookups(stage, placement_of):
    """One resource function per routing key the config sets for the stage, and the task
    count per GPU (TASKS_PER_GPU) of the rules that can ask for GPUs. A key a job leaves
    unset is the profile's default-resources value: declared on the rule, it would otherwise
    drop that value (a CPU job sent to SLURM's default partition)."""

    def lookup(wildcards, key):
        value = placement_of(wildcards)[key]
        if value is None:
            return command_line_resource(
                workflow.resource_settings.default_resources, key
            )
        return value

    return {
        "tasks_per_gpu": TASKS_PER_GPU,
        **{
            key: (lambda wildcards, key=key: lookup(wildcards, key))
            for key in routed_keys(config, stage)
        },
    }


def stage_routing(stage):
    """Partition, account, QoS, constraint and GPU model of a stage's jobs, per base model."""
    return routing_lookups(
        stage, lambda wildcards: job_routing(config, wildcards.base, stage)
    )


def stage_nodes(stage):
    """One node for a stage's jobs of several GPUs (reprolm.config.resources.node_count)."""

    def lookup(wildcards):
        return node_count(model_settings(config, wildcards.base, stage))

    return lookup


def score_resource(key):
    """A score job's resources: the score stage's for a metric that runs an encoder."""

    def lookup(wildcards, attempt, rulename):
        if key == "gpus":
            check_gpu_partition(
                wildcards.base, metric_stage(wildcards.metric), rulename
            )
        return sized(
            score_settings(config, wildcards.base, wildcards.metric),
            key,
            rulename,
            wildcards,
            attempt,
        )

    return lookup


def score_routing():
    """A score job's placement: the score stage's for a metric that runs an encoder (on a
    GPU where the stage has GPUs); the CPU metrics' keep the CPU jobs' partition."""
    return routing_lookups(
        "score",
        lambda wildcards: job_routing(
            config, wildcards.base, metric_stage(wildcards.metric)
        ),
    )


def score_threads(wildcards):
    return score_settings(config, wildcards.base, wildcards.metric)["threads"]


def dataset_resource(key):
    """A dataset build's memory or time, from the size of the raw data it reads (<TBD> in
    a dry run until that data exists)."""

    def lookup(wildcards, input, attempt):
        value = build_request(list(input))[key]
        return attempt_size(config, key, value, attempt)

    return lookup


def stage_stop_signal(stage):
    """SIGTERM ahead of the time limit for the stages that save progress on it."""

    def lookup(wildcards):
        return stop_signal(model_settings(config, wildcards.base, stage))

    return lookup


def stage_threads(stage):
    def lookup(wildcards):
        return model_settings(config, wildcards.base, stage)["threads"]

    return lookup


def lm_eval_inputs(wildcards):
    suite = config["lm_eval_suites"][wildcards.suite]
    tasks = suite["tasks"]
    return {
        "model": model_dir(wildcards),
        "docs": [raw_dir(t["source"]) for t in tasks if t.get("source")],
        "hub_data": [lookups.task_data(t) for t in tasks if not t.get("source")],
        "nltk_data": lookups.nltk_data(suite),
    }


def lm_eval_sources(wildcards):
    tasks = config["lm_eval_suites"][wildcards.suite]["tasks"]
    return canonical(
        {t["source"]: raw_dir(t["source"]) for t in tasks if t.get("source")}
    )


def metric_inputs(wildcards):
    """The generations, a hub sentence encoder the metric's settings name, and what the
    definitions its settings choose read (the model's folder, NLTK data)."""
    settings = config.get("metrics", {}).get(wildcards.metric, {})
    encoder = lookups.hub_encoder(settings)
    return {
        "generations": f"results/generations/{wildcards.base}/{wildcards.recipe}/{wildcards.promptset}.parquet",
        "encoder": [encoder] if encoder else [],
        **lookups.definition_inputs(
            wildcards.metric, settings, wildcards.base, wildcards.recipe
        ),
    }


def judge_spec(wildcards):
    return canonical(config["judges"][wildcards.judge])


def judge_inputs(wildcards):
    return lookups.judge_files(config, wildcards.judge)


def judge_resource(key):
    """A judge job's resources are those its own model needs (none for an endpoint), its
    runtime sized from the need of what it judges where the config says so."""

    def lookup(wildcards, attempt, rulename):
        if key == "gpus":
            check_gpu_partition(
                judge_base(config, wildcards.judge), "evaluate", rulename
            )
        return sized(
            judge_settings(config, wildcards.judge), key, rulename, wildcards, attempt
        )

    return lookup


def judge_routing():
    """Where a judge's jobs go: its own model's evaluate placement."""
    return routing_lookups("evaluate", judge_placement)


def judge_placement(wildcards):
    base = judge_base(config, wildcards.judge)
    if base is None:
        return routing(judge_settings(config, wildcards.judge))
    return job_routing(config, base, "evaluate")


def judge_threads(wildcards):
    return judge_settings(config, wildcards.judge)["threads"]


# Each judge stage is a pair of rules told apart by the judges they match: API judges' jobs
# run on the submitting host (compute nodes often have no internet), model judges' are
# submitted. Snakemake's localrules are per rule, hence the pair.
def pack_resources(rule):
    """A packed rule's jobs hold one ``pack_slot`` each. A cluster run gives each group
    one (the SLURM profile's ``--resources``, scoped local), so the jobs of a packed
    submission run one after another and never share its GPUs; local runs ignore groups.
    """
    return {"pack_slot": 1} if pack_group(rule) else {}


def judge_rule(stage, api):
    """``{stage}`` for judges that run a model, ``{stage}_api`` for API judges."""
    return f"{stage}_api" if api else stage


def judge_name_pattern(api):
    """The judge wildcard's constraint of a stage's API (``api``) or model-judge rule."""
    return judge_name_regex(config.get("judges", {}), api)


def judge_job_resources(api):
    """An API judge's job holds one ``api_requests`` (``--resources api_requests=N`` caps
    how many run at once); a model judge's asks for its model's placement, GPUs, memory
    and time."""
    if api:
        return {"api_requests": 1}
    return {
        **judge_routing(),
        "pack_slot": 1,
        "gpu": judge_resource("gpus"),
        "nodes": lambda wildcards: node_count(judge_settings(config, wildcards.judge)),
        "mem_mb": judge_resource("mem_mb"),
        "runtime": judge_resource("runtime"),
    }


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


def checkpoint_output(rule, **wildcards):
    return getattr(checkpoints, rule).get(**wildcards).output[0]


def study_table_inputs(wildcards):
    """The study's score files, other files its tables read, and the file it was loaded from
    if it is not the package's."""
    tables_of = study(config, wildcards.study)
    scores = lookups.replicate_score_paths(
        config, tables_of.table_inputs(config, checkpoint_output)
    )
    return {
        "scores": scores,
        "samples": lookups.lm_eval_samples_logs(scores),
        "files": tables_of.table_files(config),
        "study_module": [tables_of.loaded_from] if tables_of.loaded_from else [],
    }


# Judge succession: a retired judge's successor judges the retired judge's released items
# (judges.*.released_verdicts); the study's agreement table sets the two side by side.
def retired_judge_pattern():
    return "|".join(successors(config.get("judges", {}))) or "(?!)"


def released_verdict_files(wildcards):
    return config["judges"][wildcards.retired]["released_verdicts"]


def released_grade_inputs(wildcards):
    """A successor's inputs for grading the answers of a retired judge's released grades:
    the grades (a rated dataset), the questions (categories, reference answers)."""
    released = config["judges"][wildcards.retired]["released_grades"]
    return {
        **judge_inputs(wildcards),
        "grades": paths.dataset_file(released["dataset"], "test"),
        "questions": paths.dataset_file(released["questions"], "test"),
    }


def released_sample(wildcards):
    """The balanced sample of the released verdicts the successor judges (None: all)."""
    return config["judges"][wildcards.retired].get("released_sample")


def study_succession(study_name):
    """The retired judges a study names (SUCCEEDED, from the config before succession),
    each with its spec and the spec of the judge acting for it."""
    return {
        retired: {
            "spec": config["judges"][retired],
            "successor": acting,
            "successor_spec": config["judges"][acting],
        }
        for retired, acting in SUCCEEDED.get(study_name, {}).items()
    }


def judged_released_items(wildcards):
    """The successors' verdicts on released verdicts (keyed by the retired judge) and their
    grades of released grades' answers (keyed ``{retired} grades``)."""
    succession = study_succession(wildcards.study)
    return {
        **{
            retired: f"results/scores/judge_released/{entry['successor']}/{retired}.json"
            for retired, entry in succession.items()
            if entry["spec"].get("released_verdicts")
        },
        **{
            f"{retired} grades": f"results/scores/judge_released_grades/{entry['successor']}/{retired}.json"
            for retired, entry in succession.items()
            if entry["spec"].get("released_grades")
        },
    }


def table_pages_inputs(wildcards):
    """A study's tables, and its judge agreement table where it names a retired judge: the
    pages of its judged tables give their judges' measured agreement."""
    inputs = {"tables": paths.tables_dir(wildcards.study)}
    if SUCCEEDED.get(wildcards.study):
        inputs["agreement"] = f"results/tables/judge_agreement/{wildcards.study}.csv"
    return inputs


def table_judges(study_name):
    """Each judged table of a study with its judges and the retired judges they act for
    (the study asked of the config as written, before succession)."""
    return table_judge_notes(
        study(config, study_name).table_judges(WRITTEN_CONFIG),
        config.get("judges", {}),
        config.get("base_models", {}),
    )


def table_captions(study_name):
    """A study's report captions, each judged table's naming its judges (its page gives
    their measured agreement)."""
    captions = study(config, study_name).captions()
    captions["judges"] = {
        table: judge_caption(notes, study_name)
        for table, notes in table_judges(study_name).items()
        if notes
    }
    return captions


def judge_agreement_tables():
    """The agreement table of each enabled study that names a retired judge, and its page."""
    return [
        f"results/{kind}/judge_agreement/{s.name}.{suffix}"
        for s in STUDIES
        if SUCCEEDED.get(s.name)
        for kind, suffix in (("tables", "csv"), ("report", "html"))
    ]
