// The doctor's reading of flight-recorder dumps (format: docs/TROUBLESHOOTING.md, The flight recorder) and the
// helpers its rules share: one rank's dump of one communicator, its timed calls, and how sizes, times and rank
// lists are written in findings. Fields a dump of an older build lacks (settings, cpu, buffer_overflows, the
// topology fingerprint) read as unknown, and the rules that need them stay silent.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hccltune::doctor {

// One record of a dump, as the doctor reads it.
struct Entry {
  uint32_t seq = 0;
  uint64_t record_id = 0;
  std::string collective, dtype, config, source, state;
  uint64_t bytes = 0;
  int64_t start_ns = 0, end_ns = 0;  // 0: not timed
  int64_t blocked_ns = 0;            // 0: never seen blocked
  double duration_ms = -1;           // < 0: not timed
  bool timed() const { return start_ns != 0 && end_ns != 0; }
};

// Per call-size bucket, the calls whose scratch need exceeded HCCL_BUFFSIZE.
struct BufferOverflow {
  uint64_t min_bytes = 0, max_bytes = 0;  // the calls' sizes, [min, max)
  uint64_t calls = 0, max_need_bytes = 0;
};

// One of the rank's node's interfaces, and per (link kind, interface) what the rank sent (the dump's
// "interfaces" and "links_used"). speed_mbps 0: the kernel did not say.
struct NetInterface {
  std::string name, address, subnet;
  double speed_mbps = 0;
};
struct LinkUse {
  std::string kind, interface, address, subnet;
  uint64_t bytes = 0, cross_node_bytes = 0;
  std::vector<int> peers, peer_nodes;
};

// One rank's dump of one communicator.
struct RankDump {
  std::string path, tag, reason, error, host, node, fingerprint;
  int rank = 0, world = 0, pid = 0, local_ranks = 0, nodes = 0;
  int64_t last_completed = -1, dump_time_ns = 0;
  std::string hccl_algo, tune_algo;
  uint64_t buffsize_bytes = 0;  // 0: unknown
  std::vector<int> affinity;    // CPUs the process may run on; empty: unknown
  int online_cpus = 0;
  double cpu_s = -1, wall_s = -1;  // process CPU and wall time since the recorder was made; < 0: unknown
  std::vector<BufferOverflow> overflows;
  std::vector<NetInterface> interfaces;
  std::vector<LinkUse> links;
  std::string device_ip, host_nic_ip;  // the rank table's ("" without one)
  std::map<uint32_t, Entry> ops;       // by operation number
  // The call this rank is stuck in: its newest record not completed that failed, or was blocked at least
  // `min_blocked_ns` before the dump.
  const Entry* Pending(int64_t min_blocked_ns = 0) const;
  uint32_t LastEntered() const { return ops.empty() ? 0 : ops.rbegin()->first; }
  // Which node the rank ran on: its node id (boot id and network namespace), else its host name.
  const std::string& Where() const { return node.empty() ? host : node; }
};

// One communicator's dumps, by rank.
using Comm = std::vector<RankDump>;

// Parses one dump's text; `name` (its path) names it in errors: InvalidArgument naming the file and what is
// wrong for text that is not a dump.
absl::StatusOr<RankDump> ParseDump(const std::string& name, absl::string_view text);

// A rank's time inside collectives, from its timed calls (the recorder times one call in 64 on every rank, the
// same operations on each): between the start of its first timed call and the end of its last (`span_s`),
// `calls` calls ran (by operation number); `busy_s` estimates their time as calls x the timed calls' mean, at
// most span_s.
struct CommTime {
  int timed = 0;  // timed calls (0 or 1: nothing below is known)
  double mean_ms = 0, span_s = 0, busy_s = 0, share = 0;
  uint64_t calls = 0;
};
CommTime TimeInCalls(const RankDump& d);

// A size as docs/CONVENTIONS.md writes it (1K, 64M), plain bytes with a unit below 1 KiB or off a binary suffix.
std::string Size(uint64_t bytes);
// `digits` decimals.
std::string Fixed(double v, int digits = 1);
// "rank 2" / "ranks 0, 3".
std::string RankList(const std::vector<int>& ranks);
// A duration in the unit that suits it: "850 us", "12.3 ms", "4.1 s".
std::string Duration(double seconds);

}  // namespace hccltune::doctor
