#!/usr/bin/env bash
# Init time of hccl-tune's communicator and of Gloo's under Open MPI's mpirun, for each world size: from the moment
# the last rank starts its init to the moment the last rank is past a first barrier (tests/perf/init_time.cc;
# Gloo from C++, init_time_gloo.cc, over the same launcher rendezvous; with "torch", also torch's ProcessGroupGloo,
# init_time_gloo.py, whose torch import is not counted; the launcher's start skew is not counted), the median of
# REPS jobs, the libraries' jobs interleaved. Prints a Markdown table.
# Usage: tests/perf/init_time.sh HCCLTUNE_INIT_TIME_BINARY [SIZES (default "8 32 64 128")] [REPS (default 3)]
#        [torch]   (hccltune-init-time-gloo is looked for beside HCCLTUNE_INIT_TIME_BINARY)
set -euo pipefail
bin=$1
sizes=${2:-8 32 64 128}
reps=${3:-3}
torch=${4:-}
gloo_bin=$(dirname "$bin")/hccltune-init-time-gloo
[[ -x $gloo_bin ]] || { echo "init_time.sh: $gloo_bin not built (needs libgloo-dev)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
export HCCL_TUNE_DAEMON=off HCCL_CONNECT_TIMEOUT=300
unset MASTER_ADDR MASTER_PORT RANK WORLD_SIZE HCCL_TUNE_STORE
slowest() {  # the last end minus the last start, in ms; fails unless all N ranks reported
  awk '$1 == "init_ms" { if ($4 > s) s = $4; if ($5 > e) e = $5; n++ }
       END { if (n != N) exit 1; printf "%.1f\n", (e - s) * 1000 }' N="$1"
}
# Runs "$@" (a launch of N ranks) until every rank reported, at most 3 times (a launch whose output lost a rank's
# line — seen with 32 torch processes on 2 cores — is rerun, and says so on stderr); prints the slowest time.
measure() {
  local n=$1 try out
  shift
  for try in 1 2 3; do
    if out=$("$@" | slowest "$n"); then echo "$out"; return 0; fi
    echo "init_time.sh: $n ranks: not every rank reported (try $try of 3): ${*: -1}" >&2
  done
  return 1
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
mpi=(mpirun.openmpi --oversubscribe --allow-run-as-root)
if [[ $torch == torch ]]; then
  echo "| ranks | hccl-tune init ms | Gloo init ms | Gloo / hccl-tune | torch Gloo init ms |"
  echo "| ---: | ---: | ---: | ---: | ---: |"
else
  echo "| ranks | hccl-tune init ms | Gloo init ms | Gloo / hccl-tune |"
  echo "| ---: | ---: | ---: | ---: |"
fi
for n in $sizes; do
  h=() g=() t=()
  for ((i = 0; i < reps; i++)); do
    h+=("$(measure "$n" "${mpi[@]}" -np "$n" "$bin")")
    g+=("$(measure "$n" "${mpi[@]}" -np "$n" "$gloo_bin")")
    [[ $torch == torch ]] || continue
    port=$(/usr/bin/python3 "$here/../python/free_port.py" $$)
    t+=("$(MASTER_ADDR=127.0.0.1 MASTER_PORT=$port measure "$n" "${mpi[@]}" -x MASTER_ADDR -x MASTER_PORT -np "$n" \
      /usr/bin/python3 "$here/init_time_gloo.py")")
  done
  hm=$(printf '%s\n' "${h[@]}" | median)
  gm=$(printf '%s\n' "${g[@]}" | median)
  row="| $n | $hm | $gm | $(awk -v a="$gm" -v b="$hm" 'BEGIN { printf "%.2f", a / b }') |"
  [[ $torch == torch ]] && row+=" $(printf '%s\n' "${t[@]}" | median) |"
  echo "$row"
done
