#!/usr/bin/env bash
# Emulated cluster on one machine: N nodes as network namespaces, each with two interfaces on two separate
# networks, and its own hccl-tuned.
#
#   node K = namespace NAME-nK           interfaces: fast0 = FAST_NET .K+1 (shaped to FAST_RATE)
#                                                    slow0 = SLOW_NET .K+1 (shaped to SLOW_RATE)
#   switch = namespace NAME-sw           bridges "fast" and "slow"; port fK / sK is the peer of node K's veth
#
# Everything (bridges included) lives in namespaces this script creates: nothing is added to the host's
# network namespace, and the test subnets exist only inside them. Each direction is shaped with tc tbf
# (node egress on fast0/slow0, switch egress on fK/sK). Node identity follows docs/CONVENTIONS.md: each namespace
# is its own node, with no extra setting.
#
# Host names: node K is host NAME-nK. `up` writes /etc/netns/NAME-nK/hosts (the host's /etc/hosts plus every node's
# name at its fast0 address), which `ip netns exec` mounts over /etc/hosts inside that node, and `exec` runs its
# command in a UTS namespace whose host name is NAME-nK: launchers that name hosts (torchrun's c10d rendezvous,
# mpirun --host, Slurm's NodeName) see one host per node, as on a real cluster. deploy/cluster/rsh.sh is the
# ssh-like agent (`rsh.sh NAME-nK COMMAND...`) that mpirun's --mca plm_rsh_agent takes to start daemons on nodes.
#
# Each node runs `hccl-tuned --socket DIR/nK/tuned.sock --db DIR/nK/tuning.db` inside its namespace, and
# DIR/nK.env holds the environment its ranks need (HCCL_TUNE_DAEMON); files are shared by all namespaces.
#
# Usage:
#   cluster.sh up     [--name NAME] [--nodes N] [--dir DIR] [--tuned PATH] [--fast-rate R] [--slow-rate R]
#                     [--fast-net A.B.C] [--slow-net A.B.C] [--default-net fast|slow]
#                     [--tuned-listen PORT] [--tuned-config FILE]
#   cluster.sh down   [--name NAME] [--dir DIR]
#   cluster.sh status [--name NAME] [--dir DIR]
#   cluster.sh exec   [--name NAME] [--dir DIR] K -- COMMAND...   (runs COMMAND in node K with its env file)
# `up` is idempotent: it creates what is missing, replaces addresses and qdiscs, restarts daemons that are
# not running, and removes nodes beyond N left by an earlier `up`. `down` removes the namespaces (killing
# the processes still inside them), the daemons and DIR.
#
# --default-net: the network `link=auto` (and HCCL_SOCKET_IFNAME-less TCP) takes between nodes. The runtime
# takes the first network both nodes share in interface order, so this network's interface is created first
# (lower ifindex). `slow` emulates the seed's case: the default route between nodes is the management network,
# and only a tuned table (link=tcp@FAST_SUBNET) puts cross-node traffic on the fast one. Default: fast.
#
# --tuned-listen PORT: each node's hccl-tuned also listens on TCP PORT on every address of its node (as one config
# for every node of a real cluster would have it); --tuned-config FILE: the config file every node's daemon reads
# (the TLS keys a non-loopback listener needs: docs/SECURITY.md). Other nodes reach a daemon at NODE_ADDRESS:PORT.
#
# Needs root (CAP_NET_ADMIN). Not root, or no network namespaces: exit 77 (skip) with a message — unless
# CI=true, where that is a failure (exit 1).
set -euo pipefail

readonly SKIP=77
cmd=${1:-}
[[ -n $cmd ]] && shift
NAME=hct NODES=2 DIR="" TUNED="" TUNED_LISTEN="" TUNED_CONFIG="" FAST_RATE=2gbit SLOW_RATE=200mbit FAST_NET=10.77.1 SLOW_NET=10.77.2 DEFAULT_NET=fast
declare -a REST=()
while (($#)); do
  case $1 in
    --name) NAME=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --tuned) TUNED=$2; shift 2 ;;
    --tuned-listen) TUNED_LISTEN=$2; shift 2 ;;
    --tuned-config) TUNED_CONFIG=$2; shift 2 ;;
    --fast-rate) FAST_RATE=$2; shift 2 ;;
    --slow-rate) SLOW_RATE=$2; shift 2 ;;
    --fast-net) FAST_NET=$2; shift 2 ;;
    --slow-net) SLOW_NET=$2; shift 2 ;;
    --default-net) DEFAULT_NET=$2; shift 2 ;;
    --) shift; REST+=("$@"); break ;;
    *) REST+=("$1"); shift ;;
  esac
done
DIR=${DIR:-/tmp/hccl-tune-cluster/$NAME}

die() { echo "cluster.sh: $*" >&2; exit 1; }
skip_or_fail() {
  if [[ ${CI:-} == true ]]; then die "$* (CI=true: the emulated cluster must be built, failing)"; fi
  echo "cluster.sh: SKIP: $*" >&2
  exit $SKIP
}
[[ $NAME =~ ^[a-z][a-z0-9]{0,9}$ ]] || die "--name '$NAME': expected 1-10 lower-case letters/digits, starting with a letter"
[[ $NODES =~ ^[0-9]+$ ]] && ((NODES >= 1 && NODES <= 64)) || die "--nodes '$NODES': expected 1-64"
for n in "$FAST_NET" "$SLOW_NET"; do
  [[ $n =~ ^(10|192\.168|172\.(1[6-9]|2[0-9]|3[01]))\.[0-9]+(\.[0-9]+)?$ && $(tr -cd . <<<"$n" | wc -c) == 2 ]] ||
    die "network '$n': expected the first three octets of a private /24 (e.g. 10.77.1)"
done
[[ $FAST_NET != "$SLOW_NET" ]] || die "--fast-net and --slow-net must differ"
[[ $DEFAULT_NET == fast || $DEFAULT_NET == slow ]] || die "--default-net '$DEFAULT_NET': expected fast or slow"

sw_ns() { echo "$NAME-sw"; }
node_ns() { echo "$NAME-n$1"; }
ns_exists() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$1"; }
link_exists() { ip -n "$1" link show "$2" >/dev/null 2>&1; }

# tbf burst: 1 ms at the rate, at least 32 KiB (one GSO segment fits).
burst_for() {
  local r=$1 v unit bps
  v=${r%%[a-zA-Z]*}
  unit=${r#"$v"}
  case ${unit,,} in
    gbit) bps=$((v * 1000000000)) ;;
    mbit) bps=$((v * 1000000)) ;;
    kbit) bps=$((v * 1000)) ;;
    *) die "rate '$r': expected NUMBER followed by gbit, mbit or kbit" ;;
  esac
  local b=$((bps / 8 / 1000))
  ((b < 32768)) && b=32768
  echo "$b"
}

require_root() {
  [[ $(id -u) -eq 0 ]] || skip_or_fail "needs root (network namespaces, veth, tc)"
  command -v ip >/dev/null && command -v tc >/dev/null || skip_or_fail "needs iproute2 (ip, tc): deploy/install-deps.sh"
  local probe="$NAME-probe"
  ip netns del "$probe" 2>/dev/null || true
  ip netns add "$probe" 2>/dev/null || skip_or_fail "cannot create network namespaces here (ip netns add failed)"
  ip netns del "$probe"
}

daemon_alive() {  # DIR/nK/tuned.pid names a live hccl-tuned
  local pidf=$DIR/n$1/tuned.pid pid
  [[ -f $pidf ]] || return 1
  pid=$(<"$pidf")
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null &&
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "--socket $DIR/n$1/tuned.sock "
}

stop_daemon() {
  local k=$1 pidf=$DIR/n$1/tuned.pid pid
  daemon_alive "$k" || { rm -f "$pidf"; return 0; }
  pid=$(<"$pidf")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$pidf"
}

# Kills what still runs inside namespace $1 (processes started there by this cluster's users), then removes it.
remove_ns() {
  local ns=$1 pids
  remove_hosts "$ns"
  ns_exists "$ns" || return 0
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  if [[ -n $pids ]]; then
    kill -TERM $pids 2>/dev/null || true
    sleep 0.3
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
  fi
  ip netns del "$ns"
}

shape() {  # ns dev rate
  tc -n "$1" qdisc replace dev "$2" root tbf rate "$3" burst "$(burst_for "$3")" latency 100ms
}

node_up() {
  local k=$1 ns sw
  ns=$(node_ns "$k") sw=$(sw_ns)
  ns_exists "$ns" || ip netns add "$ns"
  ip -n "$ns" link set lo up
  local net dev port rate
  local -a specs=("fast:$FAST_NET:$FAST_RATE:f" "slow:$SLOW_NET:$SLOW_RATE:s")
  [[ $DEFAULT_NET == slow ]] && specs=("${specs[1]}" "${specs[0]}")
  # The default network's interface must come first (lower ifindex): recreate both when it does not.
  if link_exists "$ns" fast0 && link_exists "$ns" slow0; then
    local first
    first=$(ip -n "$ns" -o link show | awk -F': ' '$2 ~ /^(fast0|slow0)@/ {sub(/0@.*/, "", $2); print $2; exit}')
    if [[ $first != "$DEFAULT_NET" ]]; then
      ip -n "$ns" link del fast0
      ip -n "$ns" link del slow0
    fi
  fi
  for spec in "${specs[@]}"; do
    IFS=: read -r dev net rate port <<<"$spec"
    dev=${dev}0 port=$port$k
    if ! link_exists "$ns" "$dev" || ! link_exists "$sw" "$port"; then
      ip -n "$ns" link del "$dev" 2>/dev/null || true
      ip -n "$sw" link del "$port" 2>/dev/null || true
      ip link add "$port" netns "$sw" type veth peer name "$dev" netns "$ns"
    fi
    ip -n "$sw" link set "$port" master "${dev%0}" up
    ip -n "$ns" addr flush dev "$dev"
    ip -n "$ns" addr add "$net.$((k + 1))/24" dev "$dev"
    ip -n "$ns" link set "$dev" up
    shape "$ns" "$dev" "$rate"
    shape "$sw" "$port" "$rate"
  done
  mkdir -p "$DIR/n$k"
  write_hosts "$k"
  printf 'HCCL_TUNE_DAEMON=unix:%s\n' "$DIR/n$k/tuned.sock" >"$DIR/n$k.env"
  if ! daemon_alive "$k"; then
    rm -f "$DIR/n$k/tuned.sock"
    local -a extra=()
    [[ -n $TUNED_LISTEN ]] && extra+=(--listen "0.0.0.0:$TUNED_LISTEN")
    [[ -n $TUNED_CONFIG ]] && extra+=(--config "$TUNED_CONFIG")
    ip netns exec "$ns" "$TUNED" --socket "$DIR/n$k/tuned.sock" --db "$DIR/n$k/tuning.db" --log-level warn \
      "${extra[@]}" </dev/null >>"$DIR/n$k/tuned.log" 2>&1 &
    echo $! >"$DIR/n$k/tuned.pid"
  fi
}

# /etc/netns/NAME-nK/hosts: the host's /etc/hosts, then every node's name at its fast0 address.
write_hosts() {
  local d j
  d=/etc/netns/$(node_ns "$1")
  mkdir -p "$d"
  {
    cat /etc/hosts
    for ((j = 0; j < NODES; j++)); do echo "$FAST_NET.$((j + 1)) $(node_ns "$j")"; done
  } >"$d/hosts.tmp"
  mv "$d/hosts.tmp" "$d/hosts"
}
remove_hosts() {
  rm -rf "/etc/netns/$1"
  rmdir /etc/netns 2>/dev/null || true
}

# A TCP connect to a closed port: refused (the peer answered with RST) means reachable; a timeout means not.
reachable() {
  local rc=0
  ip netns exec "$1" timeout 3 bash -c "exec 3<>/dev/tcp/$2/9" 2>/dev/null || rc=$?
  ((rc == 0 || rc == 1))
}

cmd_up() {
  require_root
  if [[ -z $TUNED ]]; then TUNED=$(command -v hccl-tuned || true); fi
  [[ -n $TUNED && -x $TUNED ]] || die "hccl-tuned not found: pass --tuned PATH (e.g. build/daemon/hccl-tuned)"
  TUNED=$(readlink -f "$TUNED")
  mkdir -p "$DIR"
  # Nodes beyond N left by an earlier `up` with more nodes.
  local k ns
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$NAME-n[0-9]+$" || true); do
    k=${ns##*-n}
    if ((k >= NODES)); then
      stop_daemon "$k"
      remove_ns "$ns"
      rm -rf "${DIR:?}/n$k" "$DIR/n$k.env"
    fi
  done
  local sw
  sw=$(sw_ns)
  ns_exists "$sw" || ip netns add "$sw"
  ip -n "$sw" link set lo up
  for br in fast slow; do
    link_exists "$sw" "$br" || ip -n "$sw" link add "$br" type bridge
    ip -n "$sw" link set "$br" up
  done
  for ((k = 0; k < NODES; k++)); do node_up "$k"; done
  cat >"$DIR/cluster.conf" <<EOF
NAME=$NAME
NODES=$NODES
FAST_NET=$FAST_NET
SLOW_NET=$SLOW_NET
FAST_SUBNET=$FAST_NET.0/24
SLOW_SUBNET=$SLOW_NET.0/24
FAST_RATE=$FAST_RATE
SLOW_RATE=$SLOW_RATE
DEFAULT_NET=$DEFAULT_NET
EOF
  # Daemons answer (their socket exists) and every node reaches every other on both networks.
  for ((k = 0; k < NODES; k++)); do
    for _ in $(seq 100); do [[ -S $DIR/n$k/tuned.sock ]] && break; sleep 0.1; done
    [[ -S $DIR/n$k/tuned.sock ]] || die "hccl-tuned of node $k did not start; its log: $(tail -5 "$DIR/n$k/tuned.log")"
  done
  for ((k = 1; k < NODES; k++)); do
    for net in "$FAST_NET" "$SLOW_NET"; do
      reachable "$(node_ns 0)" "$net.$((k + 1))" || die "node 0 cannot reach node $k at $net.$((k + 1))"
    done
  done
  echo "cluster.sh: $NODES node(s) '$NAME' up in $DIR (fast $FAST_NET.0/24 at $FAST_RATE, slow $SLOW_NET.0/24 at $SLOW_RATE, default $DEFAULT_NET)"
}

cmd_down() {
  [[ $(id -u) -eq 0 ]] || skip_or_fail "needs root (network namespaces)"
  local k ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$NAME-n[0-9]+$" || true); do
    k=${ns##*-n}
    stop_daemon "$k"
    remove_ns "$ns"
  done
  # Daemons whose namespace is already gone.
  for pidf in "$DIR"/n*/tuned.pid; do
    [[ -f $pidf ]] || continue
    k=${pidf%/tuned.pid}
    stop_daemon "${k##*/n}"
  done
  remove_ns "$(sw_ns)"
  for d in /etc/netns/"$NAME"-n*; do [[ -d $d ]] && remove_hosts "${d##*/}"; done
  rm -rf "$DIR"
  echo "cluster.sh: '$NAME' removed"
}

cmd_status() {
  [[ -f $DIR/cluster.conf ]] || { echo "cluster.sh: '$NAME' is not up ($DIR/cluster.conf missing)"; exit 1; }
  cat "$DIR/cluster.conf"
  # shellcheck disable=SC1091
  source "$DIR/cluster.conf"
  local k
  for ((k = 0; k < NODES; k++)); do
    local d=down
    daemon_alive "$k" && d="up (pid $(<"$DIR/n$k/tuned.pid"))"
    echo "node $k: namespace $(node_ns "$k"), hccl-tuned $d, env $DIR/n$k.env"
    ip -n "$(node_ns "$k")" -brief addr show | grep -v '^lo' | sed 's/^/  /'
  done
}

cmd_exec() {
  ((${#REST[@]} >= 2)) || die "exec: usage: cluster.sh exec K -- COMMAND..."
  local k=${REST[0]}
  [[ -f $DIR/n$k.env ]] || die "exec: node $k of '$NAME' is not up"
  local -a envs
  mapfile -t envs <"$DIR/n$k.env"
  # The node's host name, in a UTS namespace of the command's own (the host's name is left alone).
  exec ip netns exec "$(node_ns "$k")" env "${envs[@]}" unshare --uts sh -c 'hostname "$0" && exec "$@"' \
    "$(node_ns "$k")" "${REST[@]:1}"
}

case $cmd in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  exec) cmd_exec ;;
  *) die "usage: cluster.sh up|down|status|exec [options] (see the header of $0)" ;;
esac
