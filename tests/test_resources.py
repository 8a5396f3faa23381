"""What jobs ask the scheduler for: layered settings, per-model placement, retry sizes, and
every GPU rule routable from the config."""

from __future__ import annotations

import math
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from reprolm.config.resources import ROUTING_KEYS, attempt_size, job_routing, model_settings, routing

REPO = Path(__file__).resolve().parents[1]


def config_with(**top) -> dict:
    return {
        "base_models": {
            "small": {"resources": {"default": {"gpus": 1, "slurm_partition": "small_gpu"}}},
            "large": {"resources": {"finetune": {"gpus": 4, "constraint": "h100", "mem_mb": 256000}}},
            "cpu_only": {},
        },
        **top,
    }


def test_settings_layer_project_then_config_then_model_default_then_model_stage():
    config = config_with(
        resources={
            "default": {"slurm_account": "proj", "gpu_model": "a100"},
            "finetune": {"slurm_partition": "gpu_long", "runtime": 2880},
        }
    )
    large = model_settings(config, "large", "finetune")
    assert (large["slurm_partition"], large["slurm_account"], large["constraint"]) == ("gpu_long", "proj", "h100")
    assert (large["gpus"], large["mem_mb"], large["runtime"], large["threads"]) == (4, 256000, 2880, 32)
    # The model's own default beats the config's per-stage setting.
    small = model_settings(config, "small", "finetune")
    assert (small["slurm_partition"], small["gpus"], small["threads"]) == ("small_gpu", 1, 8)
    assert "slurm_partition" not in model_settings(config, "large", "generate")
    assert model_settings(config, "cpu_only", "evaluate")["mem_mb"] == 4000


def test_routing_names_every_key_and_asks_for_a_gpu_model_only_with_gpus():
    config = config_with(resources={"default": {"gpu_model": "a100", "qos": "normal"}})
    assert routing(model_settings(config, "large", "finetune")) == {
        "slurm_partition": None,
        "slurm_account": None,
        "qos": "normal",
        "constraint": "h100",
        "gpu_model": "a100",
    }
    # The plugin turns a gpu_model into a GPU request even where gpu is 0.
    cpu_job = routing(model_settings(config, "cpu_only", "evaluate"))
    assert cpu_job["gpu_model"] is None and cpu_job["qos"] == "normal"


def test_a_job_without_gpus_takes_its_partition_and_constraint_only_from_its_own_stage():
    config = config_with(
        resources={
            "default": {"slurm_partition": "gpu", "constraint": "a100", "slurm_account": "proj"},
            "extrapolate": {"slurm_partition": "cpu_long"},
        }
    )
    # A GPU job takes the default block's placement.
    assert job_routing(config, "large", "finetune")["slurm_partition"] == "gpu"
    # CPU jobs: their stage's own partition, else none (the profile's); the account is shared.
    assert job_routing(config, "cpu_only", "extrapolate") == {
        "slurm_partition": "cpu_long",
        "slurm_account": "proj",
        "qos": None,
        "constraint": None,
        "gpu_model": None,
    }
    assert job_routing(config, "cpu_only", "default")["slurm_partition"] is None
    assert job_routing(config, "cpu_only", "evaluate")["constraint"] is None
    # A model's own default block routes its GPU jobs only: small asks for a GPU everywhere.
    assert job_routing(config, "small", "evaluate")["slurm_partition"] == "small_gpu"


@pytest.mark.parametrize(
    "growth, attempts, expected",
    [
        (None, (1, 2, 3), (1000, 1000, 1000)),
        ({"factor": 2}, (1, 2, 3), (1000, 2000, 4000)),
        ({"factor": 2, "max_mem_mb": 3000}, (1, 2, 3), (1000, 2000, 3000)),
        # A cap below the first request never shrinks it.
        ({"factor": 2, "max_mem_mb": 500}, (1, 2), (1000, 1000)),
    ],
)
def test_a_retry_keeps_its_size_unless_growth_is_configured_and_then_up_to_the_cap(growth, attempts, expected):
    config = {"retry_growth": growth} if growth else {}
    assert tuple(attempt_size(config, "mem_mb", 1000, a) for a in attempts) == expected
    # GPUs and CPUs never grow.
    assert attempt_size(config, "gpus", 4, 3) == 4


def test_only_keys_the_config_sets_for_a_stage_are_routed():
    """Keys never set stay the profile's default-resources (a declared key left unset would
    drop it)."""
    from reprolm.config.resources import routed_keys

    config = config_with(resources={"generate": {"qos": "short"}})
    assert routed_keys(config, "finetune") == ["slurm_partition", "constraint"]
    assert routed_keys(config, "generate") == ["slurm_partition", "qos"]
    assert routed_keys({"base_models": {"cpu_only": {}}}, "evaluate") == []


def declared_resources(tmp_path: Path) -> dict[str, set[str]]:
    """Each rule of the workflow and the resource names it declares (Snakemake's own parse),
    under the default config with every routing key set for every model."""
    import yaml
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings, StorageSettings

    routed = tmp_path / "routed.yaml"
    routed.write_text(yaml.safe_dump({"resources": {"default": {key: "x" for key in ROUTING_KEYS}}}))
    configfiles = [REPO / "config" / "config.yaml", routed]
    with SnakemakeApi(OutputSettings()) as api:
        workflow = api.workflow(
            resource_settings=ResourceSettings(cores=1),
            storage_settings=StorageSettings(),
            config_settings=ConfigSettings(configfiles=configfiles),
            snakefile=REPO / "workflow" / "Snakefile",
            workdir=REPO,
        )
        workflow.dag()
        return {rule.name: set(rule.resources) for rule in workflow._workflow.rules}


def test_every_rule_that_can_ask_for_gpus_is_routed_by_the_config_and_listed_in_the_profile(tmp_path):
    """A new GPU rule without the routing keys would land on the profile's CPU partition,
    where sbatch refuses a GPU request; the profile's README lists the GPU rules."""
    rules = declared_resources(tmp_path)
    gpu_rules = {name for name, keys in rules.items() if "gpu" in keys}
    assert {"finetune", "train_before_test", "generate", "lm_eval", "grade", "win_rate"} <= gpu_rules
    for name in gpu_rules:
        assert set(ROUTING_KEYS) <= rules[name], f"rule {name} asks for GPUs but is not routed"
    readme = (REPO / "profiles" / "slurm" / "README.md").read_text()
    listed = re.search(r"<!-- gpu-rules -->(.*?)<!-- /gpu-rules -->", readme, re.S).group(1)
    assert set(re.findall(r"`(\w+)`", listed)) == gpu_rules


def paper_config() -> dict:
    import yaml

    return yaml.safe_load((REPO / "config" / "paper.yaml").read_text())


class JobStandIn:
    """What the SLURM plugin's submit-string builder reads of a job: its resources and threads."""

    def __init__(self, threads: int, **resources):
        self.threads = threads
        self.resources = SimpleNamespace(**resources, get=lambda key, default=None: resources.get(key, default))


def test_a_job_of_several_gpus_asks_the_installed_plugin_for_one_node():
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    from reprolm.config.resources import TASKS_PER_GPU, node_count

    paper = paper_config()
    finetune = model_settings(paper, "llama3_8b", "finetune")
    assert (finetune["gpus"], node_count(finetune)) == (4, 1)
    assert node_count(model_settings(paper, "llama3_8b", "generate")) is None
    assert node_count(model_settings(paper, "gpt2", "finetune")) is None
    params = dict(run_uuid="u", slurm_logfile="l", comment_str="c", account="", partition="", workdir="w")
    job = JobStandIn(32, gpu=4, nodes=node_count(finetune), tasks_per_gpu=TASKS_PER_GPU, mem_mb=256000, runtime=1440)
    command = get_submit_command(job, params) + set_gres_string(job)
    assert "--nodes=1" in command and "--gpus=4" in command and "--ntasks" not in command


def test_paper_gpu_memory_fits_its_80gb_gpus_and_a_40gb_gpu_is_refused_naming_the_key():
    from reprolm.checks import check_gpu_memory
    from reprolm.errors import ConfigError

    paper = paper_config()
    assert model_settings(paper, "llama3_8b", "finetune")["gpu_mem_gb"] == 80
    check_gpu_memory(paper, REPO)
    paper["resources"]["default"]["gpu_mem_gb"] = 40
    # Ruler's recipes: 8e9 x 16 / 4 bytes of model states, 4 x 2048 tokens x 2 MiB of
    # activations, 4 GiB of working memory.
    with pytest.raises(ConfigError) as refused:
        check_gpu_memory(paper, REPO)
    assert str(refused.value) == (
        "llama3_8b finetune with recipe ruler needs ~50 GiB per GPU with 4 GPUs under ZeRO-3 (8.0B parameters from "
        "its name); resources.default.gpu_mem_gb is 40: raise gpus or choose a larger GPU"
    )
    # A model's own setting is the key to change where it sets one.
    paper["resources"]["default"]["gpu_mem_gb"] = 80
    paper["base_models"]["qwen2_5_14b"]["resources"] = {"default": {"gpus": 1, "gpu_mem_gb": 24}}
    with pytest.raises(
        ConfigError, match=r"qwen2_5_14b .*base_models\.qwen2_5_14b\.resources\.default\.gpu_mem_gb is 24"
    ):
        check_gpu_memory(paper, REPO)


def test_finetune_memory_shards_model_states_by_zero_stage_and_counts_activations():
    from reprolm.config.resources import finetune_gib

    recipe = {"per_device_train_batch_size": 4, "max_length": 2048}
    activations_and_working = 4 * 2048 * 2 / 1024 + 4
    assert finetune_gib(8 * 2**30, 4, 3, recipe) == pytest.approx(8 * 16 / 4 + activations_and_working)
    assert finetune_gib(8 * 2**30, 4, 2, recipe) == pytest.approx(8 * (2 + 14 / 4) + activations_and_working)
    assert finetune_gib(8 * 2**30, 4, 0, recipe) == pytest.approx(8 * 16 + activations_and_working)
    # DPO: a frozen reference model (sharded under ZeRO-3) and chosen plus rejected sequences.
    dpo = {**recipe, "objective": "dpo"}
    assert finetune_gib(8 * 2**30, 4, 3, dpo) == pytest.approx(8 * 18 / 4 + 2 * 4 * 2048 * 2 / 1024 + 4)


@pytest.mark.slow
def test_a_config_too_large_for_its_gpus_is_refused_before_any_job(tmp_path):
    from workflow_helpers import snakemake

    overlay = tmp_path / "small_gpus.yaml"
    overlay.write_text("resources:\n  default: {gpu_mem_gb: 40}\n")
    result = snakemake(REPO, "-n", "--configfile", "config/paper.yaml", str(overlay), check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "llama3_8b finetune with recipe ruler needs ~50 GiB per GPU with 4 GPUs under ZeRO-3" in output
    assert "resources.default.gpu_mem_gb is 40" in output


def test_only_score_jobs_of_a_metric_that_runs_an_encoder_take_the_score_stages_gpu():
    from reprolm.config.resources import score_settings

    paper = paper_config()
    diversity = score_settings(paper, "llama3_8b_gem", "diversity")
    assert (diversity["gpus"], diversity["mem_mb"], diversity["runtime"]) == (1, 32000, 120)
    assert score_settings(paper, "llama3_8b_gem", "length_levels")["gpus"] == 0


def test_a_metrics_stage_is_what_its_entry_declares_whatever_its_settings_say():
    """Diversity runs its sentence encoder (the packaged one where no ``encoder`` is named):
    its score jobs keep the score stage's GPU when the setting is left out."""
    from reprolm.config.resources import score_settings
    from reprolm.score.metrics import METRICS, metric_stage

    paper = paper_config()
    paper["metrics"]["diversity"].pop("encoder", None)
    assert score_settings(paper, "llama3_8b_gem", "diversity")["gpus"] == 1
    assert {name: metric_stage(name) for name in METRICS if metric_stage(name) != "default"} == {"diversity": "score"}


def test_a_dataset_build_asks_for_memory_by_the_rows_and_data_it_reads(tmp_path):
    """2.5 bytes per byte of uncompressed parquet data and 4,000 per row, over a 1 GB base;
    never below the project's defaults."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from reprolm.config.resources import build_request, parquet_size

    source = tmp_path / "openhermes"
    source.mkdir()
    texts = [f"{index:08d}" + "x" * 992 for index in range(25_000)]
    pq.write_table(pa.table({"value": texts[:20_000]}), source / "train.parquet", compression="zstd")
    pq.write_table(pa.table({"value": texts[20_000:]}), source / "test.parquet", use_dictionary=False)
    rows, data = parquet_size(source)
    # The data's own size, not the files': this text compresses to almost nothing.
    assert rows == 25_000 and data > 25_000 * 1000 > 20 * sum(f.stat().st_size for f in source.iterdir())
    assert build_request([str(source)]) == {"mem_mb": 4000, "runtime": 60}
    # A build that also reads a score's JSON (FLR's pairs) counts it by its size, with no rows.
    scores = tmp_path / "scores.json"
    scores.write_text("{}" + " " * 998)
    assert parquet_size(scores) == (0, 1000)
    assert build_request([str(source), str(scores)]) == {"mem_mb": 4000, "runtime": 60}
    with pytest.raises(FileNotFoundError) as missing:
        build_request([str(tmp_path / "not_yet_downloaded")])
    assert missing.value.filename == str(tmp_path / "not_yet_downloaded")


def test_an_openhermes_sized_build_asks_for_more_than_the_profiles_4_gb(monkeypatch):
    """Sizes stand in for the files: OpenHermes-2.5's as measured (1,001,551 rows, 1,603 MiB
    of data; its build peaked at 6,695 MiB), and a source ten times larger that also needs
    more time."""
    import reprolm.config.resources as resources

    sizes = {"openhermes": (1_001_551, 1603 * 2**20), "large": (10_015_510, 16030 * 2**20)}
    monkeypatch.setattr(resources, "parquet_size", sizes.get)
    assert resources.build_request(["openhermes"]) == {"mem_mb": 9209, "runtime": 60}
    assert resources.build_request(["openhermes", "large"])["runtime"] == math.ceil(0.5 * 1603 * 11 / 60)
