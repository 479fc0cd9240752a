#!/usr/bin/env bash
# Online tuning, end to end with real processes, a regression injected into one configuration:
# a daemon holds a table whose allreduce winner is ring (runner-up one_shot); the test hook
# HCCL_TUNE_TEST_DELAY slows ring by 1 ms per call. A 2-rank job (online mode, the default) must
#  - be moved by the daemon's online policy: a version with an exploration plan, then a version whose winner is
#    one_shot; the job's calls use one_shot from then on (its per-call configuration log),
#  - make the identical choice on every rank for every call, and get every result right;
# the same job with HCCL_TUNE_MODE=static must stay on ring for every call (while the daemon does publish);
# the same job run by a reader (an ordinary user in the socket's group; root only) makes the daemon explore, but its
# reports alone never install one_shot: the decision is logged "unconfirmed" and ring stays the winner.
# Usage: online.sh HCCL_TUNE HCCL_TUNED ONLINE_JOB
set -euo pipefail
cli=$1 tuned=$2 job=$3
tmp=$(mktemp -d)
pid=""
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
fail() {
  echo "FAILED: $*" >&2
  [[ -f $tmp/daemon.log ]] && tail -20 "$tmp/daemon.log" >&2
  exit 1
}

source "$(dirname "$0")/online_fixture.sh"
quick_policy_conf >"$tmp/tuned.conf"
two_rank_topology "$cli"
ring_table "$tmp/table.json"

start_daemon() {  # [GROUP]: a fresh database holding the table above; the socket's group GROUP (default: ours)
  rm -f "$tmp/t.db"*
  local as=()
  [[ $# -gt 0 ]] && as=(setpriv --regid "$1" --keep-groups)
  "${as[@]}" "$tuned" --socket "$tmp/d.sock" --db "$tmp/t.db" --config "$tmp/tuned.conf" --log-level info \
    2>>"$tmp/daemon.log" &
  pid=$!
  for _ in $(seq 100); do [[ -S $tmp/d.sock ]] && break; sleep 0.05; done
  [[ -S $tmp/d.sock ]] || fail "daemon did not start"
  "$cli" import "$tmp/table.json" --daemon "unix:$tmp/d.sock" >/dev/null || fail "import"
}
stop_daemon() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }
latest() {  # version and winner of the daemon's allreduce entry
  "$cli" export - --daemon "unix:$tmp/d.sock" | python3 -c '
import json, sys
t = json.load(sys.stdin)["tables"][0]
print(t["version"], t["entries"][0]["configuration"])'
}

export HCCL_TUNE_DAEMON="unix:$tmp/d.sock" HCCL_TUNE_SAMPLE_RATE=1 HCCL_TUNE_SYNC_INTERVAL=16 \
  HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=60 HCCL_TUNE_LOG_LEVEL=info HCCL_TUNE_TEST_DELAY="allreduce:ring=1ms"
calls=3000
run_job() {  # MODE DIR [USER]
  mkdir -p "$2/store"
  local pids=() as=()
  if [[ $# -gt 2 ]]; then
    chown -R "$3" "$2"
    as=(runuser -u "$3" --)
  fi
  for r in 0 1; do
    HCCL_TUNE_MODE=$1 RANK=$r WORLD_SIZE=2 HCCL_TUNE_STORE="file://$2/store" \
      "${as[@]}" "$job" "$calls" "$2" >"$2/out$r" 2>"$2/err$r" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || fail "$1 job failed: $(cat "$2"/err*)"; done
  cat "$2/out0" "$2/out1"
  cmp -s "$2/rank0" "$2/rank1" || fail "$1: the ranks' per-call configurations differ"
  [[ $(wc -l <"$2/rank0") -eq $calls ]] || fail "$1: rank 0 logged $(wc -l <"$2/rank0") calls, not $calls"
}

# --- static: never switches, never explores, although the daemon publishes new versions ---
start_daemon
mkdir -p "$tmp/static"
run_job static "$tmp/static"
n=$(grep -vc '^ring(' "$tmp/static/rank0" || true)
((n == 0)) || fail "static mode ran $n calls on another configuration than ring"
for _ in $(seq 50); do read -r v winner < <(latest); ((v > 1)) && break; sleep 0.1; done
((v > 1)) || fail "the daemon did not react to the slowed ring (still version $v)"
echo "static: all $calls calls on ring on both ranks, while the daemon moved to version $v"
stop_daemon

# --- online: the daemon explores, then moves the winner; the job follows at an agreed operation ---
start_daemon
mkdir -p "$tmp/online"
run_job online "$tmp/online"
read -r v winner < <(latest)
[[ $winner == one_shot* && $v -ge 3 ]] || fail "the daemon's table is version $v with winner $winner"
first=$(head -1 "$tmp/online/rank0")
last=$(tail -1 "$tmp/online/rank0")
[[ $first == ring* ]] || fail "the job did not start on the table's winner: $first"
[[ $last == one_shot* ]] || fail "the job did not end on the new winner: $last"
# From the switch on every call is one_shot; before it, one_shot appears only as exploration (1 call in 4).
switch=$(awk '/^ring/ {last=NR} END {print last+1}' "$tmp/online/rank0")
explored=$(head -n $((switch - 1)) "$tmp/online/rank0" | grep -c '^one_shot' || true)
rings=$(head -n $((switch - 1)) "$tmp/online/rank0" | grep -c '^ring' || true)
((explored > 0 && explored * 3 <= rings + 3)) || fail "exploration ran $explored of $((switch - 1)) calls"
grep -h "in effect from operation" "$tmp/online/err0" "$tmp/online/err1" | sed 's/^.*rank/rank/' | sort -u
grep -q "explore" "$tmp/daemon.log" && grep -q "switch" "$tmp/daemon.log" || fail "the policy did not log its steps"
grep "online policy" "$tmp/daemon.log" | sed 's/^.*online policy/online policy/' | tail -4
echo "online: calls 1..$((switch - 1)) on ring ($explored explored one_shot), calls $switch..$calls on one_shot;" \
  "daemon table v$v winner $winner; both ranks identical, every result correct"
stop_daemon

# --- a reader's job: exploration, but no switch on its reports alone ---
if [[ $(id -u) -ne 0 ]]; then
  echo "reader: skipped (needs root to run the job as another user)"
  exit 0
fi
source "$(dirname "$0")/test_users.sh"
ensure_groups hcclt-sock
ensure_user hcclt-reader hcclt-sock
chmod 0755 "$tmp"
: >"$tmp/daemon.log"
start_daemon hcclt-sock
mkdir -p "$tmp/reader"
run_job online "$tmp/reader" hcclt-reader
read -r v winner < <(latest)
[[ $winner == ring* ]] || fail "a reader's reports installed $winner (table version $v)"
grep -q " explore: " "$tmp/daemon.log" || fail "the reader's regression did not start an exploration"
grep -q " unconfirmed: " "$tmp/daemon.log" || fail "the policy did not log the unconfirmed decision"
! grep -q " switch: " "$tmp/daemon.log" || fail "the policy switched on a reader's reports"
last=$(tail -1 "$tmp/reader/rank0")
[[ $last == ring* ]] || fail "the reader's job did not end on ring: $last"
explored=$(grep -c '^one_shot' "$tmp/reader/rank0" || true)
((explored > 0)) || fail "the reader's job ran no exploring call"
grep "online policy" "$tmp/daemon.log" | sed 's/^.*online policy/online policy/' | tail -2
echo "reader: $explored of $calls calls explored one_shot; daemon table v$v keeps $winner (unconfirmed)"
