// Link inspector: for each pair of ranks of a communicator, the links between them — type (shm inside a node,
// the HCCS class; tcp between nodes; roce/ib once that transport exists), the network (subnet) and the interface
// and address each side uses, and *measured* bandwidth and latency — for the default link and, between nodes, for
// every network both nodes have an interface in (so a slow management network next to a fast one shows up as
// such). Also the link each of this rank's pairs actually used for its last collective (Used), so a program can
// check it is not on the slow network. `hccl-tune links` and the PyTorch backend's hccl_tune_torch.LinkInspector
// are this code.
//
// Measure() is collective: every rank of `comm` calls it. It runs on sub-communicators of its own (Split), so
// `comm`'s links in use (Communicator::LinksUsed) stay those of the program's calls. Pairs are measured one at a
// time over a two-rank sub-communicator, the other ranks waiting: latency is half the median round trip of an
// 8-byte message, bandwidth the median of `bytes` sent one way and acknowledged (minus that latency). Cost: one
// communicator setup per pair plus, per link, (latency_iters + 3) round trips and (iters + 1) messages of `bytes`;
// 3 ranks on one node with the defaults take about a second. Afterwards every rank holds every pair's results.
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
  int src = 0, dst = 0;          // src < dst; links are symmetric
  std::string type;              // "shm" or "tcp"
  std::string network;           // tcp: the subnet ("10.77.1.0/24"); shm: ""
  std::string src_interface;     // tcp: src's interface on that network; shm: ""
  std::string dst_interface;     // tcp: dst's interface on that network
  std::string src_address;       // tcp: src's address on that network
  std::string dst_address;       // tcp: dst's address on that network
  bool is_default = false;       // the link a configuration with link=auto uses
  double bandwidth_gbps = 0;     // Gbit/s (1e9 bit/s)
  double latency_us = 0;         // one way, microseconds
  std::string source;            // "measured" (by Measure) or "stored" (FromStored: read from the node daemon)
  int64_t measured_unix_ms = 0;  // when
  nlohmann::json ToJson() const;
  // InvalidArgument naming the first missing or mistyped field.
  static absl::StatusOr<LinkInfo> FromJson(const nlohmann::json& j);
};

// The link one of this rank's pairs used for its last collective (Communicator::LinksUsed, each address resolved
// to this host's interface and its subnet).
struct UsedLink {
  int src = 0, dst = 0;      // src is this rank
  std::string type;          // "shm" or "tcp"
  std::string network;       // tcp: the subnet of src's interface on the connection; shm: ""
  std::string interface;     // tcp: src's interface; shm: ""
  std::string address;       // tcp: src's address
  std::string peer_address;  // tcp: dst's address
  int lanes = 0;             // TCP connections (channels); 1 for shm
  uint32_t operation = 0;    // the collective's operation number
  nlohmann::json ToJson() const;
};

struct LinkInspectorOptions {
  uint64_t bytes = 4u << 20;  // bandwidth message size
  int iters = 3;              // bandwidth iterations (after one warm-up)
  int latency_iters = 20;     // round trips (after a few warm-up ones)
};

class LinkInspector {
 public:
  // Collective over `comm` (see the file comment). InvalidArgument for bytes == 0 or iterations < 1.
  static absl::StatusOr<LinkInspector> Measure(Communicator& comm, const Environment& env,
                                               const LinkInspectorOptions& opt = {});
  // A table as ToJson() writes it ({"ranks": N, "links": [...]}). DataLoss naming what is wrong.
  static absl::StatusOr<LinkInspector> FromJson(const nlohmann::json& j);

  // A table the node daemon stored for this topology (`hccl-tune links` stores what it measures), as FromJson reads
  // it, every link's source set to "stored" (measured_unix_ms stays when it was measured). `ranks` is the group's
  // size: FailedPrecondition naming both when the table is of another size.
  static absl::StatusOr<LinkInspector> FromStored(const nlohmann::json& j, int ranks);

  int ranks() const { return ranks_; }
  // When the newest of the table's links was measured (0 for an empty table).
  int64_t measured_unix_ms() const;
  // The default link between two ranks (either order). InvalidArgument for a rank outside the group or src == dst.
  absl::StatusOr<LinkInfo> get_link(int src, int dst) const;
  // The pair's link with the highest measured bandwidth (the default one on a tie).
  absl::StatusOr<LinkInfo> best_link(int src, int dst) const;
  // Every measured link of every pair (default and alternatives), by pair, then network.
  const std::vector<LinkInfo>& links() const { return links_; }
  nlohmann::json ToJson() const;

  // This rank's pairs' links in use (not collective). Used() lists every peer that took part in a collective
  // with this rank; UsedBetween() one pair, which must include this rank (InvalidArgument otherwise: a rank
  // knows its own links only), NotFound before the pair's first collective.
  static std::vector<UsedLink> Used(const Communicator& comm);
  static absl::StatusOr<UsedLink> UsedBetween(const Communicator& comm, int src, int dst);

 private:
  absl::Status CheckPair(int src, int dst) const;

  int ranks_ = 0;
  std::vector<LinkInfo> links_;
};

}  // namespace hccltune
