#!/usr/bin/env bash
# Fault campaign for hccl-tuned (docs/RELIABILITY.md): TRIALS times, hccl-tuned is SIGKILLed at a random moment
# during one of
#   put     PutTable: `hccl-tune import --daemon` of 2,000-entry tables in a loop;
#   report  a ReportTimings stream: a 2-rank job reporting every call;
#   sweep   a daemon-run sweep (hccl-tune sweep --via-daemon);
#   mini    a mini-sweep the daemon starts by itself for a stale entry of an idle node's table;
# then, every trial: PRAGMA integrity_check is ok; every stored table version holds exactly the entries it was
# written with (no half-written version) and its content hash; a table stored before the trial is unchanged; the
# reporting job goes on without the daemon and ends normally; the killed sweep resumes to the end under a restarted
# daemon (--via-daemon --resume); the killed mini-sweep's entry stays stale and whole, and the restarted daemon
# mini-sweeps it again to the end (one new table version, every other entry identical); no sweep or rank process
# is left. Prints the figures (trials, hangs, leaks, lost
# data). Usage: daemon_kill_campaign.sh HCCL_TUNE HCCL_TUNED TRIALS
set -euo pipefail
cli=$1 tuned=$2 trials=$3
d=$(mktemp -d)
tpid="" job=""
cleanup() {
  [[ -n $job ]] && kill -9 "$job" 2>/dev/null
  [[ -n $tpid ]] && kill -9 "$tpid" 2>/dev/null
  pkill -9 -f -- "--daemon unix:$d/" 2>/dev/null || true
  rm -rf "$d"
}
trap cleanup EXIT
export HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=30
T="unix:$d/t.sock"
fail() {
  echo "FAIL: $*" >&2
  [[ -f $d/tuned.log ]] && { echo "--- daemon log:" >&2; tail -20 "$d/tuned.log" >&2; }
  exit 1
}
# Mini-sweeps on, one idle second before each; at most one per trial is killed and one retried.
cat > "$d/tuned.conf" <<'CONF'
mini_sweep = on
mini_sweep_idle_s = 1
mini_sweep_max_per_hour = 3600
CONF
start_daemon() {
  rm -f "$d/t.sock"
  "$tuned" --socket "$d/t.sock" --db "$d/t.db" --config "$d/tuned.conf" --sweep-command "$cli" --log-level info \
    2>> "$d/tuned.log" &
  tpid=$!
  for _ in $(seq 200); do [[ -S $d/t.sock ]] && return; sleep 0.05; done
  fail "the daemon did not start"
}
kill_daemon() {
  kill -9 "$tpid"
  wait "$tpid" 2>/dev/null || true
  tpid=""
}
ours() { pgrep -f -- "--daemon $T" || true; }
# Waits up to $2 seconds for the child $1; its exit status in $rc. False (and the child killed) when it ran on.
wait_for() {
  local i
  for i in $(seq $(($2 * 10))); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$1" 2>/dev/null; then
    kill -9 "$1"
    wait "$1" 2>/dev/null || true
    return 1
  fi
  rc=0
  wait "$1" || rc=$?
}

# Tables of 2,000 entries for topology N, every entry's time set to V (each import is a new version).
table() {
  python3 - "$1" "$2" <<'PY'
import hashlib, json, sys
n, v = int(sys.argv[1]), float(sys.argv[2])
topo = ('{"format":2,"inter":[{"link":"tcp","network":"10.20.0.0/16"}],"intra":["shm"],"nodes":%d,'
        '"ranks_per_node":[%s],"release":"0.1","runtime":"hccl-tune"}' % (n, ",".join(["8"] * n)))
fp = hashlib.sha256(topo.encode()).hexdigest()[:16]
entries = [{"collective": "allreduce", "dtype": "fp32", "world_size": w, "bytes": "%d-%d" % (i * 64, i * 64 + 64),
            "configuration": "ring(chunk=1M,channels=1,link=shm)", "time_us": v, "busbw_gbps": 1.0, "samples": 10,
            "runner_up": "", "margin": 0.1, "default_margin": 0.2, "sweep_id": "campaign", "library_version": "0.1",
            "measured_unix_ms": 0} for w in range(2, 6) for i in range(500)]
print(json.dumps({"format": "hccl-tune-tables", "format_version": 1, "tables": [
    {"fingerprint": fp, "topology": topo, "version": 1, "created_unix_ms": 0, "content_hash": "", "entries": entries}]}))
PY
}

# Every version holds 2,000 entries of one time value (no half-written version), and every table's content hash
# matches its entries (a fresh import of the export warns about none).
check_db() {
  [[ $(sqlite3 "$d/t.db" "PRAGMA integrity_check") == ok ]] || fail "integrity_check: trial $1"
  local bad
  bad=$(sqlite3 "$d/t.db" "SELECT v.fingerprint, v.version, count(e.version), count(DISTINCT e.time_us)
    FROM table_versions v LEFT JOIN entries e ON e.fingerprint = v.fingerprint AND e.version = v.version
    WHERE e.sweep_id = 'campaign' OR e.sweep_id IS NULL GROUP BY v.fingerprint, v.version
    HAVING count(e.version) != 2000 OR count(DISTINCT e.time_us) != 1")
  [[ -z $bad ]] || fail "half-written table versions after trial $1: $bad"
  "$cli" export --db "$d/t.db" "$d/export.json" > /dev/null || fail "export after trial $1"
  rm -f "$d/check.db"
  "$cli" import --db "$d/check.db" "$d/export.json" > "$d/check.txt" 2>&1 || fail "re-import: $(cat "$d/check.txt")"
  ! grep -qi "content_hash\|edited" "$d/check.txt" || fail "a stored table's hash does not match: $(cat "$d/check.txt")"
  [[ $(sqlite3 "$d/t.db" "SELECT count(*) FROM entries e JOIN table_versions v USING (fingerprint, version)
    WHERE e.fingerprint = '$keep_fp' AND v.version = 1") == 2000 ]] || fail "the table stored before trial $1 was lost"
}

start_daemon
table 9 1.5 > "$d/keep.json"
"$cli" import --daemon "$T" "$d/keep.json" > /dev/null || fail "first import"
keep_fp=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tables"][0]["fingerprint"])' "$d/keep.json")
for v in 1 2 3 4; do table 2 "$v.25" > "$d/t$v.json"; done

# A one-node 2-rank table of this release whose allreduce/int32 1K-16K entry is stale: an idle daemon mini-sweeps
# that range (1K, 2K, 4K, 8K) and merges its winner as one new version.
release=$("$cli" --version | sed -E 's/^hccl-tune ([0-9]+\.[0-9]+).*/\1/')
mini_topo="{\"format\":2,\"inter\":[],\"intra\":[\"shm\"],\"nodes\":1,\"ranks_per_node\":[2],\"release\":\"$release\",\"runtime\":\"hccl-tune\"}"
mini_fp=$(printf '%s' "$mini_topo" | sha256sum | cut -c1-16)
python3 - "$d/mini.json" "$mini_fp" "$mini_topo" <<'PY'
import json, sys
path, fp, topo = sys.argv[1:]
def e(rng, stale=False):
    x = {"collective": "allreduce", "dtype": "int32", "world_size": 2, "bytes": rng,
         "configuration": "ring(channels=1,link=auto)", "time_us": 9.0, "rank_time_us": 8.0, "busbw_gbps": 0.0,
         "samples": 10, "runner_up": "", "margin": 0.0, "default_margin": 0.0, "sweep_id": "mini-campaign",
         "library_version": "test", "measured_unix_ms": 0}
    if stale: x["stale"] = True
    return x
json.dump({"format": "hccl-tune-tables", "format_version": 1, "tables": [{"fingerprint": fp, "topology": topo,
    "version": 1, "created_unix_ms": 0, "content_hash": "", "entries": [e("0-1K"), e("1K-16K", True), e("16K-")]}]},
    open(path, "w"))
PY
# The mini table's latest version: "VERSION STALE OTHERS". STALE: 1 while an entry of 1K-16K is stale; OTHERS: 1
# when the 0-1K and 16K- entries are as imported and the entries between them cover 1K-16K exactly, once each.
mini_state() {
  "$cli" export --db "$d/t.db" "$d/mini-now.json" > /dev/null || fail "export of the mini-sweep table"
  python3 - "$d/mini-now.json" "$mini_fp" <<'PY'
import json, sys
t = [t for t in json.load(open(sys.argv[1]))["tables"] if t["fingerprint"] == sys.argv[2]][0]
by = {e["bytes"]: e for e in t["entries"] if e["collective"] == "allreduce" and e["dtype"] == "int32"}
others = all(by.get(r, {}).get("configuration", "").startswith("ring(") and by[r]["time_us"] == 9.0
             and by[r]["sweep_id"] == "mini-campaign" for r in ("0-1K", "16K-"))
size = lambda x: int(x[:-1]) * {"K": 1 << 10, "M": 1 << 20}[x[-1]] if x[-1] in "KM" else int(x)
inner = sorted((size(lo), size(hi), e) for r, e in by.items() if r not in ("0-1K", "16K-")
               for lo, hi in [r.split("-")])
edges = [1 << 10] + [hi for _, hi, _ in inner]
others = others and all(lo == edges[i] for i, (lo, _, _) in enumerate(inner)) and edges[-1] == 16 << 10
print(t["version"], int(any(e.get("stale") for _, _, e in inner)), int(bool(others)))
PY
}
mini_started() { grep -c "mini-sweep sw-.* of $mini_fp .*: started" "$d/tuned.log" || true; }

hangs=0 leaks=0 resumed=0 puts=0 reports=0 sweeps=0 minis=0 remini=0
for trial in $(seq "$trials"); do
  [[ -n $tpid ]] || start_daemon
  mode=$(((trial - 1) % 4))
  delay=$(python3 -c "import random; print(round(random.uniform(0.05, 1.5), 2))")
  case $mode in
    0)  # PutTable in a loop, killed at a random moment
      (for i in $(seq 40); do "$cli" import --daemon "$T" "$d/t$((i % 4 + 1)).json" > /dev/null 2>&1 || exit 0; done) &
      loop=$!
      sleep "$delay"
      kill_daemon
      wait_for $loop 30 || hangs=$((hangs + 1))
      puts=$((puts + 1))
      ;;
    1)  # a job streaming live timings; it must end normally without the daemon
      HCCL_TUNE_DAEMON="$T" HCCL_TUNE_SAMPLE_RATE=1 "$cli" bench --ranks 2 --coll allreduce --min-bytes 8 \
        --max-bytes 1K --iters 3000 > "$d/job.out" 2> "$d/job.err" &
      job=$!
      sleep "$delay"
      kill_daemon
      wait_for $job 120 || { hangs=$((hangs + 1)); rc=0; }
      job=""
      [[ $rc == 0 ]] || fail "the reporting job failed when the daemon was killed (trial $trial): $(tail -3 "$d/job.err")"
      reports=$((reports + 1))
      ;;
    2)  # a daemon-run sweep, killed mid-sweep, resumed under a restarted daemon
      # A mini-sweep killed in an earlier trial may still be 'running' in the store: only a new row is this sweep.
      earlier=$(sqlite3 "$d/t.db" "SELECT group_concat(quote(id)) FROM sweeps WHERE status='running'" 2>/dev/null || true)
      "$cli" sweep --via-daemon --daemon "$T" --ranks 2 --coll allreduce --min-bytes 1K --max-bytes 1M \
        --links shm,tcp --cap-ms 80 --force --json > "$d/sweep.json" 2>&1 &
      client=$!
      sid=""
      for _ in $(seq 300); do
        sid=$(sqlite3 "$d/t.db" "SELECT id FROM sweeps WHERE status='running' AND id NOT IN (${earlier:-''})
          ORDER BY started_ms DESC LIMIT 1" 2>/dev/null || true)
        [[ -n $sid ]] && break
        sleep 0.05
      done
      [[ -n $sid ]] || fail "the daemon-run sweep did not start (trial $trial): $(tail -3 "$d/sweep.json")"
      sleep "$delay"
      kill_daemon
      wait_for $client 60 || hangs=$((hangs + 1))
      # The sweep process and its ranks end once their daemon is gone.
      for _ in $(seq 300); do [[ -z $(ours) ]] && break; sleep 0.1; done
      if [[ -n $(ours) ]]; then
        leaks=$((leaks + 1))
        pkill -9 -f -- "--daemon $T" || true
      fi
      status=$(sqlite3 "$d/t.db" "SELECT status FROM sweeps WHERE id='$sid'" 2>/dev/null || true)
      if [[ -n $sid && $status != done ]]; then
        [[ $(sqlite3 "$d/t.db" "SELECT count(*) FROM entries WHERE sweep_id='$sid'") == 0 ]] ||
          fail "a killed sweep left table entries (trial $trial)"
        start_daemon
        "$cli" sweep --via-daemon --daemon "$T" --resume "$sid" --force --json > "$d/resume.json" 2>&1 ||
          fail "resume of $sid after SIGKILL (trial $trial): $(tail -3 "$d/resume.json")"
        [[ $(sqlite3 "$d/t.db" "SELECT status FROM sweeps WHERE id='$sid'") == done ]] || fail "resumed sweep not done"
        resumed=$((resumed + 1))
      fi
      sweeps=$((sweeps + 1))
      ;;
    3)  # a mini-sweep started by the daemon itself, killed at a random moment, retried by the restarted daemon
      before=$(mini_started)
      "$cli" import --daemon "$T" "$d/mini.json" > /dev/null 2>&1 || fail "import of the stale table (trial $trial)"
      for _ in $(seq 300); do (($(mini_started) > before)) && break; sleep 0.05; done
      (($(mini_started) > before)) || fail "no mini-sweep of the stale entry started (trial $trial)"
      id=$(grep "mini-sweep sw-.* of $mini_fp .*: started" "$d/tuned.log" | tail -1 | sed -E 's/.*mini-sweep (sw-[0-9a-f-]+) .*/\1/')
      sleep "$delay"
      kill_daemon
      for _ in $(seq 300); do pgrep -f -- "--sweep-id $id" > /dev/null || break; sleep 0.1; done
      if pgrep -f -- "--sweep-id $id" > /dev/null; then
        leaks=$((leaks + 1))
        pkill -9 -f -- "--sweep-id $id" || true
      fi
      read -r v stale others < <(mini_state)
      ((others == 1)) || fail "the killed mini-sweep $id changed the entries around the stale one (trial $trial)"
      if ((stale == 1)); then
        before=$(mini_started)
        start_daemon
        for _ in $(seq 1200); do
          read -r v2 stale2 others2 < <(mini_state)
          ((stale2 == 0)) && break
          sleep 0.1
        done
        ((stale2 == 0)) || fail "the restarted daemon did not mini-sweep the stale entry again (trial $trial)"
        (($(mini_started) > before)) || fail "the stale entry was cleared without a new mini-sweep (trial $trial)"
        ((v2 == v + 1 && others2 == 1)) ||
          fail "the retried mini-sweep made version $v2 from $v (others as imported: $others2) (trial $trial)"
        remini=$((remini + 1))
      fi
      minis=$((minis + 1))
      ;;
  esac
  [[ -n $tpid ]] && kill_daemon
  check_db "$trial"
done
versions=$(sqlite3 "$d/t.db" "SELECT count(*) FROM table_versions")
echo "daemon kill campaign: $trials trials ($puts PutTable, $reports ReportTimings, $sweeps sweeps, $resumed resumed," \
  "$minis mini-sweeps, $remini retried)," \
  "hangs $hangs, leaked processes $leaks, lost data 0 ($versions table versions, all whole; integrity_check ok)"
((hangs == 0 && leaks == 0)) || fail "hangs or leaks"
