#!/usr/bin/env bash
# hccl-tuned's /metrics scraped by a real Prometheus server (Debian's `prometheus`): a private daemon with
# metrics_port set holds an allreduce table (winner ring, runner-up one_shot); a 2-rank job reports its live
# timings while ring is slowed by the test hook HCCL_TUNE_TEST_DELAY, so the online policy also explores. Prometheus
# scrapes every second; its HTTP API must then return the job's series (calls of the table's topology, with
# durations and bytes) and data for every query of every panel of deploy/grafana/hccl-tune-dashboard.json. Every
# rank's results are checked by the job itself. Also: /metrics answers only GET on loopback; another path is 404.
# Usage: metrics_prometheus.sh HCCL_TUNE HCCL_TUNED ONLINE_JOB DASHBOARD_JSON
set -euo pipefail
cli=$1 tuned=$2 job=$3 dashboard=$4
command -v prometheus >/dev/null || { echo "SKIP: prometheus is not installed (deploy/install-deps.sh)"; exit 77; }
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
fail() {
  echo "FAILED: $*" >&2
  for f in daemon.log prometheus.log; do [[ -f $tmp/$f ]] && tail -15 "$tmp/$f" >&2; done
  exit 1
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
mport=$(free_port)
pport=$(free_port)

source "$(dirname "$0")/online_fixture.sh"
{
  echo "metrics_port = $mport"
  quick_policy_conf
} >"$tmp/tuned.conf"
two_rank_topology "$cli"
ring_table "$tmp/table.json"

"$tuned" --socket "$tmp/d.sock" --db "$tmp/t.db" --config "$tmp/tuned.conf" --log-level info 2>"$tmp/daemon.log" &
pids+=($!)
for _ in $(seq 100); do [[ -S $tmp/d.sock ]] && break; sleep 0.05; done
[[ -S $tmp/d.sock ]] || fail "daemon did not start"
"$cli" import "$tmp/table.json" --daemon "unix:$tmp/d.sock" >/dev/null || fail "import"
grep -q "metrics on http://127.0.0.1:$mport/metrics" "$tmp/daemon.log" || fail "the daemon does not say where /metrics is"
ss -ltn | grep -q "127.0.0.1:$mport " || fail "/metrics is not bound to loopback only: $(ss -ltn | grep ":$mport ")"
python3 - "$mport" <<'PY' || fail "/metrics answers wrongly"
import sys, urllib.error, urllib.request
base = f"http://127.0.0.1:{sys.argv[1]}"
body = urllib.request.urlopen(base + "/metrics").read().decode()
assert "# TYPE hccltune_call_duration_seconds histogram" in body, body[:400]
for path, method, code in (("/other", "GET", 404), ("/metrics", "POST", 405)):
    try:
        urllib.request.urlopen(urllib.request.Request(base + path, method=method, data=b"" if method == "POST" else None))
        raise SystemExit(f"{method} {path} answered 200")
    except urllib.error.HTTPError as e:
        assert e.code == code, (path, e.code)
PY

cat >"$tmp/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: hccl-tuned
    static_configs:
      - targets: ["127.0.0.1:$mport"]
YML
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/prom" \
  --web.listen-address="127.0.0.1:$pport" >"$tmp/prometheus.log" 2>&1 &
pids+=($!)
# Prometheus scrapes a new target only after its discovery's first update (about 5 s): wait for the first scrape.
scraped() {
  python3 - "$pport" <<'PY' 2>/dev/null
import json, sys, urllib.request
r = json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/api/v1/query?query=up"))
sys.exit(0 if any(s["value"][1] == "1" for s in r["data"]["result"]) else 1)
PY
}
for _ in $(seq 300); do scraped && break; sleep 0.1; done
scraped || fail "Prometheus did not scrape the daemon within 30 s"

export HCCL_TUNE_DAEMON="unix:$tmp/d.sock" HCCL_TUNE_SAMPLE_RATE=1 HCCL_TUNE_SYNC_INTERVAL=16 \
  HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=60 HCCL_TUNE_TEST_DELAY="allreduce:ring=1ms"
mkdir -p "$tmp/job/store"
jobs=()
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 HCCL_TUNE_STORE="file://$tmp/job/store" "$job" 3000 "$tmp/job" >"$tmp/job/out$r" \
    2>"$tmp/job/err$r" &
  jobs+=($!)
done
for p in "${jobs[@]}"; do wait "$p" || fail "the job failed: $(cat "$tmp"/job/err*)"; done
cat "$tmp/job/out0" "$tmp/job/out1"
sleep 2.5  # two more scrapes after the job's final reports

python3 - "$pport" "$fp" "$dashboard" <<'PY' || fail "Prometheus lacks the job's series"
import json, sys, time, urllib.parse, urllib.request
port, fp, dashboard = sys.argv[1:]
def query(expr):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    r = json.load(urllib.request.urlopen(url))
    assert r["status"] == "success", r
    return r["data"]["result"]
calls = query(f'hccltune_calls_total{{topology="{fp}",collective="allreduce"}}')
assert calls, (f"no hccltune_calls_total series of the job's topology; up: {query('up')}; "
               f"all: {query('hccltune_calls_total')[:3]}")
total = sum(float(s["value"][1]) for s in calls)
configs = sorted(s["metric"]["configuration"] for s in calls)
assert total > 0, calls
for name in ("hccltune_call_duration_seconds_count", "hccltune_call_bytes_total"):
    assert query(f'{name}{{topology="{fp}"}}'), f"no {name} of the job's topology"
explore = query('hccltune_online_actions_total{kind="explore"}')
assert explore and float(explore[0]["value"][1]) >= 1, f"no exploration counted: {explore}"
assert query(f'hccltune_table_version{{topology="{fp}"}}'), "no table version"
panels = json.load(open(dashboard))["panels"]
n = 0
for p in panels:
    for t in p["targets"]:
        res = query(t["expr"])
        assert res, f"panel '{p['title']}': {t['expr']} returns no data"
        n += 1
print(f"prometheus: {int(total)} allreduce calls of topology {fp} scraped ({', '.join(configs)}); "
      f"explorations {explore[0]['value'][1]}; {n} queries of {len(panels)} dashboard panels return data")
PY
