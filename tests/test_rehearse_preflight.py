"""What the rehearsal's verdict says of what the real run would stop on, beyond the
cluster's answers to its requests: a gated hub repository this host's token cannot download
(the hub's access check, answered by the local hub stand-in of tests/hub_standin.py), an API
key not set, a disk too small for the run's models and checkpoints, and GPU jobs whose request
can be given GPUs too small for them. Each at the function that makes its verdict lines, and
the verdict they go into; the SLURM rehearsals of tests/test_rehearse.py run them all.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import huggingface_hub
import pytest

from hub_standin import HubServerStandIn
from reprolm.models.base import download_base_model
from reprolm.rehearse.gpu_memory import gpu_memory_problems, named_memory_gb, satisfies
from reprolm.rehearse.login_node import (
    DagJob,
    api_key_users,
    disk_problems,
    hub_access_problems,
    missing_api_keys,
    pending_hub_ids,
)
from reprolm.rehearse.rehearsal import fail_verdict, login_node_problems
from reprolm.rehearse.submissions import ACCEPTED, Request, group_shapes, read_partitions, retry_problems

READY = (True, ["ready: the cluster accepts all 3 job shapes (5 jobs)"])
ONLINE: dict[str, str] = {}


def _downloads(*bases: str) -> list[DagJob]:
    return [DagJob("download_base_model", {"base": base}, (f"resources/models/{base}",)) for base in bases]


HUB_CONFIG = {
    "base_models": {
        "llama": {"hub": {"path": "meta-llama/Meta-Llama-3-8B-Instruct"}},
        "gpt2": {"hub": {"path": "openai-community/gpt2"}},
        "unused": {"hub": {"path": "meta-llama/Llama-3.1-8B"}},
    },
    "sources": {},
}


def test_a_gated_repository_this_hosts_token_cannot_download_fails_the_verdict(tmp_path, monkeypatch):
    hub = HubServerStandIn(
        monkeypatch,
        open_repos={("model", "openai-community/gpt2")},
        gated={("model", "meta-llama/Meta-Llama-3-8B-Instruct")},
    )
    try:
        jobs = _downloads("llama", "gpt2")
        # Only what the run downloads: not the model no job uses.
        assert [hub_id.repo for hub_id in pending_hub_ids(HUB_CONFIG, jobs, tmp_path)] == [
            "meta-llama/Meta-Llama-3-8B-Instruct",
            "openai-community/gpt2",
        ]
        failures, warnings = hub_access_problems(pending_hub_ids(HUB_CONFIG, jobs, tmp_path), ONLINE)
        assert failures == [
            "- hub access (base_models.llama.hub.path): meta-llama/Meta-Llama-3-8B-Instruct is gated and this "
            "host's hub token has not been granted access: accept its licence at "
            "https://huggingface.co/meta-llama/Meta-Llama-3-8B-Instruct with the account of the token (`hf auth "
            "login`; docs/cluster.md), then rehearse again"
        ]
        assert warnings == []
        # (huggingface_hub also asks the hub for its list of agent harnesses, once.)
        assert sorted(path for path in hub.asked if path.endswith("/auth-check")) == [
            "/api/models/meta-llama/Meta-Llama-3-8B-Instruct/auth-check",
            "/api/models/openai-community/gpt2/auth-check",
        ]
        ready, lines = fail_verdict(*READY, "the run would stop on what this host lacks", failures)
        assert not ready and lines == ["not ready: the run would stop on what this host lacks", *failures]
        # Once the licence is accepted (or the model is downloaded already), nothing fails.
        hub.gated, hub.open_repos = set(), hub.open_repos | hub.gated
        assert hub_access_problems(pending_hub_ids(HUB_CONFIG, jobs, tmp_path), ONLINE) == ([], [])
        hub.gated = {("model", "meta-llama/Meta-Llama-3-8B-Instruct")}
        (tmp_path / "resources" / "models" / "llama").mkdir(parents=True)
        assert hub_access_problems(pending_hub_ids(HUB_CONFIG, jobs, tmp_path), ONLINE) == ([], [])
        # A repository the hub does not have (or this token cannot see) fails too.
        hub.open_repos = set()
        assert hub_access_problems(pending_hub_ids(HUB_CONFIG, jobs, tmp_path), ONLINE)[0] == [
            "- hub access (base_models.gpt2.hub.path): openai-community/gpt2 is not on the hub or is private to "
            "another account than this host's token's"
        ]
    finally:
        hub.close()


def test_a_base_model_without_safetensors_weights_fails_the_verdict_naming_the_conversion(tmp_path, monkeypatch):
    """The download takes safetensors only: a repository with only PyTorch .bin weights (or
    none) would download a model without weights. The hub's file list says so first."""
    hub = HubServerStandIn(
        monkeypatch,
        open_repos={("model", "meta-llama/Meta-Llama-3-8B-Instruct"), ("model", "openai-community/gpt2")},
        gated=set(),
        files={"openai-community/gpt2": ["config.json", "pytorch_model.bin", "tokenizer.json"]},
    )
    try:
        hub_ids = pending_hub_ids(HUB_CONFIG, _downloads("llama", "gpt2"), tmp_path)
        failures, _ = hub_access_problems(hub_ids, ONLINE)
        assert len(failures) == 1 and failures[0].startswith(
            "- hub access (base_models.gpt2.hub.path): openai-community/gpt2 ships its weights only as PyTorch "
            ".bin files (1, e.g. pytorch_model.bin), and the download takes safetensors only: convert them"
        )
        assert "save_pretrained(DIR, safe_serialization=True)" in failures[0]
        # The file list of the revision the run downloads (here unpinned: the hub's newest).
        assert "/api/models/openai-community/gpt2" in [path.split("?")[0] for path in hub.asked]
        hub.files["openai-community/gpt2"] = ["config.json", "tokenizer.json"]
        assert hub_access_problems(hub_ids, ONLINE)[0] == [
            "- hub access (base_models.gpt2.hub.path): openai-community/gpt2 lists no weight files (no "
            ".safetensors, no pytorch_model .bin) at this revision"
        ]
        # Weights in a subfolder are not what the download takes.
        hub.files["openai-community/gpt2"] = ["config.json", "onnx/model.safetensors"]
        assert len(hub_access_problems(hub_ids, ONLINE)[0]) == 1
        hub.files["openai-community/gpt2"] = ["config.json", "model-00001-of-00002.safetensors"]
        assert hub_access_problems(hub_ids, ONLINE) == ([], [])
        # A locked run's files are those of the lock's commit, as its download reads.
        commit = "7" * 40
        hub.asked.clear()
        failures, _, _ = login_node_problems(
            HUB_CONFIG, _downloads("gpt2"), tmp_path, ONLINE, {"model openai-community/gpt2": {"revision": commit}}
        )
        assert failures == []
        assert f"/api/models/openai-community/gpt2/revision/{commit}" in [path.split("?")[0] for path in hub.asked]
    finally:
        hub.close()


def test_a_download_that_gives_no_safetensors_fails_and_leaves_no_model(tmp_path, monkeypatch):
    def snapshot_download_stand_in(repo_id, revision, local_dir, allow_patterns):
        Path(local_dir).mkdir(parents=True, exist_ok=True)
        (Path(local_dir) / "config.json").write_text("{}")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download_stand_in)
    commit = "1" * 40
    with pytest.raises(ValueError, match=rf"base model org/base \(revision {commit}\): the hub gave no .safetensors"):
        download_base_model({"path": "org/base", "revision": commit}, str(tmp_path / "base"))
    assert not (tmp_path / "base").exists()


def test_the_hub_not_answering_fails_and_offline_downloads_go_unchecked(tmp_path, monkeypatch):
    """The hub's address on a port where nothing listens (127.0.0.1:9): refused, as the
    downloads would be."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    # (online, whatever this process was started with: make exports HF_HUB_OFFLINE=1)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    hub_ids = pending_hub_ids(HUB_CONFIG, _downloads("llama", "gpt2"), tmp_path)
    failures, warnings = hub_access_problems(hub_ids, ONLINE)
    assert warnings == [] and len(failures) == 2
    assert re.fullmatch(
        r"- hub access: the hub did not answer for 2 of 2 repositories to download, e\.g\. "
        r"meta-llama/Meta-Llama-3-8B-Instruct \(ConnectError: .*refused.*\); their downloads on this host would "
        r"fail the same way",
        failures[0],
    ), failures[0]
    assert failures[1] == "  change: run where the hub is reachable, or download them and set HF_HUB_OFFLINE=1"
    assert hub_access_problems(hub_ids, {"HF_HUB_OFFLINE": "1"}) == (
        [],
        [
            "- warning: hub access of 2 repositories to download unchecked: HF_HUB_OFFLINE is set "
            "(their downloads read the local cache)"
        ],
    )


API_CONFIG = {
    "base_models": {
        "gpt_4o": {"endpoint": {"base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY"}},
        "claude": {"endpoint": {"base_url": "https://api.anthropic.com/v1/", "api_key_env": "ANTHROPIC_API_KEY"}},
        "llama": {"hub": {"path": "meta-llama/Meta-Llama-3-8B-Instruct"}},
    },
    "judges": {
        "gpt41": {"kind": "chat_endpoint", "api_key_env": "OPENAI_API_KEY"},
        "unused_judge": {"kind": "chat_endpoint", "api_key_env": "MISTRAL_API_KEY"},
        "rm": {"kind": "reward_model", "model": "llama/pretrained"},
    },
}
API_JOBS = [
    DagJob("generate_api", {"base": "gpt_4o", "recipe": "pretrained", "promptset": "tlg"}, ()),
    DagJob("generate_api", {"base": "claude", "recipe": "pretrained", "promptset": "tlg"}, ()),
    DagJob("grade_api", {"judge": "gpt41", "base": "llama", "recipe": "sft", "promptset": "chat"}, ()),
    DagJob("grade", {"judge": "rm", "base": "llama", "recipe": "sft", "promptset": "chat"}, ()),
]


def test_an_api_key_the_jobs_read_and_this_host_lacks_is_named_never_its_value(tmp_path):
    assert api_key_users(API_CONFIG, API_JOBS) == {
        "OPENAI_API_KEY": ["base_models.gpt_4o", "judges.gpt41"],
        "ANTHROPIC_API_KEY": ["base_models.claude"],
    }
    secret = "sk-not-to-be-printed"
    environ = {"OPENAI_API_KEY": secret, "ANTHROPIC_API_KEY": ""}
    lines = missing_api_keys(api_key_users(API_CONFIG, API_JOBS), environ)
    assert lines == [
        "- API key: environment variable ANTHROPIC_API_KEY is not set on this host, and base_models.claude read it",
        "  change: export ANTHROPIC_API_KEY before the run (or leave out what asks that API)",
    ]
    failures, _, _ = login_node_problems(API_CONFIG, API_JOBS, tmp_path, environ)
    assert failures == lines and secret not in "\n".join(failures)
    assert not fail_verdict(*READY, "the run would stop on what this host lacks", failures)[0]
    # Both set: nothing; the unused judge's key is not asked for.
    assert missing_api_keys(api_key_users(API_CONFIG, API_JOBS), {**environ, "ANTHROPIC_API_KEY": "x"}) == []


def test_a_disk_too_small_for_the_runs_models_and_checkpoints_fails_the_verdict(tmp_path):
    """A finetune's checkpoints (28 bytes a parameter, as reprolm plan counts them), a
    download's and a merge's weights (2), on the one file system of results/ and resources/
    (here both are folders of tmp_path, one not made yet), against its real free space."""
    free = shutil.disk_usage(tmp_path).free
    parameters = int(free / 30) + 1
    config = {"base_models": {"big": {"hub": {"path": "org/big"}, "parameters": parameters}}}
    jobs = [
        *_downloads("big"),
        DagJob("finetune", {"base": "big", "recipe": "sft"}, ("results/models/big/sft",)),
        DagJob("extrapolate", {"base": "big", "recipe": "dpo", "alpha": "0.5"}, ("results/models/big/dpo+expo0.5",)),
        DagJob("generate", {"base": "big", "recipe": "sft", "promptset": "tlg"}, ("results/generations/x.parquet",)),
    ]
    (tmp_path / "resources").mkdir()
    failures, notes = disk_problems(jobs, config, tmp_path)
    need = parameters * (2 + 28 + 2)
    assert len(failures) == 2 and notes == []
    assert re.fullmatch(
        re.escape(
            f"- disk: results/ (~{parameters * 30 / 1e9:,.0f} GB) and resources/ (~{parameters * 2 / 1e9:,.0f} GB) "
            f"need ~{need / 1e9:,.0f} GB for the run's models and checkpoints, and their file system ({tmp_path}) has "
        )
        + r"[\d,]+ GB free",
        failures[0],
    ), failures[0]
    assert failures[1] == "  change: free space there, or put results/ and resources/ on a larger file system (a link)"
    assert not fail_verdict(*READY, "the run would stop on what this host lacks", failures)[0]
    # The model downloaded already takes no more; a small model fits, and is a note.
    (tmp_path / "resources" / "models" / "big").mkdir(parents=True)
    config["base_models"]["big"]["parameters"] = 1_000_000
    failures, notes = disk_problems(jobs, config, tmp_path)
    assert failures == [] and len(notes) == 1
    assert re.fullmatch(r"Disk: results/ \(~0 GB\) and resources/ \(~0 GB\) need ~0 GB of [\d,]+ GB free", notes[0])


GPU_CALL = (
    "sbatch --parsable --job-name reprolm-rehearsal --output {log} --export=ALL --comment rule_generate_wildcards_{w} "
    "-p gpu_a100 -t 240 --mem 64000 --cpus-per-task=8 -D /work --gpus=a100:1"
)
MIXED_A100 = read_partitions(
    "PartitionName=gpu_a100 Default=NO MaxNodes=UNLIMITED MaxTime=2-00:00:00 MaxMemPerNode=UNLIMITED Nodes=a[1-2]\n"
    "PartitionName=gpu_h100 Default=NO MaxNodes=UNLIMITED MaxTime=1-00:00:00 MaxMemPerNode=UNLIMITED Nodes=h1\n"
    "PartitionName=gpu_any Default=NO MaxNodes=UNLIMITED MaxTime=1-00:00:00 MaxMemPerNode=UNLIMITED Nodes=x1\n",
    "NodeName=a1 CPUTot=64 RealMemory=512000 Gres=gpu:a100:4(S:0-1) AvailableFeatures=a100_40gb,ib "
    "Partitions=gpu_a100\n"
    "NodeName=a2 CPUTot=64 RealMemory=512000 Gres=gpu:a100:4(S:0-1) AvailableFeatures=a100_80gb,ib "
    "Partitions=gpu_a100\n"
    "NodeName=h1 CPUTot=96 RealMemory=1024000 Gres=gpu:h100:8 AvailableFeatures=(null) Partitions=gpu_h100\n"
    "NodeName=x1 CPUTot=96 RealMemory=1024000 Gres=gpu:a100:8 AvailableFeatures=(null) Partitions=gpu_any\n",
)
# 30B parameters in bf16 on one GPU: 56 GiB of weights and 4 of KV cache, of which vLLM
# takes 85% of the GPU: ~70 GiB, over a 40 GB A100 and within an 80 GB one.
GPU_CONFIG = {
    "studies": [],
    "generation": {"backend": "vllm"},
    "base_models": {
        "big": {"parameters": 30_000_000_000, "resources": {"generate": {"gpus": 1, "precision": "bfloat16"}}}
    },
}


def _gpu_shape(call: str):
    wildcards = "base=big,recipe=sft,promptset=tlg"
    call = call.format(log=f"logs/{wildcards}/%j.log", w=wildcards)
    [shape] = group_shapes([Request("generate", wildcards, call=call, sources=frozenset({("generate", "big")}))])
    shape.verdict = ACCEPTED
    return shape


def test_a_gpu_job_that_can_be_given_gpus_too_small_for_it_fails_the_verdict(tmp_path):
    assert [sorted(node.features) for node in MIXED_A100["gpu_a100"].nodes] == [
        ["a100_40gb", "ib"],
        ["a100_80gb", "ib"],
    ]
    assert MIXED_A100["gpu_h100"].nodes[0].features == frozenset()
    failures, warnings = gpu_memory_problems([_gpu_shape(GPU_CALL)], MIXED_A100, GPU_CONFIG, tmp_path)
    assert failures == [
        "- generate (1 jobs: base=big,recipe=sft,promptset=tlg): generate needs ~60 GiB per GPU at bfloat16 (big, "
        "30.0B parameters from its config); vLLM takes 85% of a GPU, so it needs one of ~70 GiB; its request can "
        "be given a1's GPUs of 40 GB (feature a100_40gb) in partition gpu_a100",
        "  change: ask for GPUs with the memory: resources.generate.constraint or resources.generate.gpu_model "
        "(nodes of this partition with them: a100_80gb); or spread it over more GPUs (gpus, with tensor_parallel "
        "for generation and evaluation)",
    ]
    assert warnings == []
    assert not fail_verdict(*READY, "GPU jobs can be given GPUs too small for them", failures)[0]
    # Asked for the 80 GB nodes by their feature, or on H100s (80 GB by their type): it fits.
    constrained = _gpu_shape(GPU_CALL.replace("-D /work", "-C a100_80gb -D /work"))
    assert gpu_memory_problems([constrained], MIXED_A100, GPU_CONFIG, tmp_path) == ([], [])
    on_h100 = _gpu_shape(GPU_CALL.replace("gpu_a100", "gpu_h100").replace("a100:1", "h100:1"))
    assert gpu_memory_problems([on_h100], MIXED_A100, GPU_CONFIG, tmp_path) == ([], [])
    # A100s whose memory nothing on the node tells: not judged, said once.
    unknown = _gpu_shape(GPU_CALL.replace("gpu_a100", "gpu_any"))
    assert gpu_memory_problems([unknown], MIXED_A100, GPU_CONFIG, tmp_path) == (
        [],
        [
            "- warning: the GPU memory of x1 in partition gpu_any is not told by a feature or GRES type "
            "(e.g. a100_80gb): 1 GPU job shapes (generate) not judged against it"
        ],
    )


def test_gpu_memory_names_and_constraints_as_sbatch_reads_them():
    assert [named_memory_gb(name) for name in ("a100_80gb", "a100-40g", "gpu80gb", "gpumem_48GB", "V100-32GB")] == [
        80,
        40,
        80,
        48,
        32,
    ]
    # Network and other features that end in a size are not GPU memory.
    assert [named_memory_gb(name) for name in ("a100", "ib100g", "eth-25g", "hdr200g")] == [None] * 4
    features = frozenset({"a100_80gb", "ib"})
    assert satisfies(features, None) and satisfies(features, "a100_80gb") and satisfies(features, "a100_40gb|a100_80gb")
    assert satisfies(features, "[a100_80gb&ib]") and not satisfies(features, "a100_80gb&nvlink")
    assert not satisfies(features, "a100_40gb")


def test_a_retry_past_its_partitions_maxtime_fails_the_verdict():
    """Retries are judged at the last attempt (tests/test_rehearse.py has the limits): a shape
    whose fourth attempt grows past MaxTime makes the verdict not ready; capped, it is ready."""
    shape = _gpu_shape(GPU_CALL)
    # 240 min x 3^3 at the 4th attempt is 6480 min, over gpu_a100's 2880.
    retried = retry_problems([shape], MIXED_A100, {"retry_growth": {"factor": 3, "max_mem_mb": 64000}}, attempts=4)
    assert retried == [
        "- generate (1 jobs: base=big,recipe=sft,promptset=tlg): its attempt 4 (retry_growth) asks for runtime "
        "6480 min, over partition gpu_a100's MaxTime of 2880 min",
        "  change: retry_growth.max_runtime (or the profile's retries)",
    ]
    ready, lines = fail_verdict(*READY, "retries would ask for more than their partitions grant", retried)
    assert not ready and lines[0] == "not ready: retries would ask for more than their partitions grant"
    capped = {"retry_growth": {"factor": 3, "max_mem_mb": 64000, "max_runtime": 2880}}
    assert retry_problems([shape], MIXED_A100, capped, attempts=4) == []
