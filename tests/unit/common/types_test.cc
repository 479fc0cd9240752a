#include "runtime/common/types.h"

#include <gtest/gtest.h>

namespace hccltune {
namespace {

TEST(Types, CollectiveNamesRoundTrip) {
  for (Collective c : AllCollectives()) {
    auto parsed = ParseCollective(CollectiveName(c));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, c);
  }
  EXPECT_EQ(*ParseCollective("reduce_scatter"), Collective::kReducescatter);
  EXPECT_EQ(*ParseCollective("AllReduce"), Collective::kAllreduce);
  auto bad = ParseCollective("allreduz");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("allreduz"), std::string::npos);
  EXPECT_NE(bad.status().message().find("allgatherv"), std::string::npos);
}

TEST(Types, DataTypeNamesSizesAliases) {
  const std::pair<const char*, size_t> expected[] = {{"int8", 1}, {"uint8", 1}, {"int32", 4}, {"int64", 8},
                                                     {"fp16", 2}, {"bf16", 2},  {"fp32", 4},  {"fp64", 8}};
  ASSERT_EQ(AllDataTypes().size(), std::size(expected));
  for (size_t i = 0; i < std::size(expected); ++i) {
    DataType t = AllDataTypes()[i];
    EXPECT_EQ(DataTypeName(t), expected[i].first);
    EXPECT_EQ(DataTypeSize(t), expected[i].second);
    EXPECT_EQ(*ParseDataType(expected[i].first), t);
  }
  EXPECT_EQ(*ParseDataType("half"), DataType::kFloat16);
  EXPECT_EQ(*ParseDataType("bfloat16"), DataType::kBfloat16);
  EXPECT_EQ(*ParseDataType("float"), DataType::kFloat32);
  EXPECT_EQ(*ParseDataType("double"), DataType::kFloat64);
  EXPECT_FALSE(ParseDataType("fp8").ok());
}

TEST(Types, ReduceOpSupportMatrix) {
  for (DataType t : AllDataTypes()) {
    for (ReduceOp op : AllReduceOps()) {
      const bool bitwise = op == ReduceOp::kBand || op == ReduceOp::kBor || op == ReduceOp::kBxor;
      const bool expect_ok = IsFloatingPoint(t) ? !bitwise : op != ReduceOp::kAvg;
      absl::Status s = CheckReduceSupported(op, t);
      EXPECT_EQ(s.ok(), expect_ok) << ReduceOpName(op) << " " << DataTypeName(t);
      if (!s.ok()) {
        EXPECT_NE(s.message().find(ReduceOpName(op)), std::string::npos);
        EXPECT_NE(s.message().find(DataTypeName(t)), std::string::npos);
      }
    }
  }
  EXPECT_EQ(*ParseReduceOp("product"), ReduceOp::kProd);
  EXPECT_FALSE(ParseReduceOp("mean").ok());
}

TEST(Types, BusBandwidthFactors) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kAllreduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kAllgather, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kReducescatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kAllreduce, 1), 1.0);
}

}  // namespace
}  // namespace hccltune
