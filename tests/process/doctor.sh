#!/usr/bin/env bash
# `hccl-tune doctor` on real 2-rank jobs (tests/process/doctor_job.cc; each rank dumps its flight recorder when it
# ends), one seeded problem per job, each of which the doctor must rank first with the right fix:
#  1. a healthy job: no finding above info;
#  2. a straggler: rank 1 sleeps 10 ms before every call (far above the 4 ms scheduler ticks of a busy host, so
#     that rank 0 is still seen waiting for it when other work shares the cores): "straggler", naming rank 1;
#  3. HCCL_BUFFSIZE=1 with 16 MiB reducescatters (ring: scratch of the whole input): "buffers", with the HCCL_BUFFSIZE that avoids the overflow;
#  4. both ranks pinned to one CPU (taskset -c 0): "binding";
#  5. HCCL_TUNE_ALGO forcing the configuration a tiny sweep (into a --db file) measured slowest at the job's
#     size, at least 1.5x the winner: "algorithm", with the fix naming HCCL_TUNE_ALGO and the table's winner.
# Usage: doctor.sh HCCL_TUNE_BIN DOCTOR_JOB_BIN [OUT_DIR]   (OUT_DIR: keeps each job's doctor output there)
set -euo pipefail
bin=$1
job=$2
out=${3:-}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
export HCCL_TUNE_DAEMON=off HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=60

# run_job NAME COLL CALLS BYTES [SLOW_RANK SLEEP_US]: a 2-rank job (the caller's environment, plus $pin before each
# rank's command); its dumps in $d/NAME/fr.
pin=()
run_job() {
  local name=$1 pids=() r
  shift
  mkdir -p "$d/$name/store"
  for r in 0 1; do
    HCCL_TUNE_FR_DUMP_DIR="$d/$name/fr" RANK=$r WORLD_SIZE=2 HCCL_TUNE_STORE="file://$d/$name/store" \
      "${pin[@]}" "$job" "$@" > "$d/$name/out$r" 2> "$d/$name/err$r" &
    pids+=($!)
  done
  for r in 0 1; do wait "${pids[r]}" || fail "$name: rank $r failed: $(cat "$d/$name/err$r")"; done
  for r in 0 1; do grep -q "^rank $r: .* correct" "$d/$name/out$r" || fail "$name: rank $r: $(cat "$d/$name/out$r")"; done
}

# expect NAME KIND REGEX [DOCTOR ARGS...]: the doctor's first finding on NAME's dumps is KIND (warn or error),
# its title + fix match REGEX and hold $LITERAL (when set); KIND=none expects nothing above info instead.
expect() {
  local name=$1 kind=$2 re=$3
  shift 3
  "$bin" doctor --dump "$d/$name/fr" "$@" > "$d/$name/doctor.txt" || fail "$name: doctor failed"
  "$bin" doctor --dump "$d/$name/fr" --json "$@" > "$d/$name/doctor.json" || fail "$name: doctor --json failed"
  python3 - "$d/$name/doctor.json" "$kind" "$re" << 'PY' || fail "$name: $(cat "$d/$name/doctor.txt")"
import json, os, re, sys
findings, kind, pattern = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
if kind == "none":
    bad = [f["kind"] + ": " + f["title"] for f in findings if f["severity"] != "info"]
    sys.exit(f"findings above info: {bad}" if bad else 0)
first = findings[0]
if first["kind"] != kind or first["severity"] == "info":
    sys.exit(f"first finding {first['severity']} {first['kind']}, expected {kind}")
text = first["title"] + " || " + first["fix"]
if not re.search(pattern, text):
    sys.exit(f"first finding does not match {pattern!r}")
literal = os.environ.get("LITERAL", "")
if literal not in text:
    sys.exit(f"first finding does not name {literal!r}")
PY
  echo "$name: $(head -1 "$d/$name/doctor.txt")"
  if [[ -n $out ]]; then cp "$d/$name/doctor.txt" "$out/$name.txt"; fi
}

run_job healthy allreduce 1280 64
expect healthy none ""

run_job straggler allreduce 1280 64 1 10000
expect straggler straggler "^rank 1 arrives last at [0-9]+ of [0-9]+ calls .* about [0-9.]+ ms late.*see what rank 1 does"

HCCL_BUFFSIZE=1 run_job buffers reducescatter 64 $((16 << 20))
expect buffers buffers "more scratch than HCCL_BUFFSIZE \(1 MB\).*HCCL_BUFFSIZE=[0-9]+ \(MB, on every rank\) avoids it"

pin=(taskset -c 0)
run_job pinned allreduce 640 64
pin=()
expect pinned binding "ranks 0, 1 are all pinned to CPU 0; 2 ranks run on 1 CPU.*taskset -c \\\$LOCAL_RANK"

# A tiny exhaustive sweep of 2-rank 64 KiB allreduces into a database file; the job forces its slowest
# configuration (at least 1.5x the winner's median).
"$bin" sweep --force --ranks 2 --db "$d/t.db" --coll allreduce --min-bytes 64K --max-bytes 64K --exhaustive \
  --cap-ms 20 --max-iters 5 --plain > "$d/sweep.log" 2>&1 || fail "sweep: $(tail -5 "$d/sweep.log")"
read -r slow winner < <(python3 - "$d/t.db" << 'PY'
import sqlite3, statistics, sys
db = sqlite3.connect(sys.argv[1])
times = {}
for config, t in db.execute("SELECT configuration, time_us FROM sweep_samples WHERE bytes = 65536"):
    times.setdefault(config, []).append(t)
med = {c: statistics.median(v) for c, v in times.items()}
(winner,) = db.execute("SELECT configuration FROM entries WHERE min_bytes <= 65536 AND 65536 < max_bytes "
                       "ORDER BY version DESC LIMIT 1").fetchone()
slow = max(med, key=med.get)
if med[slow] < 1.5 * med[winner]:
    sys.exit(f"no configuration 1.5x slower than {winner} ({med})")
print(slow, winner)
PY
) || fail "no slow configuration in the sweep"
HCCL_TUNE_ALGO="allreduce:0-=$slow" run_job algorithm allreduce 640 65536
LITERAL=$winner expect algorithm algorithm "ran .* \(HCCL_TUNE_ALGO\), up to [0-9]+% slower.*unset HCCL_TUNE_ALGO" \
  --db "$d/t.db"
echo "doctor: OK"
