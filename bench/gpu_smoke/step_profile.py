"""Where a finetune step's GPU time goes, and what each setting of the recipe path changes.

    bash bench/gpu_smoke/profile_step --out DIR

The model of ``finetune_1b.py`` (Llama-3.2-1B's shape, random weights) trained in a plain
loop that does what the Trainer does on one GPU for our SFT recipes: float32 weights under
bf16 autocast, the model's own cross-entropy, gradients accumulated over micro-batches,
clipped to norm 1, fused AdamW. Each setting below is timed alone (``SETTINGS``); the paper's
setting is then profiled (``torch.profiler``) and its GPU kernels summed by kind: matrix
products, attention, the loss, elementwise kernels, the optimizer, the rest. That the loop
matches the Trainer is checked by its throughput against ``finetune_1b.py``'s for the same
setting (``gpu_smoke.json``).

Figures are written to ``DIR/step_profile.json`` after every setting, so that a run stopped
at its time limit keeps what it measured. Without a GPU (``--device`` is CUDA where torch sees
it) the settings without ``torch.compile`` run at the tiny size in seconds, the profile then
summing CPU operators, not kernels: a check of the loop and the profile, not a measurement.
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from finetune_1b import (  # noqa: E402
    SIZES,
    attention_flops_per_token,
    llama_config,
    model_flops_utilisation,
    peak_bf16_flops,
)

# Each setting: the weights' dtype, bf16 autocast, gradient checkpointing, sequences per
# micro-batch (the accumulation keeps 32 sequences an optimizer step), torch.compile.
PAPER = {"weights": "float32", "autocast": True, "checkpointing": True, "micro_batch": 4, "compile": False}
SETTINGS = {
    "paper": PAPER,
    "no_checkpointing": {**PAPER, "checkpointing": False},
    "bf16_weights": {**PAPER, "weights": "bfloat16", "autocast": False},
    "micro_batch_8": {**PAPER, "micro_batch": 8},
    "no_checkpointing_micro_batch_8": {**PAPER, "checkpointing": False, "micro_batch": 8},
    "compiled": {**PAPER, "compile": True},
    "compiled_no_checkpointing_micro_batch_8": {**PAPER, "compile": True, "checkpointing": False, "micro_batch": 8},
    "compiled_bf16_weights": {**PAPER, "compile": True, "weights": "bfloat16", "autocast": False},
}
SEQUENCES_PER_STEP = 32
# Kernel (or, on a CPU, operator) names by kind, first match wins. Elementwise kernels are the
# memory-bound rest: norms, activations, rotary, residual adds, casts and copies.
KINDS = (
    ("attention", re.compile(r"flash|fmha|attention|sdpa|efficient", re.I)),
    ("loss", re.compile(r"cross_entropy|softmax|nll_loss", re.I)),
    ("optimizer", re.compile(r"adam|multi_tensor|foreach|_amp_", re.I)),
    ("matrix products", re.compile(r"gemm|cutlass|cublas|xmma|nvjet|matmul|addmm|aten::mm|aten::bmm", re.I)),
    ("elementwise", re.compile(r"elementwise|copy|reduce|CatArray|fill|aten::(mul|add|pow|silu|neg|cat|rsqrt)", re.I)),
)


def kind_of(name: str) -> str:
    return next((kind for kind, pattern in KINDS if pattern.search(name)), "other")


def build_model(size: dict, setting: dict, device: str):
    import torch
    from transformers import AutoModelForCausalLM

    config = llama_config(size)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(
            config, dtype=getattr(torch, setting["weights"]), attn_implementation="sdpa"
        )
    if setting["checkpointing"]:
        # The Trainer's default since transformers 4.35: non-reentrant checkpoints.
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    model.train()
    return model


class Loop:
    """One optimizer step of the recipe on one device, as the Trainer takes it."""

    def __init__(self, size: dict, setting: dict, device: str):
        import torch

        self.torch, self.device, self.setting = torch, device, setting
        self.model = build_model(size, setting, device)
        self.forward = torch.compile(self.model) if setting["compile"] else self.model
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=2e-5, fused=device == "cuda")
        self.accumulation = max(1, SEQUENCES_PER_STEP // setting["micro_batch"])
        if size is SIZES["tiny"]:
            self.accumulation = 2
        generator = torch.Generator().manual_seed(0)
        shape = (setting["micro_batch"], size["max_length"])
        self.input_ids = torch.randint(0, size["vocab_size"], shape, generator=generator).to(device)
        self.attention_mask = torch.ones_like(self.input_ids)

    def step(self) -> None:
        torch = self.torch
        for _ in range(self.accumulation):
            with torch.autocast(self.device, dtype=torch.bfloat16, enabled=self.setting["autocast"]):
                loss = self.forward(
                    input_ids=self.input_ids, attention_mask=self.attention_mask, labels=self.input_ids
                ).loss
            (loss / self.accumulation).backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def synchronize(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def close(self) -> None:
        del self.forward, self.model, self.optimizer
        if self.device == "cuda":
            self.torch.cuda.empty_cache()


def time_setting(name: str, size: dict, device: str, warmup: int, measured: int) -> tuple[dict, Loop]:
    import torch

    setting = SETTINGS[name]
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    started = time.monotonic()
    loop = Loop(size, setting, device)
    for _ in range(warmup):
        loop.step()
    loop.synchronize()
    timed = time.monotonic()
    for _ in range(measured):
        loop.step()
    loop.synchronize()
    seconds = time.monotonic() - timed
    tokens = measured * loop.accumulation * setting["micro_batch"] * size["max_length"]
    parameters = sum(p.numel() for p in loop.model.parameters())
    peak, source = peak_bf16_flops(torch.cuda.get_device_name(0) if device == "cuda" else None)
    mfu = model_flops_utilisation(parameters, tokens / seconds, peak)
    dense = 6 * parameters
    attention = attention_flops_per_token(size["num_layers"], size["hidden_size"], size["max_length"])
    figures = {
        "setting": setting,
        "parameters": parameters,
        "sequences_per_step": loop.accumulation * setting["micro_batch"],
        "measured_steps": measured,
        "seconds_per_step": round(seconds / measured, 4),
        "tokens_per_second": round(tokens / seconds, 1),
        "mfu": round(mfu, 4) if mfu is not None else None,
        "mfu_with_attention": round(mfu * (dense + attention) / dense, 4) if mfu is not None else None,
        "peak_source": source,
        "peak_allocated_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if device == "cuda" else None,
        "seconds": round(time.monotonic() - started, 1),
    }
    return figures, loop


def profile(loop: Loop, device: str) -> dict:
    """One optimizer step under the profiler: device time by kind of kernel, the top kernels,
    and how much of the step's wall time the device was busy."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    loop.synchronize()
    started = time.monotonic()
    with profiler(activities=activities) as recorded:
        loop.step()
        loop.synchronize()
    wall = time.monotonic() - started
    times: dict[str, float] = {}
    for event in recorded.key_averages():
        if device == "cuda":
            if event.device_type != DeviceType.CUDA:
                continue
            own = event.self_device_time_total
        else:
            own = event.self_cpu_time_total
            if not event.key.startswith("aten::"):
                continue
        times[event.key] = times.get(event.key, 0.0) + own / 1e6
    busy = sum(times.values())
    by_kind: dict[str, float] = {}
    for name, seconds in times.items():
        by_kind[kind_of(name)] = by_kind.get(kind_of(name), 0.0) + seconds
    top = sorted(times.items(), key=lambda item: -item[1])[:20]
    return {
        "step_wall_seconds": round(wall, 4),
        "busy_seconds": round(busy, 4),
        "busy_share_of_wall": round(busy / wall, 3) if wall else None,
        "by_kind": {
            kind: {"seconds": round(seconds, 4), "share": round(seconds / busy, 3)}
            for kind, seconds in sorted(by_kind.items(), key=lambda item: -item[1])
        },
        "top": [{"name": name[:160], "kind": kind_of(name), "seconds": round(seconds, 4)} for name, seconds in top],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--size", choices=sorted(SIZES), help="large on a GPU, tiny on a CPU")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--settings", nargs="+", choices=sorted(SETTINGS), help="all on a GPU; uncompiled on a CPU")
    parser.add_argument("--budget", type=float, default=400.0, help="seconds; a setting starts only with 30 left")
    args = parser.parse_args(argv)
    import torch

    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    on_gpu = args.device == "cuda"
    args.size = args.size or ("large" if on_gpu else "tiny")
    args.settings = args.settings or [name for name, setting in SETTINGS.items() if on_gpu or not setting["compile"]]

    size = SIZES[args.size]
    warmup, measured = (2, 4) if args.size == "large" else (1, 2)
    args.out.mkdir(parents=True, exist_ok=True)
    result_file = args.out / "step_profile.json"
    result = {"device": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu", "torch": torch.__version__}
    import transformers

    result["transformers"] = transformers.__version__
    result["settings"], result["failures"] = {}, {}
    started = time.monotonic()
    for name in args.settings:
        if args.budget - (time.monotonic() - started) < 30:
            result["failures"][name] = "skipped: the budget is spent"
            continue
        loop = None
        try:
            figures, loop = time_setting(name, size, args.device, warmup, measured)
            result["settings"][name] = figures
            print(f"[step_profile] {name}: {json.dumps(figures)}", flush=True)
            if name == "paper":
                result["profile"] = profile(loop, args.device)
                print(f"[step_profile] profile: {json.dumps(result['profile']['by_kind'])}", flush=True)
        except Exception as error:  # a setting that fails (memory, compile) leaves the others
            result["failures"][name] = f"{type(error).__name__}: {error}"[:2000]
            print(f"[step_profile] {name} failed: {result['failures'][name]}", flush=True)
        finally:
            if loop is not None:
                loop.close()
            gc.collect()
            if args.device == "cuda":
                torch.cuda.empty_cache()
            result["seconds"] = round(time.monotonic() - started, 1)
            result_file.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
