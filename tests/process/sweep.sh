#!/usr/bin/env bash
# hccl-tune sweep as processes: a tiny 2- and 3-rank sweep stores winners covering the requested range; a sweep
# killed with SIGKILL leaves the database intact (integrity_check, no half-written table) and --resume completes
# it; bad input is refused with a message naming what is wrong.
# usage: sweep.sh HCCL_TUNE_BIN [HCCL_TUNED_BIN]
set -euo pipefail
bin=$1
d=$(mktemp -d)
pid=""
trap '[[ -n $pid ]] && kill -9 -- -$pid 2>/dev/null; rm -rf "$d"' EXIT
export HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=60
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. Tiny sweeps store winners that cover [min, max].
"$bin" sweep --ranks 2 --db "$d/t.db" --coll allreduce --min-bytes 1K --max-bytes 16K --algo ring,recursive_doubling \
  --links shm --cap-ms 40 --force --plain > "$d/out2.txt"
grep -q "winners stored in database" "$d/out2.txt" || fail "no winners line: $(cat "$d/out2.txt")"
"$bin" sweep --ranks 3 --db "$d/t.db" --coll allgather,broadcast --min-bytes 3K --max-bytes 12K --links shm \
  --cap-ms 40 --force --json > "$d/out3.json"
"$bin" show --db "$d/t.db" --json > "$d/show.json"
python3 - "$d/show.json" "$d/out3.json" <<'PY'
import json, sys
tables = json.load(open(sys.argv[1]))["tables"]
def parse(s):
    k = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    def one(x):
        if x == "": return None
        return int(x[:-1]) * k[x[-1]] if x[-1] in k else int(x)
    lo, hi = s.split("-")
    return one(lo), one(hi)
def check(coll, world, lo, hi):
    es = [e for t in tables for e in t["entries"] if e["collective"] == coll and e["world_size"] == world]
    assert es, f"no entries for {coll} world {world}"
    rs = sorted(parse(e["bytes"]) for e in es)
    assert rs[0][0] <= lo, (coll, rs)
    assert rs[-1][1] is None or rs[-1][1] > hi, (coll, rs)
    for a, b in zip(rs, rs[1:]):
        assert a[1] == b[0], f"gap or overlap in {coll}: {rs}"
    for e in es:
        assert e["configuration"] and e["time_us"] > 0 and e["busbw_gbps"] > 0, e
check("allreduce", 2, 1024, 16384)
check("allgather", 3, 3072, 12288)
check("broadcast", 3, 3072, 12288)
lines = [json.loads(l) for l in open(sys.argv[2])]
done = [l for l in lines if l.get("event") == "done"]
assert len(done) == 1 and done[0]["entries"], lines[-1]
assert any(l.get("event") == "progress" for l in lines)
print("coverage ok")
PY
[[ $(sqlite3 "$d/t.db" "SELECT count(*) FROM sweeps WHERE status='done'") == 2 ]] || fail "sweeps not marked done"

# verify re-measures every stored bucket; report writes a self-contained HTML page with one SVG per plot.
"$bin" verify --ranks 2 --db "$d/t.db" --cap-ms 20 > "$d/verify.txt" || fail "verify: $(cat "$d/verify.txt")"
grep -q "buckets of topology" "$d/verify.txt" || fail "verify output: $(cat "$d/verify.txt")"
grep -Eq "winner within 5% of the best re-measured candidate in [0-9]+ of [1-9][0-9]* buckets" "$d/verify.txt" \
  || fail "verify summary: $(cat "$d/verify.txt")"
"$bin" report --db "$d/t.db" --out "$d/r.html" > /dev/null
[[ $(grep -c "<svg" "$d/r.html") -ge 2 ]] || fail "report has no plots"
grep -q "winner: " "$d/r.html" || fail "report marks no winner"
! grep -Eq "<script|src=\"http" "$d/r.html" || fail "report is not self-contained"

# Storage through the daemon (the default): the table, the sweep row and its raw samples go to hccl-tuned's
# database (no local journal file); a sweep SIGKILLed mid-way is resumed from the samples the daemon kept.
tuned=${2:-$(dirname "$bin")/../daemon/hccl-tuned}
if [[ -x $tuned ]]; then
  "$tuned" --socket "$d/tuned.sock" --db "$d/daemon.db" --log-level warn &
  tpid=$!
  for _ in $(seq 100); do [[ -S $d/tuned.sock ]] && break; sleep 0.1; done
  XDG_STATE_HOME="$d/state" HCCL_TUNE_DAEMON="unix:$d/tuned.sock" "$bin" sweep --ranks 2 --coll allreduce \
    --min-bytes 1K --max-bytes 8K --links shm --cap-ms 40 --force --plain > "$d/viad.txt" 2>&1 \
    || { kill $tpid; fail "sweep through the daemon: $(cat "$d/viad.txt")"; }
  fp=$(sed -n 's/.*topology \([0-9a-f]\{16\}\).*/\1/p' "$d/viad.txt")
  "$bin" get --daemon "unix:$d/tuned.sock" --coll allreduce --dtype fp32 --bytes 4K --world 2 --topology "$fp" \
    > "$d/get.txt" || { kill $tpid; fail "get after a daemon sweep"; }
  XDG_STATE_HOME="$d/state" "$bin" report --daemon "unix:$d/tuned.sock" --out "$d/rd.html" > /dev/null \
    || { kill $tpid; fail "report through the daemon"; }
  [[ ! -e $d/state/hccl-tune/sweeps.db ]] || { kill $tpid; fail "a local journal was written"; }
  [[ $(sqlite3 "$d/daemon.db" "SELECT count(*) FROM sweeps WHERE status='done'") == 1 ]] \
    || { kill $tpid; fail "the daemon holds no finished sweep row"; }
  [[ $(sqlite3 "$d/daemon.db" "SELECT count(*) FROM sweep_samples") -gt 0 ]] \
    || { kill $tpid; fail "the daemon holds no sweep samples"; }
  grep -q "winner: " "$d/rd.html" || { kill $tpid; fail "daemon report marks no winner"; }
  # SIGKILL mid-sweep, then --resume through the daemon.
  setsid "$bin" sweep --daemon "unix:$d/tuned.sock" --ranks 2 --coll allreduce --min-bytes 1K --max-bytes 256K \
    --links shm,tcp --cap-ms 60 --force --plain > "$d/dk.txt" 2>&1 &
  pid=$!
  n=0
  for _ in $(seq 600); do
    n=$(sqlite3 "$d/daemon.db" "SELECT count(*) FROM sweep_samples s JOIN sweeps w ON w.id = s.sweep_id \
      WHERE w.status = 'running'" 2>/dev/null || echo 0)
    [[ $n -gt 100 ]] && break
    sleep 0.05
  done
  [[ $n -gt 100 ]] || { kill $tpid; fail "the daemon got no samples from the sweep: $(cat "$d/dk.txt")"; }
  kill -9 -- -$pid
  wait $pid 2>/dev/null || true
  pid=""
  kid=$(sqlite3 "$d/daemon.db" "SELECT id FROM sweeps WHERE status='running'")
  [[ -n $kid ]] || { kill $tpid; fail "the killed sweep's row is not running"; }
  "$bin" sweep --daemon "unix:$d/tuned.sock" --resume "$kid" --force --plain > "$d/dr.txt" 2>&1 \
    || { kill $tpid; fail "resume through the daemon: $(cat "$d/dr.txt")"; }
  grep -q "replayed from the journal" "$d/dr.txt" || { kill $tpid; fail "resume replayed nothing: $(cat "$d/dr.txt")"; }
  [[ $(sqlite3 "$d/daemon.db" "SELECT status FROM sweeps WHERE id='$kid'") == done ]] \
    || { kill $tpid; fail "resumed sweep not done"; }
  kill $tpid
  wait $tpid 2>/dev/null || true
  [[ $(sqlite3 "$d/daemon.db" "PRAGMA integrity_check") == ok ]] || fail "daemon DB integrity_check"
  echo "daemon storage + kill + resume ok"
fi

# 2. SIGKILL mid-sweep: the DB stays intact, no table is written, and --resume completes the sweep.
setsid "$bin" sweep --ranks 2 --db "$d/k.db" --coll allreduce --min-bytes 1K --max-bytes 1M --links shm,tcp \
  --cap-ms 60 --force --plain > "$d/killed.txt" 2>&1 &
pid=$!
for _ in $(seq 600); do
  n=$(sqlite3 "$d/k.db" "SELECT count(*) FROM sweep_samples" 2>/dev/null || echo 0)
  [[ $n -gt 200 ]] && break
  sleep 0.05
done
[[ $n -gt 200 ]] || fail "sweep produced no samples: $(cat "$d/killed.txt")"
kill -9 -- -$pid
wait $pid 2>/dev/null || true
pid=""
[[ $(sqlite3 "$d/k.db" "PRAGMA integrity_check") == ok ]] || fail "integrity_check after SIGKILL"
[[ $(sqlite3 "$d/k.db" "SELECT count(*) FROM entries") == 0 ]] || fail "half-written table after SIGKILL"
id=$(sqlite3 "$d/k.db" "SELECT id FROM sweeps")
[[ $(sqlite3 "$d/k.db" "SELECT status FROM sweeps") == running ]] || fail "sweep row not running"
kept=$(sqlite3 "$d/k.db" "SELECT count(*) FROM sweep_samples")
# The killed sweep holds nothing off: its row names its process, which is gone, so the busy check (on a copy of
# the journal) reports it as interrupted with the command that continues it, not as a sweep in progress.
sqlite3 "$d/k.db" ".backup '$d/k2.db'"
"$bin" sweep --ranks 2 --db "$d/k2.db" --coll allreduce --min-bytes 1K --max-bytes 1K --links shm --cap-ms 20 \
  --no-table --force --plain > "$d/after_kill.txt" 2>&1 || fail "sweep after SIGKILL: $(cat "$d/after_kill.txt")"
grep -q "sweep $id was interrupted (its process is gone); hccl-tune sweep --resume $id" "$d/after_kill.txt" \
  || fail "dead owner not reported: $(cat "$d/after_kill.txt")"
! grep -q "is marked running" "$d/after_kill.txt" || fail "dead owner still holds the node: $(cat "$d/after_kill.txt")"
"$bin" sweep --resume "$id" --db "$d/k.db" --force --plain > "$d/resumed.txt" 2>&1 || fail "resume: $(cat "$d/resumed.txt")"
grep -q "replayed from the journal" "$d/resumed.txt" || fail "resume replayed nothing: $(cat "$d/resumed.txt")"
[[ $(sqlite3 "$d/k.db" "SELECT status FROM sweeps") == done ]] || fail "resumed sweep not done"
[[ $(sqlite3 "$d/k.db" "SELECT count(*) FROM entries") -gt 0 ]] || fail "no winners after resume"
[[ $(sqlite3 "$d/k.db" "SELECT count(*) FROM sweep_samples") -gt $kept ]] || fail "resume measured nothing new"
[[ $(sqlite3 "$d/k.db" "PRAGMA integrity_check") == ok ]] || fail "integrity_check after resume"
echo "kill + resume ok ($kept samples kept)"

# Ctrl-C (SIGINT to the whole process group): a clean stop, exit 130, the row marked cancelled, resumable.
setsid "$bin" sweep --ranks 2 --db "$d/c.db" --coll allreduce --min-bytes 1K --max-bytes 1M --cap-ms 60 --force \
  --plain > "$d/int.txt" 2>&1 &
pid=$!
for _ in $(seq 600); do
  n=$(sqlite3 "$d/c.db" "SELECT count(*) FROM sweep_samples" 2>/dev/null || echo 0)
  [[ $n -gt 100 ]] && break
  sleep 0.05
done
kill -INT -- -$pid
rc=0
wait $pid || rc=$?
pid=""
[[ $rc == 130 ]] || fail "Ctrl-C exit $rc: $(cat "$d/int.txt")"
grep -q "continue with: hccl-tune sweep --resume" "$d/int.txt" || fail "no resume hint: $(cat "$d/int.txt")"
[[ $(sqlite3 "$d/c.db" "SELECT status FROM sweeps") == cancelled ]] || fail "not cancelled"
"$bin" sweep --resume "$(sqlite3 "$d/c.db" "SELECT id FROM sweeps")" --db "$d/c.db" --force --plain > /dev/null 2>&1 \
  || fail "resume after Ctrl-C"
[[ $(sqlite3 "$d/c.db" "SELECT status FROM sweeps") == done ]] || fail "resume after Ctrl-C not done"
echo "ctrl-c + resume ok"

# 3. Bad input: exit 2 and a message naming the problem; nothing starts.
expect_bad() {
  local want=$1; shift
  if "$bin" sweep --force "$@" > "$d/bad.txt" 2>&1; then fail "accepted: $*"; fi
  grep -qi -- "$want" "$d/bad.txt" || fail "'$*' said: $(cat "$d/bad.txt"), expected '$want'"
}
expect_bad "inverted size range" --min-bytes 1M --max-bytes 1K --db "$d/bad.db"
expect_bad "empty size range" --min-bytes 1025 --max-bytes 2000 --db "$d/bad.db"
expect_bad "warp" --coll warp --db "$d/bad.db"
expect_bad "dtype" --dtype fp99 --db "$d/bad.db"
expect_bad "algorithm" --algo nosuch --db "$d/bad.db"
expect_bad "ranks" --ranks 0 --db "$d/bad.db"
expect_bad "step" --step 3 --db "$d/bad.db"
expect_bad "--max-iters must be at least the 5 iterations" --max-iters 3 --db "$d/bad.db"
expect_bad "--cap-ms must be > 0" --cap-ms 0 --db "$d/bad.db"
expect_bad "no daemon answers" --daemon unix:$d/none.sock
echo "bad input ok"
