"""bench/RESULTS.md's tables of one gpu_smoke run, from its JSON:

    python bench/gpu_smoke/table.py $OUT/gpu_smoke.json

The device and the time against the budget; each step's status and seconds; the measured
finetune's tokens per second, MFU beside its target and peak memory beside the memory models;
every failure's first line; what the carried wheels leave out."""

from __future__ import annotations

import json
import sys
from pathlib import Path

# Well-tuned transformers training in bf16 at 1B parameters and sequence length 2048 reaches
# about this share of an H100's dense bf16 peak (issue 46's efficiency target).
MFU_TARGET = 0.40
VARIANT_NAMES = {"paper": "paper's recipe (gradient checkpointing)", "no_checkpointing": "gradient checkpointing off"}


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def number(value, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def tflops(flops: float | None) -> str:
    return "n/a" if flops is None else f"{flops / 1e12:,.0f} TFLOP/s"


def render(report: dict) -> str:
    device, packages = report["device"], report.get("packages", {})
    host = report.get("host", {})
    lines = [
        f"Device: **{device.get('name')}** ({device.get('kind')}"
        + (f", {device['memory_gib']} GiB" if device.get("memory_gib") else "")
        + f"); Python {host.get('python', '?')}, torch {packages.get('torch', '?')}, "
        f"transformers {packages.get('transformers', '?')}; **{report['wall_seconds']:.0f} s** of the "
        f"{report['budget_seconds']:.0f} s budget ({'within' if report['within_budget'] else 'over'}).",
        "",
        "| step | status | seconds |",
        "|---|---|---:|",
    ]
    for name, step in report["steps"].items():
        lines.append(f"| {name} | {step['status']} | {step['seconds']:.1f} |")
    workflow = report.get("workflow")
    if workflow:
        lines += [
            "",
            f"Workflow: {workflow['jobs']} jobs; GPU-routed rules checked: {', '.join(workflow['gpu_routed_rules'])}.",
        ]
    measured = report.get("finetune_1b", {})
    if measured:
        first = next(iter(measured.values()))
        size = f"{first['model']['parameters'] / 1e9:.2f}B" if first["model"]["parameters"] >= 1e8 else "tiny"
        lines += [
            "",
            f"| {size} Llama, seq {first['recipe']['max_length']}, bf16 | tokens/s | s/step | MFU (6N) | "
            f"MFU with attention | target | peak allocated GiB | memory check's model GiB | plan's states GiB |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for variant, result in measured.items():
            memory = result["memory"]
            lines.append(
                f"| {VARIANT_NAMES.get(variant, variant)} | {number(result['tokens_per_second'], 0)} | "
                f"{number(result['seconds_per_step'], 3)} | {percent(result['mfu'])} | "
                f"{percent(result['mfu_with_attention'])} | {percent(MFU_TARGET)} | "
                f"{number(memory['peak_allocated_gib'], 2)} | {number(memory['finetune_gib_model'], 2)} | "
                f"{number(memory['plan_states_gib'], 2)} |"
            )
        lines += [
            "",
            f"MFU = {first['mfu_formula']}; peak {tflops(first['peak_flops'])} ({first['peak_source']}); optimizer {first['trainer']['optim']}, attention "
            f"{first['model']['attention_implementation']}, {first['precision']}.",
        ]
    failures = report.get("failures", [])
    lines += ["", f"Failures: {len(failures)}" + (":" if failures else ".")]
    for failure in failures:
        first_line = (failure["error"].strip().splitlines() or [""])[0]
        lines.append(f"- {failure['step']}: {first_line}")
    if report.get("not_covered"):
        lines += [
            "",
            "Not covered (not carried): " + "; ".join(item.split(":")[0] for item in report["not_covered"]) + ".",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        sys.exit("usage: python bench/gpu_smoke/table.py GPU_SMOKE_JSON")
    print(render(json.loads(Path(argv[0]).read_text())), end="")


if __name__ == "__main__":
    main()
