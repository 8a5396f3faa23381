#!/usr/bin/env bash
# Registers profiles/slurm as the Snakemake profile `slurm` (`snakemake --profile slurm`), as a
# link into the Snakemake config directory ($XDG_CONFIG_HOME/snakemake, else
# ~/.config/snakemake). A profile already there under that name is never replaced: the link
# is then made as `reprolm-slurm`, and the name to use is printed.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
target="$repo/profiles/slurm"
config_dir="${XDG_CONFIG_HOME:-$HOME/.config}/snakemake"
mkdir -p "$config_dir"
for name in slurm reprolm-slurm; do
    link="$config_dir/$name"
    if [ -L "$link" ] && [ "$(readlink "$link")" = "$target" ]; then
        echo "$name"
        exit 0
    fi
    if [ ! -e "$link" ] && [ ! -L "$link" ]; then
        ln -s "$target" "$link"
        echo "$name"
        exit 0
    fi
done
echo "register-slurm-profile: $config_dir/slurm and $config_dir/reprolm-slurm are both taken;" \
     "use --profile $target" >&2
exit 1
