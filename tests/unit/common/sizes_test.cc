#include "runtime/common/sizes.h"

#include <gtest/gtest.h>

namespace hccltune {
namespace {

TEST(Sizes, ParseSuffixes) {
  EXPECT_EQ(*ParseBytes("0"), 0u);
  EXPECT_EQ(*ParseBytes("4096"), 4096u);
  EXPECT_EQ(*ParseBytes("64K"), 65536u);
  EXPECT_EQ(*ParseBytes("64k"), 65536u);
  EXPECT_EQ(*ParseBytes("1M"), 1048576u);
  EXPECT_EQ(*ParseBytes("2G"), 2147483648u);
  EXPECT_EQ(*ParseBytes("16MiB"), 16u << 20);
  EXPECT_EQ(*ParseBytes("8B"), 8u);
}

TEST(Sizes, ParseErrors) {
  for (const char* bad : {"", "K", "-1", "1.5M", "12X", "M1", "99999999999999999999"}) {
    auto r = ParseBytes(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_EQ(ParseBytes("17179869184G").status().code(), absl::StatusCode::kOutOfRange);
  // A size is one word: spaces around it are trimmed, inside it they are an error.
  EXPECT_EQ(*ParseBytes(" 64K "), 65536u);
  for (const char* bad : {"1 K", "6 4K", "1K B", "1\tM"}) {
    auto r = ParseBytes(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
}

TEST(Sizes, TerabytesOnlyWhereDataIsRead) {
  // FormatBytes prints T for multiples of 2^40 and what it wrote must read back (table exports, sweep state);
  // what people write follows docs/CONVENTIONS.md: K, M and G.
  EXPECT_EQ(*ParseBytes("2T"), uint64_t{2} << 40);
  auto t = ParseBytes("2T", SizeSuffixes::kConventions);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("the suffixes are K, M and G"), absl::string_view::npos) << t.status();
  EXPECT_EQ(*ParseBytes("2048G", SizeSuffixes::kConventions), uint64_t{2} << 40);
  EXPECT_FALSE(ParseByteRange("0-1T", SizeSuffixes::kConventions).ok());
  EXPECT_TRUE(ParseByteRange("0-1T").ok());
}

TEST(Sizes, FormatLargestExactSuffix) {
  EXPECT_EQ(FormatBytes(0), "0");
  EXPECT_EQ(FormatBytes(8), "8");
  EXPECT_EQ(FormatBytes(1536), "1536");
  EXPECT_EQ(FormatBytes(1024), "1K");
  EXPECT_EQ(FormatBytes(1048576), "1M");
  EXPECT_EQ(FormatBytes(3 * 1048576 / 2), "1536K");
  EXPECT_EQ(FormatBytes(uint64_t{1} << 30), "1G");
  for (uint64_t v : {uint64_t{1}, uint64_t{1000}, uint64_t{65536}, uint64_t{123} << 20, uint64_t{5} << 40}) {
    EXPECT_EQ(*ParseBytes(FormatBytes(v)), v);
  }
}

TEST(Sizes, Ranges) {
  auto r = ParseByteRange("0-64K");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->min, 0u);
  EXPECT_EQ(r->max, 65536u);
  EXPECT_TRUE(r->Contains(65535));
  EXPECT_FALSE(r->Contains(65536));
  auto open = ParseByteRange("64K-");
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(open->max, kUnbounded);
  EXPECT_TRUE(open->Contains(uint64_t{1} << 40));
  EXPECT_EQ(FormatByteRange(*r), "0-64K");
  EXPECT_EQ(FormatByteRange(*open), "64K-");
  EXPECT_FALSE(ParseByteRange("64K").ok());
  EXPECT_FALSE(ParseByteRange("64K-64K").ok());
  EXPECT_FALSE(ParseByteRange("1M-64K").ok());
  EXPECT_FALSE(ParseByteRange("x-1M").ok());
}

}  // namespace
}  // namespace hccltune
