#!/usr/bin/env bash
# hccl-tune bench --check for the ring algorithms that reduce straight out of the shm ring (allreduce ring,
# double_ring, reducescatter ring, reduce reducescatter_gather) at RANKS processes: odd and large sizes, chunks
# of 4K and 1M, several dtypes, in a small HCCL_BUFFSIZE so the ring wraps inside messages.
set -euo pipefail
tune=$1 ranks=$2
export HCCL_BUFFSIZE=1
fail=0
for dtype in float32 float64 int8 float16 bfloat16; do
  for coll in allreduce reducescatter reduce; do
    case $coll in
      allreduce) algos="ring(chunk=4K,link=shm) ring(chunk=1M,link=shm) double_ring(chunk=4K,link=shm)" ;;
      reducescatter) algos="ring(chunk=4K,link=shm) ring(chunk=1M,link=shm)" ;;
      reduce) algos="reducescatter_gather(link=shm)" ;;
    esac
    for algo in $algos; do
      out=$("$tune" bench --coll "$coll" --ranks "$ranks" --dtype "$dtype" --min-bytes 1 --max-bytes 4M --algo "$algo" \
        --check --iters 1 --warmup 1 2>&1) || { echo "$out"; fail=1; continue; }
      if grep -q "CHECK FAILED" <<<"$out" || ! grep -q "check ok" <<<"$out"; then
        echo "$out"; fail=1
      fi
    done
  done
done
exit $fail
