// HCCL rank table (RANK_TABLE_FILE, version 1.0) bootstrap (docs/CONVENTIONS.md, Node identity).
//
//   {"version": "1.0", "server_count": "2", "status": "completed",
//    "server_list": [{"server_id": "node-a",
//                     "device": [{"device_id": "0", "device_ip": "10.77.1.1", "rank_id": "0"}, ...]}, ...]}
//
// Values are strings, as HCCL writes them. Every process reads the whole table, so mistakes are found at once,
// before any rendezvous: duplicate rank_id, rank ids that are not 0..N-1, two ranks bound to the same device of
// one server (the silent deadlock of HCCL jobs: here an error naming both ranks), missing or mistyped fields,
// and an address of this process's rank that no local interface has.
//
// A process's rank is RANK_ID; the world size is the number of devices; the node is the server_id (unless
// HCCL_TUNE_NODE_ID is set); the device is device_id (unless HCCL_TUNE_DEVICE is set); the rendezvous is at
// rank 0's device_ip and HCCL_TUNE_MASTER_PORT (unless HCCL_TUNE_STORE names a store).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/common/config.h"

namespace hccltune {

// Bounds of what a table may hold, checked before anything is stored (a refusal names the limit).
inline constexpr size_t kMaxRankTableBytes = 64u << 20;          // the file
inline constexpr size_t kMaxRankTableRanks = size_t{kMaxRanks};  // devices over every server
inline constexpr int kMaxDeviceId = 65535;
inline constexpr size_t kMaxRankTableFieldBytes = 256;  // server_id, device_ip and every other string

struct RankTableEntry {
  int rank_id = 0;
  int device_id = 0;
  std::string device_ip;
  std::string server_id;
  std::string host_nic_ip;  // the server's host_nic_ip when the table gives one (optional; may be "reserve")
  int local_rank = 0;       // index among the ranks of its server, by rank_id
  int local_size = 1;       // ranks on its server
};

struct RankTable {
  std::vector<RankTableEntry> ranks;  // indexed by rank_id (dense: 0..N-1)
  int world_size() const { return static_cast<int>(ranks.size()); }
};

// Parses and validates a table. `source` (the file name) prefixes every error.
absl::StatusOr<RankTable> ParseRankTable(absl::string_view json_text, absl::string_view source);
absl::StatusOr<RankTable> LoadRankTable(const std::string& path);

// Fills rank, world size, local rank/size, node id, device and rendezvous of `env` for rank `rank_id` of
// `table`. `local_addresses` are this host's IPv4 addresses: the rank's device_ip must be one of them.
absl::Status ApplyRankTable(const RankTable& table, int rank_id, const std::vector<std::string>& local_addresses,
                            Environment* env);

// LoadRankTable(env->rank_table_file) + ApplyRankTable(RANK_ID, this host's interfaces); clears
// env->rank_table_file so the result is a plain env:// environment.
absl::Status ApplyRankTableFromEnvironment(Environment* env);

}  // namespace hccltune
