"""Training losses beyond cross-entropy, usable as a Trainer's ``compute_loss_func``.

GEM (entropy-regularised SFT, "Preserving Diversity in Supervised Fine-Tuning of LLMs"):
with shifted logits z, labels y and masked positions dropped,

    w = 1 (h = linear)  or  w = sigmoid(0.01 * (z - z_y)) (h = logsigmoid), no gradient;
    q = softmax(z / beta), no gradient;   log p = log_softmax(z);
    loss = - mean over tokens of  sum_v q_v * w_v * (log p_y - log p_v).

Its gradient has a closed form, d loss_t / d z = q * w - S * onehot(y) with
S = sum_v q_v w_v (for h = linear, softmax(z / beta) - onehot(y)). The loss therefore runs
as an autograd function that works through the tokens in chunks: its temporaries are one
chunk's vocabulary-wide tensors, and what it keeps for the backward pass is that gradient,
one logits-sized tensor, as cross-entropy keeps its log-softmax.

Across gradient accumulation (``loss.compat``, for GEM and its cross-entropy baseline):
``paper`` means over every label token of the optimizer step (the Trainer's
``num_items_in_batch``, all micro-batches and devices), so each token weighs the same;
``original`` is what the original GEM code trained both with (transformers 4.45, before the
Trainer counted tokens across micro-batches): each micro-batch's mean over its own tokens,
divided by the accumulation steps, then averaged over devices, so a token of a short
micro-batch weighs more.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from reprolm.registry import Registry

IGNORE_INDEX = -100
WEIGHTINGS = ("linear", "logsigmoid")


@dataclass(frozen=True)
class Normalisation:
    """A ``loss.compat``: how the loss is averaged across gradient accumulation."""

    name: str
    # Each micro-batch's mean over its own label tokens, divided by the accumulation steps
    # (the Trainer must then leave the devices' gradients averaged); else the mean over every
    # label token of the optimizer step.
    per_micro_batch: bool


NORMALISATIONS: Registry[Normalisation] = Registry("loss normalisation")
NORMALISATIONS.register("paper", Normalisation("paper", per_micro_batch=False))
NORMALISATIONS.register("original", Normalisation("original", per_micro_batch=True))


def normalisation(loss: Mapping) -> Normalisation:
    """The normalisation a recipe's ``loss`` settings choose (``compat``, default paper)."""
    return NORMALISATIONS.get(loss.get("compat", "paper"), "loss compat")


def _weights(z: torch.Tensor, y: torch.Tensor, beta: float, h: str) -> tuple[torch.Tensor, torch.Tensor]:
    """For one chunk of logits (tokens x vocab) and labels: q * w, and the logits, both in at
    least float32 (bf16 logits would lose the small differences the loss is made of)."""
    z = z.to(torch.promote_types(z.dtype, torch.float32))
    qw = torch.softmax(z / beta, dim=-1)
    if h == "logsigmoid":
        qw *= torch.sigmoid(0.01 * (z - z.gather(1, y[:, None])))
    return qw, z


def _chunks(logits: torch.Tensor, labels: torch.Tensor, chunk: int):
    """(batch row, token slice, kept positions, their labels) for every chunk of every row.
    Position t's logits predict label t + 1; views of ``logits`` are taken row by row, so the
    logits are never copied whole."""
    for row in range(logits.shape[0]):
        targets = labels[row, 1:]
        for start in range(0, targets.shape[0], chunk):
            y = targets[start : start + chunk]
            kept = (y != IGNORE_INDEX).nonzero()[:, 0]
            if len(kept):
                yield row, start + kept, y[kept]


class _GEMLoss(torch.autograd.Function):
    # log p_y - log p_v = z_y - z_v: the normaliser cancels, so no log-softmax is needed.
    # q * w is kept from the forward pass, in the logits' dtype (as cross-entropy keeps its
    # log-softmax), so the backward pass is one subtraction per chunk.
    @staticmethod
    def forward(ctx, logits, labels, beta, h, chunk, normaliser):
        total = logits.new_zeros((), dtype=torch.promote_types(logits.dtype, torch.float32))
        weights = torch.zeros_like(logits)
        for row, positions, y in _chunks(logits, labels, chunk):
            qw, z = _weights(logits[row, positions], y, beta, h)
            total += torch.bmm(qw[:, None, :], z[:, :, None]).sum() - (z.gather(1, y[:, None])[:, 0] * qw.sum(-1)).sum()
            qw.scatter_add_(1, y[:, None], -qw.sum(-1, keepdim=True))
            weights[row, positions] = qw.to(weights.dtype)
        ctx.save_for_backward(weights)
        ctx.normaliser = normaliser
        return total / normaliser

    @staticmethod
    def backward(ctx, grad_output):
        (weights,) = ctx.saved_tensors
        # In place, to allocate nothing: a training step runs backward once (no retain_graph).
        return weights.mul_(grad_output / ctx.normaliser), None, None, None, None, None


def gem_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    beta: float = 0.7,
    h: str = "linear",
    num_items_in_batch: int | torch.Tensor | None = None,
    chunk_tokens: int = 1024,
) -> torch.Tensor:
    """GEM on causal-LM ``logits`` (batch x length x vocab) and unshifted ``labels``;
    positions labelled -100 are dropped. The mean is over ``num_items_in_batch`` tokens when
    given (the Trainer's count across gradient-accumulation steps), else over this batch's."""
    if h not in WEIGHTINGS:
        raise ValueError(f"GEM weighting h={h!r}; choose from {WEIGHTINGS}")
    if beta <= 0:
        raise ValueError(f"GEM beta must be positive, got {beta}")
    labels = labels.to(logits.device)
    kept = int((labels[:, 1:] != IGNORE_INDEX).sum())
    count = int(num_items_in_batch) if num_items_in_batch is not None else kept
    if kept == 0:
        return logits.sum() * 0.0
    return _GEMLoss.apply(logits, labels, beta, h, chunk_tokens, count)


def micro_batch_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The causal LM's cross-entropy, mean over this batch's label tokens (in at least
    float32, as the models' own loss computes it); 0 with the graph kept when every label is
    masked."""
    targets = labels[:, 1:].to(logits.device)
    if not (targets != IGNORE_INDEX).any():
        return logits.sum() * 0.0
    shifted = logits[:, :-1].reshape(-1, logits.shape[-1])
    shifted = shifted.to(torch.promote_types(shifted.dtype, torch.float32))
    return torch.nn.functional.cross_entropy(shifted, targets.reshape(-1), ignore_index=IGNORE_INDEX)


def trainer_loss(recipe: dict):
    """The ``compute_loss_func`` a recipe's ``loss`` asks for (None: the model's own
    cross-entropy, over the step's tokens)."""
    spec = recipe.get("loss") or {}
    kind = spec.get("kind", "ce")
    if kind not in ("ce", "gem"):
        raise ValueError(f"unknown loss kind {kind!r}; known: ce, gem")
    micro_batch = normalisation(spec).per_micro_batch
    if kind == "ce" and not micro_batch:
        return None
    beta, h = spec.get("beta", 0.7), spec.get("h", "linear")
    accumulation = recipe.get("gradient_accumulation_steps", 1)

    def compute(outputs, labels, num_items_in_batch=None):
        if not micro_batch:
            return gem_loss(outputs.logits, labels, beta=beta, h=h, num_items_in_batch=num_items_in_batch)
        # The Trainer scales a compute_loss_func's loss by nothing: the division by the
        # accumulation steps that transformers 4.45 made is made here.
        if kind == "ce":
            return micro_batch_cross_entropy(outputs.logits, labels) / accumulation
        return gem_loss(outputs.logits, labels, beta=beta, h=h) / accumulation

    return compute


def per_micro_batch(recipe: dict) -> bool:
    """Whether the recipe's loss is normalised per micro-batch (``compat: original``): the
    Trainer must then neither count tokens across devices nor scale by their number
    (``average_tokens_across_devices`` off), leaving the devices' gradients averaged."""
    return normalisation(recipe.get("loss") or {}).per_micro_batch
