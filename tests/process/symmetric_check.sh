#!/usr/bin/env bash
# hccl-tune bench --symmetric --check at RANKS processes: buffers from symmetric memory (each rank's memfd mapped
# by the others through /proc/PID/fd), under auto: allreduce and reducescatter for fp32 sum (the fused kernel)
# and bf16 max (the tiled path), allgather and broadcast, 8 B..8 MiB, with ordinary stores and then with
# non-temporal stores from 4 KiB. Asserts every row checked ok, and that `symmetric` ran exactly from
# SymmetricFromBytes (runtime/api/communicator.h) up.
# Usage: symmetric_check.sh HCCL_TUNE_BINARY RANKS
set -euo pipefail
bin=$1 ranks=$2
export HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=60 HCCL_TUNE_DAEMON=off
from_bytes() {  # COLL: SymmetricFromBytes at this many ranks
  case $1 in
    allreduce) ((ranks <= 2)) && echo 1024 || echo 4096 ;;
    reducescatter) ((ranks <= 2)) && echo 2048 || echo 8192 ;;
    *) ((ranks <= 2)) && echo 2048 || echo 16384 ;;
  esac
}
for nt in auto 4K; do
  for dt in "allreduce fp32 sum" "allreduce bf16 max" "reducescatter fp32 sum" "reducescatter bf16 max" \
            "allgather fp16 sum" "broadcast int32 sum"; do
    set -- $dt
    from=$(from_bytes "$1")
    # Sizes from 8 B (allgather/reducescatter: one element per rank) to 8 MiB: 21 rows at 2 ranks.
    lo=8
    [[ $1 == allgather || $1 == reducescatter ]] && lo=$((ranks * 4))
    out=$(HCCL_TUNE_NT_STORES=$nt "$bin" bench --coll "$1" --ranks "$ranks" --symmetric --check --dtype "$2" \
          --op "$3" --min-bytes $lo --max-bytes 8M --iters 3 --warmup 1 2>&1)
    rows=$(grep -c "^$1 " <<<"$out" || true)
    ok=$(grep -c 'check ok' <<<"$out" || true)
    if [[ $rows -lt 18 || $ok -ne $rows ]] || grep -q 'CHECK FAILED' <<<"$out"; then
      echo "$out"
      echo "FAILED: $* at $ranks ranks, HCCL_TUNE_NT_STORES=$nt: $ok of $rows rows checked ok" >&2
      exit 1
    fi
    wrong=$(awk -v c="$1" -v from="$from" '$1 == c && (($3 >= from) != ($4 ~ /^symmetric\(/))' <<<"$out")
    if [[ -n $wrong ]]; then
      echo "$out"
      echo "FAILED: symmetric should run exactly from $from bytes; these rows disagree:" >&2
      echo "$wrong" >&2
      exit 1
    fi
    echo "$* (NT stores $nt): $ok rows verified, symmetric from $from bytes"
  done
done
