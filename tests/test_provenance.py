"""Where a step ran, from the environment SLURM gives it."""

from __future__ import annotations

import pytest

from reprolm.provenance import execution_host

# What a GPU rule's script saw in the test cluster's job step (srun -n1 under the Snakemake
# SLURM executor), trimmed to the variables that matter here.
JOB_STEP = {
    "SLURM_JOB_ID": "2",
    "SLURMD_NODENAME": "node7",
    "SLURM_STEP_NODELIST": "node7",
    "SLURM_STEP_GPUS": "2,3",
    "SLURM_GPUS_ON_NODE": "2",
    "CUDA_VISIBLE_DEVICES": "0,1",
}
# A workflow run whole inside sbatch: the batch step has job variables, no step ones.
BATCH = {"SLURM_JOB_ID": "9", "SLURM_JOB_NODELIST": "node3", "SLURM_JOB_GPUS": "1", "CUDA_VISIBLE_DEVICES": "1"}


@pytest.fixture
def environment(monkeypatch):
    for name in list(JOB_STEP) + list(BATCH) + ["SLURM_NODELIST"]:
        monkeypatch.delenv(name, raising=False)

    def set_to(variables: dict) -> None:
        for name, value in variables.items():
            monkeypatch.setenv(name, value)

    return set_to


def test_job_step_records_job_node_and_granted_gpu_indices(environment):
    environment(JOB_STEP)
    execution = execution_host()
    assert (execution["slurm_job_id"], execution["slurm_node"]) == ("2", "node7")
    # The node's GPU indices, not their count, and not the cgroup-renumbered visible ones.
    assert execution["slurm_gpus"] == "2,3"
    assert execution["cuda_visible_devices"] == "0,1"


def test_batch_step_falls_back_to_job_variables(environment):
    environment(BATCH)
    execution = execution_host()
    assert (execution["slurm_job_id"], execution["slurm_node"], execution["slurm_gpus"]) == ("9", "node3", "1")


def test_outside_slurm_records_no_job(environment):
    execution = execution_host()
    assert execution["slurm_job_id"] is None and execution["slurm_node"] is None and execution["slurm_gpus"] is None
    assert execution["host"]


def test_a_folder_replaced_in_place_is_told_from_one_merely_touched_or_copied(tmp_path):
    """One job's record lists all its outputs (a study's tables and plots, both named after
    the study): each folder is compared with its own manifest, by stat, then by hash."""
    import os
    import time

    from reprolm.provenance.hashing import SNAKEMAKE_MARKER
    from reprolm.provenance.records import build_record, write_record
    from reprolm.provenance.replaced import changed_since_record, mark_replaced_folders

    outputs = ["results/tables/gem", "results/plots/gem"]
    for output, content in zip(outputs, ("table", "plot"), strict=True):
        (tmp_path / output).mkdir(parents=True)
        (tmp_path / output / "a.csv").write_text(content)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        record = build_record(
            rule="study_tables",
            wildcards={"study": "gem"},
            params={},
            inputs={},
            outputs=outputs,
            seed=0,
            started="",
            finished="",
            usage={},
        )
        for output in outputs:
            write_record(record, output)
            (tmp_path / output / SNAKEMAKE_MARKER).touch()
    finally:
        os.chdir(cwd)
    assert [changed_since_record(o, tmp_path) for o in outputs] == [False, False]
    time.sleep(0.01)
    (tmp_path / "results/plots/gem/a.csv").write_text("plot")  # same bytes, new time
    assert changed_since_record("results/plots/gem", tmp_path) is False
    assert mark_replaced_folders(tmp_path) == []
    marker = tmp_path / "results/plots/gem" / SNAKEMAKE_MARKER
    before = marker.stat().st_mtime_ns
    (tmp_path / "results/plots/gem/a.csv").write_text("new plot")
    assert changed_since_record("results/plots/gem", tmp_path) is True
    assert mark_replaced_folders(tmp_path) == ["results/plots/gem"]
    assert marker.stat().st_mtime_ns > before
    assert changed_since_record("results/tables/missing", tmp_path) is None


HF_TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz012345"
OPENAI_KEY = "sk-" + "proj-Ab12Cd34Ef56Gh78Ij90"


def test_secrets_are_redacted_by_what_they_are_and_length_budgets_are_kept():
    from reprolm.provenance.redaction import is_secret_key, redact

    for key in ("api_key", "OPENAI_API_KEY", "apiKey", "hf_token", "HF_TOKEN", "token", "hub_token", "access_token"):
        assert is_secret_key(key), key
    for key in ("password", "db_password", "client_secret", "aws_secret_access_key", "private_key", "credentials"):
        assert is_secret_key(key), key
    # Counts, lists and names of tokens; where a secret is kept (a variable's name, a path).
    kept = ("max_new_tokens", "add_tokens", "max_gen_toks", "stop_token_ids", "tokenizer", "tokenizers", "max_tokens")
    for key in (*kept, "eos_token", "pad_token", "api_key_env", "HF_TOKEN_PATH", "keys", "sort_key"):
        assert not is_secret_key(key), key

    params = {
        "promptset": {"prompt": "target_length", "sampling": {"max_new_tokens": 320, "stop_token_ids": [2, 5]}},
        "recipe": {"add_tokens": "mlt", "tokenizer": "tiny_bpe", "max_gen_toks": 256, "learning_rate": 0.003},
        "endpoint": {"base_url": "https://api.example/v1", "api_key_env": "OPENAI_API_KEY", "api_key": "anything"},
        "hub": {"token": "whatever", "repo": "meta-llama/Meta-Llama-3-8B-Instruct"},
        # Credentials under keys that do not say so, whole or inside text.
        "note": f"pulled with {HF_TOKEN}",
        "headers": ["Authorization: Bearer abcdefghijklmnop.qrstuvwx"],
        "extra": [OPENAI_KEY, "Xy7" + "Qz9Lm2Np4Rs6Tu8Vw0Ab1Cd3Ef5Gh7Jk9"],
        "hashes": ["9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"],
    }
    assert redact(params) == {
        "promptset": {"prompt": "target_length", "sampling": {"max_new_tokens": 320, "stop_token_ids": [2, 5]}},
        "recipe": {"add_tokens": "mlt", "tokenizer": "tiny_bpe", "max_gen_toks": 256, "learning_rate": 0.003},
        "endpoint": {"base_url": "https://api.example/v1", "api_key_env": "OPENAI_API_KEY", "api_key": "<redacted>"},
        "hub": {"token": "<redacted>", "repo": "meta-llama/Meta-Llama-3-8B-Instruct"},
        "note": "pulled with <redacted>",
        "headers": ["Authorization: Bearer <redacted>"],
        "extra": ["<redacted>", "<redacted>"],
        "hashes": ["9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"],
    }


def test_a_records_params_keep_the_length_budget_and_drop_a_hub_token(tmp_path, monkeypatch):
    """A record as a generation's and a Ruler recipe's params give it."""
    from reprolm.provenance.records import build_record

    monkeypatch.chdir(tmp_path)
    (tmp_path / "out.txt").write_text("x")
    record = build_record(
        rule="generate",
        wildcards={},
        params={
            "promptset": {"sampling": {"max_new_tokens": 48, "temperature": 0.7}},
            "recipe": {"add_tokens": "mlt"},
            "hub_token": HF_TOKEN,
        },
        inputs={},
        outputs=["out.txt"],
        seed=0,
        started="",
        finished="",
        usage={},
        notes={"generation": {"max_new_tokens": 48, "stop": ["<|eos|>", "[MLT:10]"]}},
    )
    assert record["params"] == {
        "promptset": {"sampling": {"max_new_tokens": 48, "temperature": 0.7}},
        "recipe": {"add_tokens": "mlt"},
        "hub_token": "<redacted>",
    }
    assert record["generation"] == {"max_new_tokens": 48, "stop": ["<|eos|>", "[MLT:10]"]}
