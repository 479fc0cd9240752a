// HugePageAdvisor on real mappings: the whole 2 MiB pages of a buffer become transparent huge pages at its second
// use (read back from /proc/self/smaps), contents unchanged; never at the first; refusals and the record's bound.
#include "runtime/common/huge_page_advisor.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/unit/common/thp_region.h"

namespace hccltune {
namespace {

using Outcome = HugePageAdvisor::Outcome;
using testing::AnonHugeKb;
using testing::ThpRegion;

TEST(HugePageAdvisor, CollapsesTheWholePagesOfABufferAtItsSecondUse) {
  if (const std::string why = testing::CannotCollapse(); !why.empty()) GTEST_SKIP() << why;
  ThpRegion r(3, true);
  ASSERT_TRUE(r.ok());
  HugePageAdvisor advisor(false);
  // The buffer starts 16 bytes into the page before the first whole huge page and ends 16 bytes into the page
  // after the last: three whole pages inside, the edges are someone else's.
  char* p = r.data() + 16;
  const size_t bytes = r.bytes() - 32;
  EXPECT_EQ(advisor.Use(p, bytes), Outcome::kFirstUse);
  EXPECT_EQ(AnonHugeKb(p), 0) << "collapsed at the first use";
  EXPECT_EQ(advisor.Use(p, bytes), Outcome::kCollapsed);
  EXPECT_EQ(AnonHugeKb(p), 3 * 2048);
  EXPECT_TRUE(r.Intact()) << "the collapse changed the buffer's contents";
  EXPECT_EQ(advisor.Use(p, bytes), Outcome::kDone);
  // Another buffer whose whole pages are the same extent is the same buffer to the advisor.
  EXPECT_EQ(advisor.Use(r.data(), r.bytes()), Outcome::kDone);
}

TEST(HugePageAdvisor, AMappingMarkedNoHugePageIsRefusedOnceAndLeftAsItWas) {
  if (const std::string why = testing::CannotCollapse(); !why.empty()) GTEST_SKIP() << why;
  ThpRegion r(2, false);  // MADV_NOHUGEPAGE: the program's choice, which the kernel keeps
  ASSERT_TRUE(r.ok());
  HugePageAdvisor advisor(false);
  EXPECT_EQ(advisor.Use(r.data(), r.bytes()), Outcome::kFirstUse);
  EXPECT_EQ(advisor.Use(r.data(), r.bytes()), Outcome::kRefused);
  EXPECT_EQ(AnonHugeKb(r.data() + 4096), 0);
  EXPECT_TRUE(r.Intact());
  EXPECT_EQ(advisor.Use(r.data(), r.bytes()), Outcome::kDone) << "a refusal is retried";
}

TEST(HugePageAdvisor, NothingWithoutAWholePageOrWhenTheSystemSaysNever) {
  ThpRegion r(1, true);
  ASSERT_TRUE(r.ok());
  HugePageAdvisor advisor(false);
  // 2 MiB that straddle a huge-page boundary contain no whole page; nor do null or empty buffers.
  EXPECT_EQ(advisor.Use(r.data() + 8192, ThpRegion::kHuge), Outcome::kNoWholePage);
  EXPECT_EQ(advisor.Use(nullptr, size_t{64} << 20), Outcome::kNoWholePage);
  EXPECT_EQ(advisor.Use(r.data(), 0), Outcome::kNoWholePage);
  HugePageAdvisor never(true);
  EXPECT_EQ(never.Use(r.data(), r.bytes()), Outcome::kDisabled);
  EXPECT_EQ(never.Use(r.data(), r.bytes()), Outcome::kDisabled);
  EXPECT_EQ(AnonHugeKb(r.data() + 4096), 0);
}

TEST(HugePageAdvisor, RemembersABoundedNumberOfBuffers) {
  // First uses only record (no system call), so addresses need not be mapped here.
  HugePageAdvisor advisor(false);
  const uintptr_t base = uintptr_t{1} << 44;
  auto at = [&](size_t i) { return reinterpret_cast<const void*>(base + i * (4 * ThpRegion::kHuge)); };
  for (size_t i = 0; i <= HugePageAdvisor::kRemembered; ++i) {
    EXPECT_EQ(advisor.Use(at(i), 2 * ThpRegion::kHuge), Outcome::kFirstUse) << i;
  }
  // The oldest was forgotten: its next use is a first use again, not a collapse.
  EXPECT_EQ(advisor.Use(at(0), 2 * ThpRegion::kHuge), Outcome::kFirstUse);
}

}  // namespace
}  // namespace hccltune
