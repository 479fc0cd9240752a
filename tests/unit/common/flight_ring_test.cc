// The flight recorder's ring (runtime/common/flight_ring.h): wraparound, End on a wrapped slot, and a reader
// snapshotting while the writer runs never sees a torn record (also run under ThreadSanitizer: the label tsan).
#include "runtime/common/flight_ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace hccltune {
namespace {

// Every field of record `k` is a function of k, so a reader can tell a torn record from a whole one.
uint32_t Write(FlightRing& ring, uint64_t k) {
  return ring.Begin(static_cast<uint32_t>(k + 1), k % 2 ? Collective::kAllgather : Collective::kAllreduce,
                    DataType::kFloat32, k * 3, static_cast<uint32_t>(k % 7 + 1), static_cast<FlightSource>(k % 6));
}
// Ends record k as a timed call; every third one was blocked first (marked twice: the first mark stays).
void Finish(FlightRing& ring, uint32_t slot, uint64_t k) {
  if (k % 3 == 0) {
    ring.MarkBlocked(slot, static_cast<int64_t>(k * 5));
    ring.MarkBlocked(slot, static_cast<int64_t>(k * 7));
  }
  ring.End(slot, FlightState::kCompleted, static_cast<int64_t>(k * 11), static_cast<int64_t>(k * 13));
}
void ExpectWhole(const FlightRecord& r) {
  const uint64_t k = r.id;
  EXPECT_EQ(r.op, k + 1);
  EXPECT_EQ(r.collective, k % 2 ? Collective::kAllgather : Collective::kAllreduce);
  EXPECT_EQ(r.bytes, k * 3);
  EXPECT_EQ(r.config_id, k % 7 + 1);
  EXPECT_EQ(r.source, k % 6);
  if (k % 3 != 0) {
    EXPECT_EQ(r.blocked_ns, 0);
  } else if (r.state == FlightState::kCompleted) {
    EXPECT_EQ(r.blocked_ns, static_cast<int64_t>(k * 5));  // the first mark, not the second
  } else {
    EXPECT_TRUE(r.blocked_ns == 0 || r.blocked_ns == static_cast<int64_t>(k * 5)) << r.blocked_ns;
  }
  if (r.state == FlightState::kCompleted) {
    EXPECT_EQ(r.start_ns, static_cast<int64_t>(k * 11));
    EXPECT_EQ(r.end_ns, static_cast<int64_t>(k * 13));
  } else {
    EXPECT_EQ(r.state, FlightState::kStarted);
    EXPECT_EQ(r.start_ns, 0);
    EXPECT_EQ(r.end_ns, 0);
  }
}

TEST(FlightRing, KeepsTheLastCapacityRecordsOldestFirst) {
  FlightRing ring(4);
  EXPECT_TRUE(ring.Snapshot().empty());
  for (uint64_t k = 0; k < 10; ++k) {
    const uint32_t slot = Write(ring, k);
    EXPECT_EQ(slot, k % 4);
    if (k != 9) Finish(ring, slot, k);
  }
  EXPECT_EQ(ring.written(), 10u);
  uint32_t torn = 99;
  const std::vector<FlightRecord> got = ring.Snapshot(&torn);
  EXPECT_EQ(torn, 0u);
  ASSERT_EQ(got.size(), 4u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].id, 6 + i);
    ExpectWhole(got[i]);
  }
  EXPECT_EQ(got[3].state, FlightState::kStarted);  // the call in progress
  EXPECT_EQ(got[2].state, FlightState::kCompleted);
}

TEST(FlightRing, FailedStateAndPartialRing) {
  FlightRing ring(8);
  ring.End(Write(ring, 0), FlightState::kFailed);
  Write(ring, 1);
  const std::vector<FlightRecord> got = ring.Snapshot();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].state, FlightState::kFailed);
  EXPECT_EQ(got[0].start_ns, 0);  // an untimed call
  EXPECT_EQ(got[0].end_ns, 0);
  EXPECT_STREQ(FlightStateName(got[0].state), "failed");
  EXPECT_EQ(got[1].state, FlightState::kStarted);
  EXPECT_EQ(got[1].op, 2u);
}

// A writer runs flat out over a small ring (every slot rewritten all the time) while a reader snapshots: each
// record the reader keeps is whole, ids strictly increase, and the reader did see records.
TEST(FlightRing, ConcurrentSnapshotsNeverTorn) {
  FlightRing ring(16);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (uint64_t k = 0; !stop.load(std::memory_order_relaxed); ++k) {
      const uint32_t slot = Write(ring, k);
      Finish(ring, slot, k);
    }
  });
  size_t seen = 0;
  for (int i = 0; i < 2000 || seen == 0; ++i) {
    const std::vector<FlightRecord> got = ring.Snapshot();
    for (size_t j = 0; j < got.size(); ++j) {
      ExpectWhole(got[j]);
      if (j > 0) {
        EXPECT_GT(got[j].id, got[j - 1].id);
      }
    }
    seen += got.size();
    if (::testing::Test::HasFailure()) break;
  }
  stop = true;
  writer.join();
  EXPECT_GT(seen, 0u);
}

}  // namespace
}  // namespace hccltune
