#include "runtime/common/types.h"

#include <array>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hccltune {
namespace {

constexpr std::array<Collective, kNumCollectives> kCollectives = {
    Collective::kAllreduce, Collective::kAllgather, Collective::kAllgatherv, Collective::kReducescatter,
    Collective::kBroadcast, Collective::kReduce,    Collective::kGather,     Collective::kScatter,
    Collective::kAlltoall,  Collective::kAlltoallv, Collective::kBarrier,    Collective::kSendRecv};
constexpr std::array<absl::string_view, kNumCollectives> kCollectiveNames = {
    "allreduce", "allgather", "allgatherv", "reducescatter", "broadcast", "reduce",
    "gather",    "scatter",   "alltoall",   "alltoallv",     "barrier",   "sendrecv"};

constexpr std::array<DataType, kNumDataTypes> kDataTypes = {DataType::kInt8,    DataType::kUint8,   DataType::kInt32,
                                                            DataType::kInt64,   DataType::kFloat16, DataType::kBfloat16,
                                                            DataType::kFloat32, DataType::kFloat64};
constexpr std::array<absl::string_view, kNumDataTypes> kDataTypeNames = {"int8", "uint8", "int32", "int64",
                                                                         "fp16", "bf16",  "fp32",  "fp64"};

constexpr std::array<ReduceOp, kNumReduceOps> kReduceOps = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin,
                                                            ReduceOp::kMax, ReduceOp::kAvg,  ReduceOp::kBand,
                                                            ReduceOp::kBor, ReduceOp::kBxor};
constexpr std::array<absl::string_view, kNumReduceOps> kReduceOpNames = {"sum", "prod", "min", "max",
                                                                         "avg", "band", "bor", "bxor"};

template <typename Names>
std::string Accepted(const Names& names) {
  return absl::StrJoin(names, ", ");
}

}  // namespace

absl::string_view CollectiveName(Collective c) { return kCollectiveNames[static_cast<size_t>(c)]; }

absl::StatusOr<Collective> ParseCollective(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (size_t i = 0; i < kCollectives.size(); ++i) {
    if (lower == kCollectiveNames[i]) return kCollectives[i];
  }
  if (lower == "reduce_scatter") return Collective::kReducescatter;
  if (lower == "all_reduce") return Collective::kAllreduce;
  if (lower == "all_gather") return Collective::kAllgather;
  if (lower == "all_to_all") return Collective::kAlltoall;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown collective '", name, "'; accepted: ", Accepted(kCollectiveNames)));
}

absl::Span<const Collective> AllCollectives() { return kCollectives; }

bool IsReducing(Collective c) {
  return c == Collective::kAllreduce || c == Collective::kReducescatter || c == Collective::kReduce;
}

bool SingleCopyCollective(Collective c) { return c != Collective::kSendRecv && !IsReducing(c); }

absl::string_view DataTypeName(DataType t) { return kDataTypeNames[static_cast<size_t>(t)]; }

absl::StatusOr<DataType> ParseDataType(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (size_t i = 0; i < kDataTypes.size(); ++i) {
    if (lower == kDataTypeNames[i]) return kDataTypes[i];
  }
  if (lower == "float16" || lower == "half") return DataType::kFloat16;
  if (lower == "bfloat16") return DataType::kBfloat16;
  if (lower == "float32" || lower == "float") return DataType::kFloat32;
  if (lower == "float64" || lower == "double") return DataType::kFloat64;
  if (lower == "char") return DataType::kInt8;
  if (lower == "int") return DataType::kInt32;
  if (lower == "long") return DataType::kInt64;
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", name, "'; accepted: ", Accepted(kDataTypeNames)));
}

absl::Span<const DataType> AllDataTypes() { return kDataTypes; }

bool IsFloatingPoint(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBfloat16 || t == DataType::kFloat32 || t == DataType::kFloat64;
}

absl::string_view ReduceOpName(ReduceOp op) { return kReduceOpNames[static_cast<size_t>(op)]; }

absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (size_t i = 0; i < kReduceOps.size(); ++i) {
    if (lower == kReduceOpNames[i]) return kReduceOps[i];
  }
  if (lower == "product") return ReduceOp::kProd;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown reduce op '", name, "'; accepted: ", Accepted(kReduceOpNames)));
}

absl::Span<const ReduceOp> AllReduceOps() { return kReduceOps; }

absl::Status CheckReduceSupported(ReduceOp op, DataType t) {
  const bool fp = IsFloatingPoint(t);
  if (op == ReduceOp::kAvg && !fp) {
    return absl::InvalidArgumentError(
        absl::StrCat("reduce op avg needs a floating-point dtype (fp16, bf16, fp32, fp64), got ", DataTypeName(t)));
  }
  if ((op == ReduceOp::kBand || op == ReduceOp::kBor || op == ReduceOp::kBxor) && fp) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reduce op ", ReduceOpName(op), " needs an integer dtype (int8, uint8, int32, int64), got ", DataTypeName(t)));
  }
  return absl::OkStatus();
}

double BusBandwidthFactor(Collective c, int world) {
  if (world <= 1) return 1.0;
  const double n = world;
  switch (c) {
    case Collective::kAllreduce: return 2.0 * (n - 1) / n;
    case Collective::kReducescatter:
    case Collective::kAllgather:
    case Collective::kAllgatherv:
    case Collective::kAlltoall:
    case Collective::kAlltoallv:
    case Collective::kGather:
    case Collective::kScatter: return (n - 1) / n;
    default: return 1.0;
  }
}

}  // namespace hccltune
