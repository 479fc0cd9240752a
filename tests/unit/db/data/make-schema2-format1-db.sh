#!/usr/bin/env bash
# How schema2-format1.db was written: by the hccl-tune and hccl-tuned of commit 8eec491 (database schema 2,
# topology fingerprint format 1), the last release before format 2. The migration test
# (tests/unit/db/sqlite_store_test.cc, Format2Migration) opens a copy with today's code.
#
# usage: make-schema2-format1-db.sh HCCL_TUNE HCCL_TUNED OUT.db   (binaries built from that commit)
# The file holds: three sweeps run with --db and one through the daemon (rows and raw samples), a table of
# 4 versions with a rollback (1 node x 2 ranks), one of 1 version (1 node x 3 ranks), an imported 2-node table
# with TCP networks in 4 versions with a rollback, a topology whose table was forgotten (its next version number
# survives), and live statistics reported by two benches through the daemon.
set -euo pipefail
bin=$1
daemon=$2
out=$3
d=$(mktemp -d)
trap 'kill $(cat "$d/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$d"' EXIT
sweep=(--force --plain --cap-ms 5 --max-iters 5)
"$bin" sweep --db "$out" --ranks 2 --coll allreduce --min-bytes 1K --max-bytes 4K --step 4 "${sweep[@]}"
"$bin" sweep --db "$out" --ranks 2 --coll broadcast --min-bytes 1K --max-bytes 4K --step 4 "${sweep[@]}"
"$bin" sweep --db "$out" --ranks 3 --coll allreduce --min-bytes 1K --max-bytes 1K "${sweep[@]}"

# table TOPOLOGY VERSION CONFIGURATION...: an export file of one table.
table() {
  local topo=$1 version=$2 fp
  fp=$(printf '%s' "$topo" | sha256sum | cut -c1-16)
  printf '{"format": "hccl-tune-tables", "format_version": 1, "tables": [{"fingerprint": "%s", "topology": "%s", ' \
    "$fp" "${topo//\"/\\\"}"
  printf '"version": %s, "created_unix_ms": 1700000000000, "entries": [' "$version"
  printf '{"collective": "allreduce", "dtype": "fp32", "world_size": 4, "bytes": "0-64K", "configuration": "%s", ' "$3"
  printf '"time_us": 25.5, "busbw_gbps": 1.5, "samples": 40, "runner_up": "ring(link=tcp@10.77.2.0/24)", '
  printf '"margin": 0.12, "default_margin": 0.3, "sweep_id": "sw-imported", "library_version": "0.1", '
  printf '"measured_unix_ms": 1700000000000}, {"collective": "allreduce", "dtype": "bf16", "world_size": 4, '
  printf '"bytes": "64K-", "configuration": "ring(chunk=1M,link=tcp@10.77.1.0/24)", "time_us": 250, '
  printf '"busbw_gbps": 2.5, "samples": 40, "runner_up": "", "margin": 0, "default_margin": 0.05, '
  printf '"sweep_id": "sw-imported", "library_version": "0.1", "measured_unix_ms": 1700000000000}]}]}\n'
}
two='{"format":1,"inter":[{"link":"tcp","network":"10.77.1.0/24"},{"link":"tcp","network":"10.77.2.0/24"}],'
two+='"intra":["shm"],"nodes":2,"ranks_per_node":[2,2],"release":"0.1"}'
table "$two" 1 'halving_doubling(link=tcp@10.77.1.0/24)' > "$d/t1.json"
table "$two" 1 'recursive_doubling(link=tcp@10.77.2.0/24)' > "$d/t2.json"
table "$two" 1 'hierarchical(intra=ring(link=shm),inter=ring(link=tcp@10.77.1.0/24))' > "$d/t3.json"
for t in t1 t2 t3; do "$bin" import "$d/$t.json" --db "$out"; done
one_by_two=$(printf '%s' '{"format":1,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[2],"release":"0.1"}' |
  sha256sum | cut -c1-16)
"$bin" rollback --db "$out" --topology "$one_by_two"
"$bin" rollback --db "$out" --topology "$(printf '%s' "$two" | sha256sum | cut -c1-16)" --to 1

: > "$d/conf"
"$daemon" --socket "$d/s.sock" --db "$out" --config "$d/conf" & echo $! > "$d/pid"
for _ in $(seq 50); do [[ -S $d/s.sock ]] && break; sleep 0.1; done
for coll in allreduce broadcast; do
  HCCL_TUNE_DAEMON=unix:$d/s.sock HCCL_TUNE_SAMPLE_RATE=1 \
    "$bin" bench --ranks 2 --coll $coll --min-bytes 1K --max-bytes 4K --iters 20
done
"$bin" sweep --daemon "unix:$d/s.sock" --ranks 2 --coll allgather --min-bytes 1K --max-bytes 1K "${sweep[@]}"
kill "$(cat "$d/pid")"
wait
rm "$d/pid"

four='{"format":1,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[4],"release":"0.1"}'
table "$four" 5 ring > "$d/t4.json"
"$bin" import "$d/t4.json" --db "$out"
"$bin" forget --db "$out" --topology "$(printf '%s' "$four" | sha256sum | cut -c1-16)"
