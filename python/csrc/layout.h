// Small helpers shared by the torch backend's variable-size collectives (all_to_all, sparse all_reduce).
// Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <vector>

namespace hccltune::torch_backend {

// Exclusive prefix sum: where each rank's block starts when blocks of `counts` bytes are packed in rank order.
inline std::vector<size_t> Displacements(const std::vector<size_t>& counts) {
  std::vector<size_t> d(counts.size());
  size_t off = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    d[i] = off;
    off += counts[i];
  }
  return d;
}

}  // namespace hccltune::torch_backend
