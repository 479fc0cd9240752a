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
find_package(nlohmann_json 3 CONFIG REQUIRED)
find_package(CLI11 CONFIG QUIET)
if(NOT CLI11_FOUND)
  find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE ${CLI11_INCLUDE_DIR})
endif()
pkg_check_modules(IBVERBS REQUIRED IMPORTED_TARGET libibverbs)
pkg_check_modules(SYSTEMD REQUIRED IMPORTED_TARGET libsystemd)
if(HCCL_TUNE_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
endif()
if(HCCL_TUNE_BUILD_BENCHMARKS)
  find_package(benchmark CONFIG REQUIRED)
endif()
