#!/usr/bin/env bash
# A BYTES-byte message between two ranks over `link=ucx` against UCX's own point-to-point ceiling on the same
# transport, interleaved repetition by repetition: `ucx_perftest -t tag_bw` (ucx-utils; deploy/install-deps.sh)
# between two processes on this node, then `hccl-tune bench --coll broadcast --ranks 2 --link ucx` (2 ranks: the
# binomial tree is one tagged send from rank 0 and one receive on rank 1; time = max over ranks, median of its
# iterations). Prints each figure per repetition, the medians and ours / perftest (bandwidth; >= 0.9 is the target).
#
# Usage: tests/perf/ucx_perftest_compare.sh [-b BUILD_DIR] [-r REPS] [-s BYTES] [-t UCX_TLS]
#   defaults: build, 5 repetitions, 67108864 bytes, UCX_TLS=tcp (run it while nothing else benchmarks)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$here/../../build reps=5 bytes=67108864 tls=tcp
while getopts b:r:s:t: o; do
  case $o in
    b) build=$OPTARG ;; r) reps=$OPTARG ;; s) bytes=$OPTARG ;; t) tls=$OPTARG ;;
    *) sed -n '2,9p' "$0"; exit 2 ;;
  esac
done
tune=$build/tuner/hccl-tune
command -v ucx_perftest >/dev/null || { echo "no ucx_perftest: run deploy/install-deps.sh (ucx-utils)" >&2; exit 2; }
[[ -x $tune ]] || { echo "no $tune: build first" >&2; exit 2; }
export UCX_TLS=$tls
mib=$(python3 -c "print($bytes / 1048576)")
perf=() ours=()
echo "# $(date -u +%FT%TZ) bytes=$bytes UCX_TLS=$tls reps=$reps load=$(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= reps; r++)); do
  port=$((20000 + RANDOM % 20000))
  timeout 120 ucx_perftest -t tag_bw -s "$bytes" -n 10 -p "$port" >/dev/null 2>&1 &
  server=$!
  sleep 0.5
  # Final: iterations, overhead 50%ile/average/overall (us), bandwidth average/overall (MB/s = MiB/s), rates
  p=$(timeout 120 ucx_perftest 127.0.0.1 -t tag_bw -s "$bytes" -n 10 -p "$port" 2>&1 | awk '/^Final:/ {print $6}')
  wait "$server" || true
  t=$("$tune" bench --coll broadcast --ranks 2 --link ucx --min-bytes "$bytes" --max-bytes "$bytes" 2>&1 |
    awk '$1 == "broadcast" && $3 ~ /^[0-9]+$/ {print $5}')
  o=$(python3 -c "print(f'{$mib / ($t / 1e6):.1f}')")
  echo "repetition $r: ucx_perftest tag_bw ${p} MiB/s, hccl-tune broadcast link=ucx ${t} us = ${o} MiB/s"
  perf+=("$p") ours+=("$o")
done
python3 - "${perf[*]}" "${ours[*]}" <<'PY'
import statistics, sys
p = statistics.median(map(float, sys.argv[1].split())); o = statistics.median(map(float, sys.argv[2].split()))
print(f"median: ucx_perftest {p:.1f} MiB/s, ours {o:.1f} MiB/s, ours / ucx_perftest = {o / p:.3f}")
PY
