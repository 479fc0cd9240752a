// Rendezvous key-value store used at communicator setup (never on the collective hot path). The interface
// mirrors c10d::Store (set/get/add/check/wait) so that the PyTorch backend can hand torch's store over.
//
// Implementations: MemoryStore (threads in one process), FileStore (a directory on a shared filesystem),
// TcpStore (a server thread in one process, clients everywhere). PrefixStore scopes keys for
// sub-communicators.
//
// Thread-safety: every implementation is safe for concurrent use.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hccltune {

class Store {
 public:
  virtual ~Store() = default;
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;
  // Waits up to `timeout` for the key to exist; DeadlineExceeded names the key.
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) = 0;
  // Atomically adds `delta` to the integer stored at `key` (absent = 0) and returns the new value.
  virtual absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) = 0;
  // Whether every key exists now.
  virtual absl::StatusOr<bool> Check(const std::vector<std::string>& keys) = 0;
  // Waits up to `timeout` until every key exists.
  virtual absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout);
  // Where the data lives, for error messages ("file store /shared/dir", "tcp store host:port").
  virtual std::string Describe() const { return "the rendezvous store"; }
};

// Threads of one process.
std::shared_ptr<Store> NewMemoryStore();
// Files in `dir` (created if missing); works across processes and, on a shared filesystem, across nodes.
absl::StatusOr<std::shared_ptr<Store>> NewFileStore(const std::string& dir);
// Keys of `base` under "prefix/".
std::shared_ptr<Store> NewPrefixStore(std::shared_ptr<Store> base, const std::string& prefix);

// store.Get(key) until `deadline`, in 200 ms slices, asking `probe` between them: a non-OK probe (another rank
// announced a failure) ends the wait with its status instead of waiting out the deadline.
absl::StatusOr<std::string> GetUntil(Store& store, const std::string& key, absl::Time deadline,
                                     const std::function<absl::Status()>& probe);

}  // namespace hccltune
