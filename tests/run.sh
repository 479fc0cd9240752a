#!/usr/bin/env bash
# The project's test command: installs dependencies, configures, builds with all cores and runs ctest.
# Exits non-zero on any failure.
#
#   tests/run.sh                 everything but `slow` (CI)
#   tests/run.sh -L unit         only the fast set (any ctest arguments pass through)
#   tests/run.sh -L slow         the slow tests (torch's whole distributed suite, ...)
#   BUILD_DIR=build-asan HCCL_TUNE_SANITIZE=address tests/run.sh -L sanitize
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

deploy/install-deps.sh

build_dir=${BUILD_DIR:-build}
generator=()
if [[ ! -f "$build_dir/CMakeCache.txt" ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
  -DHCCL_TUNE_SANITIZE="${HCCL_TUNE_SANITIZE:-}"
cmake --build "$build_dir" --parallel "$(nproc)"

cd "$build_dir"
# Default: everything but tests labelled `slow` (minutes to hours; run them with `tests/run.sh -L slow`).
args=("$@")
((${#args[@]})) || args=(-LE slow)
ctest --output-on-failure --parallel "$(nproc)" --timeout 900 "${args[@]}"
