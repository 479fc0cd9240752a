#!/usr/bin/env bash
# Runs `hccl-tune bench --algo all --check` for every collective; fails on any mismatch or error.
# Usage: bench_check_all.sh HCCL_TUNE_BINARY RANKS LINK
set -euo pipefail
bin=$1 ranks=$2 link=$3
export HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=60 HCCL_BUFFSIZE=2
total=0
for coll in allreduce allgather allgatherv reducescatter broadcast reduce gather scatter alltoall alltoallv barrier sendrecv; do
  algo=all
  [[ $coll == sendrecv ]] && algo=auto
  out=$("$bin" bench --coll "$coll" --ranks "$ranks" --algo "$algo" --link "$link" --check \
        --min-bytes 0 --max-bytes 1M --iters 2 --warmup 1 --root $((ranks - 1)))
  ok=$(grep -c 'check ok' <<<"$out" || true)
  if grep -q 'CHECK FAILED' <<<"$out" || [[ $ok -eq 0 ]]; then
    echo "$out"
    echo "FAILED: $coll at $ranks ranks over $link" >&2
    exit 1
  fi
  [[ $coll == sendrecv ]] || grep -q "link=$link" <<<"$out" || { echo "$out"; echo "FAILED: rows do not show link=$link" >&2; exit 1; }
  total=$((total + ok))
  echo "$coll: $ok checked rows"
done
echo "bench --check: $total rows verified at $ranks ranks over $link"
