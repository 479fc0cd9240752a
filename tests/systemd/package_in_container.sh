#!/usr/bin/env bash
# Runs inside the container booted by tests/systemd/package_test.sh, as root, with systemd as PID 1. The
# packages' dependencies are installed already (apt resolved them from their Depends); the packages themselves
# are not. Installs them with dpkg while systemd runs, then checks, in order:
#   1. the unit is enabled and not started; the hccl-tune user and group exist; the config is a conffile;
#   2. started, it serves: a daemon-run sweep and a C++ job (hccl-tune bench, reporting) as `tester`, an ordinary
#      member of the hccl-tune and hccl-tune-admin (tuner) groups; a 2-rank torch.distributed job on the "hccl" backend;
#   3. the rank processes are named hccl-tune (ps -o comm), none is `exe`;
#   4. dpkg -r hccl-tuned stops the daemon and keeps its database and config; dpkg -P drops both;
#   5. removing and purging the other packages leaves none of their files and no process.
# Writes RESULTS/log and RESULTS/status (PASS or the failure). Usage: package_in_container.sh RESULTS DEBS_DIR
set -uo pipefail
out=$1 debs=$2
exec >"$out/log" 2>&1
status="FAIL: ended early"
trap 'echo "$status" >"$out/status"' EXIT
fail() {
  status="FAIL: $*"
  echo "FAILED: $*"
  journalctl -u hccl-tuned --no-pager | tail -20
  exit 1
}
as_tester() {
  setpriv --reuid=tester --regid=tester --init-groups env -i HOME=/home/tester PATH=/usr/bin:/bin "$@"
}

echo "== 1. dpkg -i (systemd running)"
dpkg -i "$debs"/hccl-tune_*.deb "$debs"/hccl-tuned_*.deb "$debs"/python3-hccl-tune_*.deb || fail "dpkg -i"
[[ $(systemctl is-enabled hccl-tuned) == enabled ]] || fail "hccl-tuned is $(systemctl is-enabled hccl-tuned), not enabled"
[[ $(systemctl is-active hccl-tuned) != active ]] || fail "installing started hccl-tuned"
getent passwd hccl-tune && getent group hccl-tune || fail "no hccl-tune user or group"
dpkg-query --showformat='${Conffiles}\n' --show hccl-tuned | grep -q "/etc/hccl-tune/hccl-tuned.conf" ||
  fail "/etc/hccl-tune/hccl-tuned.conf is not a conffile"
echo "enabled, not started; conffile $(dpkg-query --showformat='${Conffiles}' --show hccl-tuned)"
useradd --create-home --groups hccl-tune,hccl-tune-admin tester || fail "useradd"

echo "== 2. the service and jobs"
systemctl start hccl-tuned || fail "systemctl start hccl-tuned"
for _ in $(seq 100); do [[ -S /run/hccl-tune/tuned.sock ]] && break; sleep 0.1; done
as_tester hccl-tune sweep --via-daemon --ranks 2 --coll allreduce --dtype fp32 --min-bytes 4K --max-bytes 256K \
  --step 4 --cap-ms 50 --force --plain || fail "the daemon-run sweep"
as_tester hccl-tune show | head -8
(
  # The names of the ranks while a bench runs (3: ps -o comm).
  for _ in $(seq 40); do ps -e -o pid=,comm=,args= | grep -v grep | grep -E "hccl-tune|exe" ; sleep 0.1; done
) >"$out/ps.txt" &
watcher=$!
as_tester env HCCL_TUNE_SAMPLE_RATE=1 hccl-tune bench --ranks 2 --coll allreduce --min-bytes 8 \
  --max-bytes 1M --check >/tmp/bench.txt 2>&1 || fail "bench: $(cat /tmp/bench.txt)"
wait "$watcher"
tail -4 /tmp/bench.txt
live=$(as_tester hccl-tune status --json | jq '.live_samples')
((live > 0)) || fail "the bench's live timings did not reach hccl-tuned"
echo "hccl-tuned holds $live live samples"
cat >/tmp/ddp.py <<'PY'
import os, sys, torch, torch.distributed as dist
dist.init_process_group("hccl")
r, n = dist.get_rank(), dist.get_world_size()
t = torch.full((1 << 16,), float(r + 1))
dist.all_reduce(t)
assert torch.all(t == n * (n + 1) / 2), t[:4]
g = [torch.empty(3) for _ in range(n)]
dist.all_gather(g, torch.full((3,), float(r)))
assert all(torch.all(x == i) for i, x in enumerate(g)), g
print(f"rank {r}/{n}: backend {dist.get_backend()} allreduce and allgather correct", flush=True)
dist.destroy_process_group()
PY
chmod a+r /tmp/ddp.py
pids=()
for r in 0 1; do
  as_tester env MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 RANK=$r WORLD_SIZE=2 python3 /tmp/ddp.py \
    >/tmp/ddp.$r 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "the torch job failed: $(cat /tmp/ddp.0 /tmp/ddp.1)"; done
cat /tmp/ddp.0 /tmp/ddp.1
grep -q "backend hccl" /tmp/ddp.0 || fail "the torch job did not run on the hccl backend"

echo "== 3. process names"
sort -u -k2,2 "$out/ps.txt" | head
awk '$2 == "exe"' "$out/ps.txt" | grep -q . && fail "a rank shows as exe: $(awk '$2 == "exe"' "$out/ps.txt" | head -2)"
awk '$2 ~ /^hccl-tune/' "$out/ps.txt" | grep -q . || fail "no process named hccl-tune* seen while the bench ran"

echo "== 4. remove and purge hccl-tuned"
db=/var/lib/hccl-tune/tuning.db
[[ -f $db ]] || fail "no database in /var/lib/hccl-tune"
dpkg -r hccl-tuned || fail "dpkg -r hccl-tuned"
[[ $(systemctl is-active hccl-tuned) != active ]] || fail "hccl-tuned still runs after dpkg -r"
pgrep -x hccl-tuned && fail "an hccl-tuned process is left after dpkg -r"
[[ -f $db && -f /etc/hccl-tune/hccl-tuned.conf ]] || fail "dpkg -r removed the database or the config"
echo "removed: stopped; $db and the config kept"
dpkg -P hccl-tuned || fail "dpkg -P hccl-tuned"
[[ ! -e /var/lib/hccl-tune && ! -e /etc/hccl-tune ]] || fail "dpkg -P left $(ls -d /var/lib/hccl-tune /etc/hccl-tune 2>/dev/null)"
echo "purged: /var/lib/hccl-tune and /etc/hccl-tune gone"

echo "== 5. remove and purge the rest"
dpkg -P python3-hccl-tune hccl-tune || fail "dpkg -P python3-hccl-tune hccl-tune"
for f in /usr/bin/hccl-tune /usr/sbin/hccl-tuned /lib/systemd/system/hccl-tuned.service \
  /usr/lib/python3/dist-packages/hccl_tune_torch.pth /usr/include/hccltune; do
  [[ ! -e $f ]] || fail "$f is left after purge"
done
left=$(dpkg -l | awk '$2 ~ /hccl/ {print $1, $2}')
[[ -z $left ]] || fail "dpkg still lists: $left"
pgrep -l "^hccl-tune" && fail "processes of hccl-tune are left"
status=PASS
echo PASS
