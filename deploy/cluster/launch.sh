#!/usr/bin/env bash
# Launches one job across the nodes of an emulated cluster (deploy/cluster/cluster.sh), like torchrun would
# across machines: rank r runs in node r / R (node-major placement) as
#   ip netns exec NAME-nK env <DIR/nK.env> RANK=r WORLD_SIZE=N*R LOCAL_RANK=l LOCAL_WORLD_SIZE=R \
#       HCCL_TUNE_STORE=file://JOBDIR/store COMMAND...
# The rendezvous is a file store: files are shared by every namespace. Rank 0's stdout is printed; every rank's
# stdout/stderr are kept in OUT/rankR.{out,err}. The exit status is 0 when every rank exits 0, else the first
# failing rank's status (124 when the job ran past --timeout; every rank is then killed).
#
# Usage: launch.sh [--name NAME] [--dir DIR] [--nodes N] [--ranks-per-node R] [--timeout S] [--out OUT]
#                  -- COMMAND [ARGS...]
# --nodes defaults to the cluster's node count.
set -euo pipefail

NAME=hct DIR="" NODES="" RPN=1 TIMEOUT=300 OUT=""
while (($#)); do
  case $1 in
    --name) NAME=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --ranks-per-node) RPN=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "launch.sh: unknown option '$1' (the command goes after --)" >&2; exit 2 ;;
  esac
done
(($#)) || { echo "launch.sh: no command (usage: launch.sh [options] -- COMMAND...)" >&2; exit 2; }
DIR=${DIR:-/tmp/hccl-tune-cluster/$NAME}
[[ -f $DIR/cluster.conf ]] || { echo "launch.sh: cluster '$NAME' is not up ($DIR/cluster.conf missing)" >&2; exit 2; }
UP_NODES=$(sed -n 's/^NODES=//p' "$DIR/cluster.conf")
NODES=${NODES:-$UP_NODES}
[[ $NODES =~ ^[0-9]+$ ]] && ((NODES >= 1 && NODES <= UP_NODES)) ||
  { echo "launch.sh: --nodes '$NODES': the cluster has $UP_NODES node(s)" >&2; exit 2; }
[[ $RPN =~ ^[0-9]+$ ]] && ((RPN >= 1)) || { echo "launch.sh: --ranks-per-node '$RPN': expected >= 1" >&2; exit 2; }

JOB=$(mktemp -d "$DIR/job.XXXXXX")
OUT=${OUT:-$JOB}
mkdir -p "$OUT" "$JOB/store"
WORLD=$((NODES * RPN))
declare -a pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$JOB/store"
}
trap cleanup EXIT

for ((r = 0; r < WORLD; r++)); do
  k=$((r / RPN))
  mapfile -t node_env <"$DIR/n$k.env"
  ip netns exec "$NAME-n$k" env "${node_env[@]}" RANK=$r WORLD_SIZE=$WORLD LOCAL_RANK=$((r % RPN)) \
    LOCAL_WORLD_SIZE=$RPN HCCL_TUNE_STORE="file://$JOB/store" "$@" >"$OUT/rank$r.out" 2>"$OUT/rank$r.err" &
  pids+=($!)
done

deadline=$((SECONDS + TIMEOUT))
declare -a rcs=()
status=0
for r in "${!pids[@]}"; do
  rc=0
  while kill -0 "${pids[$r]}" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.05; done
  if kill -0 "${pids[$r]}" 2>/dev/null; then
    echo "launch.sh: rank $r still running after ${TIMEOUT}s: killing the job" >&2
    status=124
    break
  fi
  wait "${pids[$r]}" || rc=$?
  rcs[r]=$rc
  ((rc == 0 || status != 0)) || status=$rc
done

cat "$OUT/rank0.out"
if ((status != 0)); then
  for ((r = 0; r < WORLD; r++)); do
    if [[ ${rcs[r]:-killed} != 0 ]]; then
      echo "launch.sh: rank $r (node $((r / RPN))) exit ${rcs[r]:-killed}; stderr:" >&2
      tail -5 "$OUT/rank$r.err" | sed 's/^/  /' >&2
    fi
  done
fi
exit $status
