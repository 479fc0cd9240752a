// A real TunerServer over a unix socket in a temp dir, reached with real gRPC clients.
#include "daemon/server.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <thread>
#include <utility>
#include <vector>

#include "db/sqlite_store.h"
#include "db/table_json.h"
#include "rpc/remote_store.h"
#include "runtime/common/daemon_discovery.h"
#include "tests/unit/db/test_util.h"

namespace hccltune::daemon {
namespace {

using db::testing::MakeEntry;
using db::testing::MakeTopology;
using db::testing::TempDir;

DaemonConfig Config(const TempDir& dir) {
  DaemonConfig c;
  c.socket = dir.File("run/tuned.sock");
  c.db = dir.File("state/tuning.db");
  c.log_level = LogLevel::kError;
  return c;
}

TEST(TunerServer, ServesTablesOverAUnixSocket) {
  TempDir dir;
  auto server = TunerServer::Start(Config(dir));
  ASSERT_TRUE(server.ok()) << server.status();
  struct stat st {};
  ASSERT_EQ(::stat(dir.File("run/tuned.sock").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);

  rpc::RemoteTuningStore remote("unix:" + dir.File("run/tuned.sock"));
  db::Topology topo = MakeTopology(2);
  auto v = remote.PutTable(topo,
                           {MakeEntry(Collective::kAllreduce, 8, 0, 65536, "one_shot"),
                            MakeEntry(Collective::kAllreduce, 8, 65536, kUnbounded, "ring")},
                           {});
  ASSERT_TRUE(v.ok()) << v.status();
  auto t = remote.GetTable(topo.fingerprint, 0);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->entries.size(), 2u);
  auto e = remote.Lookup(topo.fingerprint, Collective::kAllreduce, DataType::kFloat32, 8, 100000, 0);
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_EQ((*e)->key.range.min, 65536u);
  auto exported = db::ExportStore(remote);
  ASSERT_TRUE(exported.ok());
  EXPECT_NE(exported->find(topo.fingerprint), std::string::npos);
  auto info = remote.DaemonStatus();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->tables(), 1u);
  EXPECT_EQ(info->db_path(), dir.File("state/tuning.db"));
  EXPECT_EQ(info->schema_version(), db::kSchemaVersion);
  EXPECT_EQ(remote.GetTable(MakeTopology(5).fingerprint, 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(remote.GetTable("zz", 0).status().code(), absl::StatusCode::kInvalidArgument);
  (*server)->Stop();
  EXPECT_NE(::access(dir.File("run/tuned.sock").c_str(), F_OK), 0);  // removed
  rpc::RemoteTuningStore gone("unix:" + dir.File("run/tuned.sock"), absl::Seconds(1));
  EXPECT_EQ(gone.ListTables().status().code(), absl::StatusCode::kUnavailable);
}

TEST(TunerServer, WatchTableDeliversEveryNewVersion) {
  TempDir dir;
  auto server = TunerServer::Start(Config(dir));
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string target = "unix:" + dir.File("run/tuned.sock");
  rpc::RemoteTuningStore remote(target);
  db::Topology topo = MakeTopology(2);
  ASSERT_TRUE(remote.PutTable(topo, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "ring")}, {}).ok());

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::WatchTableRequest req;
  req.mutable_topology()->set_fingerprint(topo.fingerprint);
  auto reader = remote.stub().WatchTable(&ctx, req);
  v1::Table t;
  ASSERT_TRUE(reader->Read(&t));  // the current one first
  EXPECT_EQ(t.version(), 1);
  ASSERT_TRUE(remote.PutTable(topo, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "bruck")}, {}).ok());
  ASSERT_TRUE(reader->Read(&t));
  EXPECT_EQ(t.version(), 2);
  EXPECT_EQ(t.entries(0).configuration().rfind("bruck", 0), 0u);
  ASSERT_TRUE(remote.Rollback(topo.fingerprint, 1).ok());
  ASSERT_TRUE(reader->Read(&t));
  EXPECT_EQ(t.version(), 3);
  // SIGTERM-style stop ends the stream cleanly.
  std::thread stopper([&] { (*server)->Stop(); });
  EXPECT_FALSE(reader->Read(&t));
  EXPECT_TRUE(reader->Finish().ok());
  stopper.join();
}

TEST(TunerServer, ReportTimingsStreamIsPersisted) {
  TempDir dir;
  auto server = TunerServer::Start(Config(dir));
  ASSERT_TRUE(server.ok()) << server.status();
  rpc::RemoteTuningStore remote("unix:" + dir.File("run/tuned.sock"));
  db::Topology topo = MakeTopology(2);
  grpc::ClientContext ctx;
  v1::ReportTimingsResponse resp;
  auto writer = remote.stub().ReportTimings(&ctx, &resp);
  v1::TimingBatch b;
  b.mutable_topology()->set_fingerprint(topo.fingerprint);
  for (int i = 0; i < 100; ++i) {
    auto* s = b.add_samples();
    s->set_collective("allreduce");
    s->set_dtype("fp32");
    s->set_world_size(8);
    s->set_bytes(1024);
    s->set_configuration("ring");
    s->set_duration_us(3);
  }
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(writer->Write(b));
  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_EQ(resp.accepted(), 1000u);
  (*server)->Stop();  // persists the queue
  auto store = db::OpenSqliteTuningStore(dir.File("state/tuning.db"));
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->Info()->live_samples, 1000u);
}

TEST(TunerServer, OversizedMessageIsResourceExhausted) {
  TempDir dir;
  DaemonConfig c = Config(dir);
  c.max_message_bytes = 64 << 10;
  auto server = TunerServer::Start(c);
  ASSERT_TRUE(server.ok()) << server.status();
  rpc::RemoteTuningStore remote("unix:" + dir.File("run/tuned.sock"));
  std::vector<db::TunedEntry> many;
  for (int i = 0; i < 2000; ++i) many.push_back(MakeEntry(Collective::kAllreduce, 8, i, i + 1, "ring"));
  EXPECT_EQ(remote.PutTable(MakeTopology(2), many, {}).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(TunerServer, SecondDaemonOnTheSameSocketIsRefused) {
  TempDir dir;
  auto first = TunerServer::Start(Config(dir));
  ASSERT_TRUE(first.ok()) << first.status();
  DaemonConfig c = Config(dir);
  c.db = dir.File("state/other.db");
  auto second = TunerServer::Start(c);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("another hccl-tuned is serving"), std::string::npos) << second.status();
  EXPECT_TRUE(UnixSocketAnswers(dir.File("run/tuned.sock")));  // the first still serves
}

TEST(TunerServer, StaleSocketIsReplacedButOtherFilesAreNot) {
  TempDir dir;
  ASSERT_EQ(::mkdir(dir.File("run").c_str(), 0755), 0);
  // A stale socket: bound, then its owner went away.
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, dir.File("run/tuned.sock").c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
  auto server = TunerServer::Start(Config(dir));
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE(UnixSocketAnswers(dir.File("run/tuned.sock")));
  (*server)->Stop();

  std::ofstream(dir.File("run/tuned.sock")) << "not a socket";
  auto refused = TunerServer::Start(Config(dir));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("is not a socket"), std::string::npos) << refused.status();
}

TEST(TunerServer, ForeignDatabaseIsRefused) {
  TempDir dir;
  ASSERT_EQ(::mkdir(dir.File("state").c_str(), 0755), 0);
  std::ofstream(dir.File("state/tuning.db")) << "precious";
  auto server = TunerServer::Start(Config(dir));
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("not an SQLite database"), std::string::npos) << server.status();
}

TEST(TunerServer, ListensOnTcpWhenAsked) {
  TempDir dir;
  DaemonConfig c = Config(dir);
  c.listen = "127.0.0.1:0";
  auto server = TunerServer::Start(c);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->tcp_port(), 0);
  rpc::RemoteTuningStore remote("127.0.0.1:" + std::to_string((*server)->tcp_port()));
  EXPECT_TRUE(remote.ListTables().ok());
}

TEST(TunerServer, RefusesPlaintextTcpOnANonLoopbackAddressUnlessInsecure) {
  TempDir dir;
  DaemonConfig c = Config(dir);
  c.listen = "0.0.0.0:0";
  auto refused = TunerServer::Start(c);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("plaintext on 0.0.0.0:0"), std::string::npos) << refused.status();
  EXPECT_NE(refused.status().message().find("--insecure"), std::string::npos) << refused.status();
  c.insecure_listen = true;
  auto server = TunerServer::Start(c);
  ASSERT_TRUE(server.ok()) << server.status();
  rpc::RemoteTuningStore remote("127.0.0.1:" + std::to_string((*server)->tcp_port()));
  EXPECT_TRUE(remote.ListTables().ok());
}

TEST(DaemonDiscovery, ResolvesPerConventions) {
  auto env = Environment::LoadFrom(std::map<std::string, std::string>{{"XDG_RUNTIME_DIR", "/run/user/7"}});
  ASSERT_TRUE(env.ok());
  auto none = [](const std::string&) { return false; };
  auto all = [](const std::string&) { return true; };
  EXPECT_EQ(ResolveDaemonTarget(*env, "", 7, none)->grpc_target, "unix:/run/user/7/hccl-tune/tuned.sock");
  EXPECT_EQ(ResolveDaemonTarget(*env, "", 7, all)->grpc_target, "unix:/run/hccl-tune/tuned.sock");
  auto bare = Environment::LoadFrom(std::map<std::string, std::string>{});
  EXPECT_EQ(ResolveDaemonTarget(*bare, "", 7, none)->socket_path, "/tmp/hccl-tune-7/tuned.sock");
  EXPECT_EQ(ResolveDaemonTarget(*bare, "node1:7070", 7, none)->grpc_target, "node1:7070");
  EXPECT_EQ(ResolveDaemonTarget(*bare, "unix:///x/y.sock", 7, none)->socket_path, "/x/y.sock");
  EXPECT_TRUE(ResolveDaemonTarget(*bare, "off", 7, none)->disabled);
  auto with_env = Environment::LoadFrom(std::map<std::string, std::string>{{"HCCL_TUNE_DAEMON", "unix:/a.sock"}});
  EXPECT_EQ(ResolveDaemonTarget(*with_env, "", 7, all)->socket_path, "/a.sock");
  EXPECT_FALSE(ParseDaemonTarget("unix:relative").ok());
  EXPECT_FALSE(ParseDaemonTarget("host").ok());
  EXPECT_FALSE(ParseDaemonTarget("host:99999").ok());
  auto bad_env = Environment::LoadFrom(std::map<std::string, std::string>{{"HCCL_TUNE_DAEMON", "nonsense"}});
  auto r = ResolveDaemonTarget(*bad_env, "", 7, none);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("HCCL_TUNE_DAEMON"), std::string::npos);
}

TEST(DaemonConfigFile, ParsesAndRejectsWithLineNumbers) {
  DaemonConfig c;
  ASSERT_TRUE(ApplyConfigText("# comment\nsocket = /x.sock\n\nlog_level = debug\nmax_versions=4\n", "f", &c).ok());
  EXPECT_EQ(c.socket, "/x.sock");
  EXPECT_EQ(c.log_level, LogLevel::kDebug);
  EXPECT_EQ(c.max_versions, 4);
  auto unknown = ApplyConfigText("socket = /x\ncolour = blue\n", "f.conf", &c);
  EXPECT_NE(unknown.message().find("f.conf:2: unknown key 'colour'"), std::string::npos) << unknown;
  EXPECT_FALSE(ApplyConfigText("max_versions = 1\n", "f", &c).ok());
  EXPECT_FALSE(ApplyConfigText("just words\n", "f", &c).ok());
}

TEST(DaemonConfigFile, MissingIsNotFoundButUnreadableIsAnErrorNamingThePath) {
  TempDir dir;
  DaemonConfig c;
  auto missing = ApplyConfigFile(dir.File("none.conf"), &c);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  // A path that exists but cannot be read is not "missing": hccl-tuned must not skip it as an absent default.
  ASSERT_EQ(::mkdir(dir.File("adir.conf").c_str(), 0755), 0);
  auto directory = ApplyConfigFile(dir.File("adir.conf"), &c);
  EXPECT_EQ(directory.code(), absl::StatusCode::kFailedPrecondition) << directory;
  EXPECT_NE(directory.message().find(dir.File("adir.conf")), std::string::npos) << directory;
  const std::string secret = dir.File("secret.conf");
  std::ofstream(secret) << "log_level = debug\n";
  ASSERT_EQ(::chmod(secret.c_str(), 0600), 0);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  // Read by another user (root reads anything): a child that gives up root when it has it.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::geteuid() == 0 && ::setuid(65534) != 0) ::_exit(10);
    DaemonConfig cc;
    absl::Status s = ApplyConfigFile(secret, &cc);
    if (s.code() != absl::StatusCode::kPermissionDenied) ::_exit(12);
    if (s.message().find(secret) == std::string::npos) ::_exit(13);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: cannot drop root, 12: not PermissionDenied, 13: path not named";
  EXPECT_TRUE(ApplyConfigFile(secret, &c).ok() || ::geteuid() != 0);
}

TEST(DaemonConfigFile, FilesAndValuesOverTheirLimitsAreRefusedNamingTheLimit) {
  TempDir dir;
  DaemonConfig c;
  const std::string big = dir.File("big.conf");
  {
    std::ofstream f(big);
    const std::string comment = "# " + std::string(1022, 'x') + "\n";
    for (size_t i = 0; i <= kMaxConfigFileBytes / comment.size(); ++i) f << comment;
  }
  auto too_big = ApplyConfigFile(big, &c);
  EXPECT_EQ(too_big.code(), absl::StatusCode::kInvalidArgument) << too_big;
  EXPECT_NE(too_big.message().find("config file " + big + " is over the limit of 1048576 bytes"), std::string::npos)
      << too_big;
  auto long_value = ApplyConfigText("log_level = info\nsweep_command = " + std::string(5000, 'a') + "\n", "f.conf", &c);
  EXPECT_NE(long_value.message().find("f.conf:2: sweep_command: a value of 5000 bytes is over the limit of 4096 bytes"),
            std::string::npos)
      << long_value;
  EXPECT_NE(ApplyConfigText(std::string(kMaxConfigFileBytes + 1, '#'), "g.conf", &c)
                .message()
                .find("g.conf: 1048577 bytes, over the limit of 1048576 bytes"),
            std::string::npos);
}

TEST(DaemonConfigFile, ChangedKeysNameEveryKeyThatDiffers) {
  const DaemonConfig base;
  EXPECT_TRUE(ChangedConfigKeys(base, base).empty());
  // Every key of the file, set to a value other than the default, is reported, and only it.
  const std::vector<std::pair<std::string, std::string>> keys = {
      {"socket", "/x.sock"},
      {"listen", "127.0.0.1:1"},
      {"db", "/x.db"},
      {"log_level", "trace"},
      {"max_versions", "7"},
      {"ingest_queue_samples", "2048"},
      {"max_message_bytes", "1048576"},
      {"sweep_command", "/bin/true"},
      {"online_policy", "off"},
      {"online_regression_ratio", "1.7"},
      {"online_min_samples", "65"},
      {"online_window", "300"},
      {"online_explore_every", "9"},
      {"online_explore_calls", "100"},
      {"online_explore_max_ratio", "3"},
      {"online_explore_min_samples", "17"},
      {"online_interval_ms", "600"},
      {"online_explore_timeout_s", "30"},
      {"online_cooldown_s", "5"},
      {"online_min_regression_us", "3"},
      {"mini_sweep", "off"},
      {"mini_sweep_idle_s", "10"},
      {"mini_sweep_max_per_hour", "9"},
  };
  for (const auto& [key, value] : keys) {
    DaemonConfig changed;
    ASSERT_TRUE(ApplyConfigText(key + " = " + value + "\n", "f", &changed).ok()) << key;
    EXPECT_EQ(ChangedConfigKeys(base, changed), std::vector<std::string>{key}) << key;
  }
  DaemonConfig two;
  ASSERT_TRUE(ApplyConfigText("log_level = debug\nmini_sweep_idle_s = 30\n", "f", &two).ok());
  EXPECT_EQ(ChangedConfigKeys(base, two), (std::vector<std::string>{"log_level", "mini_sweep_idle_s"}));
}

}  // namespace
}  // namespace hccltune::daemon
