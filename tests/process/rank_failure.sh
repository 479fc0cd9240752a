#!/usr/bin/env bash
# The local jobs `hccl-tune bench|sweep` start: their ranks are named, and a failed job ends whole, saying which
# rank the others blamed.
#  1. names: a running 3-rank bench's ranks show as hccl-tune/r0..r2 in `ps -o comm` (no `exe`, threads
#     included), `ps -o args`, `top` and `ss -p`; the spawner as hccl-tune;
#  2. a frozen rank (SIGSTOP), over shm and over tcp: the bench exits non-zero within HCCL_EXEC_TIMEOUT + the
#     grace period (HCCL_TUNE_KILL_GRACE) plus 2 s of slack, naming the frozen rank, and no process of the job is
#     left;
#  3. a killed rank (SIGKILL), over shm and over tcp: the same, naming the killed rank and its signal;
#  4. the spawner killed (SIGKILL) or terminated (SIGTERM): its ranks end with it;
#  5. a sweep with a frozen rank: rank 0 records the failed sweep in the database within the grace period, and
#     the sweep's failure (stderr and its --json "failed" event) names the frozen rank;
#  6. a bad HCCL_TUNE_KILL_GRACE is an error naming the variable, the value and what is accepted; no rank starts.
# Usage: rank_failure.sh HCCL_TUNE_BIN
set -euo pipefail
bin=$1
d=$(mktemp -d)
job=""
pids=()
cleanup() {
  for p in $job "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$d"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  [[ -f $d/err ]] && { echo "--- stderr of the job:" >&2; cat "$d/err" >&2; }
  exit 1
}
T=2 G=1 SLACK=2
export HCCL_TUNE_DAEMON=off HCCL_CONNECT_TIMEOUT=$T HCCL_EXEC_TIMEOUT=$T HCCL_TUNE_KILL_GRACE=$G HCCL_BUFFSIZE=2

source "$(dirname "$0")/three_ranks.sh"
start_bench() {
  start_job "$bin" bench --ranks 3 --coll allreduce --min-bytes 8 --max-bytes 8 --iters 100000000 --warmup 1 \
    --link "$1"
}
now() { echo "${EPOCHREALTIME/,/.}"; }
# Waits for the job to end; sets rc and secs (since $1).
finish_job() {
  rc=0
  wait "$job" || rc=$?
  secs=$(python3 -c "print(f'{$(now) - $1:.2f}')")
}
# Neither the spawner nor any rank is left: gone, or a zombie whose parent died with it, waiting for init.
alive() { [[ -e /proc/$1 ]] && [[ $(ps -o stat= -p "$1" 2> /dev/null) != Z* ]]; }
none_left() {
  for p in $job "${pids[@]}"; do
    for _ in $(seq 50); do alive "$p" || break; sleep 0.1; done
    alive "$p" && fail "$1: process $p is left: $(ps -o pid,stat,comm,args -p "$p" | tail -1)"
  done
  job="" pids=()
}
within() { python3 -c "import sys; sys.exit(0 if $secs <= $1 else 1)"; }

# 1. Names.
start_bench shm
sleep 1  # the ranks have named themselves and connected
[[ $(ps -o comm= -p "$job") == hccl-tune ]] || fail "the spawner's comm: $(ps -o comm= -p "$job")"
for r in 0 1 2; do
  p=${pids[r]}
  [[ $(ps -o comm= -p "$p") == "hccl-tune/r$r" ]] || fail "rank $r's comm: $(ps -o comm= -p "$p")"
  [[ $(ps -o args= -p "$p") == "hccl-tune/r$r --report-fd "*" bench --launched "* ]] ||
    fail "rank $r's args: $(ps -o args= -p "$p")"
  for t in /proc/"$p"/task/*/comm; do
    [[ $(cat "$t") == "hccl-tune/r$r" ]] || fail "rank $r's thread $t is named $(cat "$t")"
  done
  # procps and iproute2 come with deploy/install-deps.sh.
  top -b -n 1 -w 512 -p "$p" | grep -q " hccl-tune/r$r *$" || fail "top: $(top -b -n 1 -w 512 -p "$p" | tail -2)"
done
ps -o comm= -p "$(IFS=,; echo "${pids[*]}")" | grep -qx exe && fail "a rank is named exe"
# The ranks' connections to the spawner's store.
for r in 0 1 2; do
  ss -tpn | grep -q "\"hccl-tune/r$r\",pid=${pids[r]}," || fail "ss -p: $(ss -tpn | grep hccl || true)"
done
ss -tpn | grep -q '"exe"' && fail "ss -p shows exe: $(ss -tpn | grep exe)"
echo "names: $(ps -o pid=,comm= -p "$job,$(IFS=,; echo "${pids[*]}")" | paste -sd' ')"

# Sends signal $2 to rank $3 of a running bench over link $1 (started when none runs) and checks the end: exit
# non-zero within HCCL_EXEC_TIMEOUT + the grace period (+ slack), the message $4 (a grep pattern after "hccl-tune
# bench: rank $3 (pid PID) "), no process left.
signal_rank() {
  local link=$1 sig=$2 r=$3 want=$4
  [[ -n $job ]] || start_bench "$link"
  sleep 0.5
  local victim=${pids[r]}
  kill -"$sig" "$victim"
  finish_job "$(now)"
  [[ $rc != 0 ]] || fail "$link, SIG$sig to rank $r: the bench exited 0"
  within $((T + G + SLACK)) || fail "$link, SIG$sig to rank $r: the bench took $secs s (limit $T + $G + $SLACK)"
  grep -q "^hccl-tune bench: rank $r (pid $victim) $want" "$d/err" ||
    fail "$link, SIG$sig to rank $r: the message does not name rank $r"
  none_left "$link, SIG$sig to rank $r"
  echo "SIG$sig to rank $r over $link: exit $rc after $secs s: $(tail -1 "$d/err")"
}

# 2. A frozen rank ends the job within HCCL_EXEC_TIMEOUT + the grace period (not before the timeout), named.
for link in shm tcp; do
  signal_rank "$link" STOP 2 "was stopped (SIGSTOP or job control) and was ended by signal 15 (SIGTERM) after the \
${G}s grace period; ranks 0, 1 failed because of it, rank [01] saying: .*rank 2"
  python3 -c "import sys; sys.exit(0 if $secs >= $T - 0.5 else 1)" || fail "$link: failed after $secs s, before $T"
done

# 3. A killed rank: named with its signal.
for link in shm tcp; do
  signal_rank "$link" KILL 1 "was killed by signal 9 (SIGKILL); ranks 0, 2 failed because of it"
done

# 4. The spawner ends: its ranks with it.
start_bench shm
kill -KILL "$job"
{ wait "$job"; } 2> /dev/null || true
none_left "spawner killed"
start_bench shm
sleep 0.5
kill -TERM "$job"
t0=$(now)
finish_job "$t0"
[[ $rc != 0 ]] || fail "a terminated bench exited 0"
within $((G + SLACK)) || fail "SIGTERM: took $secs s"
grep -q "^hccl-tune bench: interrupted (SIGTERM): its 3 ranks were ended" "$d/err" || fail "SIGTERM said other things"
none_left "spawner terminated"
echo "spawner killed / terminated: no rank left"

# 5. A sweep: rank 0 records the failure, the sweep names the frozen rank. Its ranks move up to 64 MiB per call:
# a longer HCCL_EXEC_TIMEOUT, so that a loaded machine (ctest runs tests side by side) does not time out a rank
# before the freeze.
TS=6
HCCL_EXEC_TIMEOUT=$TS start_job "$bin" sweep --ranks 3 --db "$d/t.db" --coll allreduce --min-bytes 1K --max-bytes 64M --links shm \
  --cap-ms 100 --force --json
for _ in $(seq 200); do
  [[ $(sqlite3 "$d/t.db" "SELECT count(*) FROM sweep_samples" 2> /dev/null || echo 0) -gt 0 ]] && break
  sleep 0.05
done
frozen=${pids[1]}
kill -STOP "$frozen"
t0=$(now)
finish_job "$t0"
[[ $rc == 1 ]] || fail "sweep with a frozen rank: exit $rc"
within $((TS + G + SLACK)) || fail "sweep with a frozen rank took $secs s"
grep -q "^hccl-tune sweep: rank 1 (pid $frozen) was stopped" "$d/err" || fail "sweep: no verdict naming rank 1"
python3 - "$d/out" "$frozen" << 'PY' || fail "sweep --json: no failed event naming rank 1: $(tail -2 "$d/out")"
import json, sys
last = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert last["event"] == "failed", last
assert last["message"].startswith(f"rank 1 (pid {sys.argv[2]}) was stopped"), last
PY
[[ $(sqlite3 "$d/t.db" "SELECT status FROM sweeps") == failed ]] ||
  fail "the sweep row is $(sqlite3 "$d/t.db" "SELECT status FROM sweeps")"
none_left "sweep with a frozen rank"
echo "sweep with a frozen rank: exit $rc after $secs s, row failed"

# 6. A bad grace period.
for bad in soon -1 3601; do
  rc=0
  HCCL_TUNE_KILL_GRACE=$bad "$bin" bench --ranks 3 --iters 1 > "$d/out" 2> "$d/err" || rc=$?
  [[ $rc != 0 ]] || fail "HCCL_TUNE_KILL_GRACE=$bad accepted"
  [[ $(cat "$d/err") == "hccl-tune bench: HCCL_TUNE_KILL_GRACE='$bad' is invalid: expected an integer from 0 to 3600" ]] ||
    fail "HCCL_TUNE_KILL_GRACE=$bad: $(cat "$d/err")"
done
echo "bad HCCL_TUNE_KILL_GRACE refused"
echo "rank_failure: ok"
