#!/usr/bin/env bash
# The shm transport in a small /dev/shm (a container's default is 64 MiB), in a private mount namespace:
# - 4 ranks in 64 MiB: each segment holds 3 rings, not 4, so the job fits; `bench --check` must pass;
# - 3 ranks in 6 MiB: no room; every rank must fail with the shortage named (no SIGBUS on the first touch of an
#   unreserved page, as before posix_fallocate) and leave no segment behind.
# Needs root (unshare -m, mount): exits 77 (skipped) otherwise.
# Usage: small_shm_check.sh HCCL_TUNE_BINARY
set -euo pipefail
bin=$1
if [[ $(id -u) -ne 0 ]] || ! unshare -m --propagation private true 2>/dev/null; then
  echo "skipped: needs root and mount namespaces"
  exit 77
fi
export HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=60 HCCL_TUNE_DAEMON=off BIN=$bin
unshare -m --propagation private bash -euo pipefail -c '
  mount -t tmpfs -o size=64M tmpfs /dev/shm
  out=$("$BIN" bench --ranks 4 --coll allreduce --min-bytes 8 --max-bytes 4M --iters 3 --warmup 1 --check 2>&1)
  rows=$(grep -c "^allreduce " <<<"$out" || true)
  ok=$(grep -c "check ok" <<<"$out" || true)
  if [[ $rows -lt 20 || $ok -ne $rows ]]; then
    echo "FAIL: 4 ranks in a 64 MiB /dev/shm: $ok of $rows rows checked ok"; echo "$out"; exit 1
  fi
  echo "ok: 4 ranks in a 64 MiB /dev/shm, $ok rows checked"
  umount /dev/shm
  mount -t tmpfs -o size=6M tmpfs /dev/shm
  set +e
  out=$("$BIN" bench --ranks 3 --coll allreduce --min-bytes 8 --max-bytes 8 --iters 1 --warmup 1 2>&1)
  rc=$?
  set -e
  if [[ $rc -eq 0 ]] || grep -q "signal" <<<"$out" || [[ $(grep -c "has no room for this rank" <<<"$out") -lt 1 ]] ||
     ! grep -q "HCCL_BUFFSIZE" <<<"$out"; then
    echo "FAIL: 3 ranks in a 6 MiB /dev/shm: rc $rc"; echo "$out"; exit 1
  fi
  left=$(ls /dev/shm | grep -c hccltune || true)
  if [[ $left -ne 0 ]]; then echo "FAIL: $left segments left in /dev/shm"; ls -la /dev/shm; exit 1; fi
  echo "ok: 3 ranks in a 6 MiB /dev/shm fail naming the shortage, nothing left: $(grep -m1 "has no room" <<<"$out")"
'
