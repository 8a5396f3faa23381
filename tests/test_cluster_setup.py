"""A cluster run's set-up on the submitting host: the hub token of the documented login, and GPU
jobs refused before any submission when they would run on the CPU jobs' partition."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from reprolm.config.resources import check_gpu_routing
from reprolm.errors import ConfigError
from reprolm.hub_token import hub_environment
from workflow_helpers import REPO, SNAKEMAKE, dry_run_details, scratch_copy, snakemake_env

# A made-up token in the format of the hub's user tokens.
TOKEN = "hf_reprolmTestTokenNeverReal0123456789"
# Variables that would tell huggingface_hub where the token or the HF home is.
HUB_VARIABLES = ("HF_HOME", "HF_TOKEN", "HF_TOKEN_PATH", "XDG_CACHE_HOME")


def logged_in_home(home: Path) -> Path:
    """A home where `huggingface-cli login` saved TOKEN (its default HF home)."""
    token = home / ".cache" / "huggingface" / "token"
    token.parent.mkdir(parents=True)
    token.write_text(TOKEN)
    return token


def user_environment(home: Path, **variables: str) -> dict:
    """This process's environment as a user's shell with ``home`` would have it: no hub
    variables but ``variables``."""
    env = {key: value for key, value in os.environ.items() if key not in HUB_VARIABLES}
    return {**env, "HOME": str(home), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **variables}


def test_hub_environment_points_at_the_login_token_only_where_nothing_else_names_one(tmp_path):
    token = logged_in_home(tmp_path / "home")
    project = str(tmp_path / "project" / "hf_home")
    env = {"HOME": str(tmp_path / "home")}
    assert hub_environment(env, project) == {"HF_HOME": project, "HF_TOKEN_PATH": str(token)}
    # huggingface_hub's own order: XDG_CACHE_HOME before HOME.
    moved = {"HOME": "/nonexistent", "XDG_CACHE_HOME": str(tmp_path / "home" / ".cache")}
    assert hub_environment(moved, project)["HF_TOKEN_PATH"] == str(token)
    # A token given otherwise wins; an HF_HOME of the user's own is kept, with its token.
    assert hub_environment({**env, "HF_TOKEN": "x"}, project) == {"HF_HOME": project}
    assert hub_environment({**env, "HF_TOKEN_PATH": "/elsewhere"}, project) == {"HF_HOME": project}
    assert hub_environment({**env, "HF_HOME": "/mine"}, project) == {}
    # No login: nothing pointed at, so a login made with the project's HF_HOME is found there.
    assert hub_environment({"HOME": str(tmp_path / "nobody")}, project) == {"HF_HOME": project}


# A job of the workflow's environment set-up (common.smk with the default config, composed as
# the Snakefile composes it) that reads the token as every job's library code would, inside the
# project's tracked step.
PROBE_RULES = """\
from reprolm.config import overlays

config.update(overlays.load("config/config.yaml"))


include: "rules/common.smk"


rule hub_token_probe:
    output:
        "probe/token.txt",
    log:
        "logs/probe.log",
    script:
        "scripts/hub_token_probe.py"
"""
PROBE_SCRIPT = """\
from pathlib import Path

import huggingface_hub

from reprolm.provenance.records import tracked_step

with tracked_step(snakemake) as log:
    token = huggingface_hub.get_token()
    log.info("hub token found: %s", token is not None)
    Path(snakemake.output[0]).write_text(token or "")
"""


@pytest.mark.workflow
def test_a_login_token_in_the_users_home_reaches_the_workflows_jobs_and_no_record(tmp_path):
    """`huggingface-cli login` writes ~/.cache/huggingface/token; the workflow moves HF_HOME
    to resources/hf_home, and its jobs still find the token, which no log or provenance
    record holds."""
    work = scratch_copy(tmp_path / "work")
    (work / "workflow" / "probe.smk").write_text(PROBE_RULES)
    (work / "workflow" / "scripts" / "hub_token_probe.py").write_text(PROBE_SCRIPT)
    logged_in_home(tmp_path / "home")
    result = subprocess.run(
        [SNAKEMAKE, "--cores", "1", "--snakefile", "workflow/probe.smk", "hub_token_probe"],
        cwd=work,
        env=user_environment(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (work / "probe" / "token.txt").read_text() == TOKEN
    assert "hub token found: True" in (work / "logs" / "probe.log").read_text()
    written = [work / "probe" / "token.txt.provenance.json", work / "logs" / "probe.log"]
    written += list((work / ".snakemake" / "log").glob("*.log"))
    assert len(written) > 2
    for path in written:
        assert TOKEN not in path.read_text(), path
    assert TOKEN not in result.stdout + result.stderr


def test_the_makefile_points_at_the_login_token_of_the_users_hf_home(tmp_path):
    token = logged_in_home(tmp_path / "home")
    show = ["make", "-s", "-C", str(REPO), "--eval", "hf-env: ; @echo $$HF_TOKEN_PATH $$HF_HOME", "hf-env"]

    def shown(**variables):
        env = user_environment(tmp_path / "home", **variables)
        return subprocess.run(show, env=env, capture_output=True, text=True, check=True).stdout.split()

    assert shown() == [str(token), str(REPO / "resources" / "hf_home")]
    assert shown(HF_TOKEN="x") == [str(REPO / "resources" / "hf_home")]
    # An HF_HOME of the user's own (which the Makefile replaces) is where their login went.
    mine = tmp_path / "mine"
    (mine / "token").parent.mkdir()
    (mine / "token").write_text(TOKEN)
    assert shown(HF_HOME=str(mine))[0] == str(mine / "token")


GPU_CONFIG = {
    "base_models": {
        "big": {"resources": {"finetune": {"gpus": 4}, "generate": {"gpus": 1, "slurm_partition": "gpu"}}},
        "small": {"resources": {"generate": {"gpus": 1}}},
    },
    "resources": {},
}


def test_gpu_jobs_without_a_partition_of_their_own_are_refused_naming_the_key():
    # No partition anywhere: SLURM's default, where the CPU jobs go.
    with pytest.raises(ConfigError, match=r"^resources\.finetune\.slurm_partition \(or base_models\.big\.resources"):
        check_gpu_routing(GPU_CONFIG, "big", "finetune", None)
    # The profile's CPU partition is no GPU partition either.
    with pytest.raises(ConfigError, match="would run on 'cpu', the CPU jobs' partition"):
        check_gpu_routing(GPU_CONFIG, "big", "finetune", "cpu")
    # A stage the config routes drops the profile's partition: small's generate gets none.
    with pytest.raises(ConfigError, match=r"base_models\.small\.resources\.generate\.slurm_partition"):
        check_gpu_routing(GPU_CONFIG, "small", "generate", "cpu")
    check_gpu_routing(GPU_CONFIG, "big", "generate", "cpu")
    check_gpu_routing(GPU_CONFIG, "big", "generate", None)
    # A rule's --set-resources partition is the job's.
    check_gpu_routing(GPU_CONFIG, "big", "finetune", "cpu", rule_partition="gpu")
    with pytest.raises(ConfigError):
        check_gpu_routing(GPU_CONFIG, "big", "finetune", "cpu", rule_partition="cpu")
    # CPU jobs go anywhere.
    check_gpu_routing(GPU_CONFIG, "big", "evaluate", None)


FINETUNE = "results/models/yi15_6b/vanilla"


def paper_dry_run(work: Path, *args: str) -> subprocess.CompletedProcess:
    """A dry run of one paper finetune (4 GPUs) and what it needs, through the SLURM executor."""
    return subprocess.run(
        [SNAKEMAKE, "-n", "--executor", "slurm", "--jobs", "10", *args, "--", FINETUNE],
        cwd=work,
        env=snakemake_env(work),
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.workflow
def test_a_cluster_dry_run_of_paper_yaml_refuses_unrouted_gpu_jobs_and_passes_routed_ones(tmp_path):
    """As shipped (no partition in config or profile), the SLURM executor's dry run refuses
    the finetune naming the key; with the GPU stage routed to its own partition it passes.
    A local dry run of the same config is never refused (tests/test_paper_dag.py)."""
    work = scratch_copy(tmp_path / "work")
    refused = paper_dry_run(work, "--configfile", "config/paper.yaml")
    assert refused.returncode != 0
    output = refused.stdout + refused.stderr
    assert (
        "resources.finetune.slurm_partition (or base_models.yi15_6b.resources.finetune.slurm_partition): "
        "yi15_6b's finetune jobs ask for 4 GPU(s) and would run without a partition" in output
    ), output[-3000:]
    routed = yaml.safe_load((work / "config" / "paper.yaml").read_text())
    routed.setdefault("resources", {}).setdefault("finetune", {})["slurm_partition"] = "gpu"
    (work / "config" / "routed.yaml").write_text(yaml.safe_dump(routed, sort_keys=False))
    passed = paper_dry_run(work, "--configfile", "config/routed.yaml", "--default-resources", "slurm_partition=cpu")
    assert passed.returncode == 0, (passed.stdout + passed.stderr)[-3000:]
    assert "rule finetune:" in passed.stdout and "slurm_partition=gpu" in passed.stdout


def docs_routing() -> dict:
    """The routing docs/cluster.md's step 4 has a researcher add to their copy of paper.yaml."""
    page = (REPO / "docs" / "cluster.md").read_text()
    step = page[page.index("### 4. Where model jobs go") :]
    return yaml.safe_load(step[step.index("```yaml") + len("```yaml") : step.index("```", step.index("```yaml") + 7)])


CPU_SCORE = "results/scores/length_levels/llama3_8b_instruct/pretrained/tlg.json"
GPU_SCORE = "results/scores/diversity/llama3_8b_gem/ce/stories.json"


@pytest.mark.workflow
def test_the_docs_routing_sends_gpu_score_jobs_to_the_gpu_partition_and_keeps_cpu_ones_on_the_profiles(tmp_path):
    """paper.yaml routed as docs/cluster.md's step 4 shows, through the SLURM executor with
    the CPU jobs' partition in the profile's default-resources: the diversity score (a GPU)
    goes to the score stage's partition, a length score (no GPU) keeps the CPU partition
    although `resources.score` names one, and so do the CPU jobs of routed stages (the
    merges), which the `default` block's GPU model and partition never reach."""
    work = scratch_copy(tmp_path / "work")
    routed = yaml.safe_load((work / "config" / "paper.yaml").read_text())
    for stage, settings in docs_routing()["resources"].items():
        routed["resources"].setdefault(stage, {}).update(settings)
    # The tests' own pattern besides: a GPU partition in the default block.
    routed["resources"]["default"]["slurm_partition"] = "gpu"
    (work / "config" / "routed.yaml").write_text(yaml.safe_dump(routed, sort_keys=False))
    details = dry_run_details(
        work,
        *("--executor", "slurm", "--jobs", "10", "--configfile", "config/routed.yaml"),
        *("--default-resources", "slurm_partition=cpu", "--", CPU_SCORE, GPU_SCORE),
    )
    jobs = {job.outputs[0]: job for job in details}
    assert jobs[GPU_SCORE].resources["slurm_partition"] == "gpu" and jobs[GPU_SCORE].resources["gpu"] == "1"
    assert jobs[CPU_SCORE].resources["slurm_partition"] == "cpu" and jobs[CPU_SCORE].resources["gpu"] == "0"
    assert "gpu_model" not in jobs[CPU_SCORE].resources
    generate = next(job for job in jobs.values() if job.rule == "generate")
    assert generate.resources["slurm_partition"] == "gpu"
