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

# Symmetric memory takes 2 MiB pages from the hugetlb pool when it has them (HCCL_TUNE_HUGE_PAGES). So that
# both paths run here, a root run on a machine whose pool is empty reserves 160 pages (320 MiB) for the tests and
# gives them back at the end; HCCL_TUNE_TEST_HUGE_PAGES=0 leaves the pool alone. A marker file ("PID PAGES") names
# the run that holds the reservation, so the next run gives back what a killed run (SIGKILL: no exit trap) left.
pool=/proc/sys/vm/nr_hugepages
marker=/run/hccl-tune-tests.huge-pages
if [[ $(id -u) == 0 && -f $marker ]]; then
  read -r held_by held < "$marker" || true
  if ! [[ ${held_by:-} =~ ^[1-9][0-9]*$ ]] || ! kill -0 "$held_by" 2>/dev/null; then
    if [[ -w $pool && $(cat $pool) == "${held:-}" ]]; then
      echo 0 > $pool || true
      echo "tests/run.sh: gave back the $held huge pages of an earlier run that was killed (pid $held_by)"
    fi
    rm -f "$marker"
  fi
fi
if [[ ${HCCL_TUNE_TEST_HUGE_PAGES:-1} != 0 && $(id -u) == 0 && -w $pool && $(cat $pool) == 0 ]]; then
  echo 160 > $pool || true
  echo "$$ $(cat $pool)" > "$marker" || true
  trap 'echo 0 > '$pool' || true; rm -f '$marker EXIT
  echo "tests/run.sh: reserved $(cat $pool) huge pages for the tests (released at exit)"
fi

# The flight-recorder dumps of the tests' deliberate timeouts and failures go to a scratch directory, not /tmp's
# default one (tests that read dumps set their own).
fr_dir=$(mktemp -d /tmp/hccl-tune-test-fr.XXXXXX)
export HCCL_TUNE_FR_DUMP_DIR=${HCCL_TUNE_FR_DUMP_DIR:-$fr_dir}

cd "$build_dir"
# Default: everything but tests labelled `slow` (minutes to hours; run them with `tests/run.sh -L slow`).
args=("$@")
((${#args[@]})) || args=(-LE slow)
ctest --output-on-failure --parallel "$(nproc)" --timeout 900 "${args[@]}"
cd "$root"

# The runtime tests again under AddressSanitizer + UndefinedBehaviorSanitizer, and the algorithm suites and the shm
# transport under ThreadSanitizer (only the targets they need are built). HCCL_TUNE_SKIP_SANITIZERS=1 skips this part; it
# also does not run when ctest arguments were given (a developer running a chosen set).
if [[ ${HCCL_TUNE_SKIP_SANITIZERS:-0} != 1 && $# -eq 0 && -z ${HCCL_TUNE_SANITIZE:-} ]]; then
  for pass in "address,undefined:sanitize:build-asan" "thread:tsan:build-tsan"; do
    IFS=: read -r sanitizers label dir <<<"$pass"
    gen=()
    [[ -f "$dir/CMakeCache.txt" ]] || ! command -v ninja >/dev/null || gen=(-G Ninja)
    cmake -S . -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHCCL_TUNE_SANITIZE="$sanitizers" \
      -DHCCL_TUNE_BUILD_BENCHMARKS=OFF >/dev/null
    if [[ $label == tsan ]]; then
      cmake --build "$dir" --parallel "$(nproc)" --target algorithms_kernels_test algorithms_pattern_test \
        algorithms_collectives_test transport_test transport_return_test mailbox_test flight_ring_test link_usage_test
    else
      cmake --build "$dir" --parallel "$(nproc)" --target transport_test transport_return_test mailbox_test communicator_test \
        link_usage_test \
        communicator_api_test flight_ring_test bootstrap_test fault_test symmetric_test algorithms_kernels_test algorithms_pattern_test \
        algorithms_collectives_test tuning_switch_test numerics_test rdma_test
    fi
    # UCX's libucm hooks mmap by patching the process's relocations; under ThreadSanitizer's own mmap interceptor
    # that crashes every binary linking UCX at its first mmap: docs/TRANSPORTS.md, Sanitizer builds.
    (cd "$dir" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 TSAN_OPTIONS=halt_on_error=1 \
      UCX_MEM_MMAP_HOOK_MODE=none \
      ctest --output-on-failure --parallel "$(nproc)" --timeout 900 -L "$label")
  done
fi
rm -rf "$fr_dir"
