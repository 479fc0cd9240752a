// LinkUsage (runtime/transport/link_usage.h) and Pair::BytesSent: pairs recorded once with their facts, bytes
// counted by TryWrite, and snapshots taken on another thread while a writer sends and new pairs are added (run
// under ThreadSanitizer by the sanitize label's build) see every count grow monotonically up to the total.
#include "runtime/transport/link_usage.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

namespace hccltune {
namespace {

// A pair that accepts every write (Counted, as the TCP and UCX pairs count).
class CountingPair final : public Pair {
 public:
  int lanes() const override { return 1; }
  absl::StatusOr<size_t> TryWrite(int, const void*, size_t bytes) override { return Counted(bytes); }
  absl::StatusOr<size_t> TryRead(int, void*, size_t) override { return size_t{0}; }
  std::string Describe() const override { return "tcp test"; }
};

LinkUsage::Link Facts(int peer, bool cross) {
  return {"tcp", "", "10.0.0.1", "10.0.0.2", "tcp test", peer, cross ? 1 : 0, cross, 0};
}

TEST(LinkUsage, RecordsEachPairOnceWithItsBytes) {
  CountingPair a, b;
  LinkUsage usage;
  usage.Add(&a, Facts(1, true));
  usage.Add(&a, Facts(1, true));
  usage.Add(&b, Facts(2, false));
  ASSERT_TRUE(a.TryWrite(0, nullptr, 100).ok());
  ASSERT_TRUE(a.TryWrite(0, nullptr, 28).ok());
  const std::vector<LinkUsage::Link> s = usage.Snapshot();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].peer, 1);
  EXPECT_TRUE(s[0].cross_node);
  EXPECT_EQ(s[0].bytes_sent, 128u);
  EXPECT_EQ(s[1].peer, 2);
  EXPECT_EQ(s[1].bytes_sent, 0u);
  EXPECT_EQ(usage.dropped(), 0u);
}

TEST(LinkUsage, SnapshotsOnAnotherThreadWhileWritingAndAdding) {
  constexpr int kPairs = 600, kWrites = 20000;  // more pairs than one chunk
  std::vector<std::unique_ptr<CountingPair>> pairs;
  for (int i = 0; i < kPairs; ++i) pairs.push_back(std::make_unique<CountingPair>());
  LinkUsage usage;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 0; i < kWrites; ++i) {
      const size_t p = static_cast<size_t>(i % kPairs);
      if (i < kPairs) usage.Add(pairs[p].get(), Facts(i, true));
      (void)pairs[p]->TryWrite(0, nullptr, 3);
    }
    done = true;
  });
  uint64_t last_total = 0;
  while (!done) {
    uint64_t total = 0;
    for (const LinkUsage::Link& l : usage.Snapshot()) total += l.bytes_sent;
    EXPECT_GE(total, last_total);
    last_total = total;
  }
  writer.join();
  uint64_t total = 0;
  const std::vector<LinkUsage::Link> s = usage.Snapshot();
  for (const LinkUsage::Link& l : s) total += l.bytes_sent;
  EXPECT_EQ(s.size(), static_cast<size_t>(kPairs));
  EXPECT_EQ(total, 3u * kWrites);
}

}  // namespace
}  // namespace hccltune
