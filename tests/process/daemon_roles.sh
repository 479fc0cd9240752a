#!/usr/bin/env bash
# The daemon's roles with real Unix users (docs/SECURITY.md, "The daemon: roles"): a private hccl-tuned (root,
# its socket's group hcclt-sock) is called by hcclt-reader (in hcclt-sock only: get/show/status/export work,
# import/rollback/forget/sweep --via-daemon are refused naming the tuner role and its uid) and by hcclt-tuner
# (also in the tuner_group hcclt-tuners: the writes work), and by root. Every write leaves an audit line naming
# the writer's uid. Needs root (creates the users and groups when missing, idempotently); skipped otherwise.
# Usage: daemon_roles.sh HCCL_TUNED HCCL_TUNE
set -euo pipefail
tuned=$1
cli=$2
if [[ $(id -u) -ne 0 ]]; then echo "SKIP: needs root (creates Unix users)"; exit 77; fi
tmp=$(mktemp -d)
chmod 0755 "$tmp"
daemon=""
trap '[[ -n $daemon ]] && kill "$daemon" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; [[ -f $tmp/tuned.log ]] && tail -20 "$tmp/tuned.log" >&2; exit 1; }

source "$(dirname "$0")/test_users.sh"
ensure_groups hcclt-sock hcclt-tuners
ensure_user hcclt-reader hcclt-sock
ensure_user hcclt-tuner hcclt-sock,hcclt-tuners
reader_uid=$(id -u hcclt-reader)
tuner_uid=$(id -u hcclt-tuner)

sock=$tmp/run/tuned.sock
target=unix:$sock
mkdir -p "$tmp/run" "$tmp/state"
chmod 0755 "$tmp/run"
printf 'tuner_group = hcclt-tuners\nonline_policy = off\n' > "$tmp/tuned.conf"
setpriv --regid hcclt-sock --keep-groups "$tuned" --config "$tmp/tuned.conf" --socket "$sock" \
  --db "$tmp/state/tuning.db" > "$tmp/tuned.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do
  "$cli" status --daemon "$target" >/dev/null 2>&1 && break
  kill -0 "$daemon" 2>/dev/null || fail "hccl-tuned exited at start"
  sleep 0.1
done
[[ $(stat -c '%a %G' "$sock") == "660 hcclt-sock" ]] || fail "socket is $(stat -c '%a %G' "$sock")"

topo='{"format":2,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[2],"release":"0.1","runtime":"hccl-tune"}'
fp=$(printf '%s' "$topo" | sha256sum | cut -c1-16)
table() {  # table VERSION CONFIGURATION
  printf '{"format": "hccl-tune-tables", "format_version": 1, "tables": [{"fingerprint": "%s", "topology": "%s",
    "version": %s, "created_unix_ms": 1000, "entries": [{"collective": "allreduce", "dtype": "fp32",
    "world_size": 2, "bytes": "0-", "configuration": "%s", "time_us": 5, "busbw_gbps": 1, "samples": 10,
    "runner_up": "", "margin": 0, "default_margin": 0, "sweep_id": "s", "library_version": "0.1",
    "measured_unix_ms": 1000}]}]}\n' "$fp" "${topo//\"/\\\"}" "$1" "$2"
}
table 1 ring > "$tmp/t1.json"
table 2 one_shot > "$tmp/t2.json"
chmod 0644 "$tmp"/t*.json
as() { local u=$1; shift; runuser -u "$u" -- "$@"; }

# root (a tuner) imports the first version.
"$cli" import "$tmp/t1.json" --daemon "$target" || fail "root: import"

# The reader reads ...
as hcclt-reader "$cli" status --daemon "$target" >/dev/null || fail "reader: status"
as hcclt-reader "$cli" show --daemon "$target" | grep -q ring || fail "reader: show lacks the table"
got=$(as hcclt-reader "$cli" get --coll allreduce --dtype fp32 --bytes 1M --world 2 --topology "$fp" \
  --daemon "$target" 2>/dev/null)
[[ $got == *ring* ]] || fail "reader: get answered '$got'"
as hcclt-reader "$cli" export - --daemon "$target" | grep -q "\"$fp\"" || fail "reader: export"
# ... and every write is refused with the role and its uid named, changing nothing.
refused() {  # refused WHAT CMD...
  local what=$1
  shift
  if as hcclt-reader "$@" > "$tmp/out" 2> "$tmp/err"; then fail "reader: $what succeeded"; fi
  grep -q "needs the tuner role" "$tmp/err" || fail "reader: $what: stderr lacks the role: $(cat "$tmp/err")"
  grep -q "uid $reader_uid " "$tmp/err" || fail "reader: $what: stderr lacks uid $reader_uid: $(cat "$tmp/err")"
}
refused import "$cli" import "$tmp/t2.json" --daemon "$target"
refused rollback "$cli" rollback --topology "$fp" --daemon "$target"
refused forget "$cli" forget --topology "$fp" --daemon "$target"
refused "sweep --via-daemon" "$cli" sweep --via-daemon --ranks 2 --max-bytes 1K --daemon "$target"
cp "$tmp/err" "$tmp/err.reader"
got=$("$cli" get --coll allreduce --dtype fp32 --bytes 1M --world 2 --topology "$fp" --daemon "$target")
[[ $got == *ring* ]] || fail "the reader's refused writes changed the table: '$got'"

# The tuner group's member writes: import, rollback, forget.
as hcclt-tuner "$cli" import "$tmp/t2.json" --daemon "$target" 2> "$tmp/err" || fail "tuner: import: $(cat "$tmp/err")"
got=$(as hcclt-tuner "$cli" get --coll allreduce --dtype fp32 --bytes 1M --world 2 --topology "$fp" --daemon "$target")
[[ $got == *one_shot* ]] || fail "tuner: import did not install one_shot: '$got'"
as hcclt-tuner "$cli" rollback --topology "$fp" --daemon "$target" 2> "$tmp/err" || fail "tuner: rollback: $(cat "$tmp/err")"
as hcclt-tuner "$cli" forget --topology "$fp" --daemon "$target" 2> "$tmp/err" || fail "tuner: forget: $(cat "$tmp/err")"
# root writes again.
"$cli" import "$tmp/t1.json" --daemon "$target" || fail "root: import after forget"

# Audit: each write names its writer.
grep -q "audit: uid $tuner_uid pid [0-9]* PutTable topology $fp version" "$tmp/tuned.log" || fail "no audit of the tuner's PutTable"
grep -q "audit: uid $tuner_uid pid [0-9]* Rollback topology $fp" "$tmp/tuned.log" || fail "no audit of the tuner's Rollback"
grep -q "audit: uid $tuner_uid pid [0-9]* DeleteTable topology $fp" "$tmp/tuned.log" || fail "no audit of the tuner's DeleteTable"
grep -q "audit: uid 0 pid [0-9]* PutTable topology $fp" "$tmp/tuned.log" || fail "no audit of root's PutTable"
if grep -q "audit: uid $reader_uid " "$tmp/tuned.log"; then fail "a refused write was audited as done"; fi

kill -TERM "$daemon"
wait "$daemon" || fail "hccl-tuned exited $? on SIGTERM"
daemon=""
grep audit "$tmp/tuned.log" | head -3; cat "$tmp/err.reader"
echo "PASS: reader reads and is refused writes; tuner group and root write; writes audited"
