"""Trainer callbacks that bound what an end of training loses: a stop signal
(reprolm.stopping) becomes a checkpoint and an orderly end at the end of the step that is
running when it arrives; and a hard kill, which sends no signal (a node failure, an OOM kill
without grace time), loses at most ``save_minutes`` of training (SaveEveryMinutes)."""

from __future__ import annotations

import time
from collections.abc import Callable

from transformers import TrainerCallback

from reprolm.stopping import JobStopped, stop_request

# A checkpoint at least this often, whatever the recipe's save_steps or epochs: a hard kill
# then loses at most this much training (recipes.*.save_minutes).
SAVE_MINUTES = 30


def _any_rank_asked(asked: bool, device) -> bool:
    """Whether any worker was asked to stop: all ranks must save the same step and stop
    together (a checkpoint under DeepSpeed is a collective), and the signal reaches them at
    slightly different moments."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return asked
    flag = torch.tensor([1 if asked else 0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


class StopOnSignal(TrainerCallback):
    """Save a checkpoint and end training at the first step end after a stop signal; then
    :meth:`raise_if_stopped` (after ``trainer.train()``) raises :class:`JobStopped`."""

    def __init__(self) -> None:
        self.stopped_at: int | None = None

    def on_step_end(self, args, state, control, **kwargs):
        if _any_rank_asked(stop_request.requested, args.device) and state.global_step < state.max_steps:
            control.should_save = True
            control.should_training_stop = True
            self.stopped_at = state.global_step
        return control

    def raise_if_stopped(self) -> None:
        if self.stopped_at is not None:
            raise JobStopped(
                stop_request.signal_name or "a stop signal on another worker", f"checkpoint at step {self.stopped_at}"
            )


class SaveEveryMinutes(TrainerCallback):
    """A checkpoint at the first step end ``minutes`` or more after the last save (or the
    start), besides the recipe's own (every ``save_steps``, or epoch): all ranks save that
    step (a DeepSpeed checkpoint is a collective), as any rank's clock says."""

    def __init__(self, minutes: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = minutes * 60
        self.clock = clock
        self.last = clock()

    def on_train_begin(self, args, state, control, **kwargs):
        self.last = self.clock()

    def on_step_end(self, args, state, control, **kwargs):
        if _any_rank_asked(self.clock() - self.last >= self.seconds, args.device):
            control.should_save = True
        return control

    def on_save(self, args, state, control, **kwargs):
        self.last = self.clock()
