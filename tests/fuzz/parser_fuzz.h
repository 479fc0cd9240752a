// The fuzz entry points of the parsers that read bytes from a socket or a file (docs/RELIABILITY.md). Each takes
// one fuzzer input and returns a non-OK status when a contract is broken (besides "no crash, no sanitizer
// report"); refusing the input is fine, refusing it without saying why is not. Used by the libFuzzer targets
// (parser_fuzzer.cc, built with -DHCCL_TUNE_FUZZ=ON and clang) and by the plain ctest parser_fuzz_test.
//
//   store_protocol  the TCP rendezvous store's requests (runtime/bootstrap/store_protocol.h), applied to a store
//                   with small limits: the limits hold after every request, every reply is well formed.
//   wire            byte 0 picks: a TCP hello (runtime/transport/tcp/tcp_transport.h), or the bytes a peer sends a
//                   StreamEndpoint receive (read in chunks of byte 0's choosing): every refusal names the peer.
//   rank_table      RANK_TABLE_FILE (runtime/bootstrap/rank_table.h): an accepted table is dense and consistent,
//                   every error names the file.
//   table_file      hccl-tune import (db/table_json.h) into an in-memory store: what is imported exports and
//                   imports again to the same file.
//   daemon_config   hccl-tuned's config file (daemon/daemon_config.h): every error names the file.
//   handlers        up to 8 gRPC requests of hccl-tuned (daemon/handlers.h), each `u8 method, u16 length, that
//                   many bytes of a serialized request`, decoded and handed to the handlers over one in-memory
//                   store: after each, every stored table reads back and validates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace hccltune::fuzz {

using FuzzFunction = absl::Status (*)(const uint8_t* data, size_t size);

absl::Status FuzzStoreProtocol(const uint8_t* data, size_t size);
absl::Status FuzzWire(const uint8_t* data, size_t size);
absl::Status FuzzRankTable(const uint8_t* data, size_t size);
absl::Status FuzzTableFile(const uint8_t* data, size_t size);
absl::Status FuzzDaemonConfig(const uint8_t* data, size_t size);
absl::Status FuzzHandlers(const uint8_t* data, size_t size);

}  // namespace hccltune::fuzz
