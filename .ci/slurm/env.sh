# Shared settings of the one-node CI cluster (.ci/slurm/*.sh source this file).
# Everything the daemons write (state, spool, logs, PID files, the MariaDB socket) lives under
# $VERBEVAL_SLURM_DIR; the configuration goes to /etc/slurm (where the SLURM commands read it).
VERBEVAL_SLURM_DIR="${VERBEVAL_SLURM_DIR:-/tmp/verbeval-slurm}"
SLURM_ACCOUNT_CI="verbeval-ci"
SLURM_NODE="$(hostname -s)"
# the default sockets, where slurmdbd (StorageHost=localhost) and the SLURM plugins look for them
MYSQL_SOCKET="/run/mysqld/mysqld.sock"
