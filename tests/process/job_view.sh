#!/usr/bin/env bash
# The job view, end to end (docs/TROUBLESHOOTING.md, "Running jobs"): a 3-rank job reporting to a private
# hccl-tuned whose rank 2 stops calling collectives (it sleeps) while ranks 0 and 1 block in the next allreduce.
# While every process is alive:
#  - `hccl-tune jobs` shows the job (id store:file://...#<tag>), its 3 ranks with their pids, ranks 0 and 1
#    waiting in operation k and rank 2 stalled after k-1;
#  - `hccl-tune doctor --job ID` reports, first and within seconds, the hang at operation k naming rank 2 as
#    never entering it, with the fix; every rank's dump came through the daemon;
#  - an unknown job id is an error naming it (jobs and doctor);
# then rank 2 is released and every rank finishes with every result correct. Negative control: a healthy job's
# `doctor --job` has no finding above info.
# Usage: job_view.sh HCCL_TUNE HCCL_TUNED STALL_JOB
set -euo pipefail
cli=$1 tuned=$2 job=$3
tmp=$(mktemp -d)
daemon="" pids=()
cleanup() {
  for p in "${pids[@]}" $daemon; do kill -9 "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAILED: $*" >&2
  for f in "$tmp"/*/err* "$tmp/daemon.log"; do [[ -f $f ]] && { echo "--- $f" >&2; tail -5 "$f" >&2; }; done
  exit 1
}

"$tuned" --socket "$tmp/d.sock" --db "$tmp/t.db" --log-level info 2>> "$tmp/daemon.log" &
daemon=$!
for _ in $(seq 100); do [[ -S $tmp/d.sock ]] && break; sleep 0.05; done
[[ -S $tmp/d.sock ]] || fail "hccl-tuned did not start"
export HCCL_TUNE_DAEMON="unix:$tmp/d.sock" HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=120 \
  HCCL_TUNE_FR_DUMP_DIR="$tmp/fr"

start_job() {  # DIR STALL_RANK STALL_AT: 3 ranks of stall_job
  mkdir -p "$1/store"
  pids=()
  for r in 0 1 2; do
    RANK=$r WORLD_SIZE=3 HCCL_TUNE_STORE="file://$1/store" "$job" "$1" "$2" "$3" > "$1/out$r" 2> "$1/err$r" &
    pids+=($!)
  done
}
finish_job() {  # DIR: stop the job, every rank exits 0 with every result correct
  touch "$1/release" "$1/stop"
  for r in 0 1 2; do
    wait "${pids[r]}" || fail "rank $r failed"
    grep -q "^rank $r: [0-9]* calls, every result correct$" "$1/out$r" || fail "rank $r: $(cat "$1/out$r")"
  done
  pids=()
}
# jobs --json as "rank state pid last_started last_completed" lines of the one job whose id contains $1.
ranks_of() {
  "$cli" jobs --json | python3 -c '
import json, sys
for j in json.load(sys.stdin)["jobs"]:
    if sys.argv[1] in j["job_id"]:
        for r in j["ranks"]:
            c = r["comms"][0]
            print(r["rank"], r["state"], r["pid"], c["last_started"], c["last_completed"], j["job_id"])' "$1"
}

# --- a stalled rank ---
mkdir -p "$tmp/stall"
start_job "$tmp/stall" 2 300
states=""
for _ in $(seq 100); do
  states=$(ranks_of "$tmp/stall/store" | awk '{print $1 "=" $2}' | tr '\n' ' ')
  [[ $states == "0=waiting 1=waiting 2=stalled " ]] && break
  sleep 0.2
done
[[ $states == "0=waiting 1=waiting 2=stalled " ]] || fail "jobs shows the ranks as: '$states'"
mapfile -t lines < <(ranks_of "$tmp/stall/store")
read -r _ _ _ k0 _ id <<< "${lines[0]}"
for r in 0 1 2; do
  read -r _ _ pid started completed _ <<< "${lines[r]}"
  [[ $pid == "${pids[r]}" ]] || fail "jobs: rank $r has pid $pid, not ${pids[r]}"
  if ((r < 2)); then
    ((started == k0 && completed == k0 - 1)) || fail "jobs: rank $r started $started completed $completed, k=$k0"
  else
    ((completed == k0 - 1 && started == k0 - 1)) || fail "jobs: rank 2 started $started completed $completed"
  fi
done
[[ $id == store:file://$tmp/stall/store#* ]] || fail "job id $id"
"$cli" jobs | sed "s|$tmp|TMP|g"
start=$(date +%s%3N)
"$cli" doctor --job "$id" --hang-after 2 --out "$tmp/dumps" > "$tmp/doctor" 2> "$tmp/doctor.err" ||
  fail "doctor --job: $(cat "$tmp/doctor.err")"
took=$(($(date +%s%3N) - start))
sed "s|$tmp|TMP|g" "$tmp/doctor"
head -1 "$tmp/doctor" | grep -q "^1\. \[error\] hang: hang at operation $k0 (allreduce of 8 B): rank 2 never entered it$" ||
  fail "doctor's first finding: $(head -1 "$tmp/doctor")"
grep -q "fix: see what rank 2 is doing" "$tmp/doctor" || fail "no fix"
dumps=("$tmp"/dumps/fr-*-r[012].json)
[[ ${#dumps[@]} == 3 && -f ${dumps[0]} ]] || fail "dumps: $(ls "$tmp/dumps")"
[[ ! -s $tmp/doctor.err ]] || fail "doctor: $(cat "$tmp/doctor.err")"
echo "doctor --job took $took ms"
((took < 5000)) || fail "doctor --job took $took ms"
for r in 0 1 2; do kill -0 "${pids[r]}" || fail "rank $r is gone"; done

# --- bad input ---
rc=0
"$cli" doctor --job nosuch > /dev/null 2> "$tmp/err.doctor" || rc=$?
((rc == 1)) && grep -q "no running job 'nosuch' on " "$tmp/err.doctor" || fail "doctor --job nosuch: rc $rc $(cat "$tmp/err.doctor")"
rc=0
"$cli" jobs --job nosuch > /dev/null 2> "$tmp/err.jobs" || rc=$?
((rc == 1)) && grep -q "no running job 'nosuch' on " "$tmp/err.jobs" || fail "jobs --job nosuch: rc $rc $(cat "$tmp/err.jobs")"
echo "unknown job: $(cat "$tmp/err.doctor")"
finish_job "$tmp/stall"

# --- negative control: a healthy job ---
mkdir -p "$tmp/ok"
start_job "$tmp/ok" -1 0
n=""
for _ in $(seq 100); do
  n=$(ranks_of "$tmp/ok/store" | awk '$5 > 50' | wc -l)
  [[ $n == 3 ]] && break
  sleep 0.2
done
[[ $n == 3 ]] || fail "the healthy job did not show 3 ranks with progress"
id=$(ranks_of "$tmp/ok/store" | awk 'NR == 1 {print $6}')
"$cli" doctor --job "$id" > "$tmp/doctor.ok" 2> "$tmp/doctor.ok.err" || fail "doctor --job (healthy): $(cat "$tmp/doctor.ok.err")"
grep '^[0-9]*\. \[' "$tmp/doctor.ok" | grep -v '\[info\]' && fail "healthy job: $(cat "$tmp/doctor.ok")"
grep -q '^1\. \[info\]' "$tmp/doctor.ok" || fail "healthy job: $(cat "$tmp/doctor.ok")"
echo "healthy: $(head -1 "$tmp/doctor.ok")"
finish_job "$tmp/ok"
echo "job view: OK"
