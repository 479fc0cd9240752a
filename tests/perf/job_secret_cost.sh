#!/usr/bin/env bash
# The job handshake's setup cost, same run: 4 ranks under Open MPI's mpirun, alternately without and with a job
# secret, each timing init and a first barrier forced over TCP (tests/perf/init_time.cc; every store and TCP data
# connection is made, so every handshake is in the time). Prints per job "off|on INIT_MS BARRIER_MS": the last
# rank's end minus the last rank's start (as tests/perf/init_time.sh), and the slowest rank's first barrier (its
# TCP connects with their handshakes, and the barrier).
# Usage: tests/perf/job_secret_cost.sh HCCLTUNE_INIT_TIME_BINARY [REPS (default 10)]
set -euo pipefail
bin=$1 reps=${2:-10}
secret=$(mktemp)
trap 'rm -f "$secret"' EXIT
export HCCL_TUNE_DAEMON=off HCCL_TUNE_ALGO='barrier:0-=dissemination(link=tcp)' HCCL_TUNE_LOG_LEVEL=debug
unset MASTER_ADDR MASTER_PORT RANK WORLD_SIZE HCCL_TUNE_STORE HCCL_TUNE_JOB_SECRET HCCL_TUNE_JOB_SECRET_FILE
head -c 32 /dev/urandom | base64 >"$secret"
chmod 600 "$secret"
run() {
  mpirun.openmpi --oversubscribe --allow-run-as-root -np 4 "$@" "$bin" 2>&1 |
    awk '$1 == "init_ms" { if ($4 > s) s = $4; if ($5 > e) e = $5 }
         / op 1 barrier / { for (i = 1; i <= NF; i++) if ($i == "us") { if ($(i-1) > b) b = $(i-1) } }
         END { printf "%.1f %.1f\n", (e - s) * 1000, b / 1000 }'
}
for ((i = 0; i < reps; i++)); do
  echo "off $(run)"
  echo "on $(run -x HCCL_TUNE_JOB_SECRET_FILE="$secret")"
done
