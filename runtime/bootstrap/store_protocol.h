// The TCP rendezvous store's wire protocol and the server's data, apart from the sockets, so the parser is
// tested and fuzzed on its own (tests/fuzz/).
//
//   hello:              client: u32 magic "HTST", u32 version, the job handshake's offer; server: u32 magic,
//                       u32 version, the handshake's challenge; client (both holding a secret): the proof
//                       (runtime/common/job_auth.h). A server that refuses the connection (too many clients)
//                       answers u32 magic, u32 kRefused, then a string saying why, and closes.
//   request:            u8 op, string key, [string value: set and add]      (string = u32 length + bytes)
//   reply:              u8 status (1 ok/found, 0 not found), [string: get and add]
//                       or kReplyError, u8 absl status code, string message. After a request the server cannot
//                       parse (garbage, a length over its bound) the server closes the connection; a request
//                       over a store limit (keys, stored bytes) is refused and the connection stays usable.
// Integers are host order (every rank of a job runs on the same architecture).
//
// Every length is checked against its bound before anything is allocated; every bound is a named constant or a
// field of StoreLimits, and every refusal names what was wrong and the limit.
//
// Thread-safety: ParseStoreRequest is a pure function; a StoreData is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hccltune::store_protocol {

inline constexpr uint32_t kMagic = 0x48545354;    // "HTST"
inline constexpr uint32_t kVersion = 2;           // 2: the job handshake
inline constexpr uint32_t kRefused = 0xffffffff;  // the hello answer's version when the server turns a client away
enum Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kCheck = 4 };
inline constexpr uint8_t kReplyError = 0xee;

// A key is a short name ("rank/3/addr"); a value is one rank's published block.
inline constexpr size_t kMaxKeyBytes = 4096;
inline constexpr size_t kMaxValueBytes = 64u << 20;
// The longest request: op, key and value with their lengths.
inline constexpr size_t kMaxRequestBytes = 1 + 4 + kMaxKeyBytes + 4 + kMaxValueBytes;
// A refusal or error message a client reads at most.
inline constexpr size_t kMaxMessageBytes = 4096;

// What one server holds and serves at most. The defaults fit a job of kMaxRanks ranks that publish a few keys
// each; tests pass small ones.
struct StoreLimits {
  size_t max_keys = size_t{4} << 20;
  size_t max_stored_bytes = size_t{1} << 30;  // keys and values together
  size_t max_connections = 65536;
  // Input and unsent replies over every connection: beyond it the server stops reading requests until its
  // replies drain (flow control, not an error).
  size_t max_buffered_bytes = size_t{256} << 20;
};

struct Request {
  Op op = kSet;
  std::string key;
  std::string value;
};

// One request from the front of `in`: the bytes it took, 0 when it is not complete yet, or InvalidArgument
// naming what is wrong (an unknown op, a key or value over its bound, an add whose delta is not an integer).
absl::StatusOr<size_t> ParseStoreRequest(absl::string_view in, Request* out);

// Appends a string (u32 length + bytes) to `out`.
void PutString(std::string& out, absl::string_view s);
// Appends an error reply.
void PutError(std::string& out, const absl::Status& status);

// The server's keys and values, with the limits enforced.
class StoreData {
 public:
  explicit StoreData(const StoreLimits& limits) : limits_(limits) {}
  // Applies `req` and appends its reply to `reply`; a request over a limit gets an error reply
  // (ResourceExhausted naming the limit) and changes nothing.
  void Apply(const Request& req, std::string* reply);
  size_t keys() const { return data_.size(); }
  size_t stored_bytes() const { return stored_bytes_; }

 private:
  // Stores `value` at `key` if the limits allow; otherwise the error and nothing changes.
  absl::Status Put(const std::string& key, std::string value);

  StoreLimits limits_;
  std::map<std::string, std::string> data_;
  size_t stored_bytes_ = 0;
};

}  // namespace hccltune::store_protocol
