"""GEM's loss against autograd of its definition, its closed-form gradient, limits, masking
and chunking; its normalisation across gradient accumulation (the paper's, over the step's
tokens, and the original code's, per micro-batch), by hand and through the Trainer; chat SFT
examples with every assistant span trained; a GEM finetune."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml

from finetune_helpers import tiny_finetune_inputs
from reprolm.train.examples import IGNORE_INDEX, assistant_spans_example
from reprolm.train.losses import NORMALISATIONS, gem_loss, trainer_loss
from workflow_helpers import REPO

VOCAB = 11


def reference_gem(logits, labels, beta, h):
    """The definition, term by term, with autograd doing the gradient."""
    z = logits[:, :-1].reshape(-1, logits.shape[-1])
    y = labels[:, 1:].reshape(-1)
    keep = y != IGNORE_INDEX
    z, y = z[keep], y[keep]
    q = torch.softmax(z.detach() / beta, -1)
    w = torch.ones_like(z) if h == "linear" else torch.sigmoid(0.01 * (z - z.gather(1, y[:, None]))).detach()
    log_p = torch.log_softmax(z, -1)
    return -(q * w * (log_p.gather(1, y[:, None]) - log_p)).sum(-1).mean()


def batch(seed=0):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(2, 6, VOCAB, generator=generator, dtype=torch.float64) * 3
    labels = torch.randint(0, VOCAB, (2, 6), generator=generator)
    labels[0, 3] = labels[1, 5] = IGNORE_INDEX
    return logits.requires_grad_(), labels


@pytest.mark.parametrize("h", ["linear", "logsigmoid"])
def test_chunked_loss_and_gradient_equal_the_definition(h):
    logits, labels = batch()
    expected = reference_gem(logits, labels, 0.7, h)
    (expected_grad,) = torch.autograd.grad(expected, logits)
    for chunk in (1, 3, 1024):
        loss = gem_loss(logits, labels, beta=0.7, h=h, chunk_tokens=chunk)
        (grad,) = torch.autograd.grad(loss, logits)
        assert loss.item() == pytest.approx(expected.item(), abs=1e-10)
        assert torch.allclose(grad, expected_grad, atol=1e-10)


def test_linear_gradient_is_tempered_softmax_minus_onehot_and_zero_where_masked():
    logits, labels = batch(1)
    (grad,) = torch.autograd.grad(gem_loss(logits, labels, beta=0.7), logits)
    y = labels[:, 1:]
    kept = int((y != IGNORE_INDEX).sum())
    assert torch.all(grad[:, -1] == 0)  # the last position predicts nothing
    for b in range(2):
        for t in range(5):
            if y[b, t] == IGNORE_INDEX:
                assert torch.all(grad[b, t] == 0)
            else:
                expected = torch.softmax(logits[b, t].detach() / 0.7, -1)
                expected[y[b, t]] -= 1
                assert torch.allclose(grad[b, t], expected / kept, atol=1e-12)


def test_limits_of_beta():
    logits, labels = batch(2)
    kept = int((labels[:, 1:] != IGNORE_INDEX).sum())
    # A very large beta makes q uniform: the gradient is 1/V - onehot(y).
    (grad,) = torch.autograd.grad(gem_loss(logits, labels, beta=1e9), logits)
    y = labels[0, 1]
    expected = torch.full((VOCAB,), 1 / VOCAB, dtype=torch.float64)
    expected[y] -= 1
    assert torch.allclose(grad[0, 0], expected / kept, atol=1e-9)
    # A tiny beta makes q one-hot on the arg-max: when that is the label, nothing is learnt.
    argmax_labels = torch.cat([labels[:, :1], logits[:, :-1].argmax(-1)], 1)
    loss = gem_loss(logits, argmax_labels, beta=1e-6)
    (grad,) = torch.autograd.grad(loss, logits)
    assert loss.item() == pytest.approx(0.0, abs=1e-9) and grad.abs().max().item() < 1e-9


def test_masked_batch_and_the_trainers_token_count():
    logits, labels = batch(3)
    assert gem_loss(logits, torch.full_like(labels, IGNORE_INDEX)).item() == 0.0
    kept = int((labels[:, 1:] != IGNORE_INDEX).sum())
    mean = gem_loss(logits, labels)
    over_accumulation = gem_loss(logits, labels, num_items_in_batch=4 * kept)
    assert over_accumulation.item() == pytest.approx(mean.item() / 4)
    with pytest.raises(ValueError, match="h='square'"):
        gem_loss(logits, labels, h="square")


class Outputs:
    def __init__(self, logits):
        self.logits = logits


def two_micro_batches():
    """Vocabulary of two, every predicting position's logits (0, ln 3): softmax (1/4, 3/4).
    Micro-batch A has one label token (0), B three (1, 1, 1)."""
    row = torch.tensor([0.0, math.log(3)], dtype=torch.float64)
    a = (row.repeat(1, 2, 1), torch.tensor([[IGNORE_INDEX, 0]]))
    b = (row.repeat(1, 4, 1), torch.tensor([[IGNORE_INDEX, 1, 1, 1]]))
    return a, b


def test_accumulated_loss_per_micro_batch_as_the_original_or_over_the_steps_tokens_by_hand():
    (logits_a, labels_a), (logits_b, labels_b) = two_micro_batches()
    # GEM, beta 1, h linear, per token: sum_v q_v (z_v - z_y) with q = (1/4, 3/4):
    # label 0: 3/4 ln 3; label 1: -1/4 ln 3.
    spec = {"gradient_accumulation_steps": 2}
    gem = {"kind": "gem", "beta": 1.0, "h": "linear"}
    original = trainer_loss({**spec, "loss": {**gem, "compat": "original"}})
    step = original(Outputs(logits_a), labels_a, 4) + original(Outputs(logits_b), labels_b, 4)
    # Each micro-batch's mean, halved: (3/4 ln 3 + (-1/4 ln 3)) / 2.
    assert step.item() == pytest.approx(math.log(3) / 4, abs=1e-12)
    paper = trainer_loss({**spec, "loss": gem})
    step = paper(Outputs(logits_a), labels_a, 4) + paper(Outputs(logits_b), labels_b, 4)
    # Over the step's four tokens: (3/4 ln 3 - 3 x 1/4 ln 3) / 4.
    assert step.item() == pytest.approx(0.0, abs=1e-12)
    # The cross-entropy baseline the original way, -ln p_y: label 0 ln 4, label 1 ln 4/3.
    ce = trainer_loss({**spec, "loss": {"kind": "ce", "compat": "original"}})
    step = ce(Outputs(logits_a), labels_a, 4) + ce(Outputs(logits_b), labels_b, 4)
    assert step.item() == pytest.approx((math.log(4) + math.log(4 / 3)) / 2, abs=1e-12)
    # The paper's cross-entropy is the model's own (over the step's tokens): no function.
    assert trainer_loss({**spec, "loss": {"kind": "ce"}}) is None
    with pytest.raises(ValueError, match="^loss compat: unknown loss normalisation 'sum'"):
        trainer_loss({"loss": {**gem, "compat": "sum"}})
    # The schema offers the registered normalisations.
    recipe = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())["properties"]["recipes"]
    assert (
        recipe["additionalProperties"]["properties"]["loss"]["properties"]["compat"]["enum"] == NORMALISATIONS.names()
    )


def test_the_trainer_accumulates_the_original_per_micro_batch_gradient(tmp_path):
    """A real Trainer step over two micro-batches of 1 and 5 label tokens (accumulation 2):
    the gradient is the mean of the two micro-batches' GEM means ('original'), or the GEM
    mean over all 6 tokens ('paper'); autograd of the definition gives both."""
    from datasets import Dataset
    from transformers import DataCollatorForSeq2Seq, Trainer, TrainerCallback

    from reprolm.models.tiny import build_tiny_model
    from reprolm.models.tokenizer import train_bpe_tokenizer
    from reprolm.train.finetune import FinetuneSpec, training_arguments

    tokenizer = train_bpe_tokenizer(["the miller repairs the blue door by the bridge"] * 4, vocab_size=300)
    model = build_tiny_model(
        {
            "architecture": "llama",
            "hidden_size": 16,
            "num_layers": 1,
            "num_heads": 2,
            "intermediate_size": 32,
            "max_positions": 16,
        },
        tokenizer,
        seed=0,
    )
    examples = [
        {"input_ids": [10, 11, 12, 13], "labels": [IGNORE_INDEX] * 3 + [13]},
        {"input_ids": [20, 21, 22, 23, 24, 25], "labels": [IGNORE_INDEX, 21, 22, 23, 24, 25]},
    ]
    for example in examples:
        example["attention_mask"] = [1] * len(example["input_ids"])

    def by_definition(micro_batch_means: bool) -> list[torch.Tensor]:
        model.zero_grad()
        losses, counts = [], []
        for example in examples:
            labels = torch.tensor([example["labels"]])
            logits = model(input_ids=torch.tensor([example["input_ids"]])).logits
            losses.append(reference_gem(logits, labels, 0.7, "linear"))
            counts.append(int((labels[:, 1:] != IGNORE_INDEX).sum()))
        if micro_batch_means:
            total = sum(losses) / 2
        else:
            total = sum(loss * count for loss, count in zip(losses, counts)) / sum(counts)
        total.backward()
        return [p.grad.clone() for p in model.parameters()]

    class Gradients(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            self.seen = [p.grad.clone() for p in model.parameters()]

    seen = {}
    for compat in ("original", "paper"):
        recipe = {
            "per_device_train_batch_size": 1,
            "gradient_accumulation_steps": 2,
            "max_steps": 1,
            "learning_rate": 0.0,
            "loss": {"kind": "gem", "beta": 0.7, "h": "linear", "compat": compat},
            "trainer_args": {"max_grad_norm": 0.0},
        }
        spec = FinetuneSpec(str(tmp_path), str(tmp_path / compat), str(tmp_path / "ck"), "", recipe)
        args = training_arguments(spec)
        assert args.average_tokens_across_devices is (compat == "paper")
        gradients = Gradients()
        Trainer(
            model=model,
            args=args,
            train_dataset=Dataset.from_list(examples),
            data_collator=DataCollatorForSeq2Seq(tokenizer, label_pad_token_id=IGNORE_INDEX),
            compute_loss_func=trainer_loss(recipe),
            callbacks=[gradients],
        ).train()
        seen[compat] = gradients.seen
    for compat, micro_batch_means in (("original", True), ("paper", False)):
        expected = by_definition(micro_batch_means)
        assert all(torch.allclose(g, e, atol=1e-6) for g, e in zip(seen[compat], expected, strict=True))
    assert not all(torch.allclose(a, b, atol=1e-6) for a, b in zip(seen["original"], seen["paper"]))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("gem")
    tiny_finetune_inputs(root)
    return root


def test_every_assistant_span_is_trained_and_nothing_else(tiny):
    from reprolm.models.loading import load_tokenizer

    tokenizer = load_tokenizer(str(tiny / "base"))
    messages = [
        {"role": "user", "content": "Describe the blue door."},
        {"role": "assistant", "content": "The miller repairs the blue door."},
        {"role": "user", "content": "And the bridge?"},
        {"role": "assistant", "content": "The fox cleans the wooden bridge."},
    ]
    example = assistant_spans_example(tokenizer, messages, max_length=512)
    trained = [token for token, label in zip(example["input_ids"], example["labels"]) if label != IGNORE_INDEX]
    text = tokenizer.decode(trained)
    assert "The miller repairs the blue door." in text and "The fox cleans the wooden bridge." in text
    assert "Describe" not in text and "bridge?" not in text and "<|assistant|>" not in text
    assert example["labels"] == [
        label if label == IGNORE_INDEX else token for token, label in zip(example["input_ids"], example["labels"])
    ]


def test_gem_recipe_trains_through_the_finetune_stage(tiny):
    from safetensors.torch import load_file

    from reprolm.train.finetune import FinetuneSpec, run

    rows = [
        {
            "messages": [
                {"role": "user", "content": f"Question {i}?"},
                {"role": "assistant", "content": "The miller repairs the blue door."},
            ]
        }
        for i in range(16)
    ]
    pq.write_table(pa.Table.from_pylist(rows), tiny / "chat.parquet")
    recipe = {
        "format": "chat_messages",
        "max_length": 64,
        "learning_rate": 5e-3,
        "num_train_epochs": 1,
        "per_device_train_batch_size": 8,
        "logging_steps": 1,
    }
    outputs = {}
    for name, loss in (("ce", None), ("gem", {"kind": "gem", "beta": 0.7, "h": "linear"})):
        run(
            FinetuneSpec(
                base_model=str(tiny / "base"),
                output_dir=str(tiny / name),
                checkpoint_root=str(tiny / "ck"),
                train_file=str(tiny / "chat.parquet"),
                recipe={**recipe, **({"loss": loss} if loss else {})},
                seed=0,
            )
        )
        outputs[name] = load_file(tiny / name / "model.safetensors")
    base = load_file(tiny / "base" / "model.safetensors")
    name = "model.embed_tokens.weight"
    assert not torch.equal(outputs["gem"][name], base[name])
    assert not torch.equal(outputs["gem"][name], outputs["ce"][name])
