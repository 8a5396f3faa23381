#!/usr/bin/env bash
# `pip check` of an environment (its python: $1), less the unmet requirements that
# requirements/overrides.txt overrides on purpose (a package's own floor on numpy, say): any
# other broken requirement fails, as pip check's would.
set -uo pipefail
python=${1:?usage: pip-check.sh PYTHON}
overrides="$(dirname "$0")/../requirements/overrides.txt"
overridden=$(grep -o '^[A-Za-z0-9_.-]\+' "$overrides" | paste -sd'|')
report=$("$python" -m pip check 2>&1)
unexpected=$(grep -v -E "has requirement ($overridden)[<>=!~ ;,]" <<<"$report" | grep -v '^No broken requirements found' || true)
if [ -n "$unexpected" ]; then
  echo "$unexpected"
  exit 1
fi
echo "pip check: no broken requirements but those requirements/overrides.txt overrides"
