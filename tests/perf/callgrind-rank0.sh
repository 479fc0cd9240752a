#!/usr/bin/env bash
# Instructions per call on one rank of a small collective: rank 0 of a launched `hccl-tune bench` runs under
# callgrind, the other ranks natively (so rank 0 seldom waits and its profile is the call's own work).
# Usage: tests/perf/callgrind-rank0.sh [-b BUILD_DIR] [-n RANKS=4] [-c COLL=allreduce] [-s BYTES=8] [-i ITERS=5000] [-o OUT]
# Then: callgrind_annotate --inclusive=yes OUT | grep -E 'CommImpl::(Allreduce|Barrier)\(' — inclusive
# instructions over the calls made (ITERS + 100 warm-up, plus one setup call).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build n=4 coll=allreduce bytes=8 iters=5000 out=callgrind.rank0.out
while getopts b:n:c:s:i:o: o; do
  case $o in
    b) build=$OPTARG ;; n) n=$OPTARG ;; c) coll=$OPTARG ;; s) bytes=$OPTARG ;; i) iters=$OPTARG ;; o) out=$OPTARG ;;
    *) sed -n '2,6p' "$0"; exit 2 ;;
  esac
done
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
bin=$build/tuner/hccl-tune
[[ -x $bin ]] || { echo "no $bin: build first" >&2; exit 2; }
export HCCL_TUNE_DAEMON=off WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1
export MASTER_PORT=$((30000 + RANDOM % 20000)) HCCL_CONNECT_TIMEOUT=120 HCCL_EXEC_TIMEOUT=600
args=(bench --launched --coll "$coll" --min-bytes "$bytes" --max-bytes "$bytes" --iters "$iters" --warmup 100)
pids=()
for ((r = 0; r < n; r++)); do
  if ((r == 0)); then
    RANK=0 LOCAL_RANK=0 valgrind -q --tool=callgrind --callgrind-out-file="$out" "$bin" "${args[@]}" &
  else
    RANK=$r LOCAL_RANK=$r "$bin" "${args[@]}" >/dev/null &
  fi
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
echo "callgrind profile of rank 0: $out" >&2
exit $rc
