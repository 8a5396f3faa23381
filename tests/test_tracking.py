"""Optional experiment tracking: off by default, TensorBoard's loss curve where asked for,
and never part of what a training run is (its checkpoint key, hence its reruns)."""

from __future__ import annotations

import os

import pytest

from finetune_helpers import MLT_TOKENS, tiny_finetune_inputs
from reprolm.train.tracking import report_to


def test_tracking_is_off_by_default_and_refuses_an_unknown_logger():
    assert report_to({}, "finetune/x/y") == [] and report_to({"report_to": "none"}, "finetune/x/y") == []
    with pytest.raises(
        ValueError, match=r"^tracking.report_to: 'comet'; choose from \['none', 'tensorboard', 'wandb', 'mlflow'\]"
    ):
        report_to({"report_to": "comet"}, "finetune/x/y")


def test_a_tracked_finetune_writes_its_loss_curve_to_tensorboard(tmp_path, monkeypatch):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from reprolm.train.finetune import FinetuneSpec, run

    tiny_finetune_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    # Set here so that the test's end removes what report_to sets.
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", "")
    loggers = report_to({"report_to": "tensorboard"}, "finetune/tiny/sft")
    assert loggers == ["tensorboard"]
    assert os.environ["TENSORBOARD_LOGGING_DIR"] == str(tmp_path / "logs/tensorboard/finetune/tiny/sft")
    recipe = {
        "format": "instruction_response",
        "completion_prefix": "mlt",
        "max_length": 128,
        "learning_rate": 1e-3,
        "max_steps": 3,
        "per_device_train_batch_size": 4,
        "logging_steps": 1,
    }
    spec = FinetuneSpec(
        base_model=str(tmp_path / "base"),
        output_dir=str(tmp_path / "out"),
        checkpoint_root=str(tmp_path / "checkpoints"),
        train_file=str(tmp_path / "train.parquet"),
        recipe=recipe,
        seed=0,
        add_tokens=list(MLT_TOKENS),
        report_to=loggers,
    )
    untracked = FinetuneSpec(**{**spec.__dict__, "report_to": []})
    assert spec.key() == untracked.key()
    run(spec)
    events = EventAccumulator(str(tmp_path / "logs/tensorboard/finetune/tiny/sft"))
    events.Reload()
    losses = events.Scalars("train/loss")
    assert [event.step for event in losses] == [1, 2, 3]
