"""The paper configuration's DAG, built offline as a dry run; lint and format."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from doc_commands import doc_command, run_printed
from workflow_helpers import JOB_HEADER, REPO, dry_run_details, job_counts, local_rules, scratch_copy, snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.beside_slurm]


@pytest.fixture(scope="module")
def paper_details(tmp_path_factory) -> list:
    """Every job of a dry run of config/paper.yaml in a scratch copy, with its inputs (made
    once, read by the tests of this module)."""
    work = scratch_copy(tmp_path_factory.mktemp("paper"))
    return dry_run_details(work, "--configfile", "config/paper.yaml")


@pytest.fixture(scope="module")
def paper_jobs(paper_details) -> list:
    return [(job.rule, job.wildcards) for job in paper_details]


def test_paper_config_builds_the_full_ruler_dag_offline(paper_jobs, paper_details):
    jobs = paper_jobs
    paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    bases = paper["ruler"]["bases"]
    baselines = [b for b in paper["ruler"]["baselines"] if "hub" in paper["base_models"][b]]
    closed = [b for b in paper["ruler"]["baselines"] if "endpoint" in paper["base_models"][b]]
    tlg_only = paper["ruler"]["tlg_only"]
    assert len(bases) == 6 and len(baselines) == 16 and len(tlg_only) == 10 and set(tlg_only) <= set(baselines)
    # The closed baselines (GPT-4o, GPT-4 Turbo, GPT-3.5 Turbo, Claude 3 Haiku, Claude 3.5
    # Sonnet): nothing downloaded, finetuned or run through lm-eval; their TLG generations
    # (a local rule, run on the submitting host) hold an API request each and are scored
    # like the others'.
    assert len(closed) == 5
    asked = [job for job in paper_details if job.wildcards.get("base") in closed]
    assert sorted((job.rule, job.wildcards.get("metric"), job.wildcards["base"]) for job in asked) == sorted(
        [("generate_api", None, b) for b in closed] + [("score", "length_levels", b) for b in closed]
    )
    assert {job.wildcards["promptset"] for job in asked} == {"tlg"}
    for job in asked:
        if job.rule == "generate_api":
            assert job.inputs == ["results/datasets/tlg/test.parquet"]
            assert job.resources.get("api_requests") == "1" and "gpu" not in job.resources
    finetunes = sorted(
        (w["base"], w["recipe"]) for rule, w in jobs if rule == "finetune" and w["recipe"] in ("ruler", "vanilla")
    )
    assert finetunes == sorted((b, r) for b in bases for r in ("ruler", "vanilla"))
    counts = job_counts(jobs)
    ruler_models = {w["base"] for rule, w in jobs if rule == "download_base_model"} & set(bases + baselines)
    assert ruler_models == set(bases + baselines) and "build_base_model" not in counts
    # 12 finetuned + 16 open baselines asked the TLG set, the baselines again with the
    # original's doubled BOS; multi-MLT for the 12 and the 6 instruct baselines, self-MLT for
    # Ruler models.
    ruler_promptsets = {e["promptset"] for e in paper["ruler"]["evaluations"]}
    generated = job_counts(
        [(w["promptset"], w) for rule, w in jobs if rule == "generate" and w["promptset"] in ruler_promptsets]
    )
    assert generated == {"tlg": 12 + 16, "tlg_doubled_bos": 16, "multi_mlt": 18, "self_mlt": 6}
    doubled = {w["base"] for rule, w in jobs if rule == "generate" and w["promptset"] == "tlg_doubled_bos"}
    assert doubled == set(baselines)
    ruler_lm_evals = [
        w
        for rule, w in jobs
        if rule == "lm_eval" and w["suite"] == "general" and w["base"] in ruler_models - set(tlg_only)
    ]
    assert len(ruler_lm_evals) == 18
    # The TLG-only baselines get no lm-eval run from Ruler (InternLM2's come from ExPO).
    tlg_only_lm_evals = {w["base"] for rule, w in jobs if rule == "lm_eval" and w["base"] in tlg_only}
    assert tlg_only_lm_evals <= set(paper["expo"]["bases"])
    ruler_sources = {"openhermes", "longform", "eli5", "arena_hard"}
    assert ruler_sources <= {w["source"] for rule, w in jobs if rule == "raw_source"}
    ruler_datasets = {"tlg", "ruler_train", "arena_multi_mlt", "arena_self_mlt"}
    assert ruler_datasets <= {w["dataset"] for rule, w in jobs if rule == "dataset"}
    # GEM: Llama-3-8B's three recipes on UltraFeedback, Qwen2.5-Math's on NuminaMath-CoT.
    gem_recipes = set(paper["gem"]["recipes"]) | {r for rs in paper["gem"]["recipes_by_base"].values() for r in rs}
    gem_finetunes = {(w["base"], w["recipe"]) for rule, w in jobs if rule == "finetune" and w["recipe"] in gem_recipes}
    assert gem_finetunes == {("llama3_8b_gem", r) for r in ("ce", "gem_linear", "gem_logsigmoid")} | {
        ("qwen25_math_7b", r) for r in ("ce_numina", "gem_linear_numina", "gem_logsigmoid_numina")
    }
    assert {w["base"] for rule, w in jobs if rule == "lm_eval" and w["suite"] == "ifeval"} == set(paper["gem"]["bases"])
    assert {w["source"] for rule, w in jobs if rule == "raw_source"} >= {
        "ultrafeedback_sft",
        "numina_cot",
        "poem_prompts",
    }


def test_paper_config_builds_the_full_harmony_grid_and_the_expo_models_offline(paper_jobs):
    jobs = paper_jobs
    paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    harmony = paper["harmony"]
    assert len(harmony["bases"]) == 61 and len(harmony["tasks"]) == 24
    grid = {(w["base"], w["task"]) for rule, w in jobs if rule == "train_before_test"}
    assert grid == {(b, t["name"]) for b in harmony["bases"] for t in harmony["tasks"]}
    assert job_counts(jobs)["train_before_test"] == 61 * 24
    # ExPO's published models: each aligned hub model extrapolated away from its SFT model,
    # the seed's 12 pairs at their model cards' alphas among them.
    extrapolated = {(w["base"], w["recipe"], w["alpha"]) for rule, w in jobs if rule == "extrapolate"}
    expo = paper["expo"]
    published = {(*pair.split("/"), f"{alpha:g}") for pair, alpha in expo["card_alphas"].items()}
    assert len(published) == 14 and ("starling_7b_alpha", "pretrained", "0.2") in published
    grid = {(b, "pretrained", f"{a:g}") for b in expo["bases"] for a in expo["alpha_search"]["alphas"]}
    assert extrapolated == published | grid
    evaluated = {(w["base"], w["recipe"]) for rule, w in jobs if rule == "lm_eval" and "+expo" in w["recipe"]}
    assert evaluated == {(base, f"{recipe}+expo{alpha}") for base, recipe, alpha in published}
    downloads = {w["base"] for rule, w in jobs if rule == "download_base_model"}
    assert set(paper["extrapolation"]["base_references"].values()) | {"rm_mistral_7b"} <= downloads
    # The alpha search: every grid point and each original graded by the original code's
    # reward model.
    assert {(w["base"], w["recipe"]) for rule, w in jobs if rule == "alpha_search"} == {
        (b, "pretrained") for b in expo["bases"]
    }
    graded = {
        (w["judge"], w["base"], w["recipe"], w["promptset"])
        for rule, w in jobs
        if rule == "grade" and w["promptset"] == "expo_search"
    }
    searched = {"pretrained"} | {f"pretrained+expo{a:g}" for a in expo["alpha_search"]["alphas"]}
    assert expo["judge"] == "expo_rm" and paper["judges"]["expo_rm"]["model"] == "rm_mistral_7b/pretrained"
    assert graded == {("expo_rm", b, r, "expo_search") for b in expo["bases"] for r in searched}
    # MT-Bench graded as FastChat does (GPT-4, its judge prompts: a source of their own),
    # AlpacaEval through its package (GPT-4 Turbo's weighted verdicts; length control reads
    # the pinned df_gamed.csv, a source of its own). Those jobs follow the alpha search's
    # checkpoint, so the dry run does not list them yet: the study's own lookups are checked.
    from reprolm.config.lookups import judge_files
    from reprolm.studies.expo import evaluation_scores

    scores = evaluation_scores(paper, "starling_7b_beta", "pretrained", 0.3)
    assert "results/scores/grade_gpt4_mt_bench/starling_7b_beta/pretrained+expo0.3/mt_bench.json" in scores
    assert "results/scores/win_rate_alpaca_eval_gpt4_turbo/starling_7b_beta/pretrained/alpaca_eval.json" in scores
    assert judge_files(paper, "alpaca_eval_gpt4_turbo") == {"length_control": "resources/raw/alpaca_eval_gamed"}
    alpaca_eval_judge = paper["judges"]["alpaca_eval_gpt4_turbo"]
    assert (alpaca_eval_judge["kind"], alpaca_eval_judge["annotator"]) == (
        "alpaca_eval",
        "weighted_alpaca_eval_gpt4_turbo",
    )
    # One answer per instruction, each of the 805 in AlpacaEval's order (the prompt id is the
    # instruction's position, which its length control reads).
    assert paper["promptsets"]["alpaca_eval"]["sampling"].get("n", 1) == 1
    assert "num" not in paper["datasets"]["alpaca_eval"].get("params", {})
    assert judge_files(paper, "gpt4_mt_bench") == {"judge_prompts": "resources/raw/fastchat_judge_prompts"}
    assert paper["judges"]["gpt4_mt_bench"]["model"] == "gpt-4"


def test_paper_config_makes_the_models_of_each_papers_effect_claim(paper_jobs):
    """The claims name their models through config: paper.yaml's are the papers' (Ruler vs
    vanilla per base, GEM vs CE, ExPO vs the aligned model per pair, FLR vs chance,
    Harmony's tau gain), and the DAG makes the models each compares."""
    from reprolm.aggregate.paper_comparison import claim_settings, expand_directions, load_headlines
    from reprolm.config import overlays

    paper = overlays.load(REPO / "config/paper.yaml", REPO)
    headlines = REPO / "config/paper_headlines.yaml"
    claims = expand_directions(
        load_headlines(headlines)["directions"], claim_settings(paper, headlines, {})["lists"], str(headlines)
    )
    finetuned = {f"{w['base']}/{w['recipe']}" for rule, w in paper_jobs if rule == "finetune"}
    generated = {(f"{w['base']}/{w['recipe']}", w["promptset"]) for rule, w in paper_jobs if rule == "generate"}
    ruler = [claim for claim in claims if claim["study"] == "ruler"]
    assert len(ruler) == len(paper["ruler"]["bases"]) == 6
    assert all({claim["higher"]["model"], claim["lower"]["model"]} <= finetuned for claim in ruler)
    expo = [claim["higher"]["model"] for claim in claims if claim["study"] == "expo"]
    assert len(expo) == 14 and all((model, paper["expo"]["win_rate"]) in generated for model in expo)
    gem = [claim for claim in claims if claim["study"] == "gem"]
    assert [claim["higher"]["base"] for claim in gem] == paper["gem"]["bases"] * 2
    # Llama-3-8B's poems and stories are sampled; Qwen2.5-Math's are not (its recipes are the
    # NuminaMath ones, evaluated on GSM8K only): its diversity claims are reported not made.
    assert {("llama3_8b_gem/gem_linear", "poems"), ("llama3_8b_gem/ce", "stories")} <= generated
    assert not any(model.startswith("qwen25_math_7b/") and p in ("poems", "stories") for model, p in generated)
    assert {claim["study"] for claim in claims} == {"ruler", "gem", "expo", "flr", "harmony"}
    assert ("paper_comparison", {}) in paper_jobs


def test_cluster_jobs_find_what_they_would_fetch_from_a_hub_made_by_local_rules(paper_details):
    """Compute nodes may have no internet. Every hub artifact a submitted job reads is an
    input made by a local rule (run on the submitting host): model checkpoints, raw
    datasets, the lm-eval tasks' datasets, IFEval's NLTK data and GEM's sentence encoder."""
    paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    local = local_rules(REPO / "config" / "paper.yaml")
    assert {"raw_source", "download_base_model", "lm_eval_task_data", "nltk_data", "download_hub_model"} <= local
    assert "generate_api" in local and "generate" not in local
    made_by = {path: job.rule for job in paper_details for path in job.outputs}
    submitted = [job for job in paper_details if job.rule not in local]
    for job in submitted:
        needs = set()
        if job.rule == "train_before_test":
            task = next(t for t in paper["harmony"]["tasks"] if t["name"] == job.wildcards["task"])
            needs.add(f"resources/lm_eval_data/{task['task']}")
        if job.rule == "lm_eval":
            tasks = paper["lm_eval_suites"][job.wildcards["suite"]]["tasks"]
            needs |= {f"resources/lm_eval_data/{t['task']}" for t in tasks if not t.get("source")}
            needs |= {"resources/nltk_data/punkt_tab"} if any(t["task"] == "ifeval" for t in tasks) else set()
        if job.rule == "score" and job.wildcards["metric"] == "diversity":
            needs.add("resources/hub_models/sentence-transformers--bert-large-nli-stsb-mean-tokens")
            # The original's text: the generating model's chat template, NLTK's word tokens.
            needs |= {
                "resources/nltk_data/punkt_tab",
                f"results/models/{job.wildcards['base']}/{job.wildcards['recipe']}",
            }
        assert needs <= set(job.inputs), (job.rule, job.wildcards, needs - set(job.inputs))
        for path in job.inputs:
            hub_made = path.startswith(
                ("resources/raw/", "resources/lm_eval_data/", "resources/nltk_data/", "resources/hub_models/")
            ) or path.startswith("resources/models/")
            if hub_made and path in made_by:
                assert made_by[path] in local, (job.rule, path, made_by[path])
    kinds = {job.rule for job in submitted}
    assert {"train_before_test", "lm_eval", "score", "finetune", "generate"} <= kinds
    assert sum(job.rule == "lm_eval_task_data" for job in paper_details) >= len(paper["harmony"]["tasks"])


def test_lint_and_format_are_clean(tmp_path):
    work = scratch_copy(tmp_path)
    lint = snakemake(work, "--lint", check=False)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    import subprocess
    import sys

    tools = Path(sys.executable).parent
    # snakefmt on the copy's workflow; ruff on the checkout itself, whose pyproject.toml it reads.
    for command, folder in (
        (["snakefmt", "--check", "workflow"], work),
        (["ruff", "check", "--no-cache", "."], REPO),
        (["ruff", "format", "--check", "--no-cache", "."], REPO),
    ):
        result = subprocess.run([str(tools / command[0]), *command[1:]], cwd=folder, capture_output=True, text=True)
        assert result.returncode == 0, result.stdout + result.stderr


def _threads_by_job(output: str) -> dict[tuple[str, str], int]:
    """(rule, wildcards line) -> threads, from a dry run's job descriptions (1 when unlisted)."""
    jobs: dict[tuple[str, str], int] = {}
    rule = wildcards = None
    for line in output.splitlines():
        header = JOB_HEADER.match(line)
        if header:
            rule, wildcards = header.group(1), ""
        elif rule and line.lstrip().startswith("wildcards: "):
            wildcards = line.split(": ", 1)[1]
            jobs[(rule, wildcards)] = 1
        elif rule and line.lstrip().startswith("threads: "):
            jobs[(rule, wildcards)] = int(line.split(": ", 1)[1])
    return jobs


@pytest.mark.doc_command("make slurm-profile")
def test_profile_slurm_as_typed_asks_for_every_cpu_the_config_gives(tmp_path):
    """`make slurm-profile` registers the profile, and `snakemake --profile slurm` from the
    repository root finds it; Snakemake then also loads profiles/default as the workflow
    profile, which therefore sets no `cores` (Snakemake caps remote jobs' threads by it).
    GPU jobs without `threads` get `cpus_per_gpu` (8) per GPU, so a 4-GPU DeepSpeed finetune
    is not left one CPU. A dry run without --cores shows every job at 1 thread, so the
    threads are read from one given the cores of a large node."""
    import subprocess

    from workflow_helpers import SNAKEMAKE, snakemake_env

    work = scratch_copy(tmp_path / "work")
    env = {**snakemake_env(work), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    registered = run_printed("make slurm-profile", REPO, env={"XDG_CONFIG_HOME": env["XDG_CONFIG_HOME"]})
    assert registered.returncode == 0 and registered.stdout.strip() == "slurm", registered.stderr
    assert (tmp_path / "xdg/snakemake/slurm").resolve() == REPO / "profiles" / "slurm"
    assert "cores" not in yaml.safe_load((REPO / "profiles/default/config.yaml").read_text())
    targets = [
        "results/scores/train_before_test/qwen1_5_14b_chat/pretrained/winogrande.json",
        "results/models/yi15_6b/vanilla",
    ]
    # GPU jobs on no partition of their own are refused through the SLURM executor.
    gpu_partition = ["--set-resources", "finetune:slurm_partition=gpu", "train_before_test:slurm_partition=gpu"]
    runs = {}
    for cores in ([], ["--cores", "64"]):
        result = subprocess.run(
            [SNAKEMAKE, "-n", "--profile", "slurm", *cores, *gpu_partition, "--configfile", "config/paper.yaml", "--"]
            + targets,
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        runs[bool(cores)] = result.stdout + result.stderr
        assert result.returncode == 0, runs[bool(cores)][-4000:]
    assert "Using profiles slurm and workflow specific profile profiles/default" in runs[False]
    threads = _threads_by_job(runs[True])
    assert threads[("train_before_test", "base=qwen1_5_14b_chat, recipe=pretrained, task=winogrande")] == 16
    assert threads[("finetune", "base=yi15_6b, recipe=vanilla")] == 4 * 8
    # A second registration finds its own link and changes nothing.
    again = subprocess.run(
        ["bash", str(REPO / "scripts/register-slurm-profile.sh")], env=env, capture_output=True, text=True, check=True
    )
    assert again.stdout.strip() == "slurm"


def test_paper_requests_one_node_for_multi_gpu_jobs_a_gpu_for_encoder_scores_and_sizes_builds_by_their_data(
    paper_details,
):
    """What the dry run asks SLURM for: 4-GPU finetunes on one node; one-GPU generations with no
    node count, the 32-34B models' 2-GPU and the 67-72B models' 4-GPU generations on one node; GEM's diversity scores
    (bert-large) on a GPU, other scores on a CPU; dataset builds sized once their raw data
    exists (<TBD> until it is downloaded)."""
    finetunes = [job.resources for job in paper_details if job.rule == "finetune"]
    assert finetunes and all((r["gpu"], r["nodes"]) == ("4", "1") for r in finetunes if r["gpu"] == "4")
    assert {r["gpu"] for r in finetunes} == {"4"}
    generations = [job.resources for job in paper_details if job.rule == "generate"]
    assert generations and all(r.get("nodes", "None") == "None" for r in generations if r["gpu"] == "1")
    assert all(r["nodes"] == "1" for r in generations if r["gpu"] != "1")
    assert {r["gpu"] for r in generations} == {"1", "2", "4"}
    scores = {
        (job.wildcards["metric"], job.resources["gpu"], job.resources["mem_mb"], job.resources["runtime"])
        for job in paper_details
        if job.rule == "score"
    }
    assert ("diversity", "1", "32000", "120") in scores
    assert {gpu for metric, gpu, _, _ in scores if metric != "diversity"} == {"0"}
    builds = [job.resources for job in paper_details if job.rule == "dataset"]
    assert builds and all(r["mem_mb"] == "<TBD>" and r["runtime"] == "<TBD>" for r in builds)


# The rules that read the internet (download.smk's local rules but local_base_model).
REMOTE_RULES = {
    "download_base_model",
    "raw_source",
    "lm_eval_task_data",
    "download_hub_model",
    "nltk_data",
    "released_file",
}


# The `reprolm lock` commands README.md and docs/cluster.md print.
LOCK = "reprolm lock --configfile config/paper.yaml"
LOCK_CHECK = "reprolm lock --configfile config/paper.yaml --check"


@pytest.mark.doc_command(LOCK)
@pytest.mark.doc_command(LOCK_CHECK)
def test_the_lock_covers_every_remote_input_of_the_paper_dag(paper_details, tmp_path, monkeypatch, capsys):
    """README's (and docs/cluster.md's) `reprolm lock` commands, run as printed against the
    hub and file-server stand-ins (tests/hub_standin.py): the lock pins every remote input
    that a job of the paper DAG fetches, as the DAG names it."""
    import shlex

    from hub_standin import NLTK_INDEX, FileServerStandIn, HubAPIStandIn, nltk_index
    from reprolm import lock
    from reprolm.cli import main
    from reprolm.config import lookups, overlays
    from reprolm.data import released_ratings

    paper = overlays.load(REPO / "config/paper.yaml", REPO)
    shipped = lock.read_lock(REPO / "config/paper.lock.yaml")
    # As shipped: only the commits public sources give (those in paper.yaml's own URLs).
    assert shipped and all(entry["public"] and entry["revision"] in entry["url"] for entry in shipped.values())
    assert lock.unlocked(paper, shipped) == list(lock.remote_inputs(paper))

    work = tmp_path / "work"
    (work / "config").mkdir(parents=True)
    for name in ("paper.yaml", "paper.lock.yaml", "paper_headlines.yaml"):
        (work / "config" / name).write_text((REPO / "config" / name).read_text())
    monkeypatch.chdir(work)
    HubAPIStandIn(monkeypatch, {}, any_repo=True)
    punkt = "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/tokenizers/punkt_tab.zip"
    files = FileServerStandIn(monkeypatch, {NLTK_INDEX: nltk_index("punkt_tab", punkt)}, any_url=True)
    make, check = doc_command(LOCK), doc_command(LOCK_CHECK)
    assert main(shlex.split(make)[1:]) == 0
    gets = len(files.gets)
    assert main(shlex.split(check)[1:]) == 0 and len(files.gets) == gets
    assert "0 moved, 0 not locked" in capsys.readouterr().err
    entries = lock.read_lock(work / "config/paper.lock.yaml")

    released = [
        file
        for name, spec in paper["sources"].items()
        if "released" in spec
        for file in released_ratings.released_files(name, spec)
    ]
    needed: dict[str, set[str]] = {}
    for job in paper_details:
        wildcards = job.wildcards
        if job.rule == "download_base_model":
            hub = paper["base_models"][wildcards["base"]]["hub"]
            keys = {lock.RemoteInput("model", hub["path"], hub.get("revision")).key}
            if hub.get("chat_template_from"):
                keys.add(lock.RemoteInput("model", hub["chat_template_from"]).key)
        elif job.rule == "raw_source":
            hub = paper["sources"][wildcards["source"]].get("hub")
            if hub is None:
                continue
            urls = [
                url
                for value in (hub.get("data_files") or {}).values()
                for url in ([value] if isinstance(value, str) else value)
            ]
            keys = {lock.RemoteInput("url", url).key for url in urls}
            if "/" in hub["path"]:
                keys.add(lock.RemoteInput("dataset", hub["path"], hub.get("revision")).key)
        elif job.rule == "lm_eval_task_data":
            keys = {lock.RemoteInput("lm_eval_task", wildcards["task"]).key}
        elif job.rule == "download_hub_model":
            repo = lookups.hub_model_repo(paper, f"resources/hub_models/{wildcards['repo']}")
            keys = {lock.RemoteInput("model", repo).key}
        elif job.rule == "nltk_data":
            keys = {lock.RemoteInput("nltk", wildcards["package"]).key}
        elif job.rule == "released_file":
            # Pinned by its published checksum, or else by the lock.
            (file,) = [file for file in released if file.path == job.outputs[0]]
            keys = set() if file.checksum else {lock.RemoteInput("url", file.url).key}
        else:
            continue
        needed.setdefault(job.rule, set()).update(keys)
    assert set(needed) == REMOTE_RULES
    every = set().union(*needed.values())
    assert len(needed["download_base_model"]) > 90 and len(needed["lm_eval_task_data"]) == 34
    assert [key for key in sorted(every) if not lock.is_locked(key, entries)] == []
    # The lm-eval tasks' own datasets each locked too (lm-eval's mmlu group: one hub dataset).
    assert entries["lm_eval_task mmlu"]["datasets"] == ["dataset cais/mmlu"]
    assert lock.is_locked("dataset cais/mmlu", entries)


def test_paper_measures_each_successor_on_the_released_verdicts_and_grades(paper_jobs):
    """AlpacaEval's successor re-judges GPT-4 Turbo's released verdicts; MT-Bench's grades
    the answers of GPT-4's released single-answer grades (FastChat's gpt-4_single.jsonl)."""
    released = {(rule, w["judge"], w["retired"]) for rule, w in paper_jobs if rule.startswith("judge_released")}
    assert released == {
        ("judge_released_api", "alpaca_eval_gpt4o_mini", "alpaca_eval_gpt4_turbo"),
        ("judge_released_grades_api", "gpt41_mt_bench", "gpt4_mt_bench"),
    }
