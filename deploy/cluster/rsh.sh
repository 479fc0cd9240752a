#!/usr/bin/env bash
# ssh for an emulated cluster (deploy/cluster/cluster.sh): `rsh.sh NAME-nK COMMAND...` runs COMMAND, a shell
# command line as ssh would pass it, in node K of cluster NAME (its namespace, env file and host name), through
# `cluster.sh exec`. Open MPI's mpirun starts its daemons on the nodes with it:
#   mpirun --mca plm_rsh_agent deploy/cluster/rsh.sh --host NAME-n0:2,NAME-n1:2 ...
# The cluster's directory is the default one (/tmp/hccl-tune-cluster/NAME) unless HCCL_TUNE_CLUSTER_DIR names it.
set -euo pipefail
host=${1:-}
[[ $host =~ ^([a-z][a-z0-9]{0,9})-n([0-9]+)$ ]] ||
  { echo "rsh.sh: host '$host': expected NAME-nK (node K of cluster NAME)" >&2; exit 255; }
shift
(($#)) || { echo "rsh.sh: no command for $host" >&2; exit 255; }
name=${BASH_REMATCH[1]} k=${BASH_REMATCH[2]}
dir=${HCCL_TUNE_CLUSTER_DIR:-/tmp/hccl-tune-cluster/$name}
exec "$(dirname "$(readlink -f "$0")")/cluster.sh" exec --name "$name" --dir "$dir" "$k" -- sh -c "$*"
