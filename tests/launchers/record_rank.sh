#!/usr/bin/env bash
# Runs one rank of a launched job and records it: stdout, stderr and exit status in DIR/{out,err,rc}.RANK, the
# rank taken from whichever launcher started it (Slurm, Open MPI, MPICH). With HCT_SKIP_RANK=R, rank R exits at
# once without running the command (a rank that never arrives).
# Usage: record_rank.sh DIR COMMAND [ARGS...]
set -uo pipefail
dir=$1
shift
rank=${SLURM_PROCID:-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-}}}
[[ -n $rank ]] || { echo "record_rank: no launcher rank variable (SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK)" >&2; exit 2; }
if [[ ${HCT_SKIP_RANK:-} == "$rank" ]]; then
  echo skipped >"$dir/rc.$rank"
  exit 0
fi
"$@" >"$dir/out.$rank" 2>"$dir/err.$rank"
rc=$?
echo "$rc" >"$dir/rc.$rank"
exit "$rc"
