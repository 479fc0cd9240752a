// The RDMA settings of the environment (read by runtime/common/config.cc, the one env reader): which RDMA ports
// links may use and the GID index, traffic class and service level they run with (docs/ENVIRONMENT.md,
// docs/TRANSPORTS.md).
//
// Thread-safety: plain values; HcaList::Allows is const and pure.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hccltune {

// HCCL_TUNE_IB_HCA, NCCL_IB_HCA's grammar: a comma-separated list of DEVICE[:PORT]; a leading '^' excludes the
// listed ports instead of keeping only them; a leading '=' (after '^' when both) makes names match exactly, else
// a name is a prefix ("mlx5" matches mlx5_0 and mlx5_1). An empty list allows every port.
struct HcaList {
  struct Item {
    std::string device;
    int port = 0;  // 0 = every port of the device
  };
  bool exclude = false;
  bool exact = false;
  std::vector<Item> items;

  bool Allows(absl::string_view device, int port) const;
  std::string ToString() const;  // the list as it would be written ("" when empty)
};
// A bad list is an error naming HCCL_TUNE_IB_HCA, the value and the grammar.
absl::StatusOr<HcaList> ParseHcaList(absl::string_view text);

struct RdmaEnv {
  HcaList hca;                   // HCCL_TUNE_IB_HCA
  std::optional<int> gid_index;  // HCCL_TUNE_IB_GID_INDEX, 0-255 (unset: the subnet's RoCE v2 entry, or UCX's)
  std::optional<int> tc;         // HCCL_RDMA_TC, 0-255 and a multiple of 4 (HCCL's: DSCP x 4); unset: UCX's
  std::optional<int> sl;         // HCCL_RDMA_SL, 0-7 (HCCL's); unset: UCX's
};

}  // namespace hccltune
