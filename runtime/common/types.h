// Vocabulary shared by every part of hccl-tune: collectives, data types and reduction operators, with the
// one spelling of each name (docs/CONVENTIONS.md). Everything that prints or parses these goes through
// the functions below.
//
// Thread-safety: all functions are pure and safe to call concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace hccltune {

enum class Collective : uint8_t {
  kAllreduce,
  kAllgather,
  kAllgatherv,
  kReducescatter,
  kBroadcast,
  kReduce,
  kGather,
  kScatter,
  kAlltoall,
  kAlltoallv,
  kBarrier,
  kSendRecv,
};
inline constexpr int kNumCollectives = 12;

// Stable lower-case names: "allreduce", "allgather", ..., "sendrecv".
absl::string_view CollectiveName(Collective c);
absl::StatusOr<Collective> ParseCollective(absl::string_view name);
absl::Span<const Collective> AllCollectives();
// Whether the collective combines values with a ReduceOp.
bool IsReducing(Collective c);
// Whether the collective's large messages over shm may travel by single copy (CMA): not reductions, which already
// reduce straight out of the ring (one copy; with single copy a 2-rank fp32 allreduce lost 1.4-1.9x at 4-16 MiB and
// 1.6x at 128 KiB), and not point-to-point, whose blocking Send must complete into the ring before the peer posts
// its Recv. Every other collective copies each byte once this way instead of twice (writer -> ring -> reader).
bool SingleCopyCollective(Collective c);

enum class DataType : uint8_t { kInt8, kUint8, kInt32, kInt64, kFloat16, kBfloat16, kFloat32, kFloat64 };
inline constexpr int kNumDataTypes = 8;

// Canonical names: int8 uint8 int32 int64 fp16 bf16 fp32 fp64. Parsing also accepts the usual aliases
// (float16/half, bfloat16, float32/float, float64/double, char, int, long).
absl::string_view DataTypeName(DataType t);
absl::StatusOr<DataType> ParseDataType(absl::string_view name);
absl::Span<const DataType> AllDataTypes();
// Bytes per element (inline: every call of a collective asks several times).
inline constexpr size_t DataTypeSize(DataType t) {
  constexpr size_t kSizes[kNumDataTypes] = {1, 1, 4, 8, 2, 2, 4, 8};
  return kSizes[static_cast<size_t>(t)];
}
bool IsFloatingPoint(DataType t);

enum class ReduceOp : uint8_t { kSum, kProd, kMin, kMax, kAvg, kBand, kBor, kBxor };
inline constexpr int kNumReduceOps = 8;

// Names: sum prod min max avg band bor bxor.
absl::string_view ReduceOpName(ReduceOp op);
absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name);
absl::Span<const ReduceOp> AllReduceOps();
// OK when `op` applies to `t`; avg needs a floating type, band/bor/bxor an integer type.
absl::Status CheckReduceSupported(ReduceOp op, DataType t);

// nccl-tests bus-bandwidth factor for a collective on `world` ranks (docs/CONVENTIONS.md, Timing).
double BusBandwidthFactor(Collective c, int world);

}  // namespace hccltune
