// Rank table (runtime/bootstrap/rank_table.h): parsing, every validation error, and what a rank learns.
#include "runtime/bootstrap/rank_table.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hccltune {
namespace {

using ::testing::HasSubstr;

constexpr char kTwoServers[] = R"({
  "version": "1.0", "server_count": "2", "status": "completed",
  "server_list": [
    {"server_id": "node-a", "device": [
      {"device_id": "0", "device_ip": "10.77.1.1", "rank_id": "0"},
      {"device_id": "1", "device_ip": "10.77.1.1", "rank_id": "1"}]},
    {"server_id": "node-b", "device": [
      {"device_id": "0", "device_ip": "10.77.1.2", "rank_id": "2"},
      {"device_id": "1", "device_ip": "10.77.1.2", "rank_id": "3"}]}]})";

std::string ErrorOf(const std::string& text) {
  auto t = ParseRankTable(text, "t.json");
  return t.ok() ? std::string("OK") : std::string(t.status().message());
}

TEST(RankTable, ParsesServersDevicesAndLocalRanks) {
  auto t = ParseRankTable(kTwoServers, "t.json");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->world_size(), 4);
  for (int r = 0; r < 4; ++r) {
    const RankTableEntry& e = t->ranks[static_cast<size_t>(r)];
    EXPECT_EQ(e.rank_id, r);
    EXPECT_EQ(e.server_id, r < 2 ? "node-a" : "node-b");
    EXPECT_EQ(e.device_id, r % 2);
    EXPECT_EQ(e.device_ip, r < 2 ? "10.77.1.1" : "10.77.1.2");
    EXPECT_EQ(e.local_rank, r % 2);
    EXPECT_EQ(e.local_size, 2);
  }
}

TEST(RankTable, RankOrderNeedNotFollowServerOrder) {
  auto t = ParseRankTable(R"({"version":"1.0","server_list":[
      {"server_id":"b","device":[{"device_id":"0","device_ip":"10.0.0.2","rank_id":"1"}]},
      {"server_id":"a","device":[{"device_id":"0","device_ip":"10.0.0.1","rank_id":"0"}]}]})",
                          "t.json");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ranks[0].server_id, "a");
  EXPECT_EQ(t->ranks[1].server_id, "b");
}

TEST(RankTable, DuplicateRankIdNamesBothPlaces) {
  std::string s = kTwoServers;
  s.replace(s.find("\"rank_id\": \"3\""), 14, "\"rank_id\": \"1\"");
  EXPECT_THAT(ErrorOf(s),
              HasSubstr("rank_id 1 appears twice: on server node-a device 1 and on server node-b device 1"));
}

TEST(RankTable, TwoRanksOnOneDeviceOfAServerNamesBoth) {
  std::string s = kTwoServers;
  s.replace(s.find("\"device_id\": \"1\""), 16, "\"device_id\": \"0\"");
  EXPECT_THAT(ErrorOf(s), HasSubstr("ranks 0 and 1 are both bound to device 0 of server node-a"));
}

TEST(RankTable, SameDeviceIdOnDifferentServersIsFine) { EXPECT_EQ(ErrorOf(kTwoServers), "OK"); }

TEST(RankTable, MissingFieldsAreNamed) {
  EXPECT_THAT(ErrorOf(R"({"server_list":[]})"), HasSubstr("the table has no \"version\""));
  EXPECT_THAT(ErrorOf(R"({"version":"1.0"})"), HasSubstr("no \"server_list\""));
  EXPECT_THAT(ErrorOf(R"({"version":"1.0","server_list":[{"device":[]}]})"),
              HasSubstr("server_list[0] has no \"server_id\""));
  EXPECT_THAT(ErrorOf(R"({"version":"1.0","server_list":[{"server_id":"a"}]})"),
              HasSubstr("server_list[0] (a) has no \"device\""));
  EXPECT_THAT(
      ErrorOf(R"({"version":"1.0","server_list":[{"server_id":"a","device":[{"device_id":"0","rank_id":"0"}]}]})"),
      HasSubstr("server a device[0] has no \"device_ip\""));
  EXPECT_THAT(
      ErrorOf(
          R"({"version":"1.0","server_list":[{"server_id":"a","device":[{"device_id":"0","device_ip":"1.2.3.4"}]}]})"),
      HasSubstr("server a device[0] has no \"rank_id\""));
  EXPECT_THAT(
      ErrorOf(
          R"({"version":"1.0","server_list":[{"server_id":"a","device":[{"rank_id":"0","device_ip":"1.2.3.4"}]}]})"),
      HasSubstr("server a device[0] has no \"device_id\""));
}

TEST(RankTable, BadValuesAreNamed) {
  EXPECT_THAT(ErrorOf("{"), HasSubstr("t.json: not valid JSON"));
  EXPECT_THAT(ErrorOf(R"({"version":"2.0","server_list":[]})"), HasSubstr("version \"2.0\" is not supported"));
  EXPECT_THAT(
      ErrorOf(
          R"({"version":"1.0","server_list":[{"server_id":"a","device":[{"device_id":0,"device_ip":"1.2.3.4","rank_id":"0"}]}]})"),
      HasSubstr("\"device_id\" must be a string"));
  EXPECT_THAT(
      ErrorOf(
          R"({"version":"1.0","server_list":[{"server_id":"a","device":[{"device_id":"x","device_ip":"1.2.3.4","rank_id":"0"}]}]})"),
      HasSubstr("\"device_id\" is \"x\", expected an integer from 0 to 65535"));
  EXPECT_THAT(
      ErrorOf(
          R"({"version":"1.0","server_list":[{"server_id":"a","device":[{"device_id":"0","device_ip":"host","rank_id":"0"}]}]})"),
      HasSubstr("device_ip \"host\" is not an IPv4 address"));
  EXPECT_THAT(
      ErrorOf(
          R"({"version":"1.0","server_list":[{"server_id":"a","device":[{"device_id":"0","device_ip":"1.2.3.4","rank_id":"1"}]}]})"),
      HasSubstr("rank_id 0 is missing"));
  std::string s = kTwoServers;
  s.replace(s.find("\"server_count\": \"2\""), 19, "\"server_count\": \"3\"");
  EXPECT_THAT(ErrorOf(s), HasSubstr("server_count is \"3\" but server_list has 2 server(s)"));
}

TEST(RankTable, ApplyFillsTheEnvironment) {
  auto t = ParseRankTable(kTwoServers, "t.json");
  ASSERT_TRUE(t.ok());
  Environment env;
  env.master_port = 29600;
  ASSERT_TRUE(ApplyRankTable(*t, 3, {"127.0.0.1", "10.77.1.2"}, &env).ok());
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.node_id, "rank-table:node-b");
  EXPECT_EQ(env.device, 1);
  EXPECT_EQ(env.master_addr, "10.77.1.1");           // rank 0's address
  EXPECT_EQ(env.rank_table_device_ip, "10.77.1.2");  // for the flight recorder's dump
  EXPECT_EQ(env.rank_table_host_nic_ip, "");
}

TEST(RankTable, AServersHostNicIpReachesItsRanks) {
  std::string text = kTwoServers;
  text.replace(text.find(R"({"server_id": "node-b",)"), 23, R"({"server_id": "node-b", "host_nic_ip": "10.77.2.2",)");
  auto t = ParseRankTable(text, "t.json");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ranks[0].host_nic_ip, "");
  EXPECT_EQ(t->ranks[2].host_nic_ip, "10.77.2.2");
  Environment env;
  env.master_port = 29600;
  ASSERT_TRUE(ApplyRankTable(*t, 2, {"10.77.1.2"}, &env).ok());
  EXPECT_EQ(env.rank_table_host_nic_ip, "10.77.2.2");
}

TEST(RankTable, ApplyRefusesAnAddressNoLocalInterfaceHas) {
  auto t = ParseRankTable(kTwoServers, "t.json");
  ASSERT_TRUE(t.ok());
  Environment env;
  env.master_port = 29600;
  absl::Status s = ApplyRankTable(*t, 2, {"127.0.0.1", "10.77.1.1"}, &env);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("rank 2 (server node-b device 0) has device_ip 10.77.1.2, which no local interface has"));
}

TEST(RankTable, ApplyRefusesUnknownRankAndMissingRendezvous) {
  auto t = ParseRankTable(kTwoServers, "t.json");
  ASSERT_TRUE(t.ok());
  Environment env;
  EXPECT_THAT(std::string(ApplyRankTable(*t, 4, {"10.77.1.2"}, &env).message()),
              HasSubstr("RANK_ID=4 is not in the rank table"));
  EXPECT_THAT(std::string(ApplyRankTable(*t, 2, {"10.77.1.2"}, &env).message()), HasSubstr("HCCL_TUNE_MASTER_PORT"));
  env.store = "file:///tmp/x";
  EXPECT_TRUE(ApplyRankTable(*t, 2, {"10.77.1.2"}, &env).ok());
}

// Every count and length is bounded before it is stored; each refusal names the limit.
TEST(RankTable, BoundsAreNamed) {
  const auto device = [](const std::string& id, const std::string& rank) {
    return absl::StrCat(R"({"version":"1.0","server_list":[{"server_id":"a","device":[{"device_id":")", id,
                        R"(","device_ip":"1.2.3.4","rank_id":")", rank, R"("}]}]})");
  };
  EXPECT_THAT(ErrorOf(device("65536", "0")),
              HasSubstr("\"device_id\" is \"65536\", expected an integer from 0 to 65535"));
  EXPECT_THAT(ErrorOf(device("0", "1048576")),
              HasSubstr("\"rank_id\" is \"1048576\", expected an integer from 0 to 1048575"));
  EXPECT_THAT(ErrorOf(device("0", "99999999999")), HasSubstr("expected an integer from 0 to 1048575"));
  std::string long_id = kTwoServers;
  long_id.replace(long_id.find("node-a"), 6, std::string(300, 'n'));
  EXPECT_THAT(ErrorOf(long_id), HasSubstr("\"server_id\" is 300 bytes long, over the limit of 256"));
  EXPECT_THAT(ErrorOf(std::string(kMaxRankTableBytes + 1, ' ')),
              HasSubstr(absl::StrCat(kMaxRankTableBytes + 1, " bytes, over the limit of ", kMaxRankTableBytes)));
  // A file over the limit is refused while it is read (nothing past the limit is kept).
  const std::string path = ::testing::TempDir() + "/huge_rank_table.json";
  {
    std::ofstream f(path, std::ios::binary);
    const std::string chunk(1 << 20, ' ');
    for (size_t i = 0; i <= kMaxRankTableBytes / chunk.size(); ++i) f << chunk;
  }
  auto t = LoadRankTable(path);
  std::remove(path.c_str());
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr("the rank table " + path + " is over the limit of 67108864 bytes"));
}

TEST(RankTable, FromEnvironmentNeedsRankIdAndAReadableFile) {
  Environment env;
  env.rank_table_file = "/nonexistent/table.json";
  EXPECT_THAT(std::string(ApplyRankTableFromEnvironment(&env).message()), HasSubstr("RANK_ID is not"));
  env.rank_id = 0;
  EXPECT_THAT(std::string(ApplyRankTableFromEnvironment(&env).message()),
              HasSubstr("RANK_TABLE_FILE: cannot read the rank table /nonexistent/table.json"));
}

}  // namespace
}  // namespace hccltune
