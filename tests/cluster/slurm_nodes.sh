#!/usr/bin/env bash
# A multi-node Slurm on an emulated cluster (deploy/cluster/cluster.sh, already up): one munged (its socket is a
# file, shared by every namespace), slurmctld in node 0, and one slurmd per node in that node's namespace, as
# host NAME-nK (NodeName; the cluster's hosts files resolve it to the node's fast0 address). Waits until every
# node is idle, runs COMMAND in node 0 with SLURM_CONF set, then stops everything and removes its directory.
# A TaskProlog exports each node's HCCL_TUNE_DAEMON (its env file) into the tasks there, as a real cluster's
# per-node daemon at one path would need no setting. Nodes oversubscribe (CPUs=64).
#
# Usage: slurm_nodes.sh NAME NODES COMMAND [ARGS...]   (the command's exit status is the script's)
set -euo pipefail
name=$1 nodes=$2
shift 2
PATH=$PATH:/usr/sbin
root=$(cd "$(dirname "$0")/../.." && pwd)
cluster=("$root/deploy/cluster/cluster.sh")
cdir=/tmp/hccl-tune-cluster/$name
for tool in munged mungekey slurmctld slurmd srun sinfo; do
  command -v "$tool" >/dev/null || { echo "slurm_nodes: $tool is missing (deploy/install-deps.sh)" >&2; exit 1; }
done
[[ -f $cdir/cluster.conf ]] || { echo "slurm_nodes: cluster '$name' is not up" >&2; exit 1; }

dir=$(mktemp -d "/tmp/hct-slurm-$name.XXXXXX")
chmod 755 "$dir"
munge_pid="" ctld_pid="" slurmd_pids=()
# stop PID...: TERM, then KILL whatever still runs after 5 s.
stop() {
  local p alive
  (($#)) || return 0
  kill "$@" 2>/dev/null || true
  for _ in $(seq 50); do
    alive=0
    for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  kill -KILL "$@" 2>/dev/null || true
  for p in "$@"; do wait "$p" 2>/dev/null || true; done
}
# The last steps' completion messages reach slurmctld (through munged) before anything stops: a slurmstepd
# whose message cannot be authenticated retries for ever and holds its slurmd. Then slurmds, slurmctld, munged.
cleanup() {
  local rc=$?
  if [[ -n $ctld_pid ]]; then
    for _ in $(seq 100); do
      [[ -z $("${cluster[@]}" exec --name "$name" 0 -- squeue -h 2>/dev/null) ]] && break
      sleep 0.1
    done
  fi
  stop "${slurmd_pids[@]}"
  stop $ctld_pid
  stop $munge_pid
  if ((rc != 0)); then
    for f in "$dir"/*.log; do [[ -f $f ]] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }; done
  fi
  rm -rf "$dir"
  exit "$rc"
}
trap cleanup EXIT

mungekey --create --keyfile="$dir/munge.key" >/dev/null
munged --force --socket="$dir/munge.sock" --key-file="$dir/munge.key" --pid-file="$dir/munged.pid" \
  --log-file="$dir/munged.log" --seed-file="$dir/munge.seed" --foreground >"$dir/munged.out" 2>&1 &
munge_pid=$!

cat >"$dir/task_prolog.sh" <<PROLOG
#!/bin/sh
# SLURMD_NODENAME is $name-nK: the tasks of node K talk to node K's hccl-tuned.
echo "export \$(cat $cdir/n\${SLURMD_NODENAME##*-n}.env)"
PROLOG
chmod 755 "$dir/task_prolog.sh"
last=$((nodes - 1))
cat >"$dir/slurm.conf" <<CONF
ClusterName=hct
SlurmctldHost=$name-n0
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
TaskProlog=$dir/task_prolog.sh
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmdParameters=config_overrides
NodeName=$name-n[0-$last] CPUs=64 State=UNKNOWN
PartitionName=test Nodes=$name-n[0-$last] Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
mkdir -p "$dir/state"
for ((k = 0; k < nodes; k++)); do mkdir -p "$dir/spool-$name-n$k"; done
export SLURM_CONF=$dir/slurm.conf

for _ in $(seq 100); do [[ -S $dir/munge.sock ]] && break; sleep 0.1; done
"${cluster[@]}" exec --name "$name" 0 -- slurmctld -D -i -f "$SLURM_CONF" >"$dir/slurmctld.out" 2>&1 &
ctld_pid=$!
for ((k = 0; k < nodes; k++)); do
  # `ip netns exec` mounts a fresh /sys, hiding the host's cgroup mounts, and slurmd stops when /sys/fs/cgroup is
  # not a file system: a tmpfs there (in the namespace's own mount namespace) gives it cgroup v1's layout, which
  # proctrack/linuxproc and task/none never use.
  "${cluster[@]}" exec --name "$name" "$k" -- sh -c 'mount -t tmpfs cgroup_root /sys/fs/cgroup && mkdir /sys/fs/cgroup/systemd && mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd && exec "$@"' slurmd \
    slurmd -D -N "$name-n$k" -f "$SLURM_CONF" >"$dir/slurmd-$k.out" 2>&1 &
  slurmd_pids+=($!)
done

# Every node is up once sinfo (from node 0) reports it idle.
for i in $(seq 300); do
  idle=$("${cluster[@]}" exec --name "$name" 0 -- sinfo -h -N -o '%T' 2>/dev/null | grep -c '^idle$' || true)
  ((idle == nodes)) && break
  if ((i == 300)); then echo "slurm_nodes: $idle of $nodes nodes idle after 30 s" >&2; exit 1; fi
  sleep 0.1
done
"${cluster[@]}" exec --name "$name" 0 -- "$@"
