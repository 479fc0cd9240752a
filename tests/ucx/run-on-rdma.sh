#!/usr/bin/env bash
# The UCX suite restricted to RDMA transports, for a machine with an RDMA device (RoCE or InfiniBand). On a
# machine without one it says so and exits 77 (ctest's and automake's "skipped"), having run nothing.
#
# For each network (link layer and subnet) on which this machine has an active RDMA port that HCCL_TUNE_IB_HCA
# allows (`hccl-tune links --json`, the "rdma" facts), at each rank count:
#  1. every rank's log line names the port it was given as NET_DEVICES and endpoints over UCX's RDMA transports
#     (rc_verbs, rc_mlx5, ud_verbs, ud_mlx5, dc_mlx5) to every peer;
#  2. `hccl-tune bench --algo all --check` for every collective over link=roce@SUBNET / ib@SUBNET
#     (tests/process/bench_check_all.sh: every algorithm, 0 B - 1 MiB, fp32, --check on every rank);
#  3. allreduce and reducescatter, every algorithm, in every other dtype, checked the same way;
# The ranks run on this one machine, so pairs go through the NIC's loopback: this tests the RDMA path of our code
# and UCX's, not the fabric. Run it on each node of a cluster, then the cluster tests (docs/CLUSTER.md) with
# inter=roce@SUBNET.
#
# Usage: tests/ucx/run-on-rdma.sh HCCL_TUNE_BINARY [RANKS...]     (default ranks: 2 3 4)
set -euo pipefail
bin=${1:?usage: run-on-rdma.sh HCCL_TUNE_BINARY [RANKS...]}
shift
ranks_list=("${@:-2 3 4}")
read -r -a ranks_list <<<"${ranks_list[*]}"
here=$(cd "$(dirname "$0")" && pwd)
export HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=60 HCCL_BUFFSIZE=2 HCCL_TUNE_DAEMON=off
unset UCX_TLS UCX_NET_DEVICES  # roce / ib set both for their own contexts

facts=$("$bin" links --ranks 2 --json --no-store --bytes 64K --iters 1) || {
  echo "run-on-rdma.sh: hccl-tune links failed" >&2
  exit 1
}
networks=$(/usr/bin/python3 -c '
import json, sys
rdma = json.loads(sys.stdin.read())["rdma"]
if not rdma["ports"]:
    print("NONE " + "; ".join(rdma["summary"]))
    sys.exit(0)
nets = sorted({(p["link"], n["subnet"]) for p in rdma["ports"] if p["state"] == "ACTIVE" and p["allowed"]
               for n in p["networks"]})
for link, subnet in nets:
    print(link, subnet)
' <<<"$facts")
if [[ $networks == NONE* ]]; then
  echo "run-on-rdma.sh: nothing run: ${networks#NONE } (libibverbs lists no RDMA device on this machine; the RDMA" \
       "links are tested here only through the fake device list of tests/unit/rdma, see docs/TRANSPORTS.md)" >&2
  exit 77
fi
if [[ -z $networks ]]; then
  echo "run-on-rdma.sh: nothing run: no ACTIVE RDMA port with an IPv4 network that HCCL_TUNE_IB_HCA allows:" >&2
  /usr/bin/python3 -c 'import json,sys; print("\n".join(json.load(sys.stdin)["rdma"]["summary"]))' <<<"$facts" >&2
  exit 77
fi
echo "RDMA networks: $(tr '\n' ' ' <<<"$networks")"

rdma_tl='(rc_verbs|rc_mlx5|ud_verbs|ud_mlx5|dc_mlx5)/'
while read -r layer subnet; do
  link="$layer@$subnet"
  for ranks in "${ranks_list[@]}"; do
    # 1. The port and the RDMA transports, from each rank's log line.
    log=$(HCCL_TUNE_LOG_LEVEL=info "$bin" bench --coll allreduce --ranks "$ranks" --link "$link" --check \
            --min-bytes 1M --max-bytes 1M --iters 1 --warmup 0 2>&1) || { echo "$log"; echo "FAILED: $link" >&2; exit 1; }
    lines=$(grep -E "link=$link \(NET_DEVICES [^ ,]+:[0-9]+," <<<"$log" || true)
    if [[ $(grep -c . <<<"$lines") -ne $ranks ]] || grep -vqE "rank [0-9]+ $rdma_tl" <<<"$lines" ||
       grep -qE "rank [0-9]+ (tcp|posix|sysv|cma|self)/" <<<"$lines"; then
      echo "$log"
      echo "FAILED: not every rank of $ranks logged $link over a port with RDMA transports only" >&2
      exit 1
    fi
    echo "$link at $ranks ranks: $(grep -oE "link=$link \(.*" <<<"$lines" | head -1)"
    # 2. Every collective and algorithm, fp32.
    "$here/../process/bench_check_all.sh" "$bin" "$ranks" "$link"
    # 3. The reducing collectives in the other dtypes.
    for dtype in int8 uint8 int32 int64 fp16 bf16 fp64; do
      for coll in allreduce reducescatter; do
        out=$("$bin" bench --coll "$coll" --dtype "$dtype" --ranks "$ranks" --algo all --link "$link" --check \
              --min-bytes 0 --max-bytes 256K --iters 1 --warmup 1)
        if grep -q 'CHECK FAILED' <<<"$out" || ! grep -q 'check ok' <<<"$out"; then
          echo "$out"
          echo "FAILED: $coll $dtype at $ranks ranks over $link" >&2
          exit 1
        fi
      done
    done
    echo "$link at $ranks ranks: every dtype of allreduce, reducescatter checked"
  done
done <<<"$networks"

# link=auto prefers an RDMA network only between nodes: ranks of one machine take shm. That needs two nodes
# (the cluster tests, docs/CLUSTER.md); here it is tested through the fake device list (tests/unit/rdma).
echo "PASS: the UCX suite over RDMA transports"
