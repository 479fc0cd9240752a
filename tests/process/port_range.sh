#!/usr/bin/env bash
# The TCP data listeners bind the job's addresses inside HCCL_TUNE_PORT_RANGE (docs/SECURITY.md, Job connections).
# 1. A 4-rank `bench --link tcp --check` with HCCL_TUNE_PORT_RANGE=LO-HI: while it runs, every listening socket of
#    its ranks (from `ss -ltnp`) has a port inside LO-HI and a specific address (never 0.0.0.0 or *); every rank's
#    output is checked by --check.
# 2. A range of one port for 4 ranks of one node fails with an error naming the range.
# Usage: port_range.sh HCCL_TUNE_BINARY
set -euo pipefail
bin=$1
export HCCL_TUNE_DAEMON=off HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=60
lo=$((30000 + RANDOM % 20000)) hi=$((lo + 15))
out=$(mktemp) seen=$(mktemp)
trap 'rm -f "$out" "$seen"' EXIT

HCCL_TUNE_PORT_RANGE=$lo-$hi "$bin" bench --coll allreduce --ranks 4 --link tcp --check --min-bytes 1K \
  --max-bytes 64K --iters 2000 --warmup 1 >"$out" 2>&1 &
bench=$!
# Poll until all 4 ranks listen (their pids are the bench's children), keeping every listener line seen.
for _ in $(seq 100); do
  pids=$(pgrep -d'|' -P "$bench" || true)
  [[ -n $pids ]] && ss -ltnp | grep -E "pid=($pids)," >>"$seen" || true
  [[ $(grep -o 'pid=[0-9]*' "$seen" | sort -u | wc -l) -ge 4 ]] && break
  sleep 0.1
done
rc=0
wait "$bench" || rc=$?
if [[ $rc -ne 0 ]] || grep -q 'CHECK FAILED' "$out" || ! grep -q 'check ok' "$out"; then
  cat "$out"
  echo "FAILED: bench with HCCL_TUNE_PORT_RANGE=$lo-$hi (exit status $rc)" >&2
  exit 1
fi
ranks=$(grep -o 'pid=[0-9]*' "$seen" | sort -u | wc -l)
if [[ $ranks -ne 4 ]]; then
  cat "$seen"
  echo "FAILED: saw listeners of $ranks ranks, expected 4" >&2
  exit 1
fi
sort -u "$seen" | while read -r _ _ _ local _; do
  addr=${local%:*} port=${local##*:}
  if [[ $addr == 0.0.0.0 || $addr == '*' || $addr == '[::]' || $port -lt $lo || $port -gt $hi ]]; then
    sort -u "$seen"
    echo "FAILED: a rank listens on $local (expected a specific address, port in $lo-$hi)" >&2
    exit 1
  fi
done
echo "listeners of 4 ranks: $(sort -u "$seen" | wc -l) sockets, all on specific addresses in $lo-$hi"
echo "$(grep -c 'check ok' "$out") checked rows"

rc=0
HCCL_TUNE_PORT_RANGE=$lo-$lo "$bin" bench --coll allreduce --ranks 4 --link tcp --check --min-bytes 1K \
  --max-bytes 4K --iters 2 >"$out" 2>&1 || rc=$?
if [[ $rc -eq 0 ]] || ! grep -q "no free port in HCCL_TUNE_PORT_RANGE $lo-$lo on " "$out"; then
  cat "$out"
  echo "FAILED: 4 ranks in a one-port range: exit status $rc, expected an error naming $lo-$lo" >&2
  exit 1
fi
echo "one port for 4 ranks: $(grep -m1 -o "no free port in HCCL_TUNE_PORT_RANGE $lo-$lo on [^;]*" "$out")"
