#!/usr/bin/env bash
# The correctness matrix over link=ucx with UCX restricted to one kind of transport (UCX_TLS):
#  1. every rank's log names the UCX transport its endpoints use (tcp/..., or posix/sysv for shared memory);
#  2. `hccl-tune bench --algo all --check` for every collective (bench_check_all.sh: every algorithm, 0 B - 1 MiB,
#     fp32, --check on every rank);
#  3. allreduce and reducescatter, every algorithm, in every other dtype (int8 ... fp64), checked the same way;
#  4. link=ucx@SUBNET for the subnet of this host's first non-loopback interface (when it has one): the log names
#     that interface as the context's NET_DEVICES, and an allreduce checks.
# Usage: ucx_check.sh HCCL_TUNE_BINARY RANKS TLS     TLS: tcp | shm (UCX_TLS=posix,sysv,cma,self)
set -euo pipefail
bin=$1 ranks=$2 tls=$3
case $tls in
  tcp) export UCX_TLS=tcp want='tcp/' ;;
  shm) export UCX_TLS=posix,sysv,cma,self want='(posix|sysv)/memory' ;;
  *) echo "ucx_check.sh: TLS must be tcp or shm, not '$tls'" >&2; exit 2 ;;
esac
export HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=60 HCCL_BUFFSIZE=2 HCCL_TUNE_DAEMON=off
here=$(dirname "$0")

# 1. The transport each rank's endpoints use, from the one log line per connect.
log=$(HCCL_TUNE_LOG_LEVEL=info "$bin" bench --coll allreduce --ranks "$ranks" --link ucx --check --min-bytes 1M \
        --max-bytes 1M --iters 1 --warmup 0 2>&1)
lines=$(grep -cE "link=ucx \(.*\): rank [0-9]+ $want" <<<"$log" || true)
if [[ $lines -ne $ranks ]]; then
  echo "$log"
  echo "FAILED: $lines of $ranks ranks logged ucx endpoints over $want (UCX_TLS=$UCX_TLS)" >&2
  exit 1
fi
echo "ucx endpoints: $(grep -oE "link=ucx \(.*" <<<"$log" | head -1)"

# 2. Every collective and algorithm, fp32.
"$here/bench_check_all.sh" "$bin" "$ranks" ucx

# 3. The reducing collectives in the other dtypes.
for dtype in int8 uint8 int32 int64 fp16 bf16 fp64; do
  for coll in allreduce reducescatter; do
    out=$("$bin" bench --coll "$coll" --dtype "$dtype" --ranks "$ranks" --algo all --link ucx --check \
          --min-bytes 0 --max-bytes 256K --iters 1 --warmup 1)
    ok=$(grep -c 'check ok' <<<"$out" || true)
    if grep -q 'CHECK FAILED' <<<"$out" || [[ $ok -eq 0 ]]; then
      echo "$out"
      echo "FAILED: $coll $dtype at $ranks ranks over ucx ($UCX_TLS)" >&2
      exit 1
    fi
  done
  echo "$dtype: allreduce, reducescatter checked"
done
# 4. ucx@SUBNET resolves to this node's interface in the subnet.
read -r ifname cidr < <(ip -4 -o addr show | awk '$2 != "lo" {print $2, $4; exit}') || true
if [[ -n ${ifname:-} ]]; then
  net=$(python3 -c "import ipaddress, sys; print(ipaddress.ip_interface(sys.argv[1]).network)" "$cidr")
  log=$(HCCL_TUNE_LOG_LEVEL=info "$bin" bench --coll allreduce --ranks "$ranks" --link "ucx@$net" --check \
          --min-bytes 1M --max-bytes 1M --iters 1 --warmup 0 2>&1)
  if ! grep -q 'check ok' <<<"$log" || [[ $(grep -c "link=ucx@$net (NET_DEVICES $ifname," <<<"$log") -ne $ranks ]]; then
    echo "$log"
    echo "FAILED: link=ucx@$net did not run over $ifname on every rank" >&2
    exit 1
  fi
  echo "ucx@$net: NET_DEVICES $ifname on every rank, check ok"
fi
echo "ucx_check: ok at $ranks ranks, UCX_TLS=$UCX_TLS"
