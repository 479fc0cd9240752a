// Communicator init's table fetch through the real tuning client (runtime/tuning_client): an absent daemon —
// no socket file, or a socket file nobody listens on (a killed daemon) — answers at once even with the 2 s
// HCCL_TUNE_FETCH_TIMEOUT_MS default, and a daemon that is there hands over its table.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "daemon/server.h"
#include "rpc/remote_store.h"
#include "runtime/selector/tuning.h"
#include "runtime/tuning_client/tuning_client.h"
#include "tests/unit/db/test_util.h"

namespace hccltune::daemon {
namespace {

using db::testing::MakeEntry;
using db::testing::MakeTopology;
using db::testing::TempDir;

struct Fetched {
  absl::StatusOr<std::shared_ptr<const TunedTable>> table;
  double ms;
};

Fetched Fetch(const std::string& target, const db::Topology& topo) {
  TuningContext ctx;
  ctx.env.daemon = target;
  ctx.env.mode = TuneMode::kStatic;  // no background polling
  ctx.fingerprint = topo.fingerprint;
  ctx.topology_json = topo.json;
  ctx.world_size = 8;
  ctx.authority = true;
  auto client = MakeTuningClient(ctx);
  EXPECT_NE(client, nullptr);
  if (client == nullptr) return {absl::InternalError("no client"), 0};
  const auto t0 = std::chrono::steady_clock::now();
  auto r = client->FetchTable(absl::Milliseconds(ctx.env.fetch_timeout_ms));
  return {std::move(r), std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()};
}

TEST(InitFetch, AnAbsentDaemonAnswersAtOnceAPresentOneHandsOverItsTable) {
  InstallDaemonTuning();
  TempDir dir;
  const db::Topology topo = MakeTopology(2);
  EXPECT_EQ(Environment{}.fetch_timeout_ms, 2000);

  Fetched none = Fetch("unix:" + dir.File("none.sock"), topo);
  EXPECT_TRUE(absl::IsUnavailable(none.table.status())) << none.table.status();
  EXPECT_LT(none.ms, 50) << "no socket file";

  // A socket file nobody listens on: what a SIGKILLed daemon leaves.
  const std::string stale = dir.File("stale.sock");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, stale.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
  ::close(fd);
  Fetched dead = Fetch("unix:" + stale, topo);
  EXPECT_FALSE(dead.table.ok());
  EXPECT_LT(dead.ms, 500) << "connection refused must not wait for the fetch timeout";

  DaemonConfig c;
  c.socket = dir.File("run/tuned.sock");
  c.db = dir.File("state/tuning.db");
  c.log_level = LogLevel::kError;
  auto server = TunerServer::Start(c);
  ASSERT_TRUE(server.ok()) << server.status();
  rpc::RemoteTuningStore remote("unix:" + c.socket);
  ASSERT_TRUE(remote.PutTable(topo, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "one_shot")}, {}).ok());
  Fetched live = Fetch("unix:" + c.socket, topo);
  ASSERT_TRUE(live.table.ok()) << live.table.status();
  ASSERT_NE(*live.table, nullptr);
  EXPECT_EQ((*live.table)->version, 1);
  std::printf("init fetch: no socket file %.3f ms, socket without listener %.3f ms, live daemon %.3f ms\n", none.ms,
              dead.ms, live.ms);
  (*server)->Stop(absl::ZeroDuration());
  InstallTuningClientFactory(nullptr);
}

}  // namespace
}  // namespace hccltune::daemon
