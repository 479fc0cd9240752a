#!/usr/bin/env bash
# hccl-tune bench --symmetric --check at RANKS processes: buffers from symmetric memory (each rank's memfd mapped
# by the others through /proc/PID/fd), allreduce under auto for fp32 sum (the fused kernel) and bf16 max (the
# tiled path), 8 B..8 MiB, with ordinary stores and then with non-temporal stores from 4 KiB. Asserts every row
# checked ok, that `symmetric` ran from SymmetricFromBytes (1 KiB at 2 ranks, 4 KiB above) and not below it.
# Usage: symmetric_check.sh HCCL_TUNE_BINARY RANKS
set -euo pipefail
bin=$1 ranks=$2
export HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=60 HCCL_TUNE_DAEMON=off
from=4096
[[ $ranks -le 2 ]] && from=1024
for nt in auto 4K; do
  for dt in "fp32 sum" "bf16 max"; do
    set -- $dt
    out=$(HCCL_TUNE_NT_STORES=$nt "$bin" bench --ranks "$ranks" --symmetric --check --dtype "$1" --op "$2" \
          --min-bytes 8 --max-bytes 8M --iters 3 --warmup 1 2>&1)
    rows=$(grep -c '^allreduce' <<<"$out" || true)
    ok=$(grep -c 'check ok' <<<"$out" || true)
    if [[ $rows -ne 21 || $ok -ne 21 ]]; then
      echo "$out"
      echo "FAILED: $1 $2 at $ranks ranks, HCCL_TUNE_NT_STORES=$nt: $ok of $rows rows checked ok (want 21)" >&2
      exit 1
    fi
    wrong=$(awk -v from="$from" '$1 == "allreduce" && (($3 >= from) != ($4 ~ /^symmetric\(/))' <<<"$out")
    if [[ -n $wrong ]]; then
      echo "$out"
      echo "FAILED: symmetric should run exactly from $from bytes; these rows disagree:" >&2
      echo "$wrong" >&2
      exit 1
    fi
    echo "$1 $2 (NT stores $nt): $ok rows verified, symmetric from $from bytes"
  done
done
