"""`reprolm plan`'s estimate beside what a finished run recorded, per stage.

    python bench/plan_vs_actual.py RUN_DIR [--device cpu] [--configfile F]

The estimate is the uncalibrated cost model's (the calibrated one would be fitted to these
very records); the actual is the sum of the recorded wall seconds of the planned jobs'
outputs (execution.usage), each job once."""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from reprolm.plan import plan
from reprolm.provenance.hashing import provenance_path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--configfile")
    args = parser.parse_args()
    run = Path(args.run)
    estimate = plan(run, args.configfile, width=1, device=args.device, calibrated=False)
    planned, recorded = defaultdict(float), defaultdict(float)
    counted = defaultdict(int)
    for job in estimate.jobs:
        record = provenance_path(run / job.outputs[0]) if job.outputs else None
        if record is None or not record.is_file():
            continue
        usage = (json.loads(record.read_text()).get("execution") or {}).get("usage") or {}
        if "wall_seconds" in usage:
            planned[job.stage] += job.seconds
            recorded[job.stage] += usage["wall_seconds"]
            counted[job.stage] += 1
    print("| stage | jobs | estimated s | recorded s | recorded / estimated |")
    print("|---|---|---|---|---|")
    for stage in sorted(planned):
        ratio = recorded[stage] / planned[stage] if planned[stage] else float("nan")
        print(f"| {stage} | {counted[stage]} | {planned[stage]:.0f} | {recorded[stage]:.0f} | {ratio:.2f} |")
    total_planned, total_recorded = sum(planned.values()), sum(recorded.values())
    print(
        f"| total | {sum(counted.values())} | {total_planned:.0f} | {total_recorded:.0f} | "
        f"{total_recorded / total_planned:.2f} |"
    )


if __name__ == "__main__":
    main()
