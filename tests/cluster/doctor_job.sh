#!/usr/bin/env bash
# `hccl-tune doctor --job` across nodes (docs/TROUBLESHOOTING.md, "Running jobs"): an emulated cluster of 2 nodes
# whose daemons also listen on TCP with TLS and client certificates (one server certificate for the nodes'
# addresses, as a cluster's CA would issue), and a 2 x 2 job (stall_job) whose rank 3, on node 1, stops calling
# collectives while ranks 0-2 block in the next allreduce. While every process is alive, on node 0 with no --daemon:
#  - `hccl-tune jobs` lists both nodes of the job (their ranks and addresses), sent by the ranks' heartbeats;
#  - `hccl-tune doctor --job ID` with the client certificate finds node 1's daemon from the job, gets the dumps of
#    all four ranks (two of them only node 1's daemon has) and names rank 3 first as the one that never entered
#    the operation;
#  - without a client certificate, node 1's daemon refuses: the doctor says which node it could not reach and why,
#    and still reports from node 0's ranks;
# then rank 3 is released and every rank finishes with every result correct.
# Usage: doctor_job.sh HCCL_TUNE HCCL_TUNED STALL_JOB. Root only (exit 77 otherwise, a failure under CI=true).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cli=$1 tuned=$2 job=$3
NAME=hdj$$ PORT=7931
DIR=/tmp/hccl-tune-cluster/$NAME
CLUSTER=("$root/deploy/cluster/cluster.sh")
tmp=$(mktemp -d)
launcher=""
export HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=120 HCCL_TUNE_LOG_LEVEL=warn

cleanup() {
  local rc=$?
  [[ -n $launcher ]] && touch "$tmp/job/release" "$tmp/job/stop" 2> /dev/null
  [[ -n $launcher ]] && { wait "$launcher" 2> /dev/null || true; }
  "${CLUSTER[@]}" down --name "$NAME" > /dev/null 2>&1 || true
  rm -rf "$tmp"
  exit $rc
}
trap cleanup EXIT
fail() {
  echo "FAILED: $*" >&2
  for f in "$tmp"/out/rank*.err "$DIR"/n*/tuned.log; do [[ -s $f ]] && { echo "--- $f" >&2; tail -5 "$f" >&2; }; done
  exit 1
}

# A CA, the daemons' certificate (every node address the doctor may dial) and a client certificate.
certs() {
  local key="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
  cd "$tmp"
  openssl req -x509 $key -keyout ca.key -out ca.pem -days 1 -subj /CN=cluster-ca 2> /dev/null
  printf 'subjectAltName=IP:10.77.1.1,IP:10.77.1.2,IP:10.77.2.1,IP:10.77.2.2,IP:127.0.0.1\n' > server.ext
  for name in server doctor; do
    openssl req $key -keyout $name.key -out $name.csr -subj /CN=$name 2> /dev/null
    openssl x509 -req -in $name.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out $name.pem -days 1 \
      $([[ $name == server ]] && echo -extfile server.ext) 2> /dev/null
  done
  printf 'tls_cert = %s\ntls_key = %s\ntls_client_ca = %s\n' "$tmp/server.pem" "$tmp/server.key" "$tmp/ca.pem" \
    > tuned.conf
  cd - > /dev/null
}

command -v openssl > /dev/null || fail "openssl is not installed (deploy/install-deps.sh installs it)"
certs
rc=0
"${CLUSTER[@]}" up --name "$NAME" --nodes 2 --tuned "$tuned" --tuned-listen $PORT --tuned-config "$tmp/tuned.conf" ||
  rc=$?
((rc == 0)) || exit $rc # 77 = skip (not root, outside CI)

mkdir -p "$tmp/job"
"$root/deploy/cluster/launch.sh" --name "$NAME" --ranks-per-node 2 --timeout 200 --out "$tmp/out" -- \
  "$job" "$tmp/job" 3 300 > "$tmp/launch.out" 2>&1 &
launcher=$!

node0() { "${CLUSTER[@]}" exec --name "$NAME" 0 -- "$@"; }
# "rank state" pairs of the one job on node 0's daemon, and its id.
states=""
for _ in $(seq 150); do
  states=$(node0 "$cli" jobs --json 2> /dev/null | python3 -c '
import json, sys
for j in json.load(sys.stdin)["jobs"]:
    print(j["job_id"], " ".join("%d=%s" % (r["rank"], r["state"]) for r in j["ranks"]))' || true)
  [[ $states == *" 0=waiting 1=waiting" ]] && break
  kill -0 $launcher 2> /dev/null || fail "the job ended early: $(cat "$tmp/launch.out")"
  sleep 0.2
done
[[ $states == *" 0=waiting 1=waiting" ]] || fail "node 0's jobs shows: '$states'"
id=${states%% *}
echo "job $id on node 0: ${states#* }"

text=$(node0 "$cli" jobs)
grep -q "^  node .*: ranks 0,1, addresses 10\.77\.1\.1" <<< "$text" || fail "jobs shows no node with ranks 0,1: $text"
grep -q "^  node .*: ranks 2,3, addresses 10\.77\.1\.2" <<< "$text" || fail "jobs shows no node with ranks 2,3: $text"
echo "jobs lists both nodes: $(grep '^  node' <<< "$text" | tr -s ' ' | paste -sd ';')"

# With the client certificate: node 1's daemon is found from the job and asked over TLS.
start=$(date +%s.%N)
node0 env HCCL_TUNE_DAEMON_TLS_CA="$tmp/ca.pem" HCCL_TUNE_DAEMON_TLS_CERT="$tmp/doctor.pem" \
  HCCL_TUNE_DAEMON_TLS_KEY="$tmp/doctor.key" "$cli" doctor --job "$id" --hang-after 1 --out "$tmp/dumps" \
  > "$tmp/doctor.out" 2> "$tmp/doctor.err" || fail "doctor --job: $(cat "$tmp/doctor.err")"
took=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
for r in 0 1 2 3; do
  compgen -G "$tmp/dumps/fr-*-r$r.json" > /dev/null || fail "no dump of rank $r: $(ls "$tmp/dumps") $(cat "$tmp/doctor.err")"
done
first=$(grep -m1 '^1\. ' "$tmp/doctor.out" || true)
[[ $first =~ ^1\.\ \[error\]\ hang:\ hang\ at\ operation\ [0-9]+\ .*rank\ 3\ never\ entered\ it ]] ||
  fail "doctor's first finding: '$first' (all: $(cat "$tmp/doctor.out"))"
echo "doctor (with TLS, ${took}s): dumps of ranks 0-3; $first"

# Without a client certificate: node 1's daemon is named as unreachable, node 0's ranks still diagnosed.
node0 "$cli" doctor --job "$id" --hang-after 1 > "$tmp/doctor2.out" 2> "$tmp/doctor2.err" ||
  fail "doctor --job without TLS: $(cat "$tmp/doctor2.err")"
note=$(grep -m1 "node .*(ranks 2,3): hccl-tuned at 10\.77\.1\.2:$PORT" "$tmp/doctor2.err" || true)
[[ -n $note ]] || fail "no note naming node 1: $(cat "$tmp/doctor2.err")"
grep -q '^1\. \[error\] hang' "$tmp/doctor2.out" || fail "doctor without node 1: $(cat "$tmp/doctor2.out")"
echo "doctor without a client certificate: $note"

touch "$tmp/job/release" "$tmp/job/stop"
wait $launcher || fail "the job failed: $(cat "$tmp/launch.out")"
launcher=""
for r in 0 1 2 3; do
  grep -q "^rank $r: [0-9]* calls, every result correct$" "$tmp/out/rank$r.out" ||
    fail "rank $r: $(cat "$tmp/out/rank$r.out")"
done
echo "every rank finished with every result correct"
