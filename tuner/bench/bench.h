// `hccl-tune bench`: times collectives the way nccl-tests (and the peer benchmarks of tests/perf/compare-peers.sh) do —
// every iteration starts after a barrier, its time is the maximum over ranks, a figure is the median of the iterations,
// warm-up iterations are not counted — and optionally checks every rank's output against an independent reference.
//
// Thread-safety: RunBench drives one communicator from the calling thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/api/communicator.h"
#include "runtime/common/configuration.h"
#include "runtime/common/types.h"

namespace hccltune::bench {

struct BenchOptions {
  Collective collective = Collective::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  uint64_t min_bytes = 8;
  uint64_t max_bytes = 64ull << 20;
  std::string algo = "auto";  // "auto", "all" or a configuration
  std::string link;           // "" = leave each configuration's link; else shm, tcp, tcp@NET
  int iters = 0;              // 0 = adaptive (more for small sizes)
  int warmup = 0;             // 0 = adaptive
  bool check = false;
  int root = 0;
  // Send and receive buffers from the communicator's symmetric memory (Communicator::AllocSymmetric), as a
  // program that allocates them with hccltune_mem_alloc does.
  bool symmetric = false;
};

struct BenchRow {
  std::string collective;
  int ranks = 0;
  uint64_t bytes = 0;
  std::string algo;
  double time_us = 0;
  double algbw = 0;  // GB/s
  double busbw = 0;  // GB/s
  bool checked = false;
  std::string error;  // mismatch or failure on this rank ("" = fine)
};

// Runs the sweep of sizes × configurations on this rank. Every rank gets the same rows; `error` is this rank's.
absl::StatusOr<std::vector<BenchRow>> RunBench(Communicator& comm, const BenchOptions& opt);

std::string FormatHeader();
std::string FormatRow(const BenchRow& row);

}  // namespace hccltune::bench
