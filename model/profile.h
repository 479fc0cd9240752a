// A cluster profile: the parameters of the cost model (model/predict.h) for one kind of cluster — the link inside a
// node, the network between nodes, reduction speed and cores. Read from JSON (docs/MODEL.md, "Profiles"):
//
//   {"name": "hccs-roce",
//    "intra": {"latency_us": 2.0, "message_us": 0.3, "bandwidth_GBps": 30.0},  // rank to rank inside a node
//    "inter": {"latency_us": 6.0, "message_us": 1.0, "bandwidth_GBps": 12.5},  // one NIC, each direction
//    "nics_per_node": 8, "reduce_GBps": 40.0, "cores_per_node": 0}
//
// latency_us: one message round (alpha); message_us: each message a rank sends (its overhead, o); GBps: 10^9 bytes
// per second; cores_per_node 0 = never oversubscribed. Without "inter" the profile knows no network between nodes
// (fitted from one-node measurements): predictions across nodes are refused.
// Thread-safety: values.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hccltune::model {

struct LinkCost {
  double alpha_s = 0;     // seconds per message round
  double overhead_s = 0;  // seconds per message sent
  double beta_s = 0;      // seconds per byte
};

struct ClusterProfile {
  std::string name;
  LinkCost intra;
  LinkCost inter;           // per NIC
  int nics_per_node = 1;    // a node's ranks share this many NICs
  double gamma_s = 0;       // seconds per byte reduced
  int cores_per_node = 0;   // 0: as many cores as ranks
  bool inter_known = true;  // false: fitted from one-node measurements only (no prediction across nodes)
};

// The profile as the JSON ParseProfile reads ("inter" left out when not known).
std::string ProfileToJson(const ClusterProfile& profile);

// Errors name the source (a file name or "profile") and the key: "profile x.json: inter.bandwidth_GBps must be a
// number > 0 (got -1)".
absl::StatusOr<ClusterProfile> ParseProfile(absl::string_view json_text, absl::string_view source);
absl::StatusOr<ClusterProfile> ReadProfileFile(const std::string& path);

}  // namespace hccltune::model
