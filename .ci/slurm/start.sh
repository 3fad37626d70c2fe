#!/usr/bin/env bash
# Start the one-node cluster: munged, MariaDB, slurmdbd, slurmctld, slurmd (each records its PID
# under $VERBEVAL_SLURM_DIR; stop.sh stops exactly those), then create the CI account and wait
# until the node is idle. Root only; run configure.sh first.
set -euo pipefail
. "$(dirname "$0")/env.sh"
D="$VERBEVAL_SLURM_DIR"
wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local n=$1 what=$2; shift 2
  for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
  echo "slurm-ci start: $what did not come up within $n s; logs in $D/log" >&2
  tail -n 20 "$D"/log/*.log "$D"/mariadb/*.log >&2 || true
  exit 1
}

runuser -u munge -- /usr/sbin/munged --pid-file="$D/munge/munged.pid" --force
wait_for 10 munged munge -n

mariadbd --user=mysql --datadir=/var/lib/mysql --socket="$MYSQL_SOCKET" --bind-address=127.0.0.1 \
  --pid-file="$D/mariadb/mariadbd.pid" --log-error="$D/mariadb/mariadbd.log" >/dev/null 2>&1 &
wait_for 60 MariaDB mariadb --socket="$MYSQL_SOCKET" -e "SELECT 1"
mariadb --socket="$MYSQL_SOCKET" -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'verbeval-ci';
  GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"

slurmdbd
wait_for 60 slurmdbd sacctmgr -n show cluster
sacctmgr -i -Q add cluster verbeval-ci >/dev/null 2>&1 || true
sacctmgr -i -Q add account "$SLURM_ACCOUNT_CI" cluster=verbeval-ci >/dev/null 2>&1 || true
sacctmgr -i -Q add user root account="$SLURM_ACCOUNT_CI" cluster=verbeval-ci >/dev/null 2>&1 || true

slurmctld
wait_for 60 slurmctld scontrol ping
slurmd
node_idle() { sinfo -h -N -o "%T" | grep -qE "^idle"; }
wait_for 60 "the node ($SLURM_NODE idle)" node_idle
sacctmgr -n -P show assoc account="$SLURM_ACCOUNT_CI" format=user | grep -qx root
echo "slurm-ci start: up ($(sinfo -h -o '%P %a %D %T %G' | tr '\n' ';'))"
