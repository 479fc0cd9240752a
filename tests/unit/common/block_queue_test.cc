#include "runtime/common/block_queue.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <vector>

namespace hccltune {
namespace {

TEST(BlockQueue, FifoOrderAcrossBlocksMatchesDeque) {
  BlockQueue<uint64_t, 4> q;
  std::deque<uint64_t> ref;
  uint64_t next = 0;
  // Interleaved pushes and pops that cross block boundaries, drain, and grow again.
  for (int round = 0; round < 50; ++round) {
    const int pushes = (round * 7) % 11 + 1;
    const int pops = (round * 5) % 13;
    for (int i = 0; i < pushes; ++i) {
      q.push_back(next);
      ref.push_back(next);
      ++next;
    }
    for (int i = 0; i < pops && !ref.empty(); ++i) {
      ASSERT_EQ(q.front(), ref.front());
      q.pop_front();
      ref.pop_front();
    }
    ASSERT_EQ(q.size(), ref.size());
    ASSERT_EQ(q.empty(), ref.empty());
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(q[i], ref[i]) << "round " << round << " index " << i;
    if (!ref.empty()) {
      ASSERT_EQ(q.back(), ref.back());
    }
  }
}

TEST(BlockQueue, ElementsDoNotMoveWhileQueued) {
  BlockQueue<int, 4> q;
  q.push_back(1);
  int* first = &q.front();
  for (int i = 2; i <= 40; ++i) q.push_back(i);  // ten blocks
  EXPECT_EQ(first, &q[0]);
  EXPECT_EQ(*first, 1);
  std::vector<int*> addresses;
  for (size_t i = 0; i < q.size(); ++i) addresses.push_back(&q[i]);
  for (int i = 0; i < 17; ++i) q.pop_front();
  for (int i = 0; i < 30; ++i) q.push_back(100 + i);
  for (size_t i = 0; i + 17 < addresses.size(); ++i) {
    EXPECT_EQ(&q[i], addresses[i + 17]);
    EXPECT_EQ(q[i], static_cast<int>(i) + 18);
  }
}

TEST(BlockQueue, DrainedQueueRestartsAndStaysUsable) {
  BlockQueue<int, 4> q;
  for (int cycle = 0; cycle < 100; ++cycle) {
    for (int i = 0; i < 3; ++i) q.push_back(cycle * 10 + i);
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(q.front(), cycle * 10 + i);
      q.pop_front();
    }
    ASSERT_TRUE(q.empty());
  }
}

}  // namespace
}  // namespace hccltune
