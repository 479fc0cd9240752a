#!/usr/bin/env bash
# Runs one rank of a launched job and records it: stdout, stderr and exit status in DIR/{out,err,rc}.RANK, the
# rank taken from whichever launcher started it (Slurm, Open MPI, MPICH, a PMIx server). With HCT_SKIP_RANK=R, rank
# R exits at once without running the command (a rank that never arrives). With HCT_PMIX_ALONE=1 the command runs
# without Open MPI's and Slurm's own variables (OMPI_*, SLURM_*), as under a launcher that sets only PMIx's.
# Usage: record_rank.sh DIR COMMAND [ARGS...]
set -uo pipefail
dir=$1
shift
rank=${SLURM_PROCID:-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${PMIX_RANK:-}}}}
[[ -n $rank ]] || {
  echo "record_rank: no launcher rank variable (SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK)" >&2
  exit 2
}
if [[ ${HCT_SKIP_RANK:-} == "$rank" ]]; then
  echo skipped >"$dir/rc.$rank"
  exit 0
fi
if [[ ${HCT_PMIX_ALONE:-} == 1 ]]; then
  while IFS='=' read -r name _; do
    [[ $name == OMPI_* || $name == SLURM_* ]] && unset "$name"
  done < <(env)
fi
"$@" >"$dir/out.$rank" 2>"$dir/err.$rank"
rc=$?
echo "$rc" >"$dir/rc.$rank"
exit "$rc"
