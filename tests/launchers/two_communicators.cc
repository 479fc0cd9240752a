// Communicators from the environment in one process of a launched job, reusing its launcher rendezvous: a second
// one created while the first lives, then (both destroyed) a third. Each runs one 4-byte allreduce of rank + 1,
// checked exactly. Prints "rank R: 3 communicators of N ranks, every result correct"; exit status 1 on any error
// or wrong result.
// Usage: two_communicators
#include <cstdio>
#include <memory>
#include <string>

#include "runtime/api/communicator.h"
#include "tests/process/job_communicator.h"

namespace {
// One checked allreduce on `comm`; false after printing why.
bool Check(hccltune::Communicator& comm, int which) {
  const int n = comm.size(), r = comm.rank();
  int32_t v = r + 1;
  if (absl::Status s = comm.Allreduce(&v, &v, 1, hccltune::DataType::kInt32, hccltune::ReduceOp::kSum); !s.ok()) {
    std::fprintf(stderr, "rank %d communicator %d: %s\n", r, which, std::string(s.message()).c_str());
    return false;
  }
  if (v != n * (n + 1) / 2) {
    std::fprintf(stderr, "rank %d communicator %d: got %d, expected %d\n", r, which, v, n * (n + 1) / 2);
    return false;
  }
  return true;
}
}  // namespace

int main() {
  using hccltune::testjobs::CommunicatorFromEnvironment;
  auto first = CommunicatorFromEnvironment();
  if (first == nullptr || !Check(*first, 1)) return 1;
  auto second = CommunicatorFromEnvironment();
  if (second == nullptr || !Check(*second, 2) || !Check(*first, 1)) return 1;
  const int n = first->size(), r = first->rank();
  first.reset();
  second.reset();
  auto third = CommunicatorFromEnvironment();
  if (third == nullptr || !Check(*third, 3)) return 1;
  std::printf("rank %d: 3 communicators of %d ranks, every result correct\n", r, n);
  return 0;
}
