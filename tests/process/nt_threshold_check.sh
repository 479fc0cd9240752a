#!/usr/bin/env bash
# HCCL_TUNE_NT_STORES=auto at RANKS processes on one node: allreduce and reducescatter stream their output from
# clamp(LLC / (2 x RANKS), 4 MiB, 32 MiB) — the LLC read here from sysfs as the runtime does (level 3 or above, the
# largest level; none: 32 MiB) — and other collectives (allgather) from 32 MiB. Checks every rank's debug line
# ("output streamed") just below and at the threshold, and that an explicit size applies to every collective.
# Usage: nt_threshold_check.sh HCCL_TUNE_BINARY RANKS
set -euo pipefail
bin=$1 ranks=$2
export HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=60 HCCL_TUNE_DAEMON=off HCCL_TUNE_LOG_LEVEL=debug
llc=0 level=0
for d in /sys/devices/system/cpu/cpu0/cache/index*; do
  [[ -r $d/level && -r $d/type && -r $d/size ]] || continue
  [[ $(cat "$d/type") == Instruction ]] && continue
  l=$(cat "$d/level") sz=$(cat "$d/size")
  case $sz in *K) b=$((${sz%K} << 10)) ;; *M) b=$((${sz%M} << 20)) ;; *G) b=$((${sz%G} << 30)) ;; *) b=$sz ;; esac
  if ((l > level && b > 0)); then level=$l llc=$b; fi
done
((level >= 3)) || llc=0
mib=$((1 << 20))
want=$((32 * mib))
if ((llc > 0)); then
  want=$((llc / (2 * ranks)))
  ((want < 4 * mib)) && want=$((4 * mib))
  ((want > 32 * mib)) && want=$((32 * mib))
fi
# The threshold is a call size; bench sizes are powers of two, so test the power of two at or above it.
at=$((4 * mib))
while ((at < want)); do at=$((at * 2)); done
below=$((at / 2))
echo "last-level cache $llc bytes (level $level): reductions stream from $want bytes; testing $below and $at"
streamed() {  # collective bytes [env...] -> how many ranks logged the call of that size as streamed
  local coll=$1 bytes=$2
  shift 2
  env "$@" "$bin" bench --coll "$coll" --ranks "$ranks" --min-bytes "$bytes" --max-bytes "$bytes" --iters 1 \
    --warmup 1 --check 2>&1 | grep -c " $coll fp32 $bytes B .* output streamed " || true
}
expect() {  # description got want
  if [[ $2 -ne $3 ]]; then
    echo "FAILED: $1: $2 of $ranks ranks streamed, expected $3" >&2
    exit 1
  fi
  echo "ok: $1"
}
# Each call is logged once per rank; the checked call and the timed ones all count, so compare with 0 or >= ranks.
n=$(streamed allreduce $at); expect "allreduce of $at" $((n >= ranks ? ranks : n)) $ranks
n=$(streamed reducescatter $at); expect "reducescatter of $at" $((n >= ranks ? ranks : n)) $ranks
n=$(streamed allreduce $below); expect "allreduce of $below" "$n" 0
if ((at < 32 * mib)); then
  n=$(streamed allgather $at); expect "allgather of $at (32 MiB for non-reductions)" "$n" 0
fi
n=$(streamed allgather $below HCCL_TUNE_NT_STORES=$below); expect "allgather of $below with HCCL_TUNE_NT_STORES=$below" $((n >= ranks ? ranks : n)) $ranks
n=$(streamed allreduce $at HCCL_TUNE_NT_STORES=off); expect "allreduce of $at with HCCL_TUNE_NT_STORES=off" "$n" 0
echo "NT stores thresholds: all checks passed at $ranks ranks"
