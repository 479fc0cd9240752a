#!/usr/bin/env bash
# Tuned at training time, end to end with real processes (issue: tuning at training time):
#  1. a daemon holds a table whose entries differ from the built-in defaults: `hccl-tune bench` (auto) runs
#     them (the algo column), on every size the table covers;
#  2. an HCCL_TUNE_ALGO override is honoured for its collective only;
#  3. sampled live timings reach the daemon's database (status --live: calls per configuration);
#  4. the daemon killed mid-job does not stop the job; a restarted daemon receives reports again.
# Usage: tuning.sh HCCL_TUNE HCCL_TUNED
set -euo pipefail
cli=$1 tuned=$2
tmp=$(mktemp -d)
pid=""
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAILED: $*" >&2; exit 1; }

start_daemon() {
  "$tuned" --socket "$tmp/d.sock" --db "$tmp/t.db" --log-level warn 2>>"$tmp/daemon.log" &
  pid=$!
  for _ in $(seq 100); do [[ -S $tmp/d.sock ]] && return 0; sleep 0.05; done
  fail "daemon did not start: $(cat "$tmp/daemon.log")"
}
start_daemon
export HCCL_TUNE_DAEMON="unix:$tmp/d.sock" HCCL_TUNE_SAMPLE_RATE=1 HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=60

# The topology of 2 ranks on this node, as the runtime computes it (docs/CONVENTIONS.md, Topology fingerprint).
release=$("$cli" --version | sed -E 's/^hccl-tune ([0-9]+\.[0-9]+).*/\1/')
topo="{\"format\":2,\"inter\":[],\"intra\":[\"shm\"],\"nodes\":1,\"ranks_per_node\":[2],\"release\":\"$release\",\"runtime\":\"hccl-tune\"}"
fp=$(printf '%s' "$topo" | sha256sum | cut -c1-16)
out=$("$cli" bench --ranks 2 --coll barrier --min-bytes 0 --max-bytes 0 --iters 1)
grep -q "topology $fp" <<<"$out" || fail "runtime fingerprint differs from $fp: $out"

# A table that differs from the defaults (which pick one_shot up to 2 KiB, then recursive_doubling / ring for
# allreduce at 2 ranks — never binomial_tree — and binomial_tree for broadcasts).
python3 - "$tmp/table.json" "$fp" "$topo" <<'PY'
import json, sys
path, fp, topo = sys.argv[1:]
def e(coll, dtype, rng, cfg):
    return {"collective": coll, "dtype": dtype, "world_size": 2, "bytes": rng, "configuration": cfg,
            "time_us": 1.0, "busbw_gbps": 1.0, "samples": 10, "runner_up": "", "margin": 0.1,
            "default_margin": 0.2, "sweep_id": "test", "library_version": "test", "measured_unix_ms": 0}
doc = {"format": "hccl-tune-tables", "format_version": 1, "tables": [{
    "fingerprint": fp, "topology": topo, "version": 1, "created_unix_ms": 0, "content_hash": "",
    "entries": [e("allreduce", "fp32", "0-4K", "binomial_tree(channels=1,link=auto)"),
                e("allreduce", "fp32", "4K-", "halving_doubling(channels=1,link=auto)"),
                e("broadcast", "fp32", "0-", "chain(chunk=64K,channels=1,link=auto)")]}]}
json.dump(doc, open(path, "w"))
PY
"$cli" import "$tmp/table.json" --daemon "$HCCL_TUNE_DAEMON" >/dev/null || fail "import"

out=$("$cli" bench --ranks 2 --coll allreduce --min-bytes 8 --max-bytes 64K --iters 20 --check)
echo "$out"
grep -q "CHECK FAILED" <<<"$out" && fail "check failed"
awk '$1=="allreduce" && $3<4096 && $4 !~ /^binomial_tree/ {bad=1} END {exit bad}' <<<"$out" || fail "table entry 0-4K not used"
awk '$1=="allreduce" && $3>=4096 && $4 !~ /^halving_doubling/ {bad=1} END {exit bad}' <<<"$out" ||
  fail "table entry 4K- not used"

# An override for allreduce only: broadcast still follows the table.
out=$(HCCL_TUNE_ALGO="allreduce:0-=ring(chunk=256K)" "$cli" bench --ranks 2 --coll allreduce --min-bytes 1K --max-bytes 1K --iters 5)
grep -q "ring(chunk=256K" <<<"$out" || fail "HCCL_TUNE_ALGO not honoured: $out"
out=$(HCCL_TUNE_ALGO="allreduce:0-=ring(chunk=256K)" "$cli" bench --ranks 2 --coll broadcast --min-bytes 1K --max-bytes 1K --iters 5)
grep -q "chain(chunk=64K" <<<"$out" || fail "override leaked into broadcast: $out"

# Live samples reached the database: calls per configuration.
for _ in $(seq 50); do
  live=$("$cli" status --daemon "$HCCL_TUNE_DAEMON" --live --json)
  n=$(python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(r["count"] for r in d["live"] if r["configuration"].startswith("binomial_tree")))' <<<"$live")
  ((n > 0)) && break
  sleep 0.2
done
((n > 0)) || fail "no live samples of the tuned configuration reached the daemon: $live"
echo "live samples of binomial_tree: $n"

# The daemon dies mid-job: the job finishes; a restarted daemon receives reports again.
"$cli" bench --ranks 2 --coll allreduce --min-bytes 8 --max-bytes 8 --iters 20000 >"$tmp/long.out" 2>"$tmp/long.err" &
job=$!
sleep 1
kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=""
rm -f "$tmp/d.sock"
sleep 0.5
start_daemon
wait "$job" || fail "the job failed after the daemon was killed: $(cat "$tmp/long.err")"
before=$n
for _ in $(seq 50); do
  live=$("$cli" status --daemon "$HCCL_TUNE_DAEMON" --live --json)
  n=$(python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(r["count"] for r in d["live"] if r["configuration"].startswith("binomial_tree")))' <<<"$live")
  ((n > before)) && break
  "$cli" bench --ranks 2 --coll allreduce --min-bytes 8 --max-bytes 8 --iters 200 >/dev/null
done
((n > before)) || fail "reports did not resume after the daemon restarted ($n <= $before)"
echo "tuning: table used, override scoped, live samples stored ($before, then $n after a daemon restart)"
