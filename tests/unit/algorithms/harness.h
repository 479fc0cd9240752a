// Builds inputs and independent references for every collective and checks every rank's output.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/algorithms/algorithm.h"
#include "thread_endpoint.h"

namespace hccltune::testing {

struct Case {
  Collective collective = Collective::kAllreduce;
  std::string config;  // configuration text, e.g. "ring(chunk=64)"
  int world = 1;
  size_t count = 0;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  bool in_place = false;
  int root = 0;
  GroupTopology topo;  // empty node_of = one node
  // Element i of rank r's send buffer, before it is stored in the dtype; empty = the harness's own pattern (small
  // values every dtype holds exactly). For the numerics tests: NaNs, signed zeros, values near the dtype's limit.
  std::function<double(int r, size_t i)> input;

  std::string Describe() const;
};

// Runs the case and returns "" on success, else a description of the first problem.
std::string RunCase(const Case& c);

}  // namespace hccltune::testing
