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
//
// "version": 2 (what `model fit` writes) adds, each optional (0 / unknown when left out):
//   "call_us": 0.2                                      every call's own cost, whatever its algorithm
//   "mailbox_us": 1.0                                   one mailbox exchange (a small call's form on one node)
//   "oversubscribed": {"call_us": 3, "round_us": 1, "byte_ns": 0.1}   waiting for a core when a node has more
//                                                       busy ranks than cores: per call, per round, per byte,
//                                                       each times (busy ranks - cores) / cores
//   "intra_tcp": {link}                                 link=tcp between ranks of one node (loopback)
//   "inter_oversubscribed": {...}                       as "oversubscribed", for the calls across nodes: per call,
//                                                       per round and per byte between nodes (fitted with "inter")
//   "cores_shared": true                                every node's ranks share the same cores_per_node cores
//                                                       (nodes emulated on one host): the wait counts all ranks
//   "single_copy_bytes": 8192                           the smallest shm message the node's receivers read by
//                                                       single copy when each rank has a core (twice that when
//                                                       they outnumber the cores); 0 or absent: none is
// and drops version 1's "everything times l/cores" (model/predict.h). Without "version" a profile is version 1 and
// predicts as it always did; version 1 refuses the keys above.
// Thread-safety: values.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hccltune::model {

struct LinkCost {
  double alpha_s = 0;     // seconds per message round
  double overhead_s = 0;  // seconds per message sent
  double beta_s = 0;      // seconds per byte
};

// What waiting for a core costs when a node has more busy ranks than cores (version 2), per rank beyond the
// cores per core: the prediction multiplies each by (l - cores) / cores.
struct Oversubscribed {
  double call_s = 0;   // once per call
  double round_s = 0;  // per message round or mailbox exchange
  double byte_s = 0;   // per byte a rank sends or receives
};

inline constexpr int kProfileVersion = 2;  // what Fit writes; 1 = the form before mailbox/oversubscribed/intra_tcp

struct ClusterProfile {
  std::string name;
  int version = 1;  // 1 or kProfileVersion (the JSON's "version"; absent = 1)
  LinkCost intra;
  LinkCost inter;           // per NIC
  int nics_per_node = 1;    // a node's ranks share this many NICs
  double gamma_s = 0;       // seconds per byte reduced
  int cores_per_node = 0;   // 0: as many cores as ranks
  bool inter_known = true;  // false: fitted from one-node measurements only (no prediction across nodes)
  // Version 2 only:
  double call_s = 0;     // every call, whatever its algorithm
  double mailbox_s = 0;  // one mailbox exchange
  Oversubscribed oversubscribed;
  LinkCost intra_tcp;            // link=tcp inside a node
  bool intra_tcp_known = false;  // false: link=tcp on one node is not predicted
  bool cores_shared = false;     // every node's ranks share cores_per_node cores (an emulated cluster on one host)
  Oversubscribed inter_oversubscribed;  // the same wait across nodes (a blocked rank woken by the network)
  uint64_t single_copy_bytes = 0;       // smallest shm message read by single copy, a core per rank (0: none)
};

// The profile as the JSON ParseProfile reads ("inter" left out when not known).
std::string ProfileToJson(const ClusterProfile& profile);

// Errors name the source (a file name or "profile") and the key: "profile x.json: inter.bandwidth_GBps must be a
// number > 0 (got -1)".
absl::StatusOr<ClusterProfile> ParseProfile(absl::string_view json_text, absl::string_view source);
absl::StatusOr<ClusterProfile> ReadProfileFile(const std::string& path);

}  // namespace hccltune::model
