#!/usr/bin/env bash
# Runs inside the container booted by tests/systemd/unit_test.sh, as root, once multi-user.target is up with
# hccl-tuned started from its shipped unit. The client side runs as `tester`, a user in the hccl-tune group and
# the tuner group hccl-tune-admin (tuner_group). Checks, each against what the unit's sandbox could break:
#   1. a daemon-run sweep (hccl-tune sweep --via-daemon): 2 ranks on 2 CPUs (so they are bound:
#      sched_setaffinity), candidates over shm and over tcp@10.77.0.0/24 (a veth interface: getifaddrs needs
#      netlink), 64K-4M with single copy from 64K (HCCL_TUNE_SINGLE_COPY in the manager's environment: every
#      message from 64K is a process_vm_readv between the ranks, each rank's probe of its peer at setup too);
#      the table is stored (unit_test.sh checks the tcp@ samples in the database afterwards);
#   2. a mini-sweep: an entry imported as stale is re-measured by the daemon's own sweep child and merged;
#   3. a job that reports live timings to the daemon (hccl-tune bench, sample rate 1).
# Writes RESULTS/log, RESULTS/journal (hccl-tuned's) and RESULTS/status (PASS or the failure); the calling unit
# powers the container off either way.
# Usage: in_container.sh RESULTS_DIR
set -uo pipefail
out=$1
exec >"$out/log" 2>&1
status="FAIL: ended early"
finish() {
  journalctl -u hccl-tuned --no-pager -o short-monotonic >"$out/journal" 2>&1
  echo "$status" >"$out/status"
}
trap finish EXIT
fail() {
  status="FAIL: $*"
  echo "FAILED: $*"
  exit 1
}
as_tester() {
  setpriv --reuid=tester --regid=tester --init-groups env -i HOME=/home/tester PATH=/usr/local/bin:/usr/bin:/bin \
    "$@"
}
work=$(as_tester mktemp -d)
subnet=10.77.0.0/24

echo "== the unit: $(systemctl show hccl-tuned -p FragmentPath --value)"
systemctl cat hccl-tuned --no-pager | grep -E '^(ExecStart|SystemCallFilter|RestrictAddressFamilies|Memory|Protect|Private)'
for _ in $(seq 100); do
  [[ $(systemctl is-active hccl-tuned) == active && -S /run/hccl-tune/tuned.sock ]] && break
  sleep 0.1
done
[[ $(systemctl is-active hccl-tuned) == active ]] || fail "hccl-tuned is not active: $(systemctl status hccl-tuned)"
(($(nproc) >= 2)) || fail "the container sees $(nproc) CPU: ranks would not be bound"
id tester
# A network of the container's own (a veth pair; the kernel has no dummy interfaces): the sweep's tcp@SUBNET
# candidates resolve 10.77.0.0/24 to hct0 by listing interfaces (getifaddrs, over netlink).
ip link add hct0 type veth peer name hct1 && ip addr add 10.77.0.1/24 dev hct0 && ip link set hct1 up &&
  ip link set hct0 up || fail "veth interface"
ip -br addr

# --- 1. a daemon-run sweep ---
echo "== 1. hccl-tune sweep --via-daemon (as tester)"
(
  # The ranks the daemon's sweep child spawns: their CPU affinity while they run.
  while sleep 0.2; do
    for p in $(pgrep -u hccl-tune); do
      printf '%s %s %s\n' "$p" "$(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null | cut -c1-60)" \
        "$(awk '/^Cpus_allowed_list/ {print $2}' /proc/"$p"/status 2>/dev/null)"
    done
  done
) >"$out/affinity" 2>/dev/null &
watcher=$!
as_tester hccl-tune sweep --via-daemon --ranks 2 --coll allreduce --dtype fp32 --min-bytes 64K --max-bytes 4M \
  --step 4 --links "shm,tcp@$subnet" --cap-ms 100 --force --plain >"$work/sweep.txt" 2>&1
rc=$?
kill "$watcher"
cat "$work/sweep.txt"
((rc == 0)) || fail "the daemon-run sweep failed (rc $rc)"
# Ranks bound to one CPU each: two processes of the sweep child with a one-CPU affinity list.
bound=$(awk '$NF ~ /^[0-9]+$/ {print $1}' "$out/affinity" | sort -u | wc -l)
echo "processes of hccl-tune seen bound to one CPU: $bound"
((bound >= 2)) || fail "no two ranks of the daemon's sweep were bound to a CPU: $(sort -u "$out/affinity" | head)"
as_tester hccl-tune show --json >"$work/show.json" || fail "hccl-tune show"
entries=$(jq '[.tables[].entries[] | select(.collective == "allreduce")] | length' "$work/show.json")
((entries > 0)) || fail "the sweep stored no allreduce table: $(cat "$work/show.json")"
echo "stored: $entries allreduce entries: $(jq -r '[.tables[0].entries[] | .bytes + " " + .configuration] | join("; ")' \
  "$work/show.json")"
journalctl -u hccl-tuned --no-pager >"$work/journal1"
grep -E "single copy from 65536-byte" "$work/journal1" | head -2
grep -qE "single copy from 65536-byte" "$work/journal1" || fail "the sweep's ranks logged no 64K single-copy threshold"
if grep -E "no single copy|unmeasured: refused" "$work/journal1"; then
  fail "single copy was refused to the sweep's ranks under the unit"
fi

# --- 2. a mini-sweep of an entry imported as stale ---
echo "== 2. a mini-sweep"
as_tester hccl-tune export "$work/export.json" || fail "export"
v1=$(jq '.tables[0].version' "$work/export.json")
range=$(jq -r '[.tables[0].entries[] | select(.collective == "allreduce")][0].bytes' "$work/export.json")
jq '(.tables[0].entries[] | select(.collective == "allreduce" and .bytes == "'"$range"'")) |= . + {stale: true}' \
  "$work/export.json" >"$work/stale.json"
chmod a+r "$work/stale.json"
as_tester hccl-tune import "$work/stale.json" || fail "import of the stale entry"
for _ in $(seq 600); do
  as_tester hccl-tune export "$work/after.json" || fail "export"
  v=$(jq '.tables[0].version' "$work/after.json")
  stale=$(jq '[.tables[0].entries[] | select(.stale == true)] | length' "$work/after.json")
  ((v >= v1 + 2 && stale == 0)) && break
  sleep 0.2
done
journalctl -u hccl-tuned --no-pager | grep -o "mini-sweep .*" | head -5
((v >= v1 + 2 && stale == 0)) || fail "no mini-sweep merged the stale entry $range (version $v, $stale stale)"
first=$(jq -r '.tables[0].entries[0].sweep_id' "$work/export.json")
echo "mini-sweep merged: version $v1 -> $v; entries of $range now:" \
  "$(jq -r '[.tables[0].entries[] | select(.sweep_id != "'"$first"'") | .bytes + " " + .configuration +
    " (" + .sweep_id + ")"] | join("; ")' "$work/after.json")"
jq -e '[.tables[0].entries[] | select(.sweep_id != "'"$first"'" and (.sweep_id | startswith("sw-")))] | length > 0' \
  "$work/after.json" >/dev/null || fail "no entry of version $v comes from the mini-sweep"

# --- 3. a job that reports live timings ---
echo "== 3. a reporting job"
before=$(as_tester hccl-tune status --json | jq '.live_samples')
as_tester env HCCL_TUNE_SAMPLE_RATE=1 hccl-tune bench --ranks 2 --coll allreduce --min-bytes 8 --max-bytes 64K \
  >"$work/bench.txt" 2>&1 || fail "bench: $(cat "$work/bench.txt")"
tail -3 "$work/bench.txt"
after=$before
for _ in $(seq 50); do
  after=$(as_tester hccl-tune status --json | jq '.live_samples')
  ((after > before)) && break
  sleep 0.2
done
((after > before)) || fail "the job's live timings did not reach hccl-tuned (live_samples $before -> $after)"
echo "live samples: $before -> $after"

[[ $(systemctl show hccl-tuned -p NRestarts --value) == 0 ]] || fail "hccl-tuned restarted"
[[ $(systemctl is-active hccl-tuned) == active ]] || fail "hccl-tuned is no longer active"
status=PASS
echo PASS
