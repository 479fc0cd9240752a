// Node identity and the topology fingerprint (../shared/CONVENTIONS.md, Node identity / Topology fingerprint).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/common/config.h"

namespace hccltune {

// HCCL_TUNE_NODE_ID when set, otherwise "<boot id>/<network namespace inode>": two ranks share a node exactly
// when they share both (each network namespace of an emulated cluster is its own node).
std::string LocalNodeId(const Environment& env);

struct TopologyFacts {
  std::vector<int> ranks_per_node;          // one count per node
  std::vector<std::string> intra_links;     // link classes inside a node ("shm" when some node has >= 2 ranks)
  std::vector<std::string> inter_networks;  // subnets every node has an interface in (multi-node only)
  std::string release;                      // "major.minor"
};

// Canonical JSON (sorted keys, no spaces) as CONVENTIONS.md defines it.
std::string TopologyJson(const TopologyFacts& facts);
// First 16 hex digits of SHA-256 of `json`.
std::string Fingerprint(const std::string& json);
// Lower-case hex SHA-256.
std::string Sha256Hex(const std::string& data);

}  // namespace hccltune
