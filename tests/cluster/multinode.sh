#!/usr/bin/env bash
# Multi-node jobs started by real launchers across an emulated cluster that is already up (cluster_test.sh builds
# and removes it): Open MPI's mpirun in node 0 starting its daemons on the other nodes through
# deploy/cluster/rsh.sh, one torchrun per node meeting at the c10d rendezvous on node 0, and srun on a Slurm with
# one slurmd per node (slurm_nodes.sh). No rendezvous setting is given: each launcher's own variables are the
# bootstrap (docs/LAUNCHING.md). Every rank is recorded by rank_run.sh and checked.
#
# Usage: multinode.sh CASE ROOT NAME HCCL_TUNE ARGS...
#   job LAUNCHER NODES RPN [PY USERBASE]
#       `hccl-tune bench --launched --check` (allreduce 1 KiB to 1 MiB): every rank exits 0 on the node the launcher
#       placed it (RPN ranks on each of NODES hosts), reports a communicator of NODES node(s) with RPN local and (mpirun,
#       srun) the launcher's rendezvous; rank 0 prints 11 checked rows. Then `hccl-tune links --launched`: shm
#       inside a node, tcp on fast0 between, each node's measurement in its own daemon. torchrun with PY: tests/python/ddp_test.py on
#       backend hccltune (build tree's package in USERBASE), every rank's parameters equal to gloo's
#   sweep LAUNCHER NODES RPN
#       a launched sweep (ring and hierarchical, both networks; the cluster's default route is the slow network)
#       leaves every node's daemon with the same table, whose winners use the fast subnet
#   away NODES RPN
#       mpirun on node 0 with every rank on nodes 1..NODES (mpirun's host runs none): `-x MASTER_ADDR=NAME-n1
#       -x MASTER_PORT=29500` gives the rendezvous; bench --check on every rank (the cluster has NODES + 1 nodes)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
case_=$1 root=$2 NAME=$3 TUNE=$4
shift 4
DIR=/tmp/hccl-tune-cluster/$NAME
CLUSTER=("$root/deploy/cluster/cluster.sh")
TORCHRUN=${TORCHRUN:-/usr/bin/torchrun}
OUT=$DIR/out
FIRST=0            # the first node with ranks: nodes FIRST..FIRST+NODES-1 run the job
declare -a MPIRUN_EXTRA=()
jobs_=0

fail() {
  local f
  for f in "$OUT"/err.* "$OUT"/torchrun.*; do [[ -f $f ]] && { echo "--- $f"; tail -n 8 "$f"; }; done
  echo "FAILED: $*" >&2
  exit 1
}

# launch LAUNCHER NODES RPN COMMAND...: one job across nodes 0..NODES-1, RPN ranks each, recorded in $OUT.
launch() {
  local launcher=$1 nodes=$2 rpn=$3 k hosts="" rc=0
  shift 3
  rm -rf "$OUT"
  mkdir -p "$OUT"
  local -a run=("$here/rank_run.sh" "$OUT" "$@") pids=()
  jobs_=$((jobs_ + 1))
  case $launcher in
    mpirun)
      for ((k = FIRST; k < FIRST + nodes; k++)); do hosts+=${hosts:+,}$NAME-n$k:$rpn; done
      timeout 240 "${CLUSTER[@]}" exec --name "$NAME" 0 -- mpirun.openmpi --allow-run-as-root --oversubscribe \
        --mca plm_rsh_agent "$root/deploy/cluster/rsh.sh" --host "$hosts" -np $((nodes * rpn)) "${MPIRUN_EXTRA[@]}" \
        "${run[@]}" ;;
    srun)
      timeout 240 "$here/slurm_nodes.sh" "$NAME" "$nodes" srun -N "$nodes" --ntasks-per-node "$rpn" "${run[@]}" ;;
    torchrun)
      # `--redirects 9:0 --tee 9:0`: Debian's torchrun 1.13 on Python 3.11 fails to parse its defaults without them.
      for ((k = 0; k < nodes; k++)); do
        timeout 240 "${CLUSTER[@]}" exec --name "$NAME" "$k" -- "$TORCHRUN" --redirects 9:0 --tee 9:0 \
          --nnodes "$nodes" --nproc_per_node "$rpn" --rdzv_backend c10d --rdzv_endpoint "$NAME-n0:29400" \
          --rdzv_id "$NAME-$jobs_" --no_python "${run[@]}" >"$OUT/torchrun.$k" 2>&1 &
        pids+=($!)
      done
      for k in "${pids[@]}"; do wait "$k" || rc=$?; done
      return $rc ;;
    *) fail "unknown launcher '$launcher' (mpirun, srun or torchrun)" ;;
  esac
}

# check_ranks NODES RPN: every rank exited 0, RPN of them on each node's host (nodes FIRST..).
check_ranks() {
  local nodes=$1 rpn=$2 r k n
  for ((r = 0; r < nodes * rpn; r++)); do
    [[ $(cat "$OUT/rc.$r" 2>/dev/null) == 0 ]] || fail "rank $r exited $(cat "$OUT/rc.$r" 2>/dev/null || echo '(never ran)')"
  done
  for ((k = FIRST; k < FIRST + nodes; k++)); do
    n=$(grep -lx "$NAME-n$k" "$OUT"/host.* | wc -l)
    ((n == rpn)) || fail "node $k ($NAME-n$k) ran $n ranks, expected $rpn"
  done
}

case $case_ in
  job)
    launcher=$1 nodes=$2 rpn=$3 py=${4:-} userbase=${5:-}
    world=$((nodes * rpn)) start=$SECONDS
    lname=$launcher
    [[ $launcher == mpirun ]] && lname=openmpi
    [[ $launcher == srun ]] && lname=slurm
    launch "$launcher" "$nodes" "$rpn" env HCCL_TUNE_LOG_LEVEL=info "$TUNE" bench --launched --coll allreduce \
      --min-bytes 1K --max-bytes 1M --iters 2 --warmup 1 --check || fail "$launcher bench across $nodes x $rpn"
    check_ranks "$nodes" "$rpn"
    for ((r = 0; r < world; r++)); do
      grep -q "rank $r/$world communicator 'world' ready: $nodes node(s), $rpn local" "$OUT/err.$r" ||
        fail "rank $r did not report a communicator of $world ranks on $nodes nodes, $rpn local"
      [[ $launcher == torchrun ]] || grep -q "$lname rendezvous at" "$OUT/err.$r" ||
        fail "rank $r did not use the $lname rendezvous"
    done
    rows=$(grep -c "check ok" "$OUT/out.0" || true)
    ((rows == 11)) || { cat "$OUT/out.0"; fail "rank 0 reported $rows checked rows, expected 11 (1K to 1M)"; }
    echo "$launcher across $nodes x $rpn: every rank ok on its node, $rows rows checked in $((SECONDS - start)) s;" \
      "rank $((world - 1)) on $(cat "$OUT/host.$((world - 1))"): $(grep -o "rank $((world - 1))/.*local" "$OUT/err.$((world - 1))")"
    # hccl-tune links: shm inside a node, tcp on fast0 between nodes; each node's local rank 0 stores the
    # measurement in its own node's daemon.
    launch "$launcher" "$nodes" "$rpn" "$TUNE" links --launched --json || fail "$launcher links across $nodes x $rpn"
    check_ranks "$nodes" "$rpn"
    q() { jq -r "$1" "$OUT/out.0"; }
    [[ $(q '[.links[] | select(.src == 0 and .dst == 1 and .default)][0].type') == shm ]] || fail "links: 0-1 is not shm"
    [[ $(q "[.links[] | select(.src == 0 and .dst == $rpn and .default)][0].interface") == fast0 ]] ||
      fail "links: 0-$rpn (across nodes) is not tcp on fast0"
    for ((k = 0; k < nodes; k++)); do
      grep -q "rank $((k * rpn)): stored in daemon unix:$DIR/n$k/tuned.sock" "$OUT/err.$((k * rpn))" "$OUT/out.$((k * rpn))" ||
        fail "links: node $k's measurement is not in its daemon"
    done
    echo "$launcher links across $nodes x $rpn: 0-1 shm, 0-$rpn tcp on fast0 ($(q "[.links[] | select(.src == 0 and
      .dst == $rpn and .default)][0].bandwidth_gbps") Gbit/s), stored in all $nodes daemons"
    if [[ -n $py ]]; then
      start=$SECONDS
      launch "$launcher" "$nodes" "$rpn" env PYTHONUSERBASE="$userbase" OMP_NUM_THREADS=1 "$py" \
        "$root/tests/python/ddp_test.py" || fail "$launcher DDP across $nodes x $rpn"
      check_ranks "$nodes" "$rpn"
      for ((r = 0; r < world; r++)); do
        grep -q "^OK rank $r/$world:" "$OUT/out.$r" || fail "rank $r: no OK line: $(tail -n 5 "$OUT/out.$r")"
      done
      echo "$launcher DDP across $nodes x $rpn in $((SECONDS - start)) s: $(grep -h '^OK rank 0' "$OUT/out.0")"
    fi
    ;;

  sweep)
    launcher=$1 nodes=$2 rpn=$3
    fast=10.77.1.0/24 slow=10.77.2.0/24 start=$SECONDS
    launch "$launcher" "$nodes" "$rpn" "$TUNE" sweep --launched --force --plain --coll allreduce --dtype fp32 \
      --min-bytes 256K --max-bytes 1M --step 4 --algo ring,hierarchical --cap-ms 200 --journal "$DIR/journal.db" ||
      fail "$launcher sweep across $nodes x $rpn"
    check_ranks "$nodes" "$rpn"
    cat "$OUT/out.0"
    fp=$(sed -n 's/.*table version [0-9]*, topology \([0-9a-f]\{16\}\).*/\1/p' "$OUT/out.0")
    [[ -n $fp ]] || fail "the sweep did not report a stored table"
    declare -a tables=()
    for ((k = 0; k < nodes; k++)); do
      t=$("${CLUSTER[@]}" exec --name "$NAME" "$k" -- sh -c "$TUNE show --json --daemon \$HCCL_TUNE_DAEMON") ||
        fail "node $k: hccl-tune show"
      tables[k]=$(jq -c --arg fp "$fp" '[.tables[] | select(.fingerprint == $fp) |
        {content_hash, entries: [.entries[] | {collective, dtype, world_size, bytes, configuration}]}]' <<<"$t")
      [[ $(jq 'length' <<<"${tables[k]}") == 1 ]] || fail "node $k: its daemon has no table for $fp"
      (($(jq '.[0].entries | length' <<<"${tables[k]}") >= 1)) || fail "node $k: the table has no entries"
      echo "node $k: $(jq -c '.[0] | [.content_hash, (.entries | map([.bytes, .configuration]))]' <<<"${tables[k]}")"
      for b in 256K 1M; do
        w=$("${CLUSTER[@]}" exec --name "$NAME" "$k" -- sh -c "$TUNE get --daemon \$HCCL_TUNE_DAEMON --coll allreduce \
          --dtype fp32 --bytes $b --world $((nodes * rpn)) --topology $fp" 2>/dev/null) || fail "node $k: no winner for $b"
        [[ $w == *"link=tcp@$fast"* && $w != *"$slow"* ]] || fail "node $k: the $b winner '$w' is not on $fast"
      done
      [[ ${tables[k]} == "${tables[0]}" ]] || fail "nodes 0 and $k hold different tables"
    done
    echo "$launcher sweep across $nodes x $rpn in $((SECONDS - start)) s: every rank ok, all $nodes daemons hold" \
      "table $fp with the same entries (winners on $fast)"
    ;;
  away)
    # mpirun on node 0, every rank on nodes 1..NODES: mpirun's host runs no rank, so its rendezvous (on that host)
    # has no server; MASTER_ADDR/MASTER_PORT, exported to the ranks with -x, name rank 0's node instead.
    nodes=$1 rpn=$2 FIRST=1 world=$(($1 * $2)) start=$SECONDS
    MPIRUN_EXTRA=(-x "MASTER_ADDR=$NAME-n1" -x MASTER_PORT=29500)
    launch mpirun "$nodes" "$rpn" env HCCL_TUNE_LOG_LEVEL=info "$TUNE" bench --launched --coll allreduce \
      --min-bytes 1K --max-bytes 1M --iters 2 --warmup 1 --check || fail "mpirun on a node with no rank"
    check_ranks "$nodes" "$rpn"
    for ((r = 0; r < world; r++)); do
      grep -q "rank $r/$world communicator 'world' ready: $nodes node(s), $rpn local" "$OUT/err.$r" ||
        fail "rank $r did not report a communicator of $world ranks on $nodes nodes, $rpn local"
    done
    rows=$(grep -c "check ok" "$OUT/out.0" || true)
    ((rows == 11)) || { cat "$OUT/out.0"; fail "rank 0 reported $rows checked rows, expected 11 (1K to 1M)"; }
    echo "mpirun on node 0, ranks on nodes 1-$nodes with -x MASTER_ADDR=$NAME-n1: every rank ok, $rows rows" \
      "checked in $((SECONDS - start)) s"
    ;;
  *) fail "unknown case '$case_' (job, sweep or away)" ;;
esac
