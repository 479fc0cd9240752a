#!/usr/bin/env bash
# `hccl-tune bench --launched --check` under a real torchrun launch with 2 ranks. torchrun's agent
# serves its TCPStore on MASTER_PORT; hccl-tune's env:// bootstrap rendezvouses on MASTER_PORT+1 (rank 0
# serves it), so both must work side by side. `--redirects 9:0 --tee 9:0` works around Debian's torchrun 1.13
# bug on Python 3.11 (Std.from_str returns None).
# Usage: torchrun_bench.sh HCCL_TUNE_BINARY [TORCHRUN]
set -euo pipefail
bin=$1 torchrun=${2:-/usr/bin/torchrun}
export HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=60 HCCL_TUNE_DAEMON=off
port=$(/usr/bin/python3 "$(dirname "$0")/../python/free_port.py" $$)
total=0
for coll in allreduce allgather broadcast alltoall; do
  out=$(timeout 120 "$torchrun" --redirects 9:0 --tee 9:0 --nnodes 1 --nproc_per_node 2 \
        --master_addr 127.0.0.1 --master_port "$port" --no_python \
        "$bin" bench --launched --coll "$coll" --check --min-bytes 0 --max-bytes 256K --iters 2 2>&1) || {
    echo "$out"; echo "FAILED: torchrun bench --coll $coll exited non-zero" >&2; exit 1; }
  ok=$(grep -c 'check ok' <<<"$out" || true)
  if grep -q 'CHECK FAILED' <<<"$out" || [[ $ok -eq 0 ]]; then
    echo "$out"; echo "FAILED: $coll under torchrun" >&2; exit 1
  fi
  grep -qE "(^|[[:space:]])${coll}[[:space:]]+2[[:space:]]" <<<"$out" || {
    echo "$out"; echo "FAILED: no rows for 2 ranks" >&2; exit 1; }
  total=$((total + ok))
  echo "$coll: $ok checked rows under torchrun (2 ranks)"
done
echo "torchrun bench --launched --check: $total rows verified"
