// The topology fingerprint (docs/CONVENTIONS.md, Topology fingerprint): the canonical JSON of what decides which
// configuration is fastest on a set of nodes, its hash (the key of a tuned table), and the topology class (the same
// JSON without the node and rank counts, with its own hash) under which tables measured on one kind of node are
// found for any node count.
//
// Format 2 is written; format 1 (no "runtime", no RDMA ports), written by releases before it, is read as the same
// topology of runtime hccl-tune, so stored tables, export files and older clients keep their meaning:
//
//   {"format":2,"inter":[{"link":"tcp","network":"10.20.0.0/16"},{"gbps":100,"link":"roce","network":"10.30.0.0/16"}],
//    "intra":["shm"],"nodes":2,"ranks_per_node":[8,8],"release":"0.1","runtime":"hccl-tune"}
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hccltune {

// The fingerprint format this build writes; it reads 1 and 2.
inline constexpr int kTopologyFormat = 2;
inline constexpr char kOwnRuntime[] = "hccl-tune";

// One network between nodes: TCP over a subnet, or an RDMA port's link layer on it.
struct InterLink {
  std::string link;     // "tcp", "roce" or "ib"
  std::string network;  // the subnet ("10.20.0.0/16"), never an interface or device name (they differ by node)
  double gbps = 0;      // RDMA: the port's nominal speed in Gb/s (not a measurement); TCP: 0, not in the JSON

  friend bool operator==(const InterLink&, const InterLink&) = default;
};

// What the canonical JSON holds.
struct TopologyDescription {
  std::vector<int> ranks_per_node;    // one count per node; "nodes" is its size
  std::vector<std::string> intra;     // link classes inside a node ("shm" when a node has two ranks or more)
  std::vector<InterLink> inter;       // networks every node has an address (or port) on
  std::string release;                // "major.minor" of the hccl-tune that measures, never a git hash
  std::string runtime = kOwnRuntime;  // "hccl-tune", or a tuned peer runtime and its major.minor ("openmpi-4.1")

  friend bool operator==(const TopologyDescription&, const TopologyDescription&) = default;
};

// Canonical format-2 JSON: keys sorted, no spaces; ranks_per_node, intra and inter sorted (inter by link, then
// network, then speed); a whole gbps is written as an integer.
std::string CanonicalTopologyJson(const TopologyDescription& d);
// The topology class: CanonicalTopologyJson without "nodes" and "ranks_per_node".
std::string TopologyClassJson(const TopologyDescription& d);
// The format-1 JSON of the same topology, byte for byte what releases before format 2 wrote; nullopt when format 1
// cannot say it (a peer runtime, an RDMA port).
std::optional<std::string> Format1TopologyJson(const TopologyDescription& d);

// Reads format 1 or 2 in any key or element order. InvalidArgument naming the field for a malformed JSON (unknown
// fields included: the fingerprint covers exactly these); FailedPrecondition for a format this build does not know.
absl::StatusOr<TopologyDescription> ParseTopologyJson(absl::string_view json);

// Lower-case hex SHA-256.
std::string Sha256Hex(absl::string_view data);
// The first 16 hex digits of the SHA-256 of `json`: a topology's fingerprint, a class JSON's class hash.
std::string Fingerprint(absl::string_view json);

// A topology's names: canonical format-2 JSON, its fingerprint, its class hash.
struct TopologyKeys {
  std::string json;
  std::string fingerprint;
  std::string topology_class;
};
TopologyKeys KeysOf(const TopologyDescription& d);
// ParseTopologyJson then KeysOf: a format-1 JSON gets its format-2 names.
absl::StatusOr<TopologyKeys> CanonicalTopology(absl::string_view json);

// OK when `hash` is 16 lower-case hex digits (a fingerprint or a class hash); `what` names it in the error.
absl::Status ValidateTopologyHash(absl::string_view hash, absl::string_view what);

}  // namespace hccltune
