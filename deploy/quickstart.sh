#!/usr/bin/env bash
# Quick start: installs dependencies, builds hccl-tune and runs the main job on this node.
# Grows with the project (see README): today it builds and prints the algorithm catalogue.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

deploy/install-deps.sh
build_dir=${BUILD_DIR:-build}
generator=()
if [[ ! -f "$build_dir/CMakeCache.txt" ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build_dir" --parallel "$(nproc)"

bin="$build_dir/tuner/hccl-tune"
"$bin" --version
echo "== algorithms and their tunable parameters =="
"$bin" algorithms
