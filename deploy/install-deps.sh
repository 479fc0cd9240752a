#!/usr/bin/env bash
# Installs every Debian 12 package that building, testing and running hccl-tune needs.
# Idempotent: installs only what is missing; runs `apt-get update` at most once per call.
# Usage: deploy/install-deps.sh            (as root, or via sudo when available)
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build pkg-config ccache git
  # the style test (tests/style/clang_format.sh)
  clang-format
  # the libFuzzer targets (cmake -DHCCL_TUNE_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++; tests/fuzz/): clang 14 and its
  # runtime libraries (libclang_rt.fuzzer, asan, ubsan: only a recommendation of clang, so named here)
  clang libclang-rt-14-dev
  # libraries
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libsqlite3-dev sqlite3 libibverbs-dev
  # the ucx transport (runtime/transport/ucx): UCP headers and libraries; ucx_perftest, UCX's own point-to-point
  # ceiling that the ucx send/recv figure of docs/PERFORMANCE.md is measured against
  libucx-dev ucx-utils
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libsystemd-dev
  # systemd-analyze (the unit test of deploy/hccl-tuned.service); the unit under a real systemd (debootstrap,
  # systemd-nspawn)
  systemd debootstrap systemd-container
  # the Debian packages (deploy/package.sh: CPack's dpkg-shlibdeps, lintian)
  dpkg-dev lintian
  # PyTorch backend (python/) for /usr/bin/python3: torch 1.13, its C++ headers, pybind11
  python3-torch libtorch-dev pybind11-dev python3-dev
  # tests/perf/init_time.sh: Gloo from C++ (hccltune-init-time-gloo), init time against hccl-tune's
  libgloo-dev
  # hccl-tune sweep --runtime openmpi|mpich: both MPI libraries, their compiler wrappers (the MPI bench is built with
  # each), and ltrace for the test that watches which Open MPI algorithm function a rules file makes run
  openmpi-bin libopenmpi-dev mpich libmpich-dev ltrace
  # tests/launchers/: a one-node Slurm started by the test (srun, slurmctld, slurmd, sinfo; its pmix plugin for
  # srun --mpi=pmix) and its munge
  slurm-wlm munge
  # the rendezvous through a launcher's PMIx server (runtime/bootstrap/pmix_rendezvous.cc): optional at build time
  libpmix-dev
  # hccl-tuned's /metrics endpoint (daemon/metrics_http.cc): an embedded HTTP server; its test scrapes it with a
  # real Prometheus server
  libcivetweb-dev prometheus
  # tests: process and network tooling; openssl makes the certificates of the daemon's TLS test
  iproute2 procps util-linux openssl
  # tests of the emulated cluster (deploy/cluster/): JSON checks
  jq
  # tests: the sweep and daemon process tests parse JSON with python3
  python3
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "install-deps: missing packages (${missing[*]}) and not root; run as root" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
