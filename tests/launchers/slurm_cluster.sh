#!/usr/bin/env bash
# A one-node Slurm cluster for tests: generates munge.key and slurm.conf in a temporary directory, starts
# munged, slurmctld and slurmd (as root, in the foreground of background jobs), waits until the node is idle,
# runs the given command with SLURM_CONF pointing at the cluster, then stops everything and removes the directory.
# mpi.conf beside slurm.conf keeps the PMIx plugin's files (srun --mpi=pmix) in that directory too.
# The node oversubscribes (SlurmdParameters=config_overrides and CPUs=64), so `srun -n 8` runs on 2 cores.
#
# Usage: tests/launchers/slurm_cluster.sh COMMAND [ARGS...]     (the command's exit status is the script's)
#        SLURM_CLUSTER_CONF_EXTRA='MpiParams=ports=12000-12999' adds lines to slurm.conf.
set -euo pipefail

for tool in munged mungekey slurmctld slurmd srun sinfo; do
  command -v "$tool" >/dev/null || [[ -x /usr/sbin/$tool ]] || {
    echo "slurm_cluster: $tool is missing (deploy/install-deps.sh installs slurm-wlm and munge)" >&2
    exit 1
  }
done
PATH=$PATH:/usr/sbin
if [[ $(id -u) -ne 0 ]]; then
  echo "slurm_cluster: slurmd runs jobs as their user only as root; run as root" >&2
  exit 1
fi

dir=$(mktemp -d /tmp/hct-slurm.XXXXXX)
chmod 700 "$dir"
pids=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if ((rc != 0)); then
    for f in "$dir"/*.log; do [[ -f $f ]] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }; done
  fi
  rm -rf "$dir"
  exit "$rc"
}
trap cleanup EXIT

# Two free TCP ports for slurmctld and slurmd.
read -r ctld_port slurmd_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
node=$(hostname -s)

mungekey --create --keyfile="$dir/munge.key" >/dev/null
munged --force --socket="$dir/munge.sock" --key-file="$dir/munge.key" --pid-file="$dir/munged.pid" \
  --log-file="$dir/munged.log" --seed-file="$dir/munge.seed" --foreground >"$dir/munged.out" 2>&1 &
pids+=($!)

cat >"$dir/slurm.conf" <<CONF
ClusterName=hct
SlurmctldHost=$node
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmdParameters=config_overrides
NodeName=$node CPUs=64 State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
${SLURM_CLUSTER_CONF_EXTRA:-}
CONF
# srun --mpi=pmix: the PMIx plugin's client directories under the cluster's directory, not /tmp/spmix_appdir_UID_JOB.STEP,
# which a cluster started earlier (its job ids also count from 1) may have left behind.
echo "PMIxCliTmpDirBase=$dir/pmix" >"$dir/mpi.conf"
mkdir -p "$dir/state" "$dir/spool" "$dir/pmix"
export SLURM_CONF=$dir/slurm.conf

for _ in $(seq 100); do [[ -S $dir/munge.sock ]] && break; sleep 0.1; done
slurmctld -D -i -f "$SLURM_CONF" >"$dir/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -N "$node" -f "$SLURM_CONF" >"$dir/slurmd.out" 2>&1 &
pids+=($!)

# The node is up once sinfo reports it idle (seconds).
for i in $(seq 300); do
  state=$(sinfo -h -N -o '%T' 2>/dev/null | head -n 1 || true)
  [[ $state == idle ]] && break
  if ((i == 300)); then echo "slurm_cluster: node $node not idle after 30 s (state '$state')" >&2; exit 1; fi
  sleep 0.1
done

"$@"
