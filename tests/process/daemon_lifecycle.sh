#!/usr/bin/env bash
# Process test: hccl-tuned as a real process, driven by the hccl-tune CLI over a unix socket.
#   start -> import -> serve -> SIGTERM (exit 0) -> restart -> still serves the same table; SIGHUP reload;
#   a second daemon on the same socket, a foreign database and a read-only state directory are refused.
# Usage: daemon_lifecycle.sh HCCL_TUNED HCCL_TUNE
set -euo pipefail
tuned=$1
cli=$2
tmp=$(mktemp -d /tmp/hccltune-proc-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

sock=$tmp/run/tuned.sock
target=unix:$sock
cat > "$tmp/tuned.conf" <<CONF
# test config
db = $tmp/state/tuning.db
log_level = info
CONF

start() {
  "$tuned" --socket "$sock" --config "$tmp/tuned.conf" 2>>"$tmp/tuned.log" &
  daemon=$!
  pids+=("$daemon")
  for _ in $(seq 100); do
    if "$cli" status --daemon "$target" >/dev/null 2>&1; then return 0; fi
    kill -0 "$daemon" 2>/dev/null || fail "hccl-tuned exited at start: $(cat "$tmp/tuned.log")"
    sleep 0.1
  done
  fail "hccl-tuned did not answer"
}

stop() {
  kill -TERM "$daemon"
  local rc=0
  wait "$daemon" || rc=$?
  [[ $rc -eq 0 ]] || fail "hccl-tuned exited $rc on SIGTERM"
  [[ ! -e $sock ]] || fail "socket left behind after a clean stop"
}

# A table file as `hccl-tune export` writes it; the fingerprint is the SHA-256 prefix of the topology JSON.
topo='{"format":2,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[4],"release":"0.1","runtime":"hccl-tune"}'
fp=$(printf '%s' "$topo" | sha256sum | cut -c1-16)
topo_escaped=${topo//\"/\\\"}
cat > "$tmp/table.json" <<JSON
{"format": "hccl-tune-tables", "format_version": 1, "tables": [{
  "fingerprint": "$fp", "topology": "$topo_escaped", "version": 1, "created_unix_ms": 1700000000000,
  "entries": [
    {"collective": "allreduce", "dtype": "fp32", "world_size": 4, "bytes": "0-64K", "configuration": "one_shot",
     "time_us": 12.5, "busbw_gbps": 1.5, "samples": 20, "runner_up": "ring", "margin": 0.2, "default_margin": 0.4,
     "sweep_id": "s1", "library_version": "0.1", "measured_unix_ms": 1700000000000},
    {"collective": "allreduce", "dtype": "fp32", "world_size": 4, "bytes": "64K-", "configuration": "ring(chunk=1M)",
     "time_us": 250, "busbw_gbps": 9.25, "samples": 20, "runner_up": "", "margin": 0.05, "default_margin": 0,
     "sweep_id": "s1", "library_version": "0.1", "measured_unix_ms": 1700000000000}]}]}
JSON

start
[[ $(stat -c %a "$sock") == 660 ]] || fail "socket mode $(stat -c %a "$sock"), expected 660"
"$cli" import "$tmp/table.json" --daemon "$target"
got=$("$cli" get --coll allreduce --dtype fp32 --bytes 1M --world 4 --topology "$fp" --daemon "$target" 2>/dev/null)
[[ $got == ring\(chunk=1M* ]] || fail "get returned '$got'"
"$cli" export "$tmp/out1.json" --daemon "$target"
"$cli" show --daemon "$target" | grep -q "one_shot" || fail "show lacks the table"
# The topology class (the JSON without nodes and ranks_per_node): show and status print it, get --class lists it.
cls=$(printf '%s' '{"format":2,"inter":[],"intra":["shm"],"release":"0.1","runtime":"hccl-tune"}' | sha256sum | cut -c1-16)
"$cli" show --daemon "$target" | grep -q "^topology $fp  class $cls " || fail "show does not print class $cls"
"$cli" status --daemon "$target" > "$tmp/status.txt"
grep -q "^  class $cls " "$tmp/status.txt" || fail "status does not print class $cls: $(cat "$tmp/status.txt")"
grep -q "^topology_format: 2$" "$tmp/status.txt" || fail "status does not print the topology format"
"$cli" get --class "$cls" --daemon "$target" > "$tmp/class.txt" || fail "get --class $cls"
grep -q "^  $fp  *1  4 " "$tmp/class.txt" || fail "get --class does not list $fp (1 node, 4 ranks): $(cat "$tmp/class.txt")"
"$cli" get --class "$cls" --json --daemon "$target" | python3 -c '
import json, sys
j = json.load(sys.stdin)
assert [t["fingerprint"] for t in j["tables"]] == [sys.argv[1]] and j["tables"][0]["ranks_per_node"] == [4], j
assert j["class"] == sys.argv[2] and "nodes" not in json.loads(j["topology"]), j' "$fp" "$cls" ||
  fail "get --class --json"
if "$cli" get --class 0123456789abcdef --daemon "$target" 2>"$tmp/err"; then fail "get --class of no table: exit 0"; fi
grep -q "no tuned tables of topology class 0123456789abcdef" "$tmp/err" || fail "get --class: $(cat "$tmp/err")"

# A second daemon on the same socket is refused; the first keeps serving.
if "$tuned" --socket "$sock" --db "$tmp/other.db" 2>"$tmp/second.log"; then fail "second daemon started"; fi
grep -q "another hccl-tuned is serving" "$tmp/second.log" || fail "unclear refusal: $(cat "$tmp/second.log")"

# SIGHUP reloads the config and keeps serving; a changed key it cannot apply while running is named.
sed -i 's/log_level = info/log_level = debug/' "$tmp/tuned.conf"
echo "mini_sweep_idle_s = 30" >> "$tmp/tuned.conf"
kill -HUP "$daemon"
sleep 0.3
"$cli" status --daemon "$target" >/dev/null || fail "not serving after SIGHUP"
grep -q "reloaded .*applied log_level = debug" "$tmp/tuned.log" || fail "no reload logged: $(cat "$tmp/tuned.log")"
grep -q "warn: reload of .*: mini_sweep_idle_s changed; it takes effect only when hccl-tuned is restarted" \
  "$tmp/tuned.log" || fail "changed key not named on reload: $(cat "$tmp/tuned.log")"

# status --live reads the daemon's database (same node, absolute path).
"$cli" status --daemon "$target" --live --json > "$tmp/live.json" || fail "status --live failed"
grep -q '"live"' "$tmp/live.json" || fail "status --live lacks live rows: $(cat "$tmp/live.json")"

stop
start
got2=$("$cli" get --coll allreduce --dtype fp32 --bytes 1M --world 4 --topology "$fp" --daemon "$target" 2>/dev/null)
[[ $got2 == "$got" ]] || fail "after restart get returned '$got2', before '$got'"
"$cli" export "$tmp/out2.json" --daemon "$target"
cmp "$tmp/out1.json" "$tmp/out2.json" || fail "table changed across restart"

# export -> import -> export is byte-identical (into a fresh file, no daemon).
"$cli" import "$tmp/out2.json" --db "$tmp/copy.db"
"$cli" export "$tmp/out3.json" --db "$tmp/copy.db"
cmp "$tmp/out2.json" "$tmp/out3.json" || fail "export -> import -> export differs"

# rollback and forget through the daemon.
sed 's/"configuration": "one_shot[^"]*"/"configuration": "ring"/' "$tmp/out2.json" > "$tmp/changed.json"
"$cli" import "$tmp/changed.json" --daemon "$target"
"$cli" get --coll allreduce --dtype fp32 --bytes 1K --world 4 --topology "$fp" --daemon "$target" 2>/dev/null |
  grep -q '^ring' || fail "changed table not served"
"$cli" rollback --topology "$fp" --daemon "$target" | grep -q "now version" || fail "rollback"
"$cli" get --coll allreduce --dtype fp32 --bytes 1K --world 4 --topology "$fp" --daemon "$target" 2>/dev/null |
  grep -q '^one_shot' || fail "rollback did not restore one_shot"
"$cli" forget --topology "$fp" --daemon "$target" >/dev/null
if "$cli" get --coll allreduce --dtype fp32 --bytes 1K --world 4 --topology "$fp" --daemon "$target" 2>/dev/null; then
  fail "forgotten table still served"
fi
# Bad input: a proper error and exit code, not a crash.
if "$cli" get --coll allreduse --dtype fp32 --bytes 1K --world 4 --topology "$fp" --daemon "$target" 2>"$tmp/err"; then
  fail "unknown collective accepted"
fi
grep -qi "allreduse" "$tmp/err" || fail "unclear error: $(cat "$tmp/err")"
stop

# A stale socket file (no daemon behind it) is replaced.
python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$sock"
start
stop

# status --live through a daemon whose database path is relative (to the daemon's working directory): a clear
# error naming the path, and no empty database created where the CLI runs.
mkdir -p "$tmp/relwd" "$tmp/elsewhere"
(cd "$tmp/relwd" && exec "$tuned" --socket "$tmp/run/rel.sock" --db rel.db --config /dev/null 2>>"$tmp/rel.log") &
rel=$!
pids+=("$rel")
for _ in $(seq 100); do
  "$cli" status --daemon "unix:$tmp/run/rel.sock" >/dev/null 2>&1 && break
  kill -0 "$rel" 2>/dev/null || fail "hccl-tuned with a relative db exited: $(cat "$tmp/rel.log")"
  sleep 0.1
done
if (cd "$tmp/elsewhere" && "$cli" status --daemon "unix:$tmp/run/rel.sock" --live) >/dev/null 2>"$tmp/rel.err"; then
  fail "status --live with the daemon's relative db path succeeded"
fi
grep -q "'rel.db', relative to the daemon's working directory" "$tmp/rel.err" || fail "unclear: $(cat "$tmp/rel.err")"
[[ ! -e $tmp/elsewhere/rel.db ]] || fail "status --live created an empty database"
kill -TERM "$rel"
wait "$rel" || fail "hccl-tuned with a relative db did not stop cleanly"

# A database path holding something else is refused and left alone.
echo "precious notes" > "$tmp/notes.db"
if "$tuned" --socket "$tmp/run/x.sock" --db "$tmp/notes.db" 2>"$tmp/foreign.log"; then fail "foreign db accepted"; fi
grep -q "not an SQLite database" "$tmp/foreign.log" || fail "unclear: $(cat "$tmp/foreign.log")"
[[ $(cat "$tmp/notes.db") == "precious notes" ]] || fail "foreign file modified"

# A read-only state directory (a read-only bind mount: root ignores permission bits) is refused clearly.
if [[ $(id -u) -eq 0 ]] && unshare -m true 2>/dev/null; then
  mkdir -p "$tmp/ro"
  if unshare -m sh -c "mount --bind '$tmp/ro' '$tmp/ro' && mount -o remount,bind,ro '$tmp/ro' &&
       exec '$tuned' --socket '$tmp/run/ro.sock' --db '$tmp/ro/tuning.db'" 2>"$tmp/ro.log"; then
    fail "read-only state dir accepted"
  fi
  grep -q "not writable" "$tmp/ro.log" || fail "unclear: $(cat "$tmp/ro.log")"
else
  echo "note: read-only state dir check skipped (needs root and unshare -m)"
fi
echo "daemon lifecycle: ok"
