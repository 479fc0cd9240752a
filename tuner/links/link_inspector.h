// Link inspector: for each pair of ranks, the link the runtime uses between them (shm inside a node, tcp
// between nodes; roce once that transport exists), the interface, and *measured* bandwidth and latency —
// for the default link and, between nodes, for every network both nodes have an interface in (so a slow
// management network next to a fast one shows up as such).
//
// Measure() is collective: every rank of `comm` calls it. Pairs are measured one at a time over a two-rank
// sub-communicator (Split), the other ranks waiting; latency is half the median round trip of a small
// message, bandwidth the median of `bytes` sent one way and acknowledged. Afterwards every rank holds every
// pair's results.
//
// Thread-safety: Measure() uses `comm` like any collective; a LinkInspector is an immutable value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/api/communicator.h"
#include "runtime/common/config.h"

namespace hccltune {

struct LinkInfo {
  int src = 0, dst = 0;       // src < dst; links are symmetric
  std::string type;           // "shm" or "tcp"
  std::string network;        // tcp: the subnet ("10.77.1.0/24"); shm: ""
  std::string interface;      // tcp: src's interface on that network; shm: ""
  std::string peer_address;   // tcp: dst's address used
  bool is_default = false;    // the link a configuration with link=auto uses
  double bandwidth_gbps = 0;  // Gbit/s, measured
  double latency_us = 0;      // one way, measured
  nlohmann::json ToJson() const;
};

struct LinkInspectorOptions {
  uint64_t bytes = 4u << 20;  // bandwidth message size
  int iters = 3;              // bandwidth iterations (after one warm-up)
  int latency_iters = 20;     // round trips (after a few warm-up ones)
};

class LinkInspector {
 public:
  static absl::StatusOr<LinkInspector> Measure(Communicator& comm, const Environment& env,
                                               const LinkInspectorOptions& opt = {});
  // The default link between two ranks (either order).
  absl::StatusOr<LinkInfo> get_link(int src, int dst) const;
  // Every measured link of every pair (default and alternatives), by pair.
  const std::vector<LinkInfo>& links() const { return links_; }
  nlohmann::json ToJson() const;

 private:
  std::vector<LinkInfo> links_;
};

}  // namespace hccltune
