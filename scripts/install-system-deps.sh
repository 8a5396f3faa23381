#!/usr/bin/env bash
# Debian packages the test suite needs. Runs as root on CI and developer machines;
# elsewhere it only reports what is missing.
set -euo pipefail
# The SLURM tests (tests/slurm_cluster.py) start a real single-node cluster from these:
# controller, node daemon, client commands, accounting daemon (for sacct), its MariaDB,
# and munge for authentication. The tests start their own daemons on their own sockets
# and ports, whether or not package scripts start the system services.
# The report test (tests/test_report_browser.py) opens results/report.html in headless chromium.
packages=(git slurmctld slurmd slurm-client slurmdbd munge mariadb-server chromium)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "missing Debian packages (install them as root): ${missing[*]}" >&2
  exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
