#!/usr/bin/env bash
# `make gpu-smoke-wheels`: the wheels bench/gpu_smoke/wheels.txt lists, for the GPU machine's
# CPython 3.12 on x86-64 Linux, into GPU_WHEELS (.gpu-wheels/, git-ignored), which a GPU run
# carries. Wheels come from the package index as they are; those marked "built" have none there
# and are built here from their source, which must give a pure-Python wheel (any Python). Fails
# unless every listed package has exactly one wheel and all of them together stay under
# GPU_WHEELS_MIB (50: what travels with the working tree is at most 64 MiB).
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
out=${GPU_WHEELS:-.gpu-wheels}
limit_mib=${GPU_WHEELS_MIB:-50}
list=bench/gpu_smoke/wheels.txt
downloaded=() built=()
while IFS= read -r line; do
  requirement=${line%%#*}
  requirement=${requirement//[[:space:]]/}
  [ -n "$requirement" ] || continue
  case $line in
    *"built:"*) built+=("$requirement") ;;
    *) downloaded+=("$requirement") ;;
  esac
done <"$list"
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
platforms=()
for platform in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 \
  manylinux2014_x86_64 manylinux_2_5_x86_64 manylinux1_x86_64 any; do
  platforms+=(--platform "$platform")
done
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
  "${platforms[@]}" -d "$staging" "${downloaded[@]}"
if [ "${#built[@]}" -gt 0 ]; then
  "$PYTHON" -m pip wheel -q --no-deps -w "$staging/built" "${built[@]}"
  for wheel in "$staging"/built/*.whl; do
    case $wheel in
      *-none-any.whl) mv "$wheel" "$staging/" ;;
      *) echo "gpu-smoke-wheels: $(basename "$wheel") is not pure Python: it cannot be built for 3.12 here" >&2; exit 1 ;;
    esac
  done
  rmdir "$staging/built"
fi
wanted=$((${#downloaded[@]} + ${#built[@]}))
found=$(find "$staging" -maxdepth 1 -name '*.whl' | wc -l)
if [ "$found" -ne "$wanted" ]; then
  echo "gpu-smoke-wheels: $found wheels for the $wanted packages of $list" >&2
  exit 1
fi
bytes=$(cat "$staging"/*.whl | wc -c)
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
if awk -v m="$mib" -v l="$limit_mib" 'BEGIN { exit !(m > l) }'; then
  echo "gpu-smoke-wheels: $found wheels take $mib MiB, over $limit_mib MiB" >&2
  exit 1
fi
rm -rf "$out"
mkdir -p "$(dirname "$out")"
mv "$staging" "$out"
trap - EXIT
echo "$out: $found wheels, $mib MiB"
