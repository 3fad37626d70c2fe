#!/usr/bin/env bash
# Write the one-node cluster's configuration: slurm.conf (partitions cpu and gpu), gres.conf,
# slurmdbd.conf, a munge key. No systemd and no usable cgroups: processes are tracked by
# proctrack/linuxproc, tasks are not confined (task/none), and memory is enforced by polling
# (JobAcctGatherParams=OverMemoryKill). The gpu partition's GRES is declared with File=/dev/null:
# a count-only `Gres=gpu:1` line without a File drains the node. Root only.
set -euo pipefail
. "$(dirname "$0")/env.sh"
D="$VERBEVAL_SLURM_DIR"
mkdir -p "$D"/{state,spool,log} /etc/slurm /run/munge /var/log/munge /var/lib/munge /run/mysqld
mkdir -p "$D/munge" "$D/mariadb"   # PID and log files of the daemons that do not run as root
chown mysql:mysql /run/mysqld "$D/mariadb"
chown munge:munge "$D/munge"
CPUS=$(nproc)
# The node declares 64 GB (config_overrides: slurmd does not check it against the machine) so that
# the shipped profile's requests (32000 MB for a model job) are accepted unchanged on a smaller CI
# machine; OverMemoryKill still kills a job that uses more than it asked for.
MEM_MB=65536

# munge: one key shared by every daemon and command of the cluster
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
fi
chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge
chmod 0700 /etc/munge && chmod 0400 /etc/munge/munge.key

cat > /etc/slurm/slurm.conf <<CONF
ClusterName=verbeval-ci
SlurmctldHost=$SLURM_NODE
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherParams=OverMemoryKill
JobAcctGatherFrequency=task=2
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStorageTRES=gres/gpu
AccountingStorageEnforce=associations
GresTypes=gpu
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
# squeue (the profile's status command) sees a finished job for MinJobAge seconds; the plugin
# wants at least 3 x init-seconds-before-status-checks (docs/workflow.md)
MinJobAge=300
ReturnToService=2
SlurmdParameters=config_overrides
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
NodeName=$SLURM_NODE CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes=$SLURM_NODE Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$SLURM_NODE MaxTime=INFINITE State=UP
CONF
echo "NodeName=$SLURM_NODE Name=gpu File=/dev/null" > /etc/slurm/gres.conf

cat > /etc/slurm/slurmdbd.conf <<CONF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=verbeval-ci
PidFile=$D/slurmdbd.pid
LogFile=$D/log/slurmdbd.log
CONF
chmod 0600 /etc/slurm/slurmdbd.conf
echo "slurm-ci configure: node $SLURM_NODE, $CPUS CPUs, ${MEM_MB} MB, partitions cpu and gpu (gres gpu:1 File=/dev/null)"
