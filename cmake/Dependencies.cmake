# Every dependency comes from Debian 12 (deploy/install-deps.sh installs them). Debian ships no protobuf CMake
# config, so Protobuf is found in MODULE mode; gRPC and Abseil through their CMake configs; libibverbs through
# pkg-config.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(absl CONFIG REQUIRED)
# Debian ships no protobuf CMake config: MODULE mode.
find_package(Protobuf 3.21 MODULE REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(OpenSSL REQUIRED)          # SHA-256 for the topology fingerprint
# The HTTP server of hccl-tuned's /metrics (daemon/metrics_http.cc). Found by hand: libcivetweb-dev ships no
# pkg-config file, and its CMake config also requires the civetweb executable (another package).
find_path(CIVETWEB_INCLUDE_DIR civetweb.h REQUIRED)
find_library(CIVETWEB_LIBRARY civetweb REQUIRED)
add_library(Civetweb::civetweb INTERFACE IMPORTED)
target_include_directories(Civetweb::civetweb INTERFACE ${CIVETWEB_INCLUDE_DIR})
target_link_libraries(Civetweb::civetweb INTERFACE ${CIVETWEB_LIBRARY} ${CMAKE_DL_LIBS})
find_package(nlohmann_json 3 CONFIG REQUIRED)
find_package(CLI11 CONFIG QUIET)
if(NOT CLI11_FOUND)
  find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE ${CLI11_INCLUDE_DIR})
endif()
pkg_check_modules(IBVERBS REQUIRED IMPORTED_TARGET libibverbs)
pkg_check_modules(SYSTEMD REQUIRED IMPORTED_TARGET libsystemd)
# UCX (libucx-dev) for the ucx transport: optional, so a build without it still works (no link=ucx).
option(HCCL_TUNE_UCX "Build the ucx transport when UCX is found" ON)
set(HCCL_TUNE_HAVE_UCX OFF)
if(HCCL_TUNE_UCX)
  pkg_check_modules(UCX IMPORTED_TARGET ucx)
  if(UCX_FOUND)
    set(HCCL_TUNE_HAVE_UCX ON)
  else()
    message(STATUS "UCX not found (pkg-config ucx): building without the ucx transport")
  endif()
endif()
# PMIx (libpmix-dev) for the launchers' rendezvous through their PMIx server (srun --mpi=pmix, Open MPI's mpirun;
# runtime/bootstrap/pmix_rendezvous.cc): optional, so a build without it derives the rendezvous from the launcher's
# variables. pkg-config gives the headers (under pmix2/include); the library is linked from the standard library
# directory, where Debian's libpmix2 puts libpmix.so.2, so no run path is baked in.
option(HCCL_TUNE_PMIX "Build the PMIx rendezvous client when PMIx is found" ON)
set(HCCL_TUNE_HAVE_PMIX OFF)
if(HCCL_TUNE_PMIX)
  pkg_check_modules(PMIX QUIET pmix)
  find_library(PMIX_LIBRARY NAMES pmix PATHS ${PMIX_LIBRARY_DIRS})
  if(PMIX_FOUND AND PMIX_LIBRARY)
    add_library(HccltunePmix::pmix INTERFACE IMPORTED)
    target_include_directories(HccltunePmix::pmix INTERFACE ${PMIX_INCLUDE_DIRS})
    target_link_libraries(HccltunePmix::pmix INTERFACE ${PMIX_LIBRARY})
    set(HCCL_TUNE_HAVE_PMIX ON)
  else()
    message(STATUS "PMIx not found (pkg-config pmix): building without the PMIx rendezvous")
  endif()
endif()
if(HCCL_TUNE_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
endif()
if(HCCL_TUNE_BUILD_BENCHMARKS)
  find_package(benchmark CONFIG REQUIRED)
endif()
