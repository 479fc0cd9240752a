// Thread-per-rank fixture: N communicators in one process over a MemoryStore (real shm and TCP transports).
#pragma once

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "runtime/api/communicator.h"
#include "runtime/bootstrap/store.h"
#include "runtime/common/config.h"

namespace hccltune::testing {

// Short timeouts for tests; small buffers so messages are staged through the rings.
inline Environment TestEnv() {
  Environment e;
  e.connect_timeout_s = 20;
  e.exec_timeout_s = 20;
  e.buffsize_bytes = 2u << 20;
  return e;
}

// Whether `s`'s message names `what` (errors are checked by what they say, not only by their code).
inline bool Contains(const absl::Status& s, absl::string_view what) {
  return s.message().find(what) != absl::string_view::npos;
}

// Runs fn(rank, comm) on n threads after creating the communicators; returns each rank's status.
inline std::vector<absl::Status> RunRanks(int n, const std::function<absl::Status(int, Communicator&)>& fn,
                                          const std::function<Environment(int)>& env_for = nullptr) {
  auto store = NewMemoryStore();
  std::vector<absl::Status> st(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto comm = Communicator::Create(r, n, store, env_for ? env_for(r) : TestEnv());
      if (!comm.ok()) {
        st[static_cast<size_t>(r)] = comm.status();
        return;
      }
      st[static_cast<size_t>(r)] = fn(r, **comm);
    });
  }
  for (auto& t : threads) t.join();
  return st;
}

}  // namespace hccltune::testing
