// The host facts the runtime's transport choices read: the last-level cache from sysfs and the automatic
// non-temporal-store threshold derived from it.
#include "runtime/common/host.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace hccltune {
namespace {

class FakeCpuDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("hccltune-host-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void AddCache(int index, const std::string& level, const std::string& type, const std::string& size) {
    const auto d = dir_ / "cache" / ("index" + std::to_string(index));
    std::filesystem::create_directories(d);
    std::ofstream(d / "level") << level << "\n";
    std::ofstream(d / "type") << type << "\n";
    std::ofstream(d / "size") << size << "\n";
  }

  std::filesystem::path dir_;
};

TEST_F(FakeCpuDir, TheHighestDataOrUnifiedLevelIsTheLastLevelCache) {
  AddCache(0, "1", "Data", "48K");
  AddCache(1, "1", "Instruction", "32K");
  AddCache(2, "2", "Unified", "1024K");
  AddCache(3, "3", "Unified", "32768K");
  EXPECT_EQ(LastLevelCacheBytesIn(dir_.string()), 32ull << 20);
}

TEST_F(FakeCpuDir, AnInstructionCacheOrAnUnreadableSizeIsNotTheLastLevel) {
  AddCache(0, "1", "Data", "32K");
  AddCache(1, "3", "Unified", "8M");
  AddCache(2, "4", "Instruction", "64M");  // not data: ignored
  AddCache(3, "5", "Unified", "lots");     // no size: ignored
  EXPECT_EQ(LastLevelCacheBytesIn(dir_.string()), 8ull << 20);
}

TEST_F(FakeCpuDir, NoCacheDescriptionGivesZero) { EXPECT_EQ(LastLevelCacheBytesIn(dir_.string()), 0u); }

TEST_F(FakeCpuDir, AMachineThatNamesNoThirdLevelHasNoKnownLastLevelCache) {
  AddCache(0, "1", "Data", "32K");
  AddCache(1, "2", "Unified", "2M");  // an L2 would overstate each rank's share of a cache
  EXPECT_EQ(LastLevelCacheBytesIn(dir_.string()), 0u);
}

TEST(Host, ThisMachinesLastLevelCacheComesFromSysfs) {
  // The process's answer is the sysfs description of its CPU (this test is not bound: CPU 0's).
  if (BoundCpu() >= 0) GTEST_SKIP() << "bound to one CPU";
  EXPECT_EQ(LastLevelCacheBytes(), LastLevelCacheBytesIn("/sys/devices/system/cpu/cpu0"));
}

TEST(Host, AutoNtStoresThresholdFollowsTheCacheShareOfEachRank) {
  constexpr uint64_t MiB = 1ull << 20;
  // A 32 MiB L3: 2 ranks stream from 8 MiB calls, 4 ranks from 4 MiB (measured: 2-rank 16 MiB allreduce 1.61-1.72
  // -> 1.20-1.24 ms).
  EXPECT_EQ(AutoNtStoresBytes(32 * MiB, 2), 8 * MiB);
  EXPECT_EQ(AutoNtStoresBytes(32 * MiB, 4), 4 * MiB);
  // Never below 4 MiB, never above the 32 MiB measured on a VM whose L3 is reported as hundreds of MiB.
  EXPECT_EQ(AutoNtStoresBytes(32 * MiB, 16), 4 * MiB);
  EXPECT_EQ(AutoNtStoresBytes(480 * MiB, 2), 32 * MiB);
  // Unknown cache, or no shm peers (unmeasured): the fixed default.
  EXPECT_EQ(AutoNtStoresBytes(0, 2), 32 * MiB);
  EXPECT_EQ(AutoNtStoresBytes(32 * MiB, 1), 32 * MiB);
  EXPECT_EQ(AutoNtStoresBytes(32 * MiB, 0), 32 * MiB);
}

TEST(Host, ShmRingsAreShorterWhenRanksOutnumberCpus) {
  constexpr uint64_t MiB = 1ull << 20;
  constexpr uint64_t kDefault = 200 * MiB;  // HCCL_BUFFSIZE's default, 200 MB
  EXPECT_EQ(ShmRingBytes(kDefault, 2, 2), 4 * MiB);
  EXPECT_EQ(ShmRingBytes(kDefault, 4, 4), 4 * MiB);
  EXPECT_EQ(ShmRingBytes(kDefault, 4, 2), 1 * MiB);  // 4 ranks on 2 CPUs
  EXPECT_EQ(ShmRingBytes(kDefault, 3, 2), 1 * MiB);
  // HCCL_BUFFSIZE shared by the other ranks' rings, below either cap.
  EXPECT_EQ(ShmRingBytes(3 * MiB, 4, 8), 1 * MiB);
  EXPECT_EQ(ShmRingBytes(2 * MiB, 4, 2), 2 * MiB / 3);
  EXPECT_EQ(ShmRingBytes(1 * MiB, 2, 2), 1 * MiB);
  // Two ranks on one CPU take turns too; below the 4 MiB cap the two caps differ.
  EXPECT_EQ(ShmRingBytes(kDefault, 2, 1), 1 * MiB);
  EXPECT_EQ(ShmRingBytes(3 * MiB, 2, 1), 1 * MiB);
  EXPECT_EQ(ShmRingBytes(3 * MiB, 2, 2), 3 * MiB);
  // Many ranks on few CPUs: a rank's inbound rings share 16 MiB, at least 64 KiB each; not oversubscribed, unchanged.
  EXPECT_EQ(ShmRingBytes(kDefault, 17, 2), 1 * MiB);
  EXPECT_EQ(ShmRingBytes(kDefault, 33, 2), 512 * 1024);
  EXPECT_EQ(ShmRingBytes(kDefault, 129, 2), 128 * 1024);
  EXPECT_EQ(ShmRingBytes(kDefault, 1024, 2), 64 * 1024);
  EXPECT_EQ(ShmRingBytes(kDefault, 128, 128), kDefault / 127);
}

}  // namespace
}  // namespace hccltune
