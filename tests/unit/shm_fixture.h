// Shm domains and endpoints for tests that run ranks as threads of one process (transport_test, mailbox_test).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/transport/shm/shm_transport.h"
#include "runtime/transport/stream_endpoint.h"

namespace hccltune::shmtest {

// Builds n shm domains (one per "rank") in this process. Single copy is off unless asked for (these tests are
// about the ring); options[r] applies to rank r when given.
inline ShmOptions RingOnly() {
  ShmOptions o;
  o.single_copy = false;
  return o;
}

inline std::vector<std::unique_ptr<ShmDomain>> MakeShm(int n, size_t ring, std::vector<ShmOptions> options = {}) {
  std::vector<int> ranks(static_cast<size_t>(n));
  std::iota(ranks.begin(), ranks.end(), 0);
  std::vector<std::unique_ptr<ShmDomain>> d;
  std::map<int, std::string> names;
  static std::atomic<int> made{0};
  const std::string prefix = absl::StrCat("hccltune-test-", ::getpid(), "-", n, "-", ring, "-", made++);
  options.resize(static_cast<size_t>(n), options.empty() ? RingOnly() : options.back());
  for (int r = 0; r < n; ++r) {
    auto dom = ShmDomain::Create(r, ranks, ring, prefix, options[static_cast<size_t>(r)]);
    EXPECT_TRUE(dom.ok()) << dom.status();
    names[r] = (*dom)->segment_name();
    d.push_back(*std::move(dom));
  }
  for (auto& dom : d) EXPECT_TRUE(dom->MapPeers(names).ok());
  for (auto& dom : d) dom->Unlink();
  return d;
}

inline std::vector<Pair*> ShmPairs(ShmDomain& d, int n, int me) {
  std::vector<Pair*> p(static_cast<size_t>(n), nullptr);
  for (int r = 0; r < n; ++r) {
    if (r != me) p[static_cast<size_t>(r)] = d.pair(r);
  }
  return p;
}

// One endpoint per domain, 20 s timeout.
inline std::vector<std::unique_ptr<StreamEndpoint>> Endpoints(std::vector<std::unique_ptr<ShmDomain>>& doms) {
  const int n = static_cast<int>(doms.size());
  std::vector<std::unique_ptr<StreamEndpoint>> eps;
  for (int r = 0; r < n; ++r) {
    eps.push_back(std::make_unique<StreamEndpoint>(r, ShmPairs(*doms[static_cast<size_t>(r)], n, r),
                                                   doms[static_cast<size_t>(r)]->doorbell(), absl::Seconds(20)));
  }
  return eps;
}

// A receive-and-reduce combiner for tests: out = local + in over int64 elements; `in` may be unaligned (it points
// into the ring).
inline void AddInt64(const Combiner&, void* out, const void* local, const void* in, size_t elems) {
  for (size_t i = 0; i < elems; ++i) {
    int64_t a, b;
    std::memcpy(&a, static_cast<const char*>(local) + 8 * i, 8);
    std::memcpy(&b, static_cast<const char*>(in) + 8 * i, 8);
    a += b;
    std::memcpy(static_cast<char*>(out) + 8 * i, &a, 8);
  }
}

}  // namespace hccltune::shmtest
