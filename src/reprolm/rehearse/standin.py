"""The stand-in run: one job of each (rule x model family x resource class) of the config's
DAG, executed through the profile on the cluster, with tiny models in place of the hub's.

A job's model family is its base model's architecture and tokenizer (``model_type`` and
``tokenizer_class``, read from the hub repository's ``config.json`` and
``tokenizer_config.json``); its resource class is its sbatch request without what names the
job. Of each class the job with the fewest jobs upstream of it represents it. The run is the
same workflow in a folder of its own beside the real run's (``STAND_IN_DIR``: the shared file
system the real jobs will use), with a config that differs from the real one in three ways:
each hub base model is a local folder holding a tiny random model of its family (its hub
config shrunk, its hub tokenizer as it is: ``stand_in_model``), each hub dataset (and
each set of released files downloaded by hand) a schema-true fixture of ``FIXTURE_ROWS``
rows, every row count the config gives
(``ROW_COUNT_KEYS``: builders' draws, lm-eval limits, training documents) cut to
``STAND_IN_ROWS``, generations stop after ``MAX_NEW_TOKENS`` and finetunes after
``MAX_STEPS``; every job keeps its routing and GPUs. The run proves where and how jobs run,
not the papers' sizes (``reprolm.rehearse.sizes`` measures those). Of the jobs of a class,
the representative is the one that adds the fewest jobs to those the run already needs, so
representatives share their upstream jobs where they can. The representatives' outputs are
the targets of one ``snakemake --profile`` run; each is then checked by its provenance
record: it ran as a SLURM job, with the hubs offline, on the GPUs it asked for.

The stop and resume path is rehearsed on one of the generations: the stand-in run saves
generations a prompt at a time (``STOP_SHARD_SIZE``), that generation's prompt set writes
``STOP_NEW_TOKENS`` tokens, and once its first prompt is saved the job is sent SIGTERM
(``scancel --signal=TERM``: what the profile's ``--signal`` sends before a time limit). It
must record the stopped attempt, fail, be retried by Snakemake (the profile's ``retries``) and
finish from the prompts the stopped attempt saved on the shared file system.

Not stood in (listed, never run): jobs whose model runs its own code (``trust_remote_code``;
a local checkpoint cannot opt in), jobs that need an API judge's answers, and classes whose
every job needs more than ``MAX_UPSTREAM`` jobs before it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from reprolm.config import overlays
from reprolm.data.upstream import UPSTREAM_SCHEMAS
from reprolm.provenance import provenance_path
from reprolm.rehearse.sizes import DEFAULT_CONFIG, fixture_options
from reprolm.rehearse.submissions import Request, resource_sources
from reprolm.stages import pack_group

STAND_IN_DIR = Path(".rehearsal") / "stand-in"
# What the workflow reads from its folder besides results (config files, DeepSpeed configs).
SHARED_FOLDERS = ("workflow", "config", "profiles")
# Rows each stand-in job processes: every row count the config gives is cut to it.
STAND_IN_ROWS = 8
# Config keys that give a row count (dataset builders' draws and caps, lm-eval suites' limits,
# train-before-test's documents), wherever they sit in the config.
ROW_COUNT_KEYS = frozenset({"num", "tlg_num", "cap_per_mlt", "limit", "max_num_train", "max_num_valid", "max_num_test"})
# A fixture's rows: enough for a builder's draw of STAND_IN_ROWS after its filters (Ruler's
# training set takes its rows after the TLG's, from length bins) and no more.
FIXTURE_ROWS = 5 * STAND_IN_ROWS
# The stand-in's generations and finetunes: long enough to run every step of the job.
MAX_NEW_TOKENS = 8
MAX_STEPS = 2
MAX_UPSTREAM = 12
SEED = 0
# The rules that fetch a hub base model to resources/models/{base}.
BASE_MODEL_FETCHES = frozenset({"download_base_model"})
# The generation the run stops: saved a prompt at a time, each long enough (on a tiny model,
# a fraction of a second) that the stop lands while prompts are left.
STOP_SHARD_SIZE = 1
STOP_NEW_TOKENS = 256
STOP_POLL_S = 0.2
# The hub files a stand-in needs: the architecture, the tokenizer, the chat template.
HUB_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
)
# A tiny model's sizes, under each name a family's config gives them.
TINY_SIZES = {
    ("hidden_size", "n_embd", "d_model"): 64,
    ("num_hidden_layers", "n_layer"): 2,
    ("num_attention_heads", "n_head"): 4,
    ("intermediate_size", "n_inner"): 128,
    ("head_dim",): 16,
}
TINY_KV_HEADS = 2


@dataclass
class Candidate:
    """A submitted job of the DAG, as the stand-in run selects it."""

    rule: str
    job: str
    models: tuple[str, ...]
    request: tuple
    outputs: list[str]
    log: str
    upstream: int
    upstream_rules: frozenset
    # The jobs it needs, local ones included (``job_key`` of each): what running it costs.
    upstream_jobs: frozenset = frozenset()

    @property
    def key(self) -> str:
        return f"{self.rule}:{self.outputs[0] if self.outputs else self.job}"


@dataclass
class Outcome:
    rule: str
    job: str
    family: str
    request: str
    status: str
    detail: str = ""


@dataclass
class StandInRun:
    outcomes: list[Outcome] = field(default_factory=list)
    not_stood_in: list[str] = field(default_factory=list)
    jobs_run: int = 0
    seconds: float = 0.0
    # The generation stopped and resumed (status "resumed" when it went as a time limit's
    # warning would have it go).
    stop: Outcome | None = None

    @property
    def ready(self) -> bool:
        resumed = self.stop is None or self.stop.status == "resumed"
        return resumed and all(outcome.status == "ran" for outcome in self.outcomes)

    def table(self) -> list[dict]:
        return [outcome.__dict__ for outcome in self.outcomes]


def job_models(config: Mapping, rule: str, wildcards: Mapping) -> tuple[str, ...]:
    """The base models a job runs (its own, or its judge's)."""
    models = {base for _, base in resource_sources(config, rule, wildcards)}
    if wildcards.get("base") in config.get("base_models", {}):
        models.add(wildcards["base"])
    return tuple(sorted(models))


def job_key(job) -> str:
    """A Snakemake job's identity across the DAG: its rule and first output."""
    return f"{job.rule.name}:{next(iter(job.output), '')}"


def candidates(dag, requests: Sequence[Request]) -> list[Candidate]:
    """The DAG's submitted jobs with their requests and what each needs upstream."""
    upstream: dict = {}

    def closure(job) -> set:
        if job not in upstream:
            found = set()
            for dependency in dag.dependencies.get(job, ()):
                found.add(dependency)
                found |= closure(dependency)
            upstream[job] = found
        return upstream[job]

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    made = []
    for job, request in zip(dag.jobs, requests, strict=True):
        before = closure(job)
        # Base models fetched upstream count too (an extrapolation's reference model).
        fetched = {d.wildcards_dict["base"] for d in before if d.rule.name in BASE_MODEL_FETCHES}
        made.append(
            Candidate(
                rule=job.rule.name,
                job=request.job,
                models=tuple(sorted(set(job_models(dag.config, job.rule.name, dict(job.wildcards_dict))) | fetched)),
                request=request.options,
                outputs=[str(path) for path in job.output],
                log=str(job.log[0]) if job.log else "",
                upstream=len(before),
                upstream_rules=frozenset(dependency.rule.name for dependency in before),
                upstream_jobs=frozenset(job_key(dependency) for dependency in before),
            )
        )
    return made


def fetch_hub_files(repo: str, revision: str | None, folder: Path, mirror: Path | None) -> Path:
    """The hub files of ``repo`` a stand-in needs, from the hub or from a folder holding
    repositories as ``{owner}/{name}/`` (a local mirror of the hub)."""
    folder.mkdir(parents=True, exist_ok=True)
    if mirror is not None:
        source = mirror / repo
        if not (source / "config.json").is_file():
            raise FileNotFoundError(f"{source / 'config.json'}: {repo} is not in the hub mirror {mirror}")
        for name in HUB_FILES:
            if (source / name).is_file():
                shutil.copy2(source / name, folder / name)
        return folder
    from huggingface_hub import snapshot_download

    snapshot_download(repo, revision=revision, allow_patterns=list(HUB_FILES), local_dir=folder)
    return folder


def family_of(files: Path) -> str:
    """``model_type/tokenizer_class`` of a repository's files."""
    config = json.loads((files / "config.json").read_text())
    tokenizer_config = files / "tokenizer_config.json"
    tokenizer = (
        json.loads(tokenizer_config.read_text()).get("tokenizer_class", "") if tokenizer_config.is_file() else ""
    )
    return f"{config['model_type']}/{(tokenizer or '?').removesuffix('Fast')}"


def tiny_config(config: Mapping) -> dict:
    """The hub config at a tiny model's sizes (every other setting as it is)."""
    tiny = dict(config)
    for names, size in TINY_SIZES.items():
        for name in names:
            if tiny.get(name) is not None:
                tiny[name] = size
    if tiny.get("num_key_value_heads") is not None:
        heads = tiny.get("num_attention_heads", 4)
        tiny["num_key_value_heads"] = (
            heads if config["num_key_value_heads"] == config.get("num_attention_heads") else TINY_KV_HEADS
        )
    if isinstance(tiny.get("layer_types"), list):
        tiny["layer_types"] = tiny["layer_types"][: tiny.get("num_hidden_layers", 2)]
    for name in ("torch_dtype", "dtype", "quantization_config", "auto_map"):
        tiny.pop(name, None)
    return tiny


def stand_in_model(files: Path, output: Path, chat_template_files: Path | None = None) -> Path:
    """A tiny random model of the repository's architecture with its tokenizer, saved as
    ``save_pretrained`` saves a checkpoint."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = tiny_config(json.loads((files / "config.json").read_text()))
    model_type = config.pop("model_type")
    tokenizer = AutoTokenizer.from_pretrained(files)
    if chat_template_files is not None:
        tokenizer.chat_template = AutoTokenizer.from_pretrained(chat_template_files).chat_template
    torch.manual_seed(SEED)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **config))
    output.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(output)
    tokenizer.save_pretrained(output)
    if (files / "generation_config.json").is_file():
        shutil.copy2(files / "generation_config.json", output / "generation_config.json")
    return output


def select(
    found: Sequence[Candidate],
    families: Mapping[str, str],
    rules: Sequence[str] | None,
    unstartable: Mapping[tuple, str] | None = None,
) -> tuple[list[Candidate], list[str]]:
    """One job per (rule, family, request); and why the rest of the classes are not stood in.
    A class whose (rule, request) is in ``unstartable`` (the cluster's judgment of requests it
    would never start, with its words) is left out: submitted, it would wait in the queue for
    ever.

    Classes are taken in order of their cheapest job (the fewest jobs upstream); each one's
    representative is the job that adds the fewest jobs to those the representatives taken
    so far need (ties: the fewest upstream), so that a score reuses a chosen generation and
    the run's local jobs (downloads, fixtures) are as few as the classes allow."""
    classes: dict[tuple, list[Candidate]] = {}
    left_out: dict[tuple, str] = {}
    for candidate in found:
        if rules and candidate.rule not in rules:
            continue
        family = ",".join(families.get(model, "?") for model in candidate.models) or "-"
        key = (candidate.rule, family, candidate.request)
        unknown = [model for model in candidate.models if model not in families]
        never = (unstartable or {}).get((candidate.rule, candidate.request))
        if never:
            left_out.setdefault(key, f"{candidate.rule} ({candidate.job}): the cluster would not start it ({never})")
            continue
        if unknown:
            left_out[key] = f"{candidate.rule} ({candidate.job}): {', '.join(unknown)} not stood in"
            continue
        api = sorted(rule for rule in candidate.upstream_rules if rule.endswith("_api"))
        if api:
            left_out.setdefault(key, f"{candidate.rule} ({candidate.job}): needs an API judge ({', '.join(api)})")
            continue
        if candidate.upstream > MAX_UPSTREAM:
            left_out.setdefault(
                key, f"{candidate.rule} ({candidate.job}): {candidate.upstream} jobs upstream, over {MAX_UPSTREAM}"
            )
            continue
        classes.setdefault(key, []).append(candidate)
    chosen: list[Candidate] = []
    needed: set[str] = set()
    for members in sorted(classes.values(), key=lambda members: min(c.upstream for c in members)):
        best = min(members, key=lambda c: (len(c.upstream_jobs - needed), c.upstream))
        chosen.append(best)
        needed |= best.upstream_jobs | {best.key}
    return chosen, [why for key, why in left_out.items() if key not in classes]


def cut_row_counts(node, rows: int = STAND_IN_ROWS):
    """``node`` (a config or part of it) with every count under ``ROW_COUNT_KEYS`` (a number,
    or a mapping of numbers) at most ``rows``; one left null (all rows) set to ``rows``."""
    if isinstance(node, list):
        return [cut_row_counts(item, rows) for item in node]
    if not isinstance(node, dict):
        return node
    cut = {}
    for key, value in node.items():
        if key in ROW_COUNT_KEYS and value is None:
            cut[key] = rows
        elif key in ROW_COUNT_KEYS and isinstance(value, int) and not isinstance(value, bool):
            cut[key] = min(value, rows)
        elif key in ROW_COUNT_KEYS and isinstance(value, dict):
            cut[key] = {name: min(count, rows) if isinstance(count, int) else count for name, count in value.items()}
        else:
            cut[key] = cut_row_counts(value, rows)
    return cut


def stand_in_config(
    config: Mapping,
    models: Mapping[str, str],
    default: Mapping,
    rows: int = FIXTURE_ROWS,
    stopped_promptset: str | None = None,
) -> dict:
    """The config with the given base models at local folders, every hub dataset whose schema
    has a fixture that fixture, every row count cut to ``STAND_IN_ROWS``, and generations and
    finetunes cut short but ``stopped_promptset``'s, long enough to be stopped."""
    stood_in = cut_row_counts(json.loads(json.dumps(config)))
    for name, folder in models.items():
        spec = stood_in["base_models"][name]
        spec.pop("hub")
        spec["path"] = folder
    for name, spec in stood_in.get("sources", {}).items():
        # A hub dataset, or released files the researcher downloads by hand (FLR's FLASK), is
        # a fixture where its schema has one; otherwise a job that reads it needs it.
        fetched = {"hub", "released"} & set(spec)
        if fetched and UPSTREAM_SCHEMAS.get(spec["schema"], "schema").fixture is not None:
            fixture = fixture_options(name, config, default)
            stood_in["sources"][name] = {
                **{key: value for key, value in spec.items() if key not in fetched},
                "fixture": {**fixture, "n": rows, "seed": SEED},
            }
    for name, promptset in stood_in.get("promptsets", {}).items():
        tokens = STOP_NEW_TOKENS if name == stopped_promptset else MAX_NEW_TOKENS
        promptset["sampling"]["max_new_tokens"] = min(promptset["sampling"]["max_new_tokens"], tokens)
    if stopped_promptset is not None:
        stood_in.setdefault("generation", {})["shard_size"] = STOP_SHARD_SIZE
    for recipe in stood_in.get("recipes", {}).values():
        recipe["max_steps"] = MAX_STEPS
    # The stand-in run proves where jobs run, not what they read: what it still fetches
    # (lm-eval's datasets) goes unpinned, which the run says.
    stood_in["allow_unpinned"] = True
    return stood_in


def stopped_generation(chosen: Sequence[Candidate]) -> Candidate | None:
    """The representative the run stops: its first generation."""
    return next((candidate for candidate in chosen if candidate.rule == "generate"), None)


def _generation_parts(candidate: Candidate) -> tuple[str, str]:
    """(its checkpoint folder, its prompt set), from the output results/generations/{base}/{recipe}/{promptset}.parquet."""
    output = Path(candidate.outputs[0])
    base, recipe = output.parts[-3], output.parts[-2]
    return f"results/checkpoints/generate/{base}/{recipe}/{output.stem}", output.stem


def stop_when_saving(
    process: subprocess.Popen, folder: Path, candidate: Candidate, env: Mapping | None, deadline: float
) -> str | None:
    """Until the run ends: once the generation has saved its first prompt, SIGTERM its job as
    a time limit's warning would. Returns the job id signalled (None if it ended first), or
    raises RuntimeError with SLURM's answer when the cluster refuses the signal."""
    checkpoints = folder / _generation_parts(candidate)[0]
    output = Path(candidate.outputs[0])
    # The job's own submission, or the packed one of its model's generations (a group job,
    # named by its group and then its rule).
    comments = {f"rule_{candidate.rule}_wildcards_{candidate.job}"}
    if group := pack_group(candidate.rule):
        comments.add(f"rule_{group.format(base=output.parts[-3], recipe=output.parts[-2])}_{candidate.rule}")
    run_env = None if env is None else dict(env)
    while process.poll() is None and time.monotonic() < deadline:
        if list(checkpoints.glob("*/shard-00000.jsonl")):
            queue = subprocess.run(
                ["squeue", "--noheader", "--format=%i|%k"], capture_output=True, text=True, env=run_env, timeout=60
            )
            job_ids = [line.split("|")[0] for line in queue.stdout.split() if line.split("|", 1)[-1] in comments]
            if job_ids:
                signalled = subprocess.run(
                    ["scancel", "--signal=TERM", job_ids[0]], capture_output=True, text=True, env=run_env, timeout=60
                )
                if signalled.returncode != 0:
                    raise RuntimeError(f"scancel --signal=TERM {job_ids[0]}: {signalled.stderr.strip()}")
                return job_ids[0]
        time.sleep(STOP_POLL_S)
    return None


def check_stop(candidate: Candidate, family: str, folder: Path, signalled: str | None, refused: str = "") -> Outcome:
    """Whether the stopped generation recorded its stop and finished from what it saved."""
    outcome = Outcome(candidate.rule, candidate.job, family, _request_text(candidate.request), "failed")
    if refused:
        outcome.detail = f"the cluster refused the signal: {refused}"
        return outcome
    if signalled is None:
        outcome.status = "not stopped"
        outcome.detail = "it ended before its first prompt was seen saved (stop and resume not rehearsed)"
        return outcome
    output = folder / candidate.outputs[0]
    record_path = provenance_path(output)
    if not output.exists() or not record_path.is_file():
        outcome.detail = f"job {signalled} was sent SIGTERM and no retry finished it ({candidate.log})"
        return outcome
    execution = json.loads(record_path.read_text()).get("execution") or {}
    stops = execution.get("stopped_attempts") or []
    log = folder / candidate.log if candidate.log else None
    kept = log.read_text().count("kept from an earlier attempt") if log and log.is_file() else 0
    if not stops or stops[0].get("slurm_job_id") != signalled:
        outcome.detail = f"job {signalled} was sent SIGTERM but its record names no stopped attempt of it"
    elif not kept:
        outcome.detail = f"job {signalled} stopped ({stops[0].get('progress')}) but the retry kept none of its prompts"
    else:
        outcome.status = "resumed"
        outcome.detail = (
            f"job {signalled} stopped by {stops[0].get('signal')} ({stops[0].get('progress')}); "
            f"job {execution.get('slurm_job_id')} kept {kept} saved prompts and finished"
        )
    return outcome


def _request_text(request: tuple) -> str:
    shown = ("-p", "--gpus", "--gres", "--nodes", "--mem", "-t")
    return " ".join(f"{option}={value}" for option, value in request if option in shown and value)


def _gpus_asked(request: tuple) -> int:
    value = dict(request).get("--gpus") or ""
    return int(value.split(":")[-1]) if value else 0


def check(candidate: Candidate, family: str, folder: Path) -> Outcome:
    """Whether the representative ran as the cluster would run the real job."""
    outcome = Outcome(candidate.rule, candidate.job, family, _request_text(candidate.request), "failed")
    output = folder / candidate.outputs[0]
    record_path = provenance_path(output) if output.exists() else None
    if record_path is None or not record_path.is_file():
        log = folder / candidate.log if candidate.log else None
        tail = log.read_text().strip().splitlines()[-3:] if log and log.is_file() else []
        outcome.detail = f"no output; its log {log}: " + " | ".join(tail) if tail else f"no output ({candidate.log})"
        return outcome
    execution = json.loads(record_path.read_text()).get("execution") or {}
    problems = []
    if not execution.get("slurm_job_id"):
        problems.append("it did not run as a SLURM job")
    if execution.get("hub_offline") is not True:
        problems.append("the hubs were online on the node (HF_HUB_OFFLINE unset)")
    granted = [gpu for gpu in (execution.get("slurm_gpus") or "").split(",") if gpu]
    if len(granted) != _gpus_asked(candidate.request):
        problems.append(f"granted {len(granted)} GPUs, asked {_gpus_asked(candidate.request)}")
    if problems:
        outcome.detail = "; ".join(problems)
        return outcome
    outcome.status = "ran"
    gpus = f", GPUs {execution['slurm_gpus']}" if granted else ""
    outcome.detail = f"job {execution['slurm_job_id']} on {execution.get('slurm_node')}{gpus}"
    return outcome


def prepare_folder(workdir: Path) -> Path:
    """The stand-in run's folder: the workflow's own files linked in, its results its own."""
    folder = workdir / STAND_IN_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for name in SHARED_FOLDERS:
        link = folder / name
        if not link.exists() and (workdir / name).exists():
            link.symlink_to(Path(os.path.relpath(workdir / name, folder)))
    return folder


def run_stand_ins(
    found: Sequence[Candidate],
    config: Mapping,
    workdir: Path,
    profile_arguments: Sequence[str],
    rules: Sequence[str] | None = None,
    hub_mirror: Path | None = None,
    env: Mapping | None = None,
    timeout: float | None = None,
    log: Callable[[str], None] = lambda line: None,
    unstartable: Mapping[tuple, str] | None = None,
) -> StandInRun:
    """Select the representatives (none of a request in ``unstartable``: see :func:`select`),
    stand their models in, run them through the profile."""
    result = StandInRun()
    folder = prepare_folder(workdir)
    hub_files, families, unread = {}, {}, []
    wanted = [candidate for candidate in found if not rules or candidate.rule in rules]
    needed = sorted({model for candidate in wanted for model in candidate.models})
    for name in needed:
        hub = config["base_models"][name].get("hub")
        if hub is None:
            continue
        if hub.get("trust_remote_code"):
            unread.append(f"{name} runs its own code (trust_remote_code), which a local checkpoint cannot opt into")
            continue
        try:
            files = fetch_hub_files(hub["path"], hub.get("revision"), folder / "hub" / hub["path"], hub_mirror)
        except Exception as error:  # the hub's errors (gated, missing, offline) are many kinds
            unread.append(f"{name}: {hub['path']} could not be read: {error}")
            continue
        hub_files[name] = files
        families[name] = family_of(files)
    local = [name for name in needed if "hub" not in config["base_models"][name]]
    families.update({name: "local" for name in local})
    chosen, left_out = select(wanted, families, rules, unstartable)
    result.not_stood_in = unread + left_out
    if not chosen:
        return result
    used = sorted({model for candidate in chosen for model in candidate.models if model in hub_files})
    models = {}
    for name in used:
        hub = config["base_models"][name]["hub"]
        output = folder / "models" / name
        if not (output / "config.json").is_file():
            template = hub.get("chat_template_from")
            template_files = (
                fetch_hub_files(template, None, folder / "hub" / template, hub_mirror) if template else None
            )
            stand_in_model(hub_files[name], output, template_files)
        models[name] = str(output.relative_to(folder))
    default_path = workdir / DEFAULT_CONFIG
    default = overlays.load(default_path, default_path.parents[1]) if default_path.is_file() else {}
    stopped = stopped_generation(chosen)
    stopped_promptset = _generation_parts(stopped)[1] if stopped else None
    (folder / "stand-in.yaml").write_text(
        yaml.safe_dump(stand_in_config(config, models, default, stopped_promptset=stopped_promptset), sort_keys=False)
    )
    targets = [candidate.outputs[0] for candidate in chosen]
    log(f"stand-in run: {len(chosen)} jobs through the profile, in {folder}")
    started = time.monotonic()
    deadline = started + (timeout if timeout is not None else float("inf"))
    with (folder / "snakemake.log").open("w") as output:
        # The run's output goes to a file: a full pipe would stall it while the stop is steered.
        process = subprocess.Popen(
            [str(Path(sys.executable).with_name("snakemake")), *targets, *profile_arguments]
            + ["--configfile", "stand-in.yaml"],
            cwd=folder,
            env=None if env is None else dict(env),
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        signalled, refused = None, ""
        try:
            if stopped is not None:
                try:
                    signalled = stop_when_saving(process, folder, stopped, env, deadline)
                except RuntimeError as error:
                    refused = str(error)
            process.wait(timeout=max(deadline - time.monotonic(), 0) if timeout is not None else None)
        except BaseException:
            process.kill()
            process.wait()
            raise
    result.seconds = time.monotonic() - started
    result.jobs_run = (folder / "snakemake.log").read_text().count("has been submitted with SLURM jobid")
    for candidate in chosen:
        family = ",".join(families[model] for model in candidate.models) or "-"
        result.outcomes.append(check(candidate, family, folder))
        if candidate is stopped:
            result.stop = check_stop(candidate, family, folder, signalled, refused)
    return result
