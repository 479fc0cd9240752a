#!/usr/bin/env bash
# Runs one rank of a job started by a real launcher on an emulated cluster and records it: the host it ran on
# (its node's name), stdout, stderr and exit status in DIR/{host,out,err,rc}.RANK, the rank taken from the
# launcher that started it (torchrun's RANK, Open MPI's OMPI_COMM_WORLD_RANK, Slurm's SLURM_PROCID).
# Usage: rank_run.sh DIR COMMAND [ARGS...]      (exits with COMMAND's status)
set -uo pipefail
dir=$1
shift
rank=${RANK:-${OMPI_COMM_WORLD_RANK:-${SLURM_PROCID:-}}}
[[ -n $rank ]] || { echo "rank_run: no launcher rank variable (RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID)" >&2; exit 2; }
hostname >"$dir/host.$rank"
"$@" >"$dir/out.$rank" 2>"$dir/err.$rank"
rc=$?
echo "$rc" >"$dir/rc.$rank"
exit "$rc"
