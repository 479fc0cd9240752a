#!/usr/bin/env bash
# hccl-tune bench --check with shm single copy (CMA) at RANKS processes: every algorithm of the collectives whose
# large messages it carries, sizes 4K..4M, single copy from 8 KiB messages whatever this machine's measured
# threshold (HCCL_TUNE_SINGLE_COPY=8K: messages at and above it and below it), then the
# same with HCCL_TUNE_SINGLE_COPY=off (the ring fallback), then single copy with non-temporal stores for every call
# from 4 KiB (HCCL_TUNE_NT_STORES=4K: streamed reductions, ring copies and own-block copies into the output).
# Asserts that every rank probed single copy as allowed in the first and third passes (no "no single copy" line at
# log level info) and reported the fallback in the second.
# Usage: single_copy_check.sh HCCL_TUNE_BINARY RANKS
set -euo pipefail
bin=$1 ranks=$2
export HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=60 HCCL_TUNE_DAEMON=off HCCL_TUNE_LOG_LEVEL=info
total=0
for mode in 8K off nt; do
  for coll in allgather broadcast allreduce reducescatter reduce gather scatter alltoall allgatherv; do
    sc=8K nt=auto
    [[ $mode == off ]] && sc=off
    [[ $mode == nt ]] && nt=4K
    out=$(HCCL_TUNE_SINGLE_COPY=$sc HCCL_TUNE_NT_STORES=$nt "$bin" bench --coll "$coll" --ranks "$ranks" --algo all --link shm --check \
          --min-bytes 4K --max-bytes 4M --iters 2 --warmup 1 --root $((ranks - 1)) 2>&1)
    ok=$(grep -c 'check ok' <<<"$out" || true)
    if grep -q 'CHECK FAILED' <<<"$out" || [[ $ok -eq 0 ]]; then
      echo "$out"
      echo "FAILED: $coll at $ranks ranks, mode $mode (HCCL_TUNE_SINGLE_COPY=$sc HCCL_TUNE_NT_STORES=$nt)" >&2
      exit 1
    fi
    # Every rank took the forced threshold (logged at init), so 8-16 KiB messages are single-copied here too.
    forced=$(grep -c 'single copy from 8192-byte messages (HCCL_TUNE_SINGLE_COPY)' <<<"$out" || true)
    if [[ $mode != off && $forced -lt $ranks ]]; then
      grep 'single copy' <<<"$out" >&2 || true
      echo "FAILED: $coll at $ranks ranks, mode $mode: $forced of $ranks ranks report the 8 KiB threshold" >&2
      exit 1
    fi
    fallback=$(grep -c 'no single copy' <<<"$out" || true)
    if [[ $mode != off && $fallback -ne 0 ]] || [[ $mode == off && $fallback -eq 0 ]]; then
      grep 'single copy' <<<"$out" >&2 || true
      echo "FAILED: $coll at $ranks ranks, HCCL_TUNE_SINGLE_COPY=$mode: $fallback fallback lines" >&2
      exit 1
    fi
    total=$((total + ok))
    echo "$coll ($mode): $ok checked rows"
  done
done
echo "single copy: $total rows verified at $ranks ranks"
