#!/usr/bin/env bash
# Two processes bootstrapped from an HCCL rank table (RANK_TABLE_FILE + RANK_ID, no RANK/WORLD_SIZE): an
# allreduce --check across them; then a table that binds both ranks to one device fails at once, on every rank,
# with an error naming both ranks.
# Usage: rank_table.sh HCCL_TUNE_BINARY
set -euo pipefail
bin=$1
d=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; rm -rf "$d"' EXIT
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT HCCL_TUNE_STORE HCCL_TUNE_NODE_ID
export HCCL_CONNECT_TIMEOUT=20 HCCL_EXEC_TIMEOUT=30 HCCL_TUNE_DAEMON=off
port=$(/usr/bin/python3 "$(dirname "$0")/../python/free_port.py" $$)
table() {  # device id of rank 1
  cat >"$d/table.json" <<JSON
{"version": "1.0", "server_count": "1", "status": "completed",
 "server_list": [{"server_id": "host-a", "device": [
   {"device_id": "0", "device_ip": "127.0.0.1", "rank_id": "0"},
   {"device_id": "$1", "device_ip": "127.0.0.1", "rank_id": "1"}]}]}
JSON
}
run() {
  pids=()
  for r in 0 1; do
    RANK_TABLE_FILE=$d/table.json RANK_ID=$r HCCL_TUNE_MASTER_PORT=$port timeout 60 "$bin" bench --launched \
      --coll allreduce --min-bytes 1K --max-bytes 1M --iters 2 --warmup 1 --check >"$d/out$r" 2>"$d/err$r" &
    pids+=($!)
  done
  rcs=()
  for p in "${pids[@]}"; do rc=0; wait "$p" || rc=$?; rcs+=("$rc"); done
}

table 1
run
[[ ${rcs[*]} == "0 0" ]] || { cat "$d"/err*; echo "FAILED: ranks exited ${rcs[*]}" >&2; exit 1; }
cat "$d/out0"
grep -q "2 ranks" "$d/out0" || { echo "FAILED: rank 0 did not report 2 ranks" >&2; exit 1; }
[[ $(grep -c "check ok" "$d/out0") -eq 11 ]] || { echo "FAILED: expected 11 checked rows" >&2; exit 1; }

table 0
start=$SECONDS
run
for r in 0 1; do
  [[ ${rcs[$r]} -ne 0 ]] || { echo "FAILED: rank $r accepted two ranks on one device" >&2; exit 1; }
  grep -q "ranks 0 and 1 are both bound to device 0 of server host-a" "$d/err$r" ||
    { cat "$d/err$r"; echo "FAILED: rank $r's error does not name both ranks" >&2; exit 1; }
done
((SECONDS - start < 10)) || { echo "FAILED: the bad table took $((SECONDS - start)) s to refuse" >&2; exit 1; }
echo "rank table: bootstrap ok; a shared device is refused at once on every rank: $(head -1 "$d/err0")"
