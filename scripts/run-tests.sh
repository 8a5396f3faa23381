#!/usr/bin/env bash
# The whole test suite (`make test`, CI), in three pytest processes side by side:
# - the SLURM tests (and those marked beside_slurm). They spend most of their time waiting on
#   the test cluster: each job is a fresh Snakemake process on the node, and the executor plugin
#   looks at the queue after 1 s, then every 11, 21, 31 s while nothing finished;
# - the tests that read the session's default run (marked default_run by tests/conftest.py),
#   which the first of them makes (about ten minutes, two jobs at a time);
# - the rest.
# While one waits, the others keep the cores busy. The rest, the lane with the most slack,
# runs at a lower priority (nice 5): it takes the CPU the two long lanes leave. The reports
# are printed one after the other. Arguments go to every pytest process.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
reports=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$reports"' EXIT
lanes=(
  "not slurm and not beside_slurm and not default_run"
  "default_run and not slurm and not beside_slurm"
  "slurm or beside_slurm"
)
names=("the rest" "the default run's readers" "the SLURM tests")
# The test cluster lives in one fixed state folder: a second suite (or a developer's SLURM test
# run under the same lock) waits for this one rather than tearing its cluster down.
flock /tmp/reprolm-slurm-tests.lock "$PYTHON" -m pytest -q -m "${lanes[2]}" "$@" >"$reports/2" 2>&1 &
pids[2]=$!
"$PYTHON" -m pytest -q -m "${lanes[1]}" "$@" >"$reports/1" 2>&1 &
pids[1]=$!
# The rest reports as it goes.
echo "==================== ${names[0]} (-m \"${lanes[0]}\") ===================="
nice -n 5 "$PYTHON" -m pytest -q -m "${lanes[0]}" "$@" &
pids[0]=$!
status=0
selected=0
for i in "${!lanes[@]}"; do
  wait "${pids[$i]}"
  code=$?
  if [ "$i" -gt 0 ]; then
    echo "==================== ${names[$i]} (-m \"${lanes[$i]}\") ===================="
    cat "$reports/$i"
  fi
  # Exit status 5: no test selected (arguments that pick tests from only some of the lanes).
  if [ "$code" -eq 5 ]; then continue; fi
  selected=1
  [ "$code" -eq 0 ] || status=1
done
[ "$selected" -eq 1 ] || exit 5
exit "$status"
