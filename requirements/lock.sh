#!/usr/bin/env bash
# Regenerates requirements/gpu-lock.txt and requirements/cpu-lock.txt (every package pinned) after a
# change to base.txt, gpu.txt, dev.txt, the constraint files or overrides.txt: `bash requirements/lock.sh`.
# Both are resolved for Linux x86_64 and Python 3.11 with uv (`pip install uv`), from PyPI. The CPU
# set is constrained by the GPU lock, so the two sets share every version but torch's build; the CPU
# torch wheel comes from where requirements/torch-cpu-wheels.sh says.
set -euo pipefail
cd "$(dirname "$0")/.."
uv=${UV:-uv}
torch_cpu_wheels=$(bash requirements/torch-cpu-wheels.sh)
platform=(--python-version 3.11 --python-platform x86_64-manylinux_2_28 --annotation-style line)

"$uv" pip compile --quiet "${platform[@]}" --custom-compile-command "bash requirements/lock.sh" \
  --override requirements/overrides.txt -c requirements/gpu-constraints.txt \
  requirements/base.txt requirements/gpu.txt requirements/dev.txt -o requirements/gpu-lock.txt
"$uv" pip compile --quiet "${platform[@]}" --custom-compile-command "bash requirements/lock.sh" \
  --find-links "$torch_cpu_wheels" --override requirements/overrides.txt -c requirements/cpu-constraints.txt \
  requirements/base.txt requirements/dev.txt -o requirements/cpu-lock.txt
