#!/usr/bin/env bash
# Emulated-cluster tests (deploy/cluster/). Each case builds its own cluster under a unique name and removes it
# on exit, also when the case fails; the last check of every case is that nothing is left behind.
#
# Usage: cluster_test.sh CASE HCCL_TUNE HCCL_TUNED
#   lifecycle            up, up again (idempotent, same daemons), shrink, down; no namespaces/daemons left
#   hier NODES RPN [both|colls]
#                        hierarchical allreduce --check across NODES x RPN ranks over the fast network; the fast
#                        interfaces' tx counters grow by at least the bytes that must cross nodes, the slow ones
#                        by far less; with "both", the same again with the slow network chosen (and reversed), and
#                        HCCL_SOCKET_IFNAME=slow0 winning over a configuration that names the fast subnet. Then
#                        hierarchical allgather and reducescatter (form=parallel and form=leader each), broadcast and
#                        double_binary_tree allreduce --check over the fast network: the bytes that must cross nodes
#                        went over fast0, not slow0,
#                        and (allgather, reducescatter) no node's fast0 sent more than (NODES-1)/NODES of the call's
#                        bytes (plus TCP/IP framing). "colls": only that second part
#   defaults NODES RPN   every collective's automatic choice (no table) across NODES x RPN ranks, 8 B to 1 MiB,
#                        --check on every rank, no rank writing errors
#   links                hccl-tune links across 2 x 2: shm inside a node, tcp between, fast >= 3x slow
#   torch_links PY USERBASE
#                        tests/python/links_test.py (hccl_tune_torch.LinkInspector) across 2 x 2 under interpreter
#                        PY with the build tree's package (PYTHONUSERBASE): shm inside a node, tcp on the fast network
#                        between; a group whose calls are forced onto the slow network reports it as the link in use
#   sweep                2 x 2 with the slow network as the default route: before any table, link=auto sends
#                        the cross-node bytes over slow0; a launched sweep (ring and hierarchical over both
#                        networks) leaves both nodes' daemons with the same table, whose winners use the fast
#                        subnet; then the same auto call takes the table and its bytes go over fast0; with
#                        node 1's daemon stopped, a sweep fails (rank 2 says it could not store the winners)
#   doctor_links JOB     doctor.links: 2 x 1 with the slow network as the default route; `hccl-tune links` stores its
#                        measurement in both daemons, a doctor_job (tests/process/doctor_job.cc) of 1 MiB allreduces
#                        dumps on every rank, whose links_used shows the bytes on slow0; `hccl-tune doctor` ranks the
#                        links finding first with HCCL_SOCKET_IFNAME=fast0 and link=tcp@FAST; the same job with the fast
#                        network as the default route gets no finding above info
#   job LAUNCHER NODES RPN [PY USERBASE]
#                        a job across NODES x RPN started by a real launcher (mpirun, srun, torchrun) with no rendezvous
#                        setting: bench --check and links on every rank, DDP under torchrun with PY (multinode.sh)
#   away NODES RPN       mpirun on node 0 of NODES+1, every rank on the others, MASTER_ADDR exported (multinode.sh)
#   sweep_launched LAUNCHER NODES RPN
#                        a launched sweep under LAUNCHER, slow network as the default route: every node's daemon holds
#                        the same table, its winners on the fast subnet (multinode.sh)
# Exit 77 (skip) when not root, unless CI=true (then the cluster must build: failure).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
case_=$1 TUNE=$2 TUNED=$3
shift 3
NAME=hct$$
DIR=/tmp/hccl-tune-cluster/$NAME
CLUSTER=("$root/deploy/cluster/cluster.sh")
export HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=60 HCCL_TUNE_LOG_LEVEL=warn

fail() { echo "FAILED: $*" >&2; exit 1; }
teardown() {
  local rc=$?
  "${CLUSTER[@]}" down --name "$NAME" >/dev/null 2>&1 || true
  exit $rc
}

no_leftovers() {
  if ip netns list | awk '{print $1}' | grep -E "^$NAME-"; then fail "namespaces of $NAME left behind"; fi
  [[ ! -e $DIR ]] || fail "$DIR left behind"
  if compgen -G "/etc/netns/$NAME-*" >/dev/null; then fail "hosts files of $NAME left in /etc/netns"; fi
  if compgen -G "/tmp/hct-slurm-$NAME.*" >/dev/null; then fail "the Slurm of $NAME left its directory"; fi
  if pgrep -f -- "--socket $DIR/" >/dev/null; then fail "hccl-tuned of $NAME left running"; fi
  if pgrep -f -- "/tmp/hct-slurm-$NAME\\." >/dev/null; then fail "Slurm daemons of $NAME left running"; fi
  echo "no leftovers: no namespace, hosts file, directory or daemon of $NAME"
}

up() {
  local rc=0
  "${CLUSTER[@]}" up --name "$NAME" --tuned "$TUNED" "$@" || rc=$?
  ((rc == 0)) || exit $rc  # 77 = skip (not root, outside CI)
}

# Sum over nodes of tx_bytes of interface $1 (fast0 / slow0).
tx_sum() {
  local total=0 k v
  for ((k = 0; k < NODES_UP; k++)); do
    v=$(ip netns exec "$NAME-n$k" cat "/sys/class/net/$1/statistics/tx_bytes")
    total=$((total + v))
  done
  echo $total
}
# tx_bytes of interface $1 on every node, space-separated.
tx_each() {
  local k
  for ((k = 0; k < NODES_UP; k++)); do echo -n "$(ip netns exec "$NAME-n$k" cat "/sys/class/net/$1/statistics/tx_bytes") "; done
}

# Hierarchical allgather, reducescatter and broadcast, and double_binary_tree allreduce (link=auto: the fast network,
# the cluster's default route) --check across $1 x $2 ranks, inter step over the fast network: each node's fast0 tx
# growth, against what must cross nodes (at least (NODES-1) x S per call in all; allreduce NODES x S) and,
# for allgather and reducescatter, at most (NODES-1)/NODES x S per call per node; 10 % of that is left for TCP/IP
# headers and acknowledgements, plus 256 KiB for connection setup and the bench's own messages.
hier_colls() {
  local nodes=$1 rpn=$2 bytes=$((4 << 20)) runs coll form algo out k
  local -a f0 f1
  # Every node has RPN ranks: allgather and reducescatter run in both forms (every local rank in parallel, one
  # leader per node).
  for spec in allgather:parallel allgather:leader reducescatter:parallel reducescatter:leader broadcast: allreduce:; do
    IFS=: read -r coll form <<<"$spec"
    # --check (1; broadcast: out of place, then in place) + --warmup 1 + --iters 2
    case $coll in
      broadcast)
        algo="hierarchical(intra=binomial_tree(link=auto),inter=binomial_tree(link=tcp@10.77.1.0/24))" runs=5 ;;
      allreduce) algo="double_binary_tree(chunk=512K,link=auto)" runs=4 ;;
      *) algo="hierarchical(intra=ring(link=auto),inter=ring(link=tcp@10.77.1.0/24),form=$form)" runs=4 ;;
    esac
    read -ra f0 <<<"$(tx_each fast0)"
    s0=$(tx_sum slow0)
    out=$("$root/deploy/cluster/launch.sh" --name "$NAME" --ranks-per-node "$rpn" --timeout 240 --out "$DIR/out" -- \
      "$TUNE" bench --launched --coll $coll --dtype fp32 --min-bytes $bytes --max-bytes $bytes \
      --iters 2 --warmup 1 --check --algo "$algo") || fail "$coll across $nodes x $rpn"
    echo "$out"
    read -ra f1 <<<"$(tx_each fast0)"
    grep -q "check ok" <<<"$out" || fail "$coll: no checked row"
    if [[ $coll == allreduce ]]; then
      grep -q "^$coll .*double_binary_tree(" <<<"$out" || fail "$coll: the row is not double_binary_tree"
    else
      grep -q "^$coll .*hierarchical(.*link=tcp@10.77.1.0/24)${form:+,form=$form})" <<<"$out" ||
        fail "$coll: the row is not hierarchical${form:+ in form $form}"
    fi
    # Any allreduce ships out of every node information about all of its S bytes: >= NODES x S per call.
    local must=$(((nodes - 1) * bytes * runs))
    [[ $coll == allreduce ]] && must=$((nodes * bytes * runs))
    local total=0 most=$(((nodes - 1) * bytes * runs / nodes)) ds=$(($(tx_sum slow0) - s0))
    for ((k = 0; k < nodes; k++)); do
      local d=$((f1[k] - f0[k]))
      total=$((total + d))
      echo -n "$coll${form:+ ($form)} node $k: fast0 sent $d bytes in $runs calls of $bytes ($((d / runs)) per call"
      if [[ $coll == allgather || $coll == reducescatter ]]; then
        echo "; (NODES-1)/NODES of a call: $((most / runs)))"
        ((d <= most + most / 10 + (256 << 10))) || fail "$coll: node $k's fast0 sent $d > $most (+ framing)"
      else
        echo ")"
      fi
    done
    echo "$coll: fast0 sent $total in all (need >= $must), slow0 $ds"
    ((total >= must)) || fail "$coll: fast0 carried $total, less than what must cross nodes"
    ((ds < bytes * runs / 20)) || fail "$coll: slow0 carried $ds bytes: traffic leaked to the network not chosen"
  done
}

trap teardown EXIT

case $case_ in
  lifecycle)
    up --nodes 3
    pids1=$(cat "$DIR"/n*/tuned.pid | tr '\n' ' ')
    up --nodes 3
    pids2=$(cat "$DIR"/n*/tuned.pid | tr '\n' ' ')
    [[ $pids1 == "$pids2" ]] || fail "second 'up' restarted daemons ($pids1 -> $pids2): not idempotent"
    for k in 0 1 2; do
      ns=$NAME-n$k
      ip -n "$ns" -4 -o addr show fast0 | grep -q "10.77.1.$((k + 1))/24" || fail "node $k: fast0 lacks 10.77.1.$((k + 1))"
      ip -n "$ns" -4 -o addr show slow0 | grep -q "10.77.2.$((k + 1))/24" || fail "node $k: slow0 lacks 10.77.2.$((k + 1))"
      tc -n "$ns" qdisc show dev fast0 | grep -q "tbf.*rate 2Gbit" || fail "node $k: fast0 not shaped to 2Gbit"
      tc -n "$ns" qdisc show dev slow0 | grep -q "tbf.*rate 200Mbit" || fail "node $k: slow0 not shaped to 200Mbit"
      grep -qx "HCCL_TUNE_DAEMON=unix:$DIR/n$k/tuned.sock" "$DIR/n$k.env" || fail "node $k: env file"
      # The node's daemon answers, from inside its namespace, through the env file.
      "${CLUSTER[@]}" exec --name "$NAME" "$k" -- sh -c "$TUNE status --daemon \$HCCL_TUNE_DAEMON" >/dev/null ||
        fail "node $k: hccl-tuned does not answer"
    done
    # Node identity: two namespaces are two nodes (docs/CONVENTIONS.md).
    id0=$(ip netns exec "$NAME-n0" readlink /proc/self/ns/net)
    id1=$(ip netns exec "$NAME-n1" readlink /proc/self/ns/net)
    [[ $id0 != "$id1" ]] || fail "nodes 0 and 1 share a network namespace"
    up --nodes 2
    ! ip netns list | grep -q "^$NAME-n2" || fail "shrinking to 2 nodes left node 2"
    "${CLUSTER[@]}" down --name "$NAME"
    "${CLUSTER[@]}" down --name "$NAME"  # idempotent
    no_leftovers
    ;;

  hier)
    nodes=$1 rpn=$2 mode=${3:-fast}
    NODES_UP=$nodes
    up --nodes "$nodes"
    hier_colls "$nodes" "$rpn"
    if [[ $mode == colls ]]; then
      "${CLUSTER[@]}" down --name "$NAME"
      no_leftovers
      exit 0
    fi
    bytes=$((4 << 20)) runs=4  # --check (1) + --warmup 1 + --iters 2
    # Any allreduce must ship, out of every node, information about all of its S bytes: >= NODES*S per call.
    need=$((nodes * bytes * runs))
    nets=(10.77.1.0/24:fast0:slow0)
    [[ $mode == both ]] && nets+=(10.77.2.0/24:slow0:fast0)
    for spec in "${nets[@]}"; do
      IFS=: read -r subnet chosen other <<<"$spec"
      c0=$(tx_sum "$chosen") o0=$(tx_sum "$other")
      algo="hierarchical(intra=ring(link=auto),inter=ring(link=tcp@$subnet))"
      out=$("$root/deploy/cluster/launch.sh" --name "$NAME" --ranks-per-node "$rpn" --timeout 240 --out "$DIR/out" -- \
        "$TUNE" bench --launched --coll allreduce --dtype fp32 --min-bytes $bytes --max-bytes $bytes \
        --iters 2 --warmup 1 --check --algo "$algo") || fail "bench across $nodes x $rpn over $subnet"
      echo "$out"
      c1=$(tx_sum "$chosen") o1=$(tx_sum "$other")
      # Every rank checked its own output (bench exits 3 on a mismatch); rank 0's row says so.
      grep -q "check ok" <<<"$out" || fail "no checked row"
      grep -q "$((nodes * rpn)) .*link=tcp@$subnet" <<<"$out" || fail "the row does not show inter link tcp@$subnet"
      for ((r = 0; r < nodes * rpn; r++)); do
        [[ ! -s $DIR/out/rank$r.err ]] || fail "rank $r wrote errors: $(cat "$DIR/out/rank$r.err")"
      done
      dc=$((c1 - c0)) do_=$((o1 - o0))
      echo "$subnet: $chosen tx grew $dc bytes (need >= $need), $other grew $do_ bytes (must be < $((need / 20)))"
      ((dc >= need)) || fail "$chosen carried $dc bytes, less than the $need that must cross nodes"
      ((do_ < need / 20)) || fail "$other carried $do_ bytes: traffic leaked to the network not chosen"
    done
    if [[ $mode == both ]]; then
      # The user's HCCL_SOCKET_IFNAME comes before the configuration's network (docs/CONVENTIONS.md): asked for the
      # fast subnet, the bytes still go over slow0.
      c0=$(tx_sum slow0) o0=$(tx_sum fast0)
      out=$(HCCL_SOCKET_IFNAME=slow0 "$root/deploy/cluster/launch.sh" --name "$NAME" --ranks-per-node "$rpn" \
        --timeout 240 --out "$DIR/out" -- "$TUNE" bench --launched --coll allreduce --dtype fp32 \
        --min-bytes $bytes --max-bytes $bytes --iters 2 --warmup 1 --check \
        --algo "hierarchical(intra=ring(link=auto),inter=ring(link=tcp@10.77.1.0/24))") ||
        fail "bench with HCCL_SOCKET_IFNAME=slow0"
      grep -q "check ok" <<<"$out" || fail "no checked row with HCCL_SOCKET_IFNAME=slow0"
      dc=$(($(tx_sum slow0) - c0)) do_=$(($(tx_sum fast0) - o0))
      echo "HCCL_SOCKET_IFNAME=slow0 over link=tcp@10.77.1.0/24: slow0 tx grew $dc, fast0 $do_ (need >= $need)"
      ((dc >= need && do_ < need / 20)) || fail "HCCL_SOCKET_IFNAME=slow0 did not win over the configuration's network"
    fi
    # An explicit link=shm intra step runs across nodes (it once was applied to the whole group and failed).
    algo="hierarchical(intra=ring(link=shm),inter=ring(link=tcp@10.77.1.0/24))"
    out=$("$root/deploy/cluster/launch.sh" --name "$NAME" --ranks-per-node "$rpn" --timeout 120 --out "$DIR/out" -- \
      "$TUNE" bench --launched --coll allreduce --dtype fp32 --min-bytes 8 --max-bytes 1M \
      --iters 1 --warmup 1 --check --algo "$algo") || fail "intra link=shm across $nodes x $rpn"
    echo "$out"
    (($(grep -c "check ok" <<<"$out") == 18)) || fail "intra link=shm: expected 18 checked rows (8 B to 1M)"
    "${CLUSTER[@]}" down --name "$NAME"
    no_leftovers
    ;;

  links)
    NODES_UP=2
    up --nodes 2
    out=$("$root/deploy/cluster/launch.sh" --name "$NAME" --ranks-per-node 2 --timeout 240 --out "$DIR/out" -- \
      "$TUNE" links --launched --json) || fail "hccl-tune links across 2 x 2"
    echo "$out"
    q() { jq -r "$1" <<<"$out"; }
    [[ $(q '[.links[] | select(.src == 0 and .dst == 1 and .default)][0].type') == shm ]] || fail "0-1 (same node) is not shm"
    [[ $(q '[.links[] | select(.src == 2 and .dst == 3 and .default)][0].type') == shm ]] || fail "2-3 (same node) is not shm"
    for pair in "0 2" "0 3" "1 2" "1 3"; do
      read -r a b <<<"$pair"
      [[ $(q "[.links[] | select(.src == $a and .dst == $b and .default)][0].type") == tcp ]] ||
        fail "$a-$b (across nodes) is not tcp"
    done
    fast=$(q '[.links[] | select(.src == 0 and .dst == 2 and .network == "10.77.1.0/24")][0].bandwidth_gbps')
    slow=$(q '[.links[] | select(.src == 0 and .dst == 2 and .network == "10.77.2.0/24")][0].bandwidth_gbps')
    iff=$(q '[.links[] | select(.src == 0 and .dst == 2 and .network == "10.77.1.0/24")][0].interface')
    echo "0-2: fast $fast Gbit/s on $iff, slow $slow Gbit/s"
    [[ $iff == fast0 ]] || fail "0-2 on 10.77.1.0/24 reports interface '$iff', expected fast0"
    awk -v f="$fast" -v s="$slow" 'BEGIN { exit !(s > 0 && f >= 3 * s) }' || fail "fast ($fast) < 3 x slow ($slow)"
    "${CLUSTER[@]}" down --name "$NAME"
    no_leftovers
    ;;

  torch_links)
    py=$1 userbase=$2
    NODES_UP=2
    up --nodes 2
    rc=0
    PYTHONUSERBASE=$userbase OMP_NUM_THREADS=1 "$root/deploy/cluster/launch.sh" --name "$NAME" --ranks-per-node 2 \
      --timeout 240 --out "$DIR/out" -- "$py" "$root/tests/python/links_test.py" hccltune - \
      --cluster 10.77.1.0/24 10.77.2.0/24 || rc=$?
    for ((r = 0; r < 4; r++)); do
      grep -q "^OK rank $r:" "$DIR/out/rank$r.out" ||
        fail "rank $r (exit $rc): $(tail -n 20 "$DIR/out/rank$r.out" "$DIR/out/rank$r.err")"
      grep "^OK rank $r:" "$DIR/out/rank$r.out"
    done
    ((rc == 0)) || fail "the job exited $rc"
    "${CLUSTER[@]}" down --name "$NAME"
    no_leftovers
    ;;

  doctor_links)
    NODES_UP=2
    "$here/doctor_links.sh" "$root" "$NAME" "$DIR" "$TUNE" "$TUNED" "$1"
    "${CLUSTER[@]}" down --name "$NAME"
    no_leftovers
    ;;

  sweep)
    NODES_UP=2
    up --nodes 2 --default-net slow
    fast=10.77.1.0/24 slow=10.77.2.0/24
    bytes=$((1 << 20)) runs=4 # --check (1) + --warmup 1 + --iters 2
    need=$((2 * bytes * runs))
    # One auto allreduce across the nodes; prints its row and the tx growth of fast0 and slow0.
    auto_call() {
      local f0 s0 out
      f0=$(tx_sum fast0) s0=$(tx_sum slow0)
      out=$("$root/deploy/cluster/launch.sh" --name "$NAME" --ranks-per-node 2 --timeout 120 --out "$DIR/out" -- \
        "$TUNE" bench --launched --coll allreduce --dtype fp32 --min-bytes $bytes --max-bytes $bytes \
        --iters 2 --warmup 1 --check) || fail "auto allreduce across 2 x 2"
      grep -q "check ok" <<<"$out" || fail "no checked row: $out"
      echo "$(grep '^allreduce' <<<"$out") $(($(tx_sum fast0) - f0)) $(($(tx_sum slow0) - s0))"
    }
    read -r _ _ _ algo _ _ _ _ _ dfast dslow <<<"$(auto_call)"
    echo "before the sweep: auto ran $algo; fast0 tx grew $dfast, slow0 $dslow (need >= $need)"
    ((dslow >= need && dfast < need / 20)) || fail "the default route is not the slow network (fast $dfast, slow $dslow)"

    out=$("$root/deploy/cluster/launch.sh" --name "$NAME" --ranks-per-node 2 --timeout 150 --out "$DIR/out" -- \
      "$TUNE" sweep --launched --force --plain --coll allreduce --dtype fp32 --min-bytes 256K --max-bytes 1M \
      --step 4 --algo ring,hierarchical --cap-ms 200 --journal "$DIR/journal.db") || fail "launched sweep across 2 x 2"
    echo "$out"
    fp=$(sed -n 's/.*table version [0-9]*, topology \([0-9a-f]\{16\}\).*/\1/p' <<<"$out")
    [[ -n $fp ]] || fail "the sweep did not report a stored table"
    declare -a tables=()
    for k in 0 1; do
      t=$("${CLUSTER[@]}" exec --name "$NAME" "$k" -- sh -c "$TUNE show --json --daemon \$HCCL_TUNE_DAEMON") ||
        fail "node $k: hccl-tune show"
      tables[k]=$(jq -c --arg fp "$fp" '[.tables[] | select(.fingerprint == $fp) |
        {content_hash, entries: [.entries[] | {collective, dtype, world_size, bytes, configuration}]}]' <<<"$t")
      echo "node $k: $(jq -c '.[0].entries | map([.bytes, .configuration])' <<<"${tables[k]}")"
      [[ $(jq 'length' <<<"${tables[k]}") == 1 ]] || fail "node $k: its daemon has no table for $fp"
      # One entry per winner range (256K and 1M merge into one range when one configuration wins both).
      (($(jq '.[0].entries | length' <<<"${tables[k]}") >= 1)) || fail "node $k: the table has no entries"
      for b in 256K 1M; do
        w=$("${CLUSTER[@]}" exec --name "$NAME" "$k" -- sh -c \
          "$TUNE get --daemon \$HCCL_TUNE_DAEMON --coll allreduce --dtype fp32 --bytes $b --world 4 --topology $fp" \
          2>/dev/null) || fail "node $k: no winner for $b"
        echo "node $k: $b -> $w"
        [[ $w == *"link=tcp@$fast"* && $w != *"$slow"* ]] || fail "node $k: the $b winner '$w' is not on $fast"
      done
    done
    [[ ${tables[0]} == "${tables[1]}" ]] || fail "the two daemons hold different tables"

    read -r _ _ _ algo _ _ _ _ _ dfast dslow <<<"$(auto_call)"
    # Rank 0 waits up to HCCL_TUNE_FETCH_TIMEOUT_MS (2 s) for its daemon's table at init: no retry needed.
    echo "after the sweep: auto ran $algo; fast0 tx grew $dfast, slow0 $dslow"
    [[ $algo == *"tcp@$fast"* ]] || fail "auto did not take the tuned configuration ($algo): $(cat "$DIR/out/rank0.err")"
    ((dfast >= need && dslow < need / 20)) || fail "tuned call: fast0 carried $dfast, slow0 $dslow (need >= $need)"

    # A node whose daemon cannot take the winners fails the job, naming the rank and why.
    kill -TERM "$(<"$DIR/n1/tuned.pid")"
    for _ in $(seq 50); do [[ -S $DIR/n1/tuned.sock ]] || break; sleep 0.1; done
    rc=0
    "$root/deploy/cluster/launch.sh" --name "$NAME" --ranks-per-node 2 --timeout 120 --out "$DIR/out" -- \
      "$TUNE" sweep --launched --force --plain --coll allreduce --dtype fp32 --min-bytes 64K --max-bytes 64K \
      --algo ring --links "tcp@$fast" --journal "$DIR/journal.db" >/dev/null 2>&1 || rc=$?
    ((rc != 0)) || fail "the sweep succeeded although node 1's daemon was stopped"
    grep -q "rank 2: storing the winners on this node" "$DIR/out/rank2.err" ||
      fail "rank 2 did not say why node 1 has no table: $(cat "$DIR/out/rank2.err")"
    echo "node 1's daemon stopped: the sweep exits $rc; rank 2: $(grep -m1 'storing the winners' "$DIR/out/rank2.err")"
    "${CLUSTER[@]}" down --name "$NAME"
    no_leftovers
    ;;

  job | sweep_launched | away)
    # Multi-node jobs under real launchers (tests/cluster/multinode.sh): ARGS = LAUNCHER NODES RPN [PY USERBASE],
    # away: NODES RPN (one more node, for mpirun alone).
    opts=(--nodes "${2:-}")
    [[ $case_ == sweep_launched ]] && opts+=(--default-net slow)
    [[ $case_ == away ]] && opts=(--nodes $(($1 + 1)))
    up "${opts[@]}"
    "$here/multinode.sh" "${case_%_launched}" "$root" "$NAME" "$TUNE" "$@"
    "${CLUSTER[@]}" down --name "$NAME"
    no_leftovers
    ;;

  defaults)
    # Every collective's automatic choice (built-in defaults, no table) across NODES x RPN ranks, 8 B to 1 MiB,
    # --check on every rank (bench exits 3 on a mismatch; rank 0's rows say "check ok").
    nodes=$1 rpn=$2
    NODES_UP=$nodes
    up --nodes "$nodes"
    for coll in allreduce allgather allgatherv reducescatter broadcast reduce gather scatter alltoall alltoallv barrier; do
      out=$("$root/deploy/cluster/launch.sh" --name "$NAME" --ranks-per-node "$rpn" --timeout 240 --out "$DIR/out" -- \
        env HCCL_TUNE_DAEMON=off "$TUNE" bench --launched --coll "$coll" --min-bytes 8 --max-bytes 1M --iters 1 \
        --warmup 1 --check) || fail "$coll across $nodes x $rpn"
      rows=$(grep -c "check ok" <<<"$out" || true)
      ((rows == 18)) || fail "$coll: $rows checked rows, expected 18 (8 B to 1 MiB): $out"
      for ((r = 0; r < nodes * rpn; r++)); do
        [[ ! -s $DIR/out/rank$r.err ]] || fail "$coll: rank $r wrote errors: $(cat "$DIR/out/rank$r.err")"
      done
      echo "$coll: $rows sizes checked on $((nodes * rpn)) ranks ($(grep "check ok" <<<"$out" | awk '{print $4}' | sort -u | paste -sd' '))"
    done
    "${CLUSTER[@]}" down --name "$NAME"
    no_leftovers
    ;;
  *) fail "unknown case '$case_'" ;;
esac
