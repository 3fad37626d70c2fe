#!/usr/bin/env bash
# Install the one-node cluster's Debian packages (bookworm: SLURM 22.05, MariaDB 10.11). Root only.
set -euo pipefail
if command -v slurmctld >/dev/null && command -v slurmdbd >/dev/null && command -v munged >/dev/null \
   && command -v mariadbd >/dev/null; then
  echo "slurm-ci install: already installed ($(slurmctld -V))"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# no daemon is started by the packages here (no systemd); start.sh starts them by hand
apt-get install -y -qq slurm-wlm slurmdbd munge mariadb-server >/dev/null
echo "slurm-ci install: $(slurmctld -V)"
