"""What jobs ask the scheduler for: layered settings, per-model placement, retry sizes, and
every GPU rule routable from the config."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reprolm.config.resources import ROUTING_KEYS, attempt_size, model_settings, routing

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
