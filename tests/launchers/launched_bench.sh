#!/usr/bin/env bash
# `hccl-tune bench --launched --check` under a real launcher with no rendezvous settings (no MASTER_ADDR, no
# HCCL_TUNE_STORE): the launcher's own variables give rank, size, local rank and size and the rendezvous
# (docs/LAUNCHING.md). Checks every rank: exit status 0, its communicator of N ranks with N local, the launcher's
# rendezvous named in its log with where it came from (PMIx, or the derived host and port), and rank 0's table with
# every row checked. Then a job whose last rank never arrives: every other rank fails within HCCL_CONNECT_TIMEOUT
# naming that rank; through PMIx also one whose rank 0 never arrives (no address published: the others name it).
#   srun:           a one-node Slurm started for the test (slurm_cluster.sh), no MPI plugin: the derived rendezvous
#   srun_pmix:      the same Slurm, srun --mpi=pmix: the rendezvous through Slurm's PMIx server
#   mpirun:         Open MPI's mpirun --oversubscribe: the rendezvous through its PMIx server; then the same job
#                   with Open MPI's own variables removed (PMIx alone gives rank, size and local facts)
#   mpirun_derived: mpirun with HCCL_TUNE_PMIX=off: the host and port derived from mpirun's URI and job id
#   mpiexec:        MPICH's mpiexec (hydra): PMI-1
# With TWO_COMMUNICATORS (tests/launchers/two_communicators.cc), a job whose every rank creates a second communicator
# from the environment beside the first, then a third after both (the launcher's rendezvous reused in one process).
# Usage: launched_bench.sh srun|srun_pmix|mpirun|mpirun_derived|mpiexec HCCL_TUNE_BINARY [RANKS [TWO_COMMUNICATORS]]
set -euo pipefail
launcher=$1
bin=$(readlink -f "$2")
n=${3:-4}
two=${4:+$(readlink -f "$4")}
here=$(cd "$(dirname "$0")" && pwd)
if [[ $launcher == srun* && -z ${HCT_IN_SLURM_CLUSTER:-} ]]; then
  HCT_IN_SLURM_CLUSTER=1 exec "$here/slurm_cluster.sh" "$0" "$@"
fi
d=$(mktemp -d /tmp/hct-launched.XXXXXX)
chmod 755 "$d"
trap 'rm -rf "$d"' EXIT
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT HCCL_TUNE_MASTER_ADDR \
  HCCL_TUNE_MASTER_PORT HCCL_TUNE_STORE HCCL_TUNE_NODE_ID RANK_TABLE_FILE
export HCCL_CONNECT_TIMEOUT=20 HCCL_EXEC_TIMEOUT=30 HCCL_TUNE_DAEMON=off HCCL_TUNE_LOG_LEVEL=info

launch() {  # launch N COMMAND...: N ranks of COMMAND under the launcher, each recorded in $d
  local ranks=$1
  shift
  case $launcher in
    srun) srun -n "$ranks" bash "$here/record_rank.sh" "$d" "$@" ;;
    srun_pmix) srun --mpi=pmix -n "$ranks" bash "$here/record_rank.sh" "$d" "$@" ;;
    mpirun*) mpirun.openmpi -np "$ranks" --oversubscribe --allow-run-as-root bash "$here/record_rank.sh" "$d" "$@" ;;
    mpiexec) mpiexec.hydra -n "$ranks" bash "$here/record_rank.sh" "$d" "$@" ;;
  esac
}
fail() { for f in "$d"/err.*; do [[ -f $f ]] && { echo "--- $f"; tail -n 5 "$f"; }; done; echo "FAILED: $*" >&2; exit 1; }
bench=("$bin" bench --launched --coll allreduce --min-bytes 1K --max-bytes 64K --iters 2 --warmup 1 --check)
# The launcher's name in the log, and where its rendezvous must have come from.
case $launcher in
  srun) name=slurm origin="a port derived from job.step" ;;
  srun_pmix) name=slurm origin="rank 0's address through PMIx, namespace slurm.pmix." ;;
  mpirun) name=openmpi origin="rank 0's address through PMIx, namespace " ;;
  mpirun_derived) name=openmpi origin="a port derived from job " ;;
  mpiexec) name=mpich origin="rank 0's address through PMI_FD" ;;
  *) echo "launched_bench: unknown launcher '$launcher' (srun, srun_pmix, mpirun, mpirun_derived, mpiexec)" >&2; exit 2 ;;
esac
[[ $launcher == mpirun_derived ]] && export HCCL_TUNE_PMIX=off
if [[ $launcher == srun_pmix ]] && ! srun --mpi=list 2>&1 | grep -qw pmix; then
  echo "launched_bench: this Slurm has no pmix MPI plugin (srun --mpi=list; Debian's slurm-wlm-basic-plugins)" >&2
  exit 1
fi

start=$SECONDS
launch "$n" "${bench[@]}" || fail "$launcher exited $?"
for ((r = 0; r < n; r++)); do
  [[ $(cat "$d/rc.$r" 2>/dev/null) == 0 ]] || fail "rank $r exited $(cat "$d/rc.$r" 2>/dev/null || echo '(never ran)')"
  grep -q "rank $r/$n communicator 'world' ready: 1 node(s), $n local" "$d/err.$r" ||
    fail "rank $r did not report a communicator of $n ranks, $n local"
  grep -q "$name rendezvous at .*$origin" "$d/err.$r" ||
    fail "rank $r did not use the $name rendezvous from $origin: $(grep -o "rendezvous at.*" "$d/err.$r")"
done
grep -q "allreduce float32 sum, $n ranks\|$n ranks" "$d/out.0" || fail "rank 0 did not report $n ranks"
rows=$(grep -c "check ok" "$d/out.0" || true)
((rows == 7)) || { cat "$d/out.0"; fail "rank 0 reported $rows checked rows, expected 7 (1K to 64K)"; }
! grep -q "CHECK FAILED" "$d/out.0" || fail "a check failed"
echo "$launcher -n $n: every rank ok, $rows rows checked in $((SECONDS - start)) s; rank 1: $(grep -o "$name rendezvous at.*" "$d/err.1" | head -n 1)"

if [[ -n $two ]]; then
  rm -f "$d"/*.[0-9]*
  launch "$n" "$two" || fail "two communicators: $launcher exited $?"
  for ((r = 0; r < n; r++)); do
    grep -q "rank $r: 3 communicators of $n ranks, every result correct" "$d/out.$r" ||
      fail "two communicators: rank $r did not report 3 correct: $(tail -n 1 "$d/err.$r")"
  done
  echo "$launcher -n $n: a second communicator beside the first, then a third, in each rank: every result correct"
fi

# PMIx alone (as under prterun): Open MPI's own variables removed, rank, size and the local facts come from the
# PMIx server.
if [[ $launcher == mpirun ]]; then
  rm -f "$d"/*.[0-9]*
  (export HCT_PMIX_ALONE=1; launch "$n" "${bench[@]}") || fail "mpirun (PMIx alone) exited $?"
  for ((r = 0; r < n; r++)); do
    [[ $(cat "$d/rc.$r" 2>/dev/null) == 0 ]] || fail "PMIx alone: rank $r exited $(cat "$d/rc.$r" 2>/dev/null)"
    grep -q "rank $r/$n communicator 'world' ready: 1 node(s), $n local" "$d/err.$r" ||
      fail "PMIx alone: rank $r did not report a communicator of $n ranks, $n local"
    grep -q "pmix rendezvous at .*$origin" "$d/err.$r" || fail "PMIx alone: rank $r did not use the pmix rendezvous"
  done
  [[ $(grep -c "check ok" "$d/out.0") == 7 ]] || fail "PMIx alone: rank 0 did not check 7 rows"
  echo "mpirun -n $n, PMIx alone: every rank ok; rank 1: $(grep -o "pmix rendezvous at.*" "$d/err.1" | head -n 1)"
fi

# srun inside an sbatch allocation: the batch step's variables are overridden by the step's.
if [[ $launcher == srun ]]; then
  {
    echo '#!/bin/bash'
    printf 'srun -n %d bash' "$n"
    printf ' %q' "$here/record_rank.sh" "$d" "${bench[@]}"
    echo
  } >"$d/batch.sh"
  rm -f "$d"/*.[0-9]*
  job=$(sbatch --parsable -n "$n" -o "$d/batch.out" "$d/batch.sh")
  for ((i = 0; i < 300; i++)); do [[ -z $(squeue -h -j "$job" 2>/dev/null) ]] && break; sleep 0.1; done
  for ((r = 0; r < n; r++)); do
    [[ $(cat "$d/rc.$r" 2>/dev/null) == 0 ]] || { cat "$d/batch.out"; fail "sbatch: rank $r did not succeed"; }
  done
  [[ $(grep -c "check ok" "$d/out.0") == 7 ]] || fail "sbatch: rank 0 did not check 7 rows"
  echo "sbatch -n $n + srun: every rank ok"
fi

# The last rank never arrives: the others fail within HCCL_CONNECT_TIMEOUT and name it (rank 0 gathers, finds it
# missing and tells the others).
rm -f "$d"/*.[0-9]*
start=$SECONDS
missing=$((n - 1))
(export HCCL_CONNECT_TIMEOUT=3 HCT_SKIP_RANK=$missing; launch "$n" "${bench[@]}") &&
  fail "a job missing rank $missing succeeded"
named=0
for ((r = 0; r < missing; r++)); do
  # mpirun kills the job once a rank exits non-zero: a rank it killed first (no exit status recorded) said nothing.
  if [[ $launcher == mpirun* && ! -f $d/rc.$r ]]; then continue; fi
  [[ $(cat "$d/rc.$r" 2>/dev/null) != 0 ]] || fail "rank $r succeeded without rank $missing"
  grep -q "rank $r: ranks $missing never joined the communicator of $n ranks within 3 s (HCCL_CONNECT_TIMEOUT)" \
    "$d/err.$r" || fail "rank $r's error does not name rank $missing"
  named=$((named + 1))
done
((named > 0)) || fail "no rank named the missing rank $missing"
((SECONDS - start < 40)) || fail "the missing rank took $((SECONDS - start)) s to be reported"
echo "$launcher -n $n without rank $missing: $named ranks named it in $((SECONDS - start)) s: $(grep -h "never joined" "$d"/err.* | head -n 1)"

# Through PMIx, rank 0 never arriving: every other rank names it (no address was published) within
# HCCL_CONNECT_TIMEOUT.
if [[ $launcher == srun_pmix || $launcher == mpirun ]]; then
  rm -f "$d"/*.[0-9]*
  start=$SECONDS
  (export HCCL_CONNECT_TIMEOUT=3 HCT_SKIP_RANK=0; launch "$n" "${bench[@]}") && fail "a job missing rank 0 succeeded"
  named=0
  for ((r = 1; r < n; r++)); do
    if [[ $launcher == mpirun && ! -f $d/rc.$r ]]; then continue; fi
    grep -q "rank $r: rank 0 never published its address through PMIx (namespace .*) within 3 s (HCCL_CONNECT_TIMEOUT)" \
      "$d/err.$r" || fail "rank $r's error does not name rank 0: $(tail -n 1 "$d/err.$r" 2>/dev/null)"
    named=$((named + 1))
  done
  ((named > 0)) || fail "no rank named the missing rank 0"
  ((SECONDS - start < 40)) || fail "the missing rank 0 took $((SECONDS - start)) s to be reported"
  echo "$launcher -n $n without rank 0: $named ranks named it in $((SECONDS - start)) s: $(grep -h "never published" "$d"/err.* | head -n 1)"
fi
