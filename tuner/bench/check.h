// Correctness checking for `hccl-tune bench --check`: inputs that depend on rank and index, and the expected
// output of every rank computed independently of the runtime (from the input formula, in double / int64),
// never by comparing ranks with each other.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/common/types.h"

namespace hccltune::bench {

struct CheckCase {
  Collective collective;
  DataType dtype;
  ReduceOp op;
  int rank;
  int world;
  int root;
  size_t count;  // elements as the runtime API takes them (per rank block)
};

// The value rank `rank` contributes at element `index` (a small integer, exact in every dtype).
double InputValue(const CheckCase& c, int rank, size_t index);
// Encodes `v` into element `index` of a buffer of c.dtype.
void Store(DataType t, void* buf, size_t index, double v);
double Load(DataType t, const void* buf, size_t index);

// Send-buffer element count and receive-buffer element count for this rank.
size_t SendElements(const CheckCase& c);
size_t RecvElements(const CheckCase& c);
// Fills this rank's send buffer.
void FillInput(const CheckCase& c, void* send);
// Compares this rank's receive buffer with the reference; returns "" when equal, else where it differs.
std::string Verify(const CheckCase& c, const void* recv);

}  // namespace hccltune::bench
