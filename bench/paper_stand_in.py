"""The rehearsal's stand-in run over the whole of config/paper.yaml, on the test SLURM.

    .venv/bin/python bench/paper_stand_in.py [WORKDIR]

Starts the test cluster the SLURM tests use (tests/slurm_cluster.py, under their lock), makes
a hub mirror holding each paper base model's repository as the stand-in run reads it (a
config.json of the model's family and the project's tiny tokenizer), and runs
``reprolm rehearse --configfile paper-stand-in.yaml --stand-in`` in a scratch copy of the
workflow. The overlay (``extends: config/paper.yaml``) keeps the paper's DAG, studies and
recipes, but caps each model's requests at what the test node has (2 CPUs, 2 fake GPUs),
generates with transformers (the node has no vLLM) and stands in what only the hub has
(``hub_assets_offline``): the run shows which rule x family x class runs through the profile;
the cluster's judgment of the paper's own requests is the submission table's.
Prints the rehearsal's report; its exit status is the rehearsal's.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import slurm_cluster  # noqa: E402
from reprolm.config.resources import model_settings  # noqa: E402
from reprolm.data.upstream import schema_for_task  # noqa: E402
from reprolm.models.tokenizer import train_bpe_tokenizer  # noqa: E402
from workflow_helpers import scratch_copy, snakemake_env  # noqa: E402

# A hub repository's family, by its owner (and name, where an owner publishes several).
FAMILIES = (
    ("google/gemma-2", "gemma2"),
    ("google/gemma", "gemma"),
    ("Qwen/", "qwen2"),
    ("openai-community/gpt2", "gpt2"),
    ("EleutherAI/pythia", "gpt_neox"),
    ("mistralai/", "mistral"),
    ("HuggingFaceH4/", "mistral"),
    ("alignment-handbook/", "mistral"),
    ("UCLA-AGI/", "mistral"),
    ("Nexusflow/", "mistral"),
    ("openchat/", "mistral"),
    ("berkeley-nest/", "mistral"),
    ("snorkelai/", "mistral"),
    ("weqweasdas/", "mistral"),
    ("internlm/", "internlm2"),
    ("", "llama"),
)
# lm-eval tasks read here from the fixture documents of a task of the same data.
TASK_STAND_INS = {"leaderboard_ifeval": "ifeval", "mmlu": "mmlu_miscellaneous"}
STAGES = ("finetune", "train_before_test", "extrapolate", "generate", "evaluate", "score")
NODE_GPUS = 2
# DeepSpeed on a CPU runs one worker: the trainings' multi-GPU requests become one fake GPU.
ONE_WORKER_STAGES = ("finetune", "train_before_test")


def family(repo: str) -> str:
    return next(model_type for prefix, model_type in FAMILIES if repo.startswith(prefix))


def hub_mirror(config: dict, mirror: Path) -> None:
    from transformers import AutoConfig

    tokenizer = train_bpe_tokenizer([f"word{i} and more text {i * 7}" for i in range(300)], 400)
    repos = {spec["hub"]["path"] for spec in config["base_models"].values() if "hub" in spec}
    repos |= {
        spec["hub"]["chat_template_from"]
        for spec in config["base_models"].values()
        if "hub" in spec and spec["hub"].get("chat_template_from")
    }
    reward_models = {
        config["base_models"][judge["model"].split("/", 1)[0]]["hub"]["path"]
        for judge in config["judges"].values()
        if judge.get("kind") == "reward_model"
        and "hub" in config["base_models"].get(judge["model"].split("/", 1)[0], {})
    }
    for repo in sorted(repos):
        model_type = family(repo)
        if model_type == "internlm2":  # runs its own code: the rehearsal lists it, never stands it in
            continue
        folder = mirror / repo
        tokenizer.save_pretrained(folder)
        # The family's default token ids (GPT-2's 50256) are not in the tiny tokenizer.
        ids = {key: getattr(tokenizer, key) for key in ("bos_token_id", "eos_token_id", "pad_token_id")}
        made = AutoConfig.for_model(model_type, vocab_size=len(tokenizer), **ids)
        if repo in reward_models:  # a reward model's hub config: one output, a classification head
            made.num_labels = 1
            made.architectures = [f"{type(made).__name__.removesuffix('Config')}ForSequenceClassification"]
        (folder / "config.json").write_text(json.dumps(made.to_dict()))


def hub_assets_offline(config: dict, default: dict) -> dict:
    """The overlay's part for what only the hub has and this machine cannot reach: lm-eval's
    task data, the sentence encoder and NLTK's data. Each lm-eval task (suites and
    train-before-test) reads the embedded default's fixture documents of its schema, or is left
    out where its schema has none; diversity takes the packaged encoder and the paper's
    definition (the original's needs NLTK's punkt_tab); no suite fetches NLTK data. On a
    cluster with the hub the stand-in run downloads them as the real run will."""
    docs = {spec["schema"]: name for name, spec in default["sources"].items() if name.endswith("_docs")}

    def local(task: dict) -> dict | None:
        name = TASK_STAND_INS.get(task["task"], task["task"])
        schema = schema_for_task(name)
        if schema is None or schema.name not in docs:
            return None
        return {**task, "task": name, "source": docs[schema.name]}

    suites = {}
    for name, suite in config["lm_eval_suites"].items():
        tasks = [made for made in map(local, suite["tasks"]) if made]
        suites[name] = {**suite, "tasks": tasks, "nltk_data": []}
    return {
        "sources": {name: default["sources"][name] for name in docs.values()},
        "lm_eval_suites": suites,
        # Its table needs the leaderboard's own tasks, none of which has fixture documents.
        "expo": {"leaderboard_v2_suite": None},
        "harmony": {"tasks": [made for made in map(local, config["harmony"]["tasks"]) if made]},
        "metrics": {"diversity": {"compat": "paper", "encoder": "packaged"}},
    }


def capped(config: dict) -> dict:
    """The overlay: every model's requests within the test node, transformers generations."""
    bases = {}
    for base in config["base_models"]:
        stages = {}
        for stage in STAGES:
            gpus = model_settings(config, base, stage)["gpus"]
            cap = 1 if stage in ONE_WORKER_STAGES else NODE_GPUS
            stages[stage] = {"gpus": min(gpus, cap), "cpus_per_gpu": 1, "threads": 1, "mem_mb": 1500}
        bases[base] = {"resources": stages}
    return {
        "generation": {"backend": "transformers"},
        "resources": {
            "default": {
                "slurm_partition": slurm_cluster.GPU_PARTITION,
                "gpu_model": slurm_cluster.GPU_TYPE,
                # The paper's models on 2 GPUs would not fit real ones; the stand-ins fit anything.
                "gpu_mem_gb": 10000,
                "mem_mb": 1500,
            }
        },
        "base_models": bases,
    }


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="reprolm-paper-stand-in-"))
    work = scratch_copy(root / "work")
    paper = yaml.safe_load((work / "config" / "paper.yaml").read_text())
    default = yaml.safe_load((work / "config" / "config.yaml").read_text())
    # An overlay of paper.yaml (`extends`), so that a key set to null is left out.
    overlay = {"extends": "config/paper.yaml", **capped(paper), **hub_assets_offline(paper, default)}
    (work / "paper-stand-in.yaml").write_text(yaml.safe_dump(overlay, sort_keys=False))
    hub_mirror(paper, root / "hub")
    with open("/tmp/reprolm-slurm-tests.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cluster = slurm_cluster.start()
        try:
            env = {k: v for k, v in snakemake_env(work).items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
            command = [sys.executable, "-m", "reprolm.cli", "rehearse", "--configfile", "paper-stand-in.yaml"]
            command += ["--workflow-profile", "profiles/slurm"]
            command += [
                "--profile",
                str(REPO / "tests" / "slurm_profile_test"),
                "--stand-in",
                "--hub-mirror",
                str(root / "hub"),
            ]
            print(f"in {work}: {' '.join(command)}", flush=True)
            return subprocess.run(command, cwd=work, env={**env, **cluster.env, **{"PYTHONUNBUFFERED": "1"}}).returncode
        finally:
            slurm_cluster.stop(cluster)
            os.sync()


if __name__ == "__main__":
    sys.exit(main())
