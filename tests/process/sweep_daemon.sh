#!/usr/bin/env bash
# Daemon-run sweeps (`hccl-tune sweep --via-daemon`, StartSweep/WatchSweep/CancelSweep) and the busy check:
#  1. a sweep run by hccl-tuned streams its progress (--json) and stores its winners, sweep row and samples in the
#     daemon's database;
#  2. while one runs, a second StartSweep is refused naming the running sweep, and a local sweep through the
#     daemon is refused (busy) naming it; Ctrl-C detaches the client and the sweep continues (with
#     --cancel-on-interrupt it cancels the sweep instead);
#  3. SIGTERM to the daemon mid-sweep: exit 0, the sweep is cancelled (no table entries from it, DB intact), and
#     no sweep or rank process survives; a restarted daemon resumes it to the end (--via-daemon --resume);
#  4. a job reporting live timings makes a sweep refuse without --force, naming the job;
#  5. a daemon that stops answering (SIGSTOP) ends a watch within the keepalive limit, naming the daemon;
#  6. a rank of a daemon-run sweep that freezes (SIGSTOP) fails the sweep within HCCL_EXEC_TIMEOUT + the grace
#     period (HCCL_TUNE_KILL_GRACE, from the daemon's environment), its FAILED state names the frozen rank, the row
#     is marked failed, and no sweep or rank process is left.
# usage: sweep_daemon.sh HCCL_TUNE_BIN HCCL_TUNED_BIN
set -euo pipefail
bin=$1
tuned=$2
d=$(mktemp -d)
tpid="" job=""
cleanup() {
  [[ -n $job ]] && kill -9 "$job" 2>/dev/null
  [[ -n $tpid ]] && kill -9 "$tpid" 2>/dev/null
  pkill -9 -f -- "--sweep-id sw-.*--daemon unix:$d/" 2>/dev/null || true
  rm -rf "$d"
}
trap cleanup EXIT
export HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=60
fail() {
  echo "FAIL: $*" >&2
  [[ -f $d/tuned.log ]] && { echo "--- daemon log:" >&2; tail -20 "$d/tuned.log" >&2; }
  exit 1
}
T="unix:$d/t.sock"
start_daemon() {
  "$tuned" --socket "$d/t.sock" --db "$d/t.db" --sweep-command "$bin" --log-level info 2>> "$d/tuned.log" &
  tpid=$!
  for _ in $(seq 100); do [[ -S $d/t.sock ]] && return; sleep 0.1; done
  fail "the daemon did not start"
}
# Processes of ours still alive: the sweep process the daemon ran and the ranks it spawned carry its socket path.
ours() { pgrep -f -- "--daemon $T" || true; }
start_daemon

# 1. A daemon-run sweep: progress streamed, everything stored in the daemon's database.
"$bin" sweep --via-daemon --daemon "$T" --ranks 2 --coll allreduce --min-bytes 1K --max-bytes 8K --links shm \
  --cap-ms 40 --force --json > "$d/via.json" 2> "$d/via.err" || fail "via-daemon sweep: $(cat "$d/via.err")"
id=$(python3 - "$d/via.json" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
events = [l["event"] for l in lines]
assert events[0] == "started", events
progress = [l for l in lines if l["event"] == "progress"]
assert progress and all(0 < p["done"] <= p["total"] for p in progress), progress
assert [p["done"] for p in progress] == sorted(p["done"] for p in progress), "progress went backwards"
done = lines[-1]
assert done["event"] == "done" and done["entries"] and done["table_version"] > 0, done
assert done["sweep_id"] == lines[0]["sweep_id"], (done["sweep_id"], lines[0])
print(done["sweep_id"])
PY
) || fail "via-daemon output: $(cat "$d/via.json")"
[[ $(sqlite3 "$d/t.db" "SELECT status FROM sweeps WHERE id='$id'") == done ]] || fail "sweep row not done"
[[ $(sqlite3 "$d/t.db" "SELECT count(*) FROM entries WHERE sweep_id='$id'") -gt 0 ]] || fail "no winners stored"
[[ $(sqlite3 "$d/t.db" "SELECT count(*) FROM sweep_samples WHERE sweep_id='$id'") -gt 0 ]] || fail "no samples"
# A late watcher sees the end state; the text form prints the winners read back from the daemon.
"$bin" sweep --watch "$id" --daemon "$T" > "$d/late.txt" 2>&1 || fail "late watch: $(cat "$d/late.txt")"
grep -q "winners stored in daemon" "$d/late.txt" || fail "late watch output: $(cat "$d/late.txt")"
grep -q "allreduce" "$d/late.txt" || fail "late watch shows no winners: $(cat "$d/late.txt")"
[[ -z $(ours) ]] || fail "processes left after a finished sweep: $(ours)"
echo "via-daemon sweep ok ($id)"

# Ctrl-C with --cancel-on-interrupt cancels the daemon's sweep: exit 130, row cancelled, no process left.
"$bin" sweep --via-daemon --cancel-on-interrupt --daemon "$T" --ranks 2 --coll allreduce --min-bytes 1K \
  --max-bytes 4M --links shm,tcp --cap-ms 80 --force --plain > "$d/coi.txt" 2>&1 &
client=$!
cid=""
for _ in $(seq 300); do
  cid=$(sqlite3 "$d/t.db" "SELECT id FROM sweeps WHERE status='running'" 2>/dev/null || true)
  [[ -n $cid ]] && [[ $(sqlite3 "$d/t.db" "SELECT count(*) FROM sweep_samples WHERE sweep_id='$cid'") -gt 20 ]] && break
  sleep 0.1
done
[[ -n $cid ]] || fail "the sweep to cancel did not start: $(cat "$d/coi.txt")"
kill -INT $client
rc=0
wait $client || rc=$?
[[ $rc == 130 ]] || fail "--cancel-on-interrupt: exit $rc: $(cat "$d/coi.txt")"
grep -q "sweep $cid cancelled" "$d/coi.txt" || fail "--cancel-on-interrupt said: $(cat "$d/coi.txt")"
[[ $(sqlite3 "$d/t.db" "SELECT status FROM sweeps WHERE id='$cid'") == cancelled ]] || fail "row not cancelled"
[[ -z $(ours) ]] || fail "processes left after cancelling: $(ours)"
if "$bin" sweep --cancel --daemon "$T" > "$d/nothing.txt" 2>&1; then fail "--cancel with nothing running"; fi
grep -q "no sweep is running" "$d/nothing.txt" || fail "--cancel said: $(cat "$d/nothing.txt")"
echo "cancel on interrupt ok ($cid)"

# 2. One sweep at a time; a local sweep is refused as busy; Ctrl-C detaches.
"$bin" sweep --via-daemon --daemon "$T" --ranks 2 --coll allreduce --min-bytes 1K --max-bytes 4M --links shm,tcp \
  --cap-ms 80 --force --plain > "$d/long.txt" 2>&1 &
client=$!
lid=""
for _ in $(seq 300); do
  lid=$(sqlite3 "$d/t.db" "SELECT id FROM sweeps WHERE status='running'" 2>/dev/null || true)
  [[ -n $lid ]] && [[ $(sqlite3 "$d/t.db" "SELECT count(*) FROM sweep_samples WHERE sweep_id='$lid'") -gt 50 ]] && break
  sleep 0.1
done
[[ -n $lid ]] || fail "the long sweep did not start: $(cat "$d/long.txt")"
if "$bin" sweep --via-daemon --daemon "$T" --ranks 2 --min-bytes 1K --max-bytes 2K --force > "$d/second.txt" 2>&1; then
  fail "a second daemon sweep was accepted"
fi
grep -q "sweep $lid is running on this daemon" "$d/second.txt" || fail "second sweep said: $(cat "$d/second.txt")"
if "$bin" sweep --daemon "$T" --ranks 2 --min-bytes 1K --max-bytes 2K --links shm > "$d/busy.txt" 2>&1; then
  fail "a local sweep was accepted while the daemon sweeps"
fi
grep -q "hccl-tuned is running sweep $lid" "$d/busy.txt" || fail "busy refusal said: $(cat "$d/busy.txt")"
kill -INT $client
rc=0
wait $client || rc=$?
[[ $rc == 130 ]] || fail "Ctrl-C on the client: exit $rc: $(cat "$d/long.txt")"
grep -q "detached; sweep $lid continues" "$d/long.txt" || fail "no detach message: $(cat "$d/long.txt")"
sleep 0.5
[[ $(sqlite3 "$d/t.db" "SELECT status FROM sweeps WHERE id='$lid'") == running ]] || fail "detaching stopped the sweep"
[[ -n $(ours) ]] || fail "the sweep processes are gone after detaching"
echo "one at a time + busy + detach ok ($lid)"

# 3. SIGTERM to the daemon mid-sweep: clean exit, sweep cancelled, no half-written table, no orphans.
"$bin" sweep --watch --daemon "$T" --plain > "$d/watch.txt" 2>&1 &
watcher=$!
sleep 0.5
kill -TERM $tpid
rc=0
wait $tpid || rc=$?
tpid=""
[[ $rc == 0 ]] || fail "daemon exit $rc after SIGTERM"
wrc=0
wait $watcher || wrc=$?
[[ $wrc == 130 ]] || fail "the watcher of a cancelled sweep exited $wrc: $(cat "$d/watch.txt")"
grep -q "continue with: hccl-tune sweep --resume $lid" "$d/watch.txt" || fail "watcher said: $(cat "$d/watch.txt")"
sleep 0.5
[[ -z $(ours) ]] || fail "processes survived the daemon: $(ps -o pid,pgid,args -p "$(ours | paste -sd,)")"
[[ $(sqlite3 "$d/t.db" "PRAGMA integrity_check") == ok ]] || fail "integrity_check after SIGTERM"
[[ $(sqlite3 "$d/t.db" "SELECT count(*) FROM entries WHERE sweep_id='$lid'") == 0 ]] || fail "half-written table"
[[ $(sqlite3 "$d/t.db" "SELECT status FROM sweeps WHERE id='$lid'") == cancelled ]] || fail "sweep not cancelled"
kept=$(sqlite3 "$d/t.db" "SELECT count(*) FROM sweep_samples WHERE sweep_id='$lid'")
echo "daemon SIGTERM mid-sweep ok ($kept samples kept)"

# ... and a restarted daemon resumes it from the kept samples.
start_daemon
"$bin" sweep --via-daemon --daemon "$T" --resume "$lid" --force --json > "$d/resume.json" 2> "$d/resume.err" \
  || fail "resume via daemon: $(cat "$d/resume.err")"
python3 - "$d/resume.json" <<'PY' || fail "resume output: $(cat "$d/resume.json")"
import json, sys
done = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][-1]
assert done["event"] == "done" and done["replayed_iterations"] > 0 and done["entries"], done
PY
[[ $(sqlite3 "$d/t.db" "SELECT status FROM sweeps WHERE id='$lid'") == done ]] || fail "resumed sweep not done"
echo "resume via daemon ok"

# 4. Busy check: a job reporting live timings to the daemon refuses a sweep without --force, naming the job.
HCCL_TUNE_DAEMON="$T" HCCL_TUNE_SAMPLE_RATE=1 "$bin" bench --ranks 2 --coll allreduce --min-bytes 8 --max-bytes 8 \
  --iters 2000000 > /dev/null 2> "$d/job.err" &
job=$!
# Each rank reports on its own schedule, so the first refusal may name rank 0 alone; wait (bounded) until the
# daemon has heard from both ranks before checking that the message names them.
named='jobs report live timings to hccl-tuned \(last 30 s\): topology [0-9a-f]{16} ranks 0,1 \(pids [0-9]+,[0-9]+\)'
refused=0
for _ in $(seq 100); do
  if ! "$bin" sweep --daemon "$T" --ranks 2 --min-bytes 1K --max-bytes 2K --links shm > "$d/live.txt" 2>&1 &&
    grep -q "report live timings to hccl-tuned" "$d/live.txt"; then
    refused=1
    grep -Eq "$named" "$d/live.txt" && break
  fi
  sleep 0.2
done
kill $job 2>/dev/null || true
wait $job 2>/dev/null || true
job=""
((refused)) || fail "a sweep next to a reporting job was not refused: $(cat "$d/live.txt")"
grep -Eq "$named" "$d/live.txt" || fail "busy message does not name the job: $(cat "$d/live.txt")"
grep -q "pass --force" "$d/live.txt" || fail "busy message: $(cat "$d/live.txt")"
echo "busy check names the live job ok"

# 5. A daemon that stops answering without closing the connection (SIGSTOP: like a host that died without a
#    reset) ends the watch within the keepalive limit (20 s + 10 s), naming the daemon, instead of never.
"$bin" sweep --via-daemon --daemon "$T" --ranks 2 --coll allreduce --min-bytes 1K --max-bytes 4M --links shm,tcp \
  --cap-ms 80 --force --plain > "$d/silent.txt" 2>&1 &
client=$!
sid=""
for _ in $(seq 300); do
  sid=$(sqlite3 "$d/t.db" "SELECT id FROM sweeps WHERE status='running'" 2>/dev/null || true)
  [[ -n $sid ]] && break
  sleep 0.1
done
[[ -n $sid ]] || fail "the sweep to watch did not start: $(cat "$d/silent.txt")"
kill -STOP "$tpid"
t0=$SECONDS
for _ in $(seq 600); do
  kill -0 $client 2>/dev/null || break
  sleep 0.1
done
waited=$((SECONDS - t0))
if kill -0 $client 2>/dev/null; then
  kill -9 $client
  kill -CONT "$tpid"
  fail "the watch of a silent daemon did not end within 60 s: $(cat "$d/silent.txt")"
fi
rc=0
wait $client || rc=$?
kill -CONT "$tpid"
[[ $rc == 1 ]] || fail "the watch of a silent daemon exited $rc: $(cat "$d/silent.txt")"
grep -q "lost the daemon's sweep $sid before it ended: .*is unreachable or stopped answering" "$d/silent.txt" ||
  fail "the lost watch said: $(cat "$d/silent.txt")"
echo "a silent daemon ends the watch after ${waited} s ok"

kill -TERM "$tpid"
wait "$tpid" || fail "daemon exit $? at the end"
tpid=""

# 6. A frozen rank of a daemon-run sweep: the daemon's sweep process ends its job and says which rank.
HCCL_EXEC_TIMEOUT=2 HCCL_CONNECT_TIMEOUT=2 HCCL_TUNE_KILL_GRACE=1 start_daemon
"$bin" sweep --via-daemon --daemon "$T" --ranks 3 --coll allreduce --min-bytes 1K --max-bytes 64M --links shm \
  --cap-ms 80 --force --json > "$d/frozen.json" 2> "$d/frozen.err" &
client=$!
rank1=""
for _ in $(seq 300); do
  fid=$(head -1 "$d/frozen.json" | python3 -c 'import json, sys; print(json.load(sys.stdin)["sweep_id"])' 2>/dev/null ||
    true)
  rank1=$(pgrep -f -- "^hccl-tune/r1 .*--daemon $T" || true)
  [[ -n $fid && -n $rank1 ]] &&
    [[ $(sqlite3 "$d/t.db" "SELECT count(*) FROM sweep_samples WHERE sweep_id='$fid'") -gt 0 ]] && break
  sleep 0.1
done
[[ -n $rank1 ]] || fail "no rank 1 of the daemon's sweep: $(cat "$d/frozen.err")"
[[ $(ps -o comm= -p "$rank1") == hccl-tune/r1 ]] || fail "rank 1 of the daemon's sweep is $(ps -o comm= -p "$rank1")"
kill -STOP "$rank1"
t0=$SECONDS
rc=0
wait $client || rc=$?
took=$((SECONDS - t0))
[[ $rc == 1 ]] || fail "a daemon-run sweep with a frozen rank: client exit $rc: $(cat "$d/frozen.err")"
((took <= 2 + 1 + 2)) || fail "a daemon-run sweep with a frozen rank took $took s"
python3 - "$d/frozen.json" "$rank1" <<'PY' || fail "the failed event: $(tail -1 "$d/frozen.json")"
import json, sys
last = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert last["event"] == "failed", last
want = f"the sweep process ended with exit status 1: rank 1 (pid {sys.argv[2]}) was stopped (SIGSTOP or job control)"
assert last["message"].startswith(want), last
assert "ranks 0, 2 failed because of it" in last["message"], last
PY
grep -q "sweep $fid failed in hccl-tuned: the sweep process ended with exit status 1: rank 1 (pid $rank1) was stopped" \
  "$d/frozen.err" || fail "the client said: $(cat "$d/frozen.err")"
[[ $(sqlite3 "$d/t.db" "SELECT status FROM sweeps WHERE id='$fid'") == failed ]] || fail "the frozen sweep's row"
sleep 0.5
[[ -z $(ours) ]] || fail "processes left after the frozen sweep: $(ps -o pid,stat,args -p "$(ours | paste -sd,)")"
echo "a frozen rank of a daemon-run sweep: failed after ${took} s naming rank 1 ok"
kill -TERM "$tpid"
wait "$tpid" || fail "daemon exit $? at the end"
tpid=""
