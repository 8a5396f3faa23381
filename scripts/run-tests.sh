#!/usr/bin/env bash
# The whole test suite (`make test`, CI). The SLURM tests spend most of their time waiting on
# the test cluster: each job is a fresh Snakemake process on the node, and the executor plugin
# looks at the queue after 1 s, then every 11, 21, 31 s while nothing finished. They run in a
# pytest process of their own beside the rest, whose work keeps the cores busy meanwhile; their
# report is printed after the rest's. Arguments go to both pytest processes.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
slurm=""
slurm_report=$(mktemp)
trap 'kill "$slurm" 2>/dev/null; rm -f "$slurm_report"' EXIT
# The test cluster lives in one fixed state folder: a second suite (or a developer's SLURM test
# run under the same lock) waits for this one rather than tearing its cluster down.
flock /tmp/reprolm-slurm-tests.lock "$PYTHON" -m pytest -q -m "slurm or beside_slurm" "$@" >"$slurm_report" 2>&1 &
slurm=$!
"$PYTHON" -m pytest -q -m "not slurm and not beside_slurm" "$@"
rest=$?
wait "$slurm"
slurm_status=$?
echo "==================== the SLURM tests (run beside the rest) ===================="
cat "$slurm_report"
# Exit status 5: no test selected (arguments that pick tests from only one half).
if [ "$rest" -eq 5 ] && [ "$slurm_status" -eq 5 ]; then exit 5; fi
[ "$rest" -eq 5 ] && rest=0
[ "$slurm_status" -eq 5 ] && slurm_status=0
[ "$rest" -eq 0 ] && [ "$slurm_status" -eq 0 ]
