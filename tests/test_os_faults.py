"""OS faults: hard links refused across file systems become copies, and disk-full, quota,
permission and read-only faults are named in words, in the error and at the end of the
failing job's log.

Real second file systems where the machine gives them: /dev/shm (a tmpfs) for a real
cross-device link, and a tiny tmpfs mounted for a real full disk (root only; otherwise
those cases are skipped and the monkeypatched ones still run).
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from finetune_helpers import MLT_TOKENS, tiny_finetune_inputs
from reprolm import oserrors
from reprolm.io import atomic_path, link_or_copy, link_or_copy_tree
from reprolm.oserrors import OSFault, naming_os_faults, os_fault
from reprolm.provenance import content_hash
from reprolm.train import finetune
from reprolm.train.finetune import FinetuneSpec

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
MB = 1024**2
TRAINING_ARGS = "training_args.bin"
# One epoch of the tiny model: a checkpoint at its end, then the finished model (seconds).
RECIPE = {
    "format": "instruction_response",
    "completion_prefix": "mlt",
    "max_length": 64,
    "learning_rate": 1e-3,
    "num_train_epochs": 1,
    "per_device_train_batch_size": 8,
    "logging_steps": 1,
}


def refuse_links(monkeypatch, code: int = errno.EXDEV) -> None:
    """``os.link`` refused as a file system refuses it."""

    def refused(source, target, *args, **kwargs):
        raise OSError(code, os.strerror(code), str(source), None, str(target))

    monkeypatch.setattr(os, "link", refused)


def second_file_system(near: Path) -> Path:
    """A scratch folder on another file system than ``near`` (/dev/shm), or skip."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK) or shm.stat().st_dev == near.stat().st_dev:
        pytest.skip("no writable /dev/shm on another file system than the test's folder")
    return Path(tempfile.mkdtemp(prefix="reprolm-os-faults-", dir=shm))


@contextmanager
def small_file_system(folder: Path, options: str) -> Iterator[Path]:
    """A tmpfs mounted at ``folder`` with ``options`` (``size=64k``, ``ro``), or skip."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=True)


# ---- link_or_copy ----


@pytest.mark.parametrize("code", [errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EMLINK])
def test_a_refused_hard_link_is_a_copy_of_the_same_bytes(tmp_path, monkeypatch, code):
    source = tmp_path / "weights.bin"
    source.write_bytes(os.urandom(4096))
    refuse_links(monkeypatch, code)
    link_or_copy(source, tmp_path / "kept.bin")
    assert (tmp_path / "kept.bin").read_bytes() == source.read_bytes()
    assert not (tmp_path / "kept.bin").samefile(source)


def test_a_hard_link_is_still_a_link_where_allowed_and_other_errors_pass(tmp_path, monkeypatch):
    source = tmp_path / "weights.bin"
    source.write_bytes(b"w")
    link_or_copy(source, tmp_path / "linked.bin")
    assert (tmp_path / "linked.bin").samefile(source)
    refuse_links(monkeypatch, errno.EIO)
    with pytest.raises(OSError) as raised:
        link_or_copy(source, tmp_path / "other.bin")
    assert raised.value.errno == errno.EIO
    assert not (tmp_path / "other.bin").exists()


def test_a_folder_linked_onto_a_real_second_file_system_is_copied_whole(tmp_path):
    elsewhere = second_file_system(tmp_path)
    try:
        source = tmp_path / "model"
        (source / "sub").mkdir(parents=True)
        (source / "model.safetensors").write_bytes(os.urandom(10_000))
        (source / "sub" / "config.json").write_text("{}")
        with pytest.raises(OSError) as refused:
            os.link(source / "model.safetensors", elsewhere / "probe")
        assert refused.value.errno == errno.EXDEV
        link_or_copy_tree(source, elsewhere / "model")
        assert content_hash(elsewhere / "model") == content_hash(source)
        # The atomic rename stays in the target's own folder, so a folder symlinked to
        # another file system is written as any other.
        (tmp_path / "results").symlink_to(elsewhere)
        with atomic_path(tmp_path / "results" / "scores.json") as tmp:
            tmp.write_text("{}\n")
        assert (elsewhere / "scores.json").read_text() == "{}\n"
        assert sorted(p.name for p in elsewhere.iterdir()) == ["model", "scores.json"]
    finally:
        shutil.rmtree(elsewhere)


# ---- the finetune's finished model across file systems ----


def tiny_spec(root: Path, name: str, checkpoints: Path | None = None) -> FinetuneSpec:
    return FinetuneSpec(
        base_model=str(root / "base"),
        output_dir=str(root / "models" / name),
        checkpoint_root=str((checkpoints or root / "checkpoints") / name),
        train_file=str(root / "train.parquet"),
        recipe=dict(RECIPE),
        seed=7,
        add_tokens=list(MLT_TOKENS),
    )


@pytest.fixture(scope="module")
def linked_model(tmp_path_factory) -> tuple[Path, FinetuneSpec]:
    """The tiny inputs and a model finished with hard links, the reference."""
    root = tmp_path_factory.mktemp("finetune")
    tiny_finetune_inputs(root)
    spec = tiny_spec(root, "linked")
    finetune.run(spec)
    kept = spec.checkpoint_dir / finetune.FINISHED
    assert all((kept / p.name).samefile(p) for p in Path(spec.output_dir).iterdir())
    return root, spec


def assert_same_model(folder: str | Path, reference: str | Path) -> None:
    """Byte for byte, but for the Trainer's pickled arguments, which name the run's own
    checkpoint folder."""
    import torch

    files = sorted(p.name for p in Path(folder).iterdir())
    assert files == sorted(p.name for p in Path(reference).iterdir())
    for name in files:
        ours, theirs = Path(folder) / name, Path(reference) / name
        if name == TRAINING_ARGS:
            ours, theirs = (torch.load(f, weights_only=False).to_dict() for f in (ours, theirs))
            assert {**ours, "output_dir": None, "run_name": None} == {**theirs, "output_dir": None, "run_name": None}
        else:
            assert ours.read_bytes() == theirs.read_bytes(), name


def assert_finished_and_restored_as_linked(spec: FinetuneSpec, reference: FinetuneSpec, caplog) -> None:
    output, kept = Path(spec.output_dir), spec.checkpoint_dir / finetune.FINISHED
    assert_same_model(output, reference.output_dir)
    assert sorted(p.name for p in spec.checkpoint_dir.iterdir()) == [finetune.FINISHED, finetune.FINISHED_MARK]
    assert content_hash(kept) == content_hash(output)
    assert not any((kept / p.name).samefile(p) for p in output.iterdir())
    # A retry after Snakemake deleted the model (a job killed as it exited) puts it back.
    shutil.rmtree(output)
    caplog.clear()
    finetune.run(spec)
    assert "kept the model an earlier attempt finished" in caplog.text
    assert_same_model(output, reference.output_dir)


@pytest.mark.timeout(120)
@pytest.mark.slow
def test_finetune_finishes_its_model_where_hard_links_are_refused(linked_model, monkeypatch, caplog):
    root, reference = linked_model
    spec = tiny_spec(root, "copied")
    refuse_links(monkeypatch)
    with caplog.at_level("INFO", logger=finetune.__name__):
        finetune.run(spec)
        assert_finished_and_restored_as_linked(spec, reference, caplog)


@pytest.mark.timeout(120)
@pytest.mark.slow
def test_finetune_with_checkpoints_on_a_full_second_file_system(linked_model, tmp_path, caplog):
    """A checkpoint that does not fit is named; once space is freed the rerun finishes the
    same model, and keeps a copy of it beside the checkpoints, across file systems."""
    root, reference = linked_model
    with small_file_system(tmp_path / "scratch", "size=256k") as scratch:
        spec = tiny_spec(root, "full", checkpoints=scratch)
        with pytest.raises(OSFault) as raised:
            finetune.run(spec)
        assert raised.value.errno == errno.ENOSPC
        message = str(raised.value)
        # The weights and Adam's two moments of ~34k float32 parameters: ~0.4 MB.
        assert message.startswith(f"no space left on {spec.checkpoint_dir}")
        assert message.endswith(f"(file system at {scratch}): 0 KB free, a checkpoint needs ~0.4 MB")
        assert not Path(spec.output_dir).exists()
        subprocess.run(["mount", "-o", "remount,size=16m", str(scratch)], check=True)
        with caplog.at_level("INFO", logger=finetune.__name__):
            finetune.run(spec)
            assert_finished_and_restored_as_linked(spec, reference, caplog)


def test_a_kept_copy_that_does_not_fit_leaves_the_checkpoints_and_the_model(linked_model, tmp_path, caplog):
    root, _ = linked_model
    with small_file_system(tmp_path / "scratch", "size=64k") as scratch:
        spec = tiny_spec(root, "no_room", checkpoints=scratch)
        model = Path(spec.output_dir)
        model.mkdir(parents=True)
        (model / "model.safetensors").write_bytes(os.urandom(100 * 1024))
        (spec.checkpoint_dir / "checkpoint-6").mkdir(parents=True)
        (spec.checkpoint_dir / "checkpoint-6" / "trainer_state.json").write_text("{}")
        with caplog.at_level("WARNING", logger=finetune.__name__):
            finetune.keep_finished(spec)
        assert sorted(p.name for p in spec.checkpoint_dir.iterdir()) == ["checkpoint-6"]
        assert (model / "model.safetensors").stat().st_size == 100 * 1024
        assert f"no space left on {spec.checkpoint_dir}" in caplog.text
        assert ": 60 KB free, a copy of the finished model needs ~100 KB" in caplog.text
        assert f"the checkpoints in {spec.checkpoint_dir} stay for a retry instead" in caplog.text


def test_model_and_checkpoint_sizes_are_estimated_from_the_parameters(linked_model):
    import torch
    from transformers import AutoModelForCausalLM

    _, reference = linked_model
    model = AutoModelForCausalLM.from_pretrained(reference.output_dir, dtype=torch.float32)
    weights = (Path(reference.output_dir) / "model.safetensors").stat().st_size
    # The file adds only its header to the tensors.
    assert 0 < weights - finetune.model_bytes(model) < 4096
    assert finetune.checkpoint_bytes(model) == 3 * finetune.model_bytes(model)


# ---- naming OS faults ----


def fake_file_system(monkeypatch, free: int, size: int = 100 * MB) -> None:
    block = 4096
    usage = SimpleNamespace(f_frsize=block, f_bavail=free // block, f_blocks=size // block)
    monkeypatch.setattr(oserrors.os, "statvfs", lambda path: usage)


def test_disk_full_is_named_with_the_folder_free_space_and_need(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("results/checkpoints/abc").mkdir(parents=True)
    fake_file_system(monkeypatch, free=int(1.7 * MB))
    for error in (
        OSError(errno.ENOSPC, "No space left on device"),
        RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)"),
        OSError(None, "Error writing bytes to file. Detail: [errno 28] No space left on device"),
    ):
        fault = os_fault(error, ["results/checkpoints/abc"], "the checkpoint", int(2.4 * MB))
        assert fault.errno == errno.ENOSPC
        assert str(fault).startswith("no space left on results/checkpoints/abc (file system at /")
        assert str(fault).endswith(": 1.7 MB free, the checkpoint needs ~2.4 MB")


@pytest.mark.parametrize(
    "message", ["basic_ios::clear: iostream error", "[enforce fail at inline_container.cc:672] . unexpected pos 576"]
)
def test_torch_writer_failure_is_a_full_disk_only_where_the_disk_is_full(tmp_path, monkeypatch, message):
    target = tmp_path / "checkpoint-6"
    fake_file_system(monkeypatch, free=512 * 1024)
    fault = os_fault(RuntimeError(message), [target], "a checkpoint", 3 * MB)
    assert str(fault).endswith(": 0.5 MB free, a checkpoint needs ~3.0 MB")
    fake_file_system(monkeypatch, free=50 * MB)
    assert os_fault(RuntimeError(message), [target], "a checkpoint", 3 * MB) is None
    # Without a known need: nearly full is under 1% of the file system.
    fake_file_system(monkeypatch, free=4096, size=100 * MB)
    assert str(os_fault(RuntimeError(message), [target])).endswith(f": 4 KB free, writing {target}")


def test_quota_permission_read_only_and_file_size_are_named(tmp_path, monkeypatch):
    fake_file_system(monkeypatch, free=10 * MB)
    target = tmp_path / "out.parquet"

    def named(code: int, **where) -> str:
        return str(os_fault(OSError(code, os.strerror(code), *where.values()), [target]))

    assert named(errno.EDQUOT).startswith(f"disk quota exceeded on {tmp_path}, writing {target}")
    assert named(errno.EACCES, filename=str(target)).startswith(f"permission denied writing {target}")
    assert named(errno.EROFS).startswith(f"read-only file system writing {target}")
    assert named(errno.EFBIG).startswith(f"file too large writing {target}")
    for other in (OSError(errno.ENOENT, "No such file or directory"), ValueError("row 3: no field 'x'")):
        assert os_fault(other, [target]) is None


def test_naming_os_faults_chains_the_original_and_passes_other_errors(tmp_path, monkeypatch):
    fake_file_system(monkeypatch, free=0)
    original = OSError(errno.ENOSPC, "No space left on device")
    with pytest.raises(OSFault) as raised, naming_os_faults(tmp_path / "model", "the model", MB):
        raise original
    assert raised.value.__cause__ is original
    with pytest.raises(KeyError), naming_os_faults(tmp_path):
        raise KeyError("recipe")


# ---- a real Snakemake job's log ends with its exception ----

SNAKEFILE = """
rule raw_source:
    output:
        directory("full/raw/{{source}}"),
    log:
        "logs/raw_source/{{source}}.log",
    params:
        spec={{"schema": "arena_question", "fixture": {{"n": 40, "seed": 4}}}},
    script:
        "{script}"
"""


@pytest.mark.timeout(120)
@pytest.mark.slow
def test_a_failing_job_log_ends_with_its_os_fault_named(tmp_path):
    """The workflow's own raw_source script in a one-rule Snakefile (the whole workflow takes
    half a minute to parse), writing onto a full file system."""
    (tmp_path / "Snakefile").write_text(
        textwrap.dedent(SNAKEFILE.format(script=REPO / "workflow" / "scripts" / "raw_source.py"))
    )
    # Mounted above the output's folder: Snakemake's clean-up of empty folders after the
    # failure then stops at the mount instead of failing on it.
    with small_file_system(tmp_path / "full", "size=4k") as mount:
        run = subprocess.run(
            [SNAKEMAKE, "--cores", "1", "full/raw/arena"],
            cwd=tmp_path,
            env={**os.environ, "REPROLM_FORKSERVER": "off", "HF_HUB_OFFLINE": "1"},
            capture_output=True,
            text=True,
            timeout=100,
        )
        assert run.returncode != 0
        assert not (tmp_path / "full" / "raw" / "arena").exists()
        assert [p.name for p in mount.rglob("*")] == []
    log = (tmp_path / "logs" / "raw_source" / "arena.log").read_text().rstrip().splitlines()
    assert "ERROR rule raw_source failed" in "\n".join(log)
    assert "Traceback (most recent call last):" in log
    # The failed write's temporary is gone, so the whole 4 KB is free again.
    assert log[-1] == (
        f"reprolm.oserrors.OSFault: no space left on full/raw (file system at {mount}): 4 KB free,"
        " writing full/raw/arena"
    )
    assert "Traceback" not in run.stderr.split("Error in rule raw_source")[-1]


def test_a_failing_step_logs_its_exception_last_without_the_environments_secrets(tmp_path, monkeypatch):
    """Any exception, not only an OS fault, ends the step's log; a secret an error message
    quotes (an API key in a URL) is masked there."""
    from snakemake.iocontainers import InputFiles, Log, OutputFiles, Params, ResourceList, Wildcards
    from snakemake.script import Snakemake

    from reprolm.provenance import tracked_step

    monkeypatch.chdir(tmp_path)
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.setenv(variable, "1")
    monkeypatch.setenv("JUDGE_API_KEY", "sk-test-0123456789")
    job = Snakemake(
        InputFiles(),
        OutputFiles(["scores/judge.json"]),
        Params(),
        Wildcards(),
        1,
        ResourceList(),
        Log(["logs/judge.log"]),
        {},
        "judge",
        None,
    )
    with pytest.raises(RuntimeError), tracked_step(job):
        raise RuntimeError("judge at https://api.example/v1?key=sk-test-0123456789: HTTP 500")
    log = (tmp_path / "logs" / "judge.log").read_text()
    assert log.rstrip().splitlines()[-1] == "RuntimeError: judge at https://api.example/v1?key=<redacted>: HTTP 500"
    assert "ERROR rule judge failed\nTraceback (most recent call last):" in log
    assert "sk-test" not in log
