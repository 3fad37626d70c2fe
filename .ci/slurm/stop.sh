#!/usr/bin/env bash
# Stop the one-node cluster's daemons, each by the PID it recorded under $VERBEVAL_SLURM_DIR
# (slurmd first, munged last); nothing else is touched.
set -uo pipefail
. "$(dirname "$0")/env.sh"
D="$VERBEVAL_SLURM_DIR"
for f in "$D/slurmd.pid" "$D/slurmctld.pid" "$D/slurmdbd.pid" "$D/mariadb/mariadbd.pid" "$D/munge/munged.pid"; do
  [ -s "$f" ] || continue
  pid=$(cat "$f")
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
  fi
  rm -f "$f"
done
echo "slurm-ci stop: daemons stopped"
