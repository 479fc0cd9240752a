#!/usr/bin/env bash
# Job connections with a job secret and HCCL's whitelist (docs/SECURITY.md, Job connections).
# (a) A 4-rank `bench --link tcp --check` with HCCL_TUNE_JOB_SECRET_FILE runs while a foreign process connects to a
#     rank's data listener and to the store with a wrong MAC, with nothing (no handshake) and with garbage: every
#     foreign connection is closed by the listener, each listener logs the refusal with the address, and every
#     rank's results check ok.
# (b) Ranks with different secrets fail, naming the peer (over the data connections and over the store).
# (c) A secret file of mode 0644 is refused, naming the file and its mode.
# (d) HCCL_WHITELIST_DISABLE=0 with a whitelist without 127.0.0.1 refuses the ranks' connections, naming the
#     address; with 127.0.0.1 listed the job runs.
# Usage: job_secret.sh HCCL_TUNE_BINARY
set -euo pipefail
bin=$1
export HCCL_TUNE_DAEMON=off HCCL_CONNECT_TIMEOUT=20 HCCL_EXEC_TIMEOUT=60 HCCL_TUNE_LOG_LEVEL=warn
unset HCCL_TUNE_JOB_SECRET HCCL_TUNE_JOB_SECRET_FILE HCCL_WHITELIST_DISABLE HCCL_WHITELIST_FILE
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() {
  echo "FAILED: $*" >&2
  exit 1
}
head -c 32 /dev/urandom | base64 >"$d/secret"
chmod 600 "$d/secret"
lo=$((30000 + RANDOM % 20000)) hi=$((lo + 15))

# --- (a) foreign connections during a job with a secret ---
HCCL_TUNE_JOB_SECRET_FILE=$d/secret HCCL_TUNE_PORT_RANGE=$lo-$hi "$bin" bench --coll allreduce --ranks 4 --link tcp \
  --check --min-bytes 1K --max-bytes 64K --iters 3000 --warmup 1 >"$d/out" 2>"$d/err" &
bench=$!
store_port='' rank_port=''
for _ in $(seq 200); do
  ss -ltnpH >"$d/ss"
  store_port=$(awk -v p="pid=$bench," 'index($0, p) { sub(/.*:/, "", $4); print $4; exit }' "$d/ss")
  kids=$(pgrep -d'|' -P "$bench" || true)
  [[ -n $kids ]] && rank_port=$(grep -E "pid=($kids)," "$d/ss" | awk '$4 ~ /^127\.0\.0\.1:/ {
    sub(/.*:/, "", $4); print $4; exit }' || true)
  [[ -n $store_port && -n $rank_port ]] && break
  sleep 0.05
done
[[ -n $store_port && -n $rank_port ]] || fail "no store or rank listener seen (store '$store_port', rank '$rank_port')"
# Each case: connect, send the bytes, read until the listener closes (or 8 s pass); prints "closed" or "open".
python3 - "$store_port" "$rank_port" >"$d/foreign" <<'PY'
import os, socket, struct, sys, threading
store, rank = int(sys.argv[1]), int(sys.argv[2])
offer = b"\x01" + os.urandom(32)
cases = {
    "store wrong MAC": (store, struct.pack("<II", 0x48545354, 2) + offer + b"x" * 32),
    "store no handshake": (store, b""),
    "store garbage": (store, b"GET / HTTP/1.0\r\n\r\n" * 2),
    "rank wrong MAC": (rank, struct.pack("<IQiiI", 0x48544350, 7, 0, 0, 2) + b"#1" + offer + b"x" * 32),
    "rank no handshake": (rank, b""),
    "rank garbage": (rank, b"GET / HTTP/1.0\r\n\r\n" * 2),
}
result = {}
def run(name, port, data):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(8)
    s.sendall(data)
    try:
        while s.recv(4096):
            pass
        result[name] = "closed"
    except ConnectionResetError:
        result[name] = "closed"
    except socket.timeout:
        result[name] = "open"
threads = [threading.Thread(target=run, args=(n, p, b)) for n, (p, b) in cases.items()]
for t in threads: t.start()
for t in threads: t.join()
for n in cases: print(f"{n}: {result.get(n)}")
PY
rc=0
wait "$bench" || rc=$?
cat "$d/foreign"
if [[ $rc -ne 0 ]] || grep -q 'CHECK FAILED' "$d/out" || ! grep -q 'check ok' "$d/out"; then
  cat "$d/out" "$d/err"
  fail "(a) the job with a secret and foreign connections: exit status $rc"
fi
[[ $(grep -c ': closed$' "$d/foreign") == 6 ]] || fail "(a) a foreign connection was not closed by its listener"
grep -q "tcp store (port $store_port): refused a connection from 127.0.0.1: " "$d/err" ||
  { cat "$d/err"; fail "(a) the store did not log its refusal"; }
grep -q "(tcp listener, port $rank_port): refused a connection from 127.0.0.1: " "$d/err" ||
  { cat "$d/err"; fail "(a) the rank's data listener did not log its refusal"; }
[[ $(grep -c 'refused a connection from 127.0.0.1' "$d/err") == 2 ]] ||
  { cat "$d/err"; fail "(a) refusals are not logged once per listener and address"; }
echo "(a) $(grep -c 'check ok' "$d/out") rows checked; 6 foreign connections closed; refusals:"
grep 'refused a connection' "$d/err"

# --- (b) different secrets ---
# Over the data connections (a file store carries no handshake): rank 0 connects to rank 1 and names it.
head -c 32 /dev/urandom | base64 >"$d/other"
chmod 600 "$d/other"
run_pair() {  # STORE_VARS... -- runs ranks 0 and 1 with different secrets; outputs in $d/b0, $d/b1
  for r in 0 1; do
    secret=$d/secret
    [[ $r == 1 ]] && secret=$d/other
    env "$@" RANK=$r WORLD_SIZE=2 HCCL_CONNECT_TIMEOUT=5 HCCL_TUNE_JOB_SECRET_FILE="$secret" \
      "$bin" bench --launched --coll allreduce --link tcp --check --min-bytes 1K --max-bytes 1K --iters 2 \
      >"$d/b$r" 2>&1 &
  done
  wait || true
}
run_pair HCCL_TUNE_STORE="file://$d/store"
grep -q "rank 0: rank 1 at 127.0.0.1:[0-9]* did not prove this job's secret" "$d/b0" ||
  { cat "$d/b0" "$d/b1"; fail "(b) rank 0 did not name rank 1 over the data connection"; }
echo "(b) data: $(grep -m1 -o 'rank 0: rank 1 at [^ ]* did not prove[^:]*' "$d/b0")"
port=$((lo + 20))
run_pair HCCL_TUNE_MASTER_ADDR=127.0.0.1 HCCL_TUNE_MASTER_PORT=$port
grep -q "the rendezvous server at 127.0.0.1:$port did not prove this job's secret" "$d/b1" ||
  { cat "$d/b0" "$d/b1"; fail "(b) rank 1 did not name the store it could not trust"; }
echo "(b) store: $(grep -m1 -o 'the rendezvous server at [^ ]* did not prove[^:]*' "$d/b1")"

# --- (c) a secret file other users can read ---
head -c 32 /dev/urandom | base64 >"$d/open"
chmod 644 "$d/open"
rc=0
HCCL_TUNE_JOB_SECRET_FILE=$d/open "$bin" bench --coll allreduce --ranks 2 --min-bytes 1K --max-bytes 1K --iters 2 \
  >"$d/out" 2>&1 || rc=$?
[[ $rc -ne 0 ]] && grep -q "HCCL_TUNE_JOB_SECRET_FILE=$d/open: mode 0644" "$d/out" ||
  { cat "$d/out"; fail "(c) a 0644 secret file: exit status $rc"; }
echo "(c) $(grep -m1 -o 'HCCL_TUNE_JOB_SECRET_FILE=[^;]*' "$d/out")"

# --- (d) HCCL's whitelist ---
echo '{"host_ip": ["192.0.2.254"], "device_ip": []}' >"$d/without"
rc=0
HCCL_WHITELIST_DISABLE=0 HCCL_WHITELIST_FILE=$d/without HCCL_CONNECT_TIMEOUT=5 "$bin" bench --coll allreduce \
  --ranks 2 --link tcp --min-bytes 1K --max-bytes 1K --iters 2 >"$d/out" 2>&1 || rc=$?
[[ $rc -ne 0 ]] && grep -q "refused a connection from 127.0.0.1: its address is not in $d/without" "$d/out" &&
  grep -q "closed the connection without answering the hello" "$d/out" ||
  { cat "$d/out"; fail "(d) a whitelist without 127.0.0.1: exit status $rc"; }
echo "(d) $(grep -m1 -o 'refused a connection from 127.0.0.1: its address is not in [^ ]*' "$d/out")"
addrs=$(ip -4 -o addr show up | awk '{print $4}' | cut -d/ -f1 | sed 's/.*/"&"/' | paste -sd,)
echo "{\"host_ip\": [$addrs], \"device_ip\": []}" >"$d/with"
HCCL_WHITELIST_DISABLE=0 HCCL_WHITELIST_FILE=$d/with "$bin" bench --coll allreduce --ranks 2 --link tcp --check \
  --min-bytes 1K --max-bytes 4K --iters 2 >"$d/out" 2>&1 || { cat "$d/out"; fail "(d) a whitelist with every address"; }
grep -q 'check ok' "$d/out" && ! grep -q 'CHECK FAILED' "$d/out" || { cat "$d/out"; fail "(d) results"; }
echo "(d) whitelist [$addrs]: $(grep -c 'check ok' "$d/out") rows checked"
