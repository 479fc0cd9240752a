#!/usr/bin/env bash
# Quick start: installs dependencies, builds hccl-tune, starts hccl-tuned with user-mode paths, sweeps this node
# over a small default space (allreduce fp32 on 2 local ranks, 4K..4M; well under 3 minutes on 2 cores), prints
# the winners and looks one size up with `hccl-tune get`. Works as root on a fresh machine after install-deps.
#   QUICKSTART_KEEP_DAEMON=1  leave hccl-tuned running afterwards (default: stopped; the table stays in its DB)
#   SKIP_DEPS=1               do not run deploy/install-deps.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

[[ ${SKIP_DEPS:-0} == 1 ]] || deploy/install-deps.sh
build_dir=${BUILD_DIR:-build}
generator=()
if [[ ! -f "$build_dir/CMakeCache.txt" ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build_dir" --parallel "$(nproc)" --target hccl-tune hccl-tuned

bin="$build_dir/tuner/hccl-tune"
tuned="$build_dir/daemon/hccl-tuned"
"$bin" --version

# User-mode paths (also as root): the socket under the runtime dir, the database under the state dir.
run_dir=${XDG_RUNTIME_DIR:-/tmp/hccl-tune-$(id -u)}/hccl-tune-quickstart
state_dir=${XDG_STATE_HOME:-${HOME:-/root}/.local/state}/hccl-tune
mkdir -p "$run_dir" "$state_dir"
sock="$run_dir/tuned.sock"
"$tuned" --socket "$sock" --db "$state_dir/tuning.db" --sweep-command "$(realpath "$bin")" --log-level warn &
tuned_pid=$!
cleanup() { [[ ${QUICKSTART_KEEP_DAEMON:-0} == 1 ]] || kill "$tuned_pid" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.1; done
[[ -S $sock ]] || { echo "quickstart: hccl-tuned did not start" >&2; exit 1; }
echo "== hccl-tuned listening on unix:$sock (database $state_dir/tuning.db) =="

echo "== hccl-tuned sweeps this node: allreduce fp32, 2 ranks, 4K..4M =="
# The build just ran, so the load average is high for a minute: the quiet check warns, --force goes on.
# --via-daemon: the daemon runs the sweep and streams its progress here (Ctrl-C detaches; the sweep goes on).
out=$(mktemp)
"$bin" sweep --via-daemon --daemon "unix:$sock" --ranks 2 --coll allreduce --dtype fp32 \
  --min-bytes 4K --max-bytes 4M --step 4 --links shm --cap-ms 100 --force --plain | tee "$out"
topology=$(sed -n 's/.*topology \([0-9a-f]\{16\}\).*/\1/p' "$out" | head -1)
rm -f "$out"

echo "== hccl-tune get: the tuned choice for a 1M allreduce on 2 ranks =="
"$bin" get --daemon "unix:$sock" --coll allreduce --dtype fp32 --bytes 1M --world 2 --topology "$topology"
echo "== done: report with: $bin report --daemon unix:$sock --out sweep.html =="
