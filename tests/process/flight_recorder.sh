#!/usr/bin/env bash
# The flight recorder in real jobs (docs/TROUBLESHOOTING.md):
#  1. a 3-rank bench whose rank 2 stops calling collectives (SIGSTOP): each surviving rank writes its dump when
#     its call fails (its own exec timeout, or the other survivor's announcement of one), which names the last completed operation and the pending one (the next) with its configuration
#     and source (`call`: the bench passes its link; `default`: its barriers); both survivors agree on them, and the job's error names the configuration too;
#     `hccl-tune doctor --dump` ranks that hang first, naming rank 2;
#  2. HCCL_TUNE_FR_SIGNAL=SIGUSR1: a signal to each rank of a live bench writes that rank's dump (reason
#     "signal") of completed allreduce calls, and the job keeps running.
# Usage: flight_recorder.sh HCCL_TUNE_BIN
set -euo pipefail
bin=$1
d=$(mktemp -d)
job=""
pids=()
cleanup() {
  if [[ -n $job ]]; then kill -9 "$job" 2> /dev/null || true; fi
  rm -rf "$d"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  [[ -f $d/err ]] && { echo "--- stderr of the job:" >&2; tail -20 "$d/err" >&2; }
  exit 1
}
export HCCL_TUNE_DAEMON=off HCCL_CONNECT_TIMEOUT=5 HCCL_EXEC_TIMEOUT=2 HCCL_TUNE_KILL_GRACE=3 HCCL_BUFFSIZE=2

# Starts a 3-rank bench of 8-byte allreduces that runs until stopped; sets job and pids[r].
source "$(dirname "$0")/three_ranks.sh"
start_bench() {
  start_job "$bin" bench --ranks 3 --coll allreduce --min-bytes 8 --max-bytes 8 --iters 100000000 --warmup 1 --link shm
}

# 1. A rank that stops calling.
export HCCL_TUNE_FR_DUMP_DIR=$d/timeout
start_bench
sleep 1
kill -STOP "${pids[2]}"
rc=0
wait "$job" || rc=$?
job=""
[[ $rc != 0 ]] || fail "the bench with a stopped rank exited 0"
grep -q "the call ran [a-z_]*(.*), chosen by [a-zA-Z_]*\]" "$d/err" || fail "the job's error names no configuration"
python3 - "$d/timeout" << 'PY' || fail "timeout dumps"
import glob, json, sys
dumps = {}
for path in glob.glob(sys.argv[1] + "/fr-*-r*.json"):
    d = json.load(open(path))
    dumps.setdefault(d["rank"], []).append(d)
if sorted(dumps) != [0, 1]:
    sys.exit(f"dumps of ranks {sorted(dumps)}, expected exactly the survivors 0 and 1")
seen, reasons = [], []
for rank in (0, 1):
    # The first survivor to time out announces it; the other may learn of it from that announcement first.
    if len(dumps[rank]) != 1 or dumps[rank][0]["reason"] not in ("timeout", "abort"):
        sys.exit(f"rank {rank}: dumps {[d['reason'] for d in dumps[rank]]}, expected one timeout or abort")
    d = dumps[rank][0]
    reasons.append(d["reason"])
    last, entries = d["last_completed_seq"], d["entries"]
    pending = entries[-1]
    if last < 10 or pending["collective_seq_id"] != last + 1 or pending["state"] != "failed":
        sys.exit(f"rank {rank}: last completed {last}, pending {pending}")
    if not pending["configuration"] or pending["source"] not in ("call", "default") or pending["bytes"] not in (0, 8):
        sys.exit(f"rank {rank}: the pending call lacks its configuration: {pending}")
    if pending["time_blocked_ns"] is None or "HCCL_EXEC_TIMEOUT" not in d["error"]:
        sys.exit(f"rank {rank}: pending {pending}, error {d['error']!r}")
    if any(e["state"] != "completed" for e in entries[:-1]):
        sys.exit(f"rank {rank}: a call before the pending one did not complete")
    seen.append((last, pending["collective_seq_id"], pending["profiling_name"], pending["configuration"]))
    print(f"rank {rank}: last completed {last}, pending {pending['collective_seq_id']} "
          f"{pending['profiling_name']} {pending['configuration']} ({pending['source']}), dumped on {d['reason']}")
if "timeout" not in reasons:
    sys.exit(f"no survivor dumped on its timeout: {reasons}")
if seen[0] != seen[1]:
    sys.exit(f"the survivors disagree: {seen}")
PY
# The doctor ranks the hang first: at the survivors' pending operation, naming rank 2 (no dump) as never entering.
"$bin" doctor --dump "$d/timeout" > "$d/doctor" || fail "hccl-tune doctor failed"
head -1 "$d/doctor" | grep -q "^1\. \[error\] hang: hang at operation [0-9]* ([a-z]* of [0-9]* B): rank 2 never entered it$" ||
  fail "doctor's first finding: $(cat "$d/doctor")"
grep -q "evidence: rank 2: no dump" "$d/doctor" || fail "doctor names no missing dump: $(cat "$d/doctor")"
echo "doctor: $(head -1 "$d/doctor")"

# 2. A signal to a live job.
export HCCL_TUNE_FR_DUMP_DIR=$d/signal HCCL_TUNE_FR_SIGNAL=SIGUSR1
start_bench
sleep 1
for r in 0 1 2; do kill -USR1 "${pids[r]}"; done
for _ in $(seq 100); do
  [[ $(ls "$d/signal" 2> /dev/null | grep -c '\.json$') -ge 3 ]] && break
  sleep 0.05
done
for r in 0 1 2; do kill -0 "${pids[r]}" 2> /dev/null || fail "rank $r died of SIGUSR1"; done
kill -TERM "$job"
wait "$job" 2> /dev/null || true
job=""
python3 - "$d/signal" << 'PY' || fail "signal dumps"
import glob, json, sys
ranks = {}
for path in glob.glob(sys.argv[1] + "/fr-*-r*.json"):
    d = json.load(open(path))
    done = [e for e in d["entries"] if e["state"] == "completed" and e["profiling_name"] == "hccl-tune:allreduce"]
    if d["reason"] != "signal" or not done or d["last_completed_seq"] < 1:
        sys.exit(f"{path}: reason {d['reason']}, {len(done)} completed allreduces")
    ranks[d["rank"]] = d["last_completed_seq"]
if sorted(ranks) != [0, 1, 2]:
    sys.exit(f"signal dumps of ranks {sorted(ranks)}")
print("signal dumps, last completed operation per rank:", ranks)
PY
echo "flight recorder: OK"
