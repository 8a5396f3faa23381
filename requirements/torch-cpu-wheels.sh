#!/usr/bin/env bash
# Prints where the CPU build of torch that requirements/cpu-lock.txt pins (torch==2.13.0+cpu) is
# found, for `--find-links`: TORCH_CPU_WHEELS if set, else the machine's pip find-links (a folder of
# offline wheels), else PyTorch's CPU wheel page.
set -uo pipefail
[ -n "${TORCH_CPU_WHEELS:-}" ] && { echo "$TORCH_CPU_WHEELS"; exit 0; }
configured=$(python3 -m pip config get global.find-links 2>/dev/null || true)
echo "${PIP_FIND_LINKS:-${configured:-https://download.pytorch.org/whl/cpu/torch/}}"
