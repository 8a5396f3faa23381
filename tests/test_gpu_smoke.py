"""bench/gpu_smoke, the first run of the workflow's GPU path on a GPU machine, held on the CPU:
its wheel list against the lock and the image, its figures' arithmetic, its configs, the make
target that gathers the wheels, and the whole command run here as its README prints it (the
CPU takes the same steps at tiny sizes)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from reprolm.checks import check_config
from reprolm.config import overlays
from reprolm.config.resources import model_settings
from reprolm.config.schema import validate_config
from workflow_helpers import REPO

SMOKE = REPO / "bench" / "gpu_smoke"
README = SMOKE / "README.md"
# The GPU machine's CPython, for the requirements' markers.
TARGET_ENVIRONMENT = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "extra": "",
}


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"gpu_smoke_{name}", SMOKE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


smoke, finetune_1b, table = load("smoke"), load("finetune_1b"), load("table")
step_profile = load("step_profile")


def pins(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        requirement = line.split("#", 1)[0].strip()
        if "==" in requirement:
            name, version = requirement.split("==", 1)
            found[canonicalize_name(name)] = version.split(";")[0].strip()
    return found


WHEELS = pins(SMOKE / "wheels.txt")
IMAGE = {canonicalize_name(name) for name in smoke.read_names(SMOKE / "image-packages.txt")}
OPTIONAL = {canonicalize_name(name) for name in smoke.optional_names()}


def test_each_wheel_is_pinned_at_the_lock_and_missing_from_the_image():
    lock = pins(REPO / "requirements" / "cpu-lock.txt")
    assert len(WHEELS) == len(smoke.read_names(SMOKE / "wheels.txt"))
    assert WHEELS, "no wheels listed"
    for name, version in WHEELS.items():
        assert lock.get(name) == version, f"wheels.txt: {name}=={version}, the lock has {lock.get(name)}"
        assert name not in IMAGE, f"wheels.txt: {name} is on the GPU image already"


def test_the_wheel_list_carries_every_requirement_the_image_lacks():
    """Each carried package's requirements (as this environment, at the lock's versions, has
    its metadata) on the GPU machine's Python 3.12: on the image or carried too. Extras are not
    installed; the optional ones are imported only where installed (wheels.txt says why)."""
    missing = []
    for name, version in WHEELS.items():
        assert metadata.version(name) == version, f"{name}: installed {metadata.version(name)}, listed {version}"
        for text in metadata.requires(name) or []:
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate(TARGET_ENVIRONMENT):
                continue
            needed = canonicalize_name(requirement.name)
            if needed not in IMAGE and needed not in WHEELS:
                missing.append(f"{name} needs {requirement}")
    assert missing == []
    assert not OPTIONAL & WHEELS.keys() and not OPTIONAL & IMAGE


def test_the_smoke_names_what_it_leaves_out():
    not_covered = " ".join(smoke.read_not_covered())
    for package in ("vLLM", "DeepSpeed"):
        assert package in not_covered


def test_mfu_on_known_numbers():
    # 1e9 parameters at 1e5 tokens/s do 6e14 FLOP/s: 60% of a 1e15 FLOP/s peak.
    assert finetune_1b.model_flops_utilisation(10**9, 1e5, 1e15) == pytest.approx(0.6)
    # Llama-3.2-1B's 1,235,814,400 parameters at 50,000 tokens/s on an H100 SXM (989 TFLOP/s).
    assert finetune_1b.model_flops_utilisation(1_235_814_400, 50_000, 989e12) == pytest.approx(0.374868, abs=1e-6)
    assert finetune_1b.model_flops_utilisation(10**9, 1e5, None) is None
    assert finetune_1b.attention_flops_per_token(16, 2048, 2048) == 805_306_368


def test_peaks_are_the_plans_dense_bf16_figures():
    assert finetune_1b.peak_bf16_flops("NVIDIA H100 80GB HBM3") == (989e12, "reprolm.need.DEVICES['h100']")
    assert finetune_1b.peak_bf16_flops("NVIDIA H200")[0] == 989e12
    assert finetune_1b.peak_bf16_flops("NVIDIA H100 PCIe")[0] is None
    assert finetune_1b.peak_bf16_flops(None)[0] is None


def test_throughput_counts_only_the_steps_after_the_warm_up():
    times = {1: 10.0, 2: 11.0, 3: 12.5, 4: 14.0}
    measured = finetune_1b.timed_throughput(times, warmup_steps=2, tokens_per_step=1000)
    assert measured["measured_steps"] == 2 and measured["measured_seconds"] == pytest.approx(3.0)
    assert measured["tokens_per_second"] == pytest.approx(666.7)
    with pytest.raises(ValueError, match="none after the 2 warm-up steps"):
        finetune_1b.timed_throughput({1: 1.0, 2: 2.0}, warmup_steps=2, tokens_per_step=1000)


def test_the_measured_model_is_llama_3_2_1b_shaped():
    import torch
    from transformers import AutoModelForCausalLM

    size = finetune_1b.SIZES["large"]
    config = finetune_1b.llama_config(size)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    assert sum(p.numel() for p in model.parameters()) == 1_235_814_400
    assert size["max_length"] == 2048


@pytest.mark.parametrize("name", ["config.yaml", "config-cpu.yaml"])
def test_overlays_pass_the_workflows_config_checks(name, monkeypatch):
    monkeypatch.chdir(REPO)
    config = overlays.load(SMOKE / name, REPO)
    schema = REPO / "workflow" / "schemas" / "config.schema.yaml"
    validate_config(config, schema)
    check_config(config, schema)
    assert list(config["base_models"]) == [smoke.BASE]
    gpus = 1 if name == "config.yaml" else 0
    finetune = model_settings(config, smoke.BASE, "finetune")
    assert (finetune["gpus"], finetune["launcher"], finetune["precision"]) == (gpus, "torchrun", "bfloat16")
    for stage in ("generate", "evaluate", "train_before_test"):
        assert model_settings(config, smoke.BASE, stage)["gpus"] == gpus
    assert config["generation"]["backend"] == "transformers"


def readme_command(prefix: str) -> str:
    """The one command in the README's code blocks that starts with ``prefix``."""
    commands = [line.strip() for line in re.findall(r"```(?:bash)?\n(.*?)```", README.read_text(), re.S)]
    found = [line for block in commands for line in block.splitlines() if line.startswith(prefix)]
    assert len(found) == 1, f"README: {found}"
    return found[0]


def run_readme_command(prefix: str, cwd: Path, out: Path, timeout: int) -> subprocess.CompletedProcess:
    """The README's command starting with ``prefix``, run as printed in ``cwd`` with ``$OUT``
    the folder ``out`` and this interpreter as the scripts' Python."""
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable}
    return subprocess.run(
        ["bash", "-c", readme_command(prefix)], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_kernels_are_summed_by_what_they_do():
    # Kernel names as CUDA profiles give them: the first five from the H200 profile of the
    # paper's setting.
    kinds = {
        "nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN": "matrix products",
        "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x64_1x4x1_cga1x1x1_kernel0_0": "attention",
        "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<"
        "float, float, float, at::native::binary_internal::MulFunctor<float> > >": "elementwise",
        "void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda": "elementwise",
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float": "loss",
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>": "optimizer",
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::NormTwoOps": "elementwise",
    }
    assert {name: step_profile.kind_of(name) for name in kinds} == kinds


@pytest.mark.slow
def test_the_readme_step_profile_runs_on_the_cpu(tmp_path):
    """`bash bench/gpu_smoke/profile_step ...` as the README prints it, without a GPU: every
    uncompiled setting trains and is timed, and the paper's step is profiled by kind."""
    out = tmp_path / "out"
    result = run_readme_command("bash bench/gpu_smoke/profile_step", REPO, out, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((out / "step_profile.json").read_text())
    assert report["device"] == "cpu" and report["failures"] == {}
    uncompiled = [name for name, setting in step_profile.SETTINGS.items() if not setting["compile"]]
    assert list(report["settings"]) == uncompiled
    for figures in report["settings"].values():
        assert figures["tokens_per_second"] > 0 and figures["parameters"] == 139_584
    profile = report["profile"]
    assert sum(kind["share"] for kind in profile["by_kind"].values()) == pytest.approx(1.0, abs=0.01)
    # A tiny model's step is still mostly its matrix products, on a CPU too.
    assert max(profile["by_kind"], key=lambda kind: profile["by_kind"][kind]["seconds"]) == "matrix products"


@pytest.mark.install
@pytest.mark.slow
def test_make_gpu_smoke_wheels_gathers_every_listed_wheel_for_python_3_12(tmp_path):
    """The README's make target, from the package index: one wheel per listed package at its
    pin, the compiled ones for CPython 3.12 on x86-64 Linux, under 50 MiB together."""
    command = readme_command("make gpu-smoke-wheels")
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(REPO / name, tmp_path / name)
    shutil.copytree(REPO / "requirements", tmp_path / "requirements")
    shutil.copytree(SMOKE, tmp_path / "bench" / "gpu_smoke", ignore=shutil.ignore_patterns("__pycache__"))
    # As a researcher types it: not with the PYTHON that `make test` hands its test processes.
    env = {key: value for key, value in os.environ.items() if key != "PYTHON"}
    result = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    wheels = sorted((tmp_path / ".gpu-wheels").glob("*.whl"))
    found = {}
    for wheel in wheels:
        name, version, *_, python, abi, platform = wheel.name[: -len(".whl")].split("-")
        found[canonicalize_name(name)] = version
        if abi != "none":
            assert (python, abi) == ("cp312", "cp312") and "x86_64" in platform and "manylinux" in platform, wheel.name
        with zipfile.ZipFile(wheel) as archive:
            assert any(entry.endswith(".dist-info/METADATA") for entry in archive.namelist())
    assert found == WHEELS
    total = sum(wheel.stat().st_size for wheel in wheels) / 2**20
    assert total < 50
    assert f"{len(wheels)} wheels, {total:.1f} MiB" in result.stdout


@pytest.mark.workflow
@pytest.mark.slow
def test_the_readme_command_runs_every_step_on_the_cpu(tmp_path):
    """`bash bench/gpu_smoke/run ...` exactly as the README prints it, in a copy of the
    repository without carried wheels, on this machine (no GPU: the CPU at tiny sizes): every
    step passes, the workflow's outputs and tables are there, no job claims a GPU, every
    package the run imported is on the GPU image or in the wheel list, and the JSON gives what
    bench/gpu_smoke/table.py reads (its README command prints the tables)."""
    repo = tmp_path / "repo"
    for name in ("src", "bench", "workflow", "config", "profiles"):
        shutil.copytree(REPO / name, repo / name, ignore=shutil.ignore_patterns("__pycache__", "last_run.json"))
    out = tmp_path / "out"
    result = run_readme_command("bash bench/gpu_smoke/run", repo, out, timeout=1500)
    report = json.loads((out / "gpu_smoke.json").read_text())
    assert result.returncode == 0, json.dumps(report["failures"], indent=1) + result.stdout[-3000:]
    assert report["schema"] == smoke.SCHEMA and report["failures"] == []
    assert report["device"] == {"requested": "auto", "kind": "cpu", "name": "cpu"}
    assert list(report["steps"]) == [
        "environment",
        "install",
        "finetune_1b:paper",
        "workflow",
        "finetune_1b:no_checkpointing",
        "imports",
    ]
    assert {step["status"] for step in report["steps"].values()} == {"ok"}
    assert report["steps"]["install"]["wheels"] == 0
    workflow = report["workflow"]
    assert all(workflow["outputs"].values()) and set(workflow["outputs"]) == set(smoke.OUTPUTS)
    assert set(workflow["gpu_routed_rules"]) == set(smoke.GPU_ROUTED)
    assert all(workflow["by_rule"][rule]["gpus"] == [0] for rule in smoke.GPU_ROUTED)
    assert workflow["by_rule"]["finetune"]["jobs"] == 3 and workflow["by_rule"]["train_before_test"]["jobs"] == 1
    lm_eval = workflow["tables"]["lm_eval"]
    assert sorted(row["task"] for row in lm_eval) == ["arc", "gsm8k"]
    assert {row["model"] for table_rows in workflow["tables"].values() for row in table_rows if "model" in row} == {
        f"{smoke.BASE}/dpo"
    }
    assert report["imports"]["not_covered"] == []
    assert {"snakemake", "trl", "datasets", "lm_eval", "torch"} <= set(report["imports"]["distributions"])
    for variant in smoke.MEASURED_VARIANTS:
        measured = report["finetune_1b"][variant]
        assert measured["size"] == "tiny" and measured["recipe"]["max_length"] == 128
        assert measured["trainer"]["gradient_checkpointing"] == (variant == "paper")
        assert measured["tokens_per_second"] > 0 and measured["measured_steps"] == 2 and measured["complete"]
        assert measured["tokens_per_step"] == 2 * 2 * 128
        assert measured["mfu"] is None and measured["peak_flops"] is None
        assert measured["memory"]["peak_allocated_gib"] is None and measured["memory"]["finetune_gib_model"] > 0
    with tarfile.open(out / "logs.tar.gz") as archive:
        names = archive.getnames()
    assert "logs/finetune/tiny_llama/sft.log" in names and "finetune_1b/finetune_1b_paper.log" in names
    assert (
        "Finished jobid" in (out / "workflow.log").read_text()
        or "steps (100%) done" in (out / "workflow.log").read_text()
    )
    printed = run_readme_command("python3 bench/gpu_smoke/table.py", repo, out, timeout=120)
    assert printed.returncode == 0, printed.stderr[-3000:]
    printed = printed.stdout
    assert printed == table.render(report)
    assert "| finetune_1b:paper | ok |" in printed and "Failures: 0." in printed
    tokens = report["finetune_1b"]["paper"]["tokens_per_second"]
    assert f"| paper's recipe (gradient checkpointing) | {tokens:,.0f} |" in printed
