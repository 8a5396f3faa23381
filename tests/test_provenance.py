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
