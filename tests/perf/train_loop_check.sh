#!/usr/bin/env bash
# hccltune-train-loop on one node: 3 local ranks (an odd world) over a file store, no daemon. Every rank checks
# the reduced gradient every step (the program exits 3 on a wrong element); rank 0's line names what ran. Bad
# arguments fail with a message naming the option.
# Usage: train_loop_check.sh HCCLTUNE_TRAIN_LOOP
set -euo pipefail
LOOP=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAILED: $*" >&2; exit 1; }
export HCCL_TUNE_DAEMON=off HCCL_TUNE_STORE="file://$dir/store" HCCL_CONNECT_TIMEOUT=20 HCCL_EXEC_TIMEOUT=30
for dtype in fp16 bf16 fp32; do
  rm -rf "$dir/store" && mkdir -p "$dir/store"
  pids=()
  for r in 0 1 2; do
    RANK=$r WORLD_SIZE=3 LOCAL_RANK=$r LOCAL_WORLD_SIZE=3 timeout 60 "$LOOP" --bytes 1M --dtype $dtype --steps 2 \
      --warmup 1 --compute-reps 1 >"$dir/r$r.out" 2>"$dir/r$r.err" &
    pids+=($!)
  done
  for r in 0 1 2; do wait "${pids[$r]}" || fail "$dtype: rank $r exited $?: $(cat "$dir/r$r.err")"; done
  cat "$dir/r0.out"
  grep -Eq "^train-loop ranks 3 nodes 1 bytes 1048576 $dtype steps 2 step_ms [0-9.]+ .* config [a-z_]+\(" "$dir/r0.out" ||
    fail "$dtype: rank 0 printed no result line"
  [[ ! -s $dir/r1.out && ! -s $dir/r2.out ]] || fail "$dtype: ranks 1-2 printed results"
done
rc=0
"$LOOP" --bytes 3 --dtype fp16 2>"$dir/err" || rc=$?
((rc == 2)) && grep -q -- "--bytes 3 is not a multiple of the fp16 size" "$dir/err" || fail "--bytes 3: rc $rc"
rc=0
"$LOOP" --steps 0 2>"$dir/err" || rc=$?
((rc == 2)) && grep -q -- "--steps '0'" "$dir/err" || fail "--steps 0: rc $rc, $(cat "$dir/err")"
rc=0
"$LOOP" --dtype int8 2>"$dir/err" || rc=$?
((rc == 2)) && grep -q -- "--dtype 'int8'" "$dir/err" || fail "--dtype int8: rc $rc, $(cat "$dir/err")"
echo "train loop: 3 ranks x {fp16,bf16,fp32} checked; bad arguments refused"
