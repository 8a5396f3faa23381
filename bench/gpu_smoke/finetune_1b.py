"""One finetune configuration measured at a useful size, through the paper's recipe code path.

    python bench/gpu_smoke/finetune_1b.py --device cuda --size large --variant paper --work DIR --result FILE

A Llama-shaped model built here from a config (no download; random weights: the speed of a
step does not depend on them) is finetuned by ``reprolm.train.finetune`` (``launch`` with
launcher ``none``: one process, as torchrun runs one worker per GPU) with an SFT recipe of
the paper's shape (``config/paper.yaml``'s Ruler recipes: ``instruction_response`` rows,
4 sequences per device x 8 accumulation, gradient checkpointing), in bf16 autocast over
float32 weights, every sequence ``max_length`` tokens long. Not the paper's: DeepSpeed ZeRO-3
over 4 GPUs (DeepSpeed is not on the GPU machine's image) and the model (1B, not 8B).

Figures (written to ``--result`` as JSON):
- tokens per second over the steps after the first ``warmup_steps`` (each step's end is when
  the Trainer logged its loss, which waits for the GPU), from the progress lines the recipe
  path writes itself (``REPROLM_PROGRESS_STEPS=1``: one per optimizer step);
- model FLOPs utilisation ``6 x N x tokens/s / peak`` (:func:`model_flops_utilisation`), N
  the parameters (tied embeddings counted once), the peak the GPU's dense bf16 rate as
  ``reprolm plan`` has it (``reprolm.need.DEVICES``); and with attention's matrix products
  added (``12 x layers x hidden x sequence`` per token, PaLM's count);
- peak GPU memory (``torch.cuda.max_memory_allocated`` and ``_reserved``) beside the two
  memory models: the pre-flight check's ``finetune_gib`` (reprolm.config.resources, states,
  activations and a working margin) and ``reprolm plan``'s states alone (16 bytes/parameter).

``--size tiny`` (2 layers, sequences of 128) runs the same steps on a CPU in seconds.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import re
import shutil
import sys
import time
from pathlib import Path

# Llama-3.2-1B's shape (tied embeddings, 128k vocabulary): 1.24B parameters.
SIZES = {
    "large": {
        "hidden_size": 2048,
        "num_layers": 16,
        "num_heads": 32,
        "num_kv_heads": 8,
        "intermediate_size": 8192,
        "vocab_size": 128256,
        "max_length": 2048,
        "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 8,
        "warmup_steps": 2,
        "measured_steps": 8,
    },
    "tiny": {
        "hidden_size": 64,
        "num_layers": 2,
        "num_heads": 4,
        "num_kv_heads": 2,
        "intermediate_size": 128,
        "vocab_size": 1024,
        "max_length": 128,
        "per_device_train_batch_size": 2,
        "gradient_accumulation_steps": 2,
        "warmup_steps": 1,
        "measured_steps": 2,
    },
}
# What the measured recipe changes from the paper's: gradient checkpointing (on in every
# paper.yaml recipe) off, which a 1B model at this batch leaves room for.
VARIANTS = {"paper": {"gradient_checkpointing": True}, "no_checkpointing": {"gradient_checkpointing": False}}
TOKENIZER_VOCAB = 1024
PROGRESS_LINE = re.compile(r"^step (\d+)/(\d+) ")


def model_flops_utilisation(parameters: int, tokens_per_second: float, peak_flops: float | None) -> float | None:
    """Model FLOPs utilisation: ``6 x N x tokens/s / peak`` (forward 2N, backward 4N FLOPs per
    trained token; recomputation under gradient checkpointing is not counted, as MFU never
    counts it). None where the peak is unknown."""
    if not peak_flops:
        return None
    return 6 * parameters * tokens_per_second / peak_flops


def attention_flops_per_token(layers: int, hidden: int, sequence: int) -> int:
    """Attention's two matrix products (scores and values) per token, forward and backward:
    ``12 x layers x hidden x sequence`` (PaLM's appendix B; causal masking not discounted)."""
    return 12 * layers * hidden * sequence


def peak_bf16_flops(device_name: str | None) -> tuple[float | None, str]:
    """(dense bf16 peak FLOP/s, where it comes from) of a GPU by its name, from
    ``reprolm.need.DEVICES`` (the SXM parts' datasheet figures); None for any other device."""
    from reprolm.need import DEVICES

    name = (device_name or "").upper()
    if "H200" in name:
        key = "h200"
    elif "H100" in name and not any(part in name for part in ("PCIE", "NVL")):
        key = "h100"
    elif "A100" in name:
        key = "a100"
    else:
        return None, f"no dense bf16 peak known for {device_name or 'this device'}"
    return DEVICES[key]["peak"], f"reprolm.need.DEVICES[{key!r}]"


def timed_throughput(step_times: dict[int, float], warmup_steps: int, tokens_per_step: int) -> dict:
    """Tokens per second over the steps after ``warmup_steps``, from each step's end time."""
    last = max(step_times)
    if warmup_steps not in step_times or last <= warmup_steps:
        raise ValueError(f"steps logged {sorted(step_times)}: none after the {warmup_steps} warm-up steps to time")
    seconds = step_times[last] - step_times[warmup_steps]
    steps = last - warmup_steps
    return {
        "measured_steps": steps,
        "measured_seconds": round(seconds, 3),
        "seconds_per_step": round(seconds / steps, 4),
        "tokens_per_step": tokens_per_step,
        "tokens_per_second": round(steps * tokens_per_step / seconds, 1),
    }


class StepTimes(logging.Handler):
    """Each optimizer step's end time, read off the recipe path's own progress lines; at the
    last step, ``at_last_step`` is called (before the Trainer saves its checkpoint)."""

    def __init__(self, last_step: int, at_last_step):
        super().__init__(logging.INFO)
        self.times: dict[int, float] = {}
        self.last_step, self.at_last_step = last_step, at_last_step

    def emit(self, record):
        match = PROGRESS_LINE.match(record.getMessage())
        if match:
            step = int(match.group(1))
            self.times[step] = time.monotonic()
            if step == self.last_step:
                self.at_last_step()


def synthetic_rows(count: int, words: int, seed: int) -> list[dict]:
    """Rows in the Ruler schema (``Instruction``, ``output``) whose answers run past the
    sequence length: every trained sequence is ``max_length`` tokens."""
    rng = random.Random(seed)
    vocabulary = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(400)
    ]
    return [
        {
            "Instruction": " ".join(rng.choices(vocabulary, k=12)),
            "output": " ".join(rng.choices(vocabulary, k=words)),
        }
        for _ in range(count)
    ]


def llama_config(size: dict, **token_ids):
    """The Llama-shaped config of a size (tied embeddings), with the tokenizer's ids given."""
    from transformers import AutoConfig

    return AutoConfig.for_model(
        "llama",
        vocab_size=size["vocab_size"],
        hidden_size=size["hidden_size"],
        num_hidden_layers=size["num_layers"],
        num_attention_heads=size["num_heads"],
        num_key_value_heads=size["num_kv_heads"],
        intermediate_size=size["intermediate_size"],
        max_position_embeddings=size["max_length"],
        tie_word_embeddings=True,
        **token_ids,
    )


def build(size: dict, device: str, model_dir: Path, train_file: Path, rows: int) -> dict:
    """The model (saved in bf16), its tokenizer and the training rows; the model's facts."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch
    from transformers import AutoModelForCausalLM

    from reprolm.models.tokenizer import train_bpe_tokenizer

    records = synthetic_rows(rows, 2 * size["max_length"], seed=0)
    tokenizer = train_bpe_tokenizer((record["output"] for record in records[:32]), TOKENIZER_VOCAB)
    shortest = min(len(ids) for ids in tokenizer([record["output"] for record in records]).input_ids)
    if shortest < size["max_length"]:
        raise ValueError(f"an answer of {shortest} tokens is shorter than max_length {size['max_length']}")
    pq.write_table(pa.Table.from_pylist(records), train_file)
    config = llama_config(
        {**size, "vocab_size": max(size["vocab_size"], len(tokenizer))},
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    # Initialised where it will train: a 1B model's random init takes a CPU far longer.
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    facts = {
        "parameters": sum(p.numel() for p in model.parameters()),
        "layers": size["num_layers"],
        "hidden_size": size["hidden_size"],
        "vocab_size": config.vocab_size,
        "attention_implementation": model.config._attn_implementation,
    }
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    del model
    return facts


def measure(device: str, size_name: str, variant: str, work: Path, result: Path) -> dict:
    """Build, finetune and write the figures to ``result``: once at the last step (so that a
    run stopped while the Trainer writes its final checkpoint, ~15 GB at 1B, keeps them;
    ``complete`` false), and again when the finetune is done."""
    import torch

    from reprolm.train.finetune import FinetuneSpec, training_arguments
    from reprolm.train.launch import launch

    size = SIZES[size_name]
    steps = size["warmup_steps"] + size["measured_steps"]
    sequences_per_step = size["per_device_train_batch_size"] * size["gradient_accumulation_steps"]
    model_dir, train_file = work / "model", work / "train.parquet"
    started = time.monotonic()
    model = build(size, device, model_dir, train_file, steps * sequences_per_step)
    seconds = {"build": round(time.monotonic() - started, 1)}
    recipe = {
        "dataset": "synthetic",
        "format": "instruction_response",
        "max_length": size["max_length"],
        "learning_rate": 2.0e-5,
        "per_device_train_batch_size": size["per_device_train_batch_size"],
        "gradient_accumulation_steps": size["gradient_accumulation_steps"],
        "lr_scheduler_type": "cosine",
        "warmup_ratio": 0.05,
        "max_steps": steps,
        **VARIANTS[variant],
    }
    spec = FinetuneSpec(
        base_model=str(model_dir),
        output_dir=str(work / "trained"),
        checkpoint_root=str(work / "checkpoints"),
        train_file=str(train_file),
        recipe=recipe,
        precision="bfloat16",
    )
    args = training_arguments(spec)
    described = {
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        "size": size_name,
        "variant": variant,
        "model": model,
        "recipe": recipe,
        "precision": "bfloat16 autocast over float32 weights",
        "trainer": {
            "optim": getattr(args.optim, "value", args.optim),
            "gradient_checkpointing": args.gradient_checkpointing,
            "bf16": args.bf16,
            "torch_compile": args.torch_compile,
            "dataloader_num_workers": args.dataloader_num_workers,
        },
        "steps": steps,
    }

    def write(complete: bool) -> dict:
        throughput = timed_throughput(timer.times, size["warmup_steps"], sequences_per_step * size["max_length"])
        figures = {
            **described,
            **throughput,
            **utilisation(model, size["max_length"], throughput["tokens_per_second"], device),
            "memory": memory(model["parameters"], recipe, device),
            "seconds": {**seconds, "total": round(time.monotonic() - started, 1)},
            "complete": complete,
        }
        result.write_text(json.dumps(figures, indent=2) + "\n")
        return figures

    os.environ["REPROLM_PROGRESS_STEPS"] = "1"
    timer = StepTimes(steps, lambda: write(complete=False))
    progress_log = logging.getLogger("reprolm.train.progress")
    progress_log.addHandler(timer)
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    trained = time.monotonic()
    try:
        launch(spec, "none")
    finally:
        progress_log.removeHandler(timer)
    seconds["finetune"] = round(time.monotonic() - trained, 1)
    return write(complete=True)


def utilisation(model: dict, sequence: int, tokens_per_second: float, device: str) -> dict:
    """MFU against the device's dense bf16 peak, without and with attention's FLOPs."""
    import torch

    peak, source = peak_bf16_flops(torch.cuda.get_device_name(0) if device == "cuda" else None)
    mfu = model_flops_utilisation(model["parameters"], tokens_per_second, peak)
    dense = 6 * model["parameters"]
    attention = attention_flops_per_token(model["layers"], model["hidden_size"], sequence)
    return {
        "peak_flops": peak,
        "peak_source": source,
        "mfu": round(mfu, 4) if mfu is not None else None,
        "mfu_with_attention": round(mfu * (dense + attention) / dense, 4) if mfu is not None else None,
        "mfu_formula": "6 * parameters * tokens_per_second / peak_flops",
    }


def memory(parameters: int, recipe: dict, device: str) -> dict:
    """Peak GPU memory so far beside the pre-flight check's model (``finetune_gib``: one GPU,
    no ZeRO) and ``reprolm plan``'s states."""
    import torch

    from reprolm.config.resources import finetune_gib
    from reprolm.need import TRAINING_BYTES

    gib = 2**30
    figures = {
        "peak_allocated_gib": round(torch.cuda.max_memory_allocated() / gib, 2) if device == "cuda" else None,
        "peak_reserved_gib": round(torch.cuda.max_memory_reserved() / gib, 2) if device == "cuda" else None,
        "finetune_gib_model": round(finetune_gib(parameters, 1, 0, recipe), 2),
        "plan_states_gib": round(parameters * TRAINING_BYTES / gib, 2),
    }
    if figures["peak_allocated_gib"] is not None:
        figures["allocated_over_model"] = round(figures["peak_allocated_gib"] / figures["finetune_gib_model"], 3)
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), required=True)
    parser.add_argument("--size", choices=sorted(SIZES), required=True)
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="paper")
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--result", type=Path, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stdout)
    args.work.mkdir(parents=True, exist_ok=True)
    try:
        result = measure(args.device, args.size, args.variant, args.work, args.result)
    finally:
        # A 1B run leaves ~20 GB of checkpoints and weights; the next variant needs the disk.
        shutil.rmtree(args.work, ignore_errors=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
