// A rolling upgrade, daemon first: hccl-tuned of topology format 2 opens a database written by the last release of
// format 1 (tests/unit/db/data/schema2-format1.db) and serves clients of that release over a real unix socket.
// Every request below is built as those clients build theirs — the same fields set (format-1 fingerprint and
// JSON; the fingerprint alone where their CLI sends it alone), and none of the fields added since, which proto3
// leaves off the wire — so the daemon sees the bytes an older runtime or CLI sends. (Newer clients against an
// hccl-tuned of format 1 run with the real binaries of that release: tests/process/mixed_versions.sh.)
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/server.h"
#include "db/sqlite_store.h"
#include "db/store_util.h"
#include "hccltune/v1/tuner.grpc.pb.h"
#include "tests/unit/db/test_util.h"

namespace hccltune::daemon {
namespace {

using db::testing::TempDir;

// One node of two ranks as the runtime of format 1 named it, and its format-2 names.
constexpr char kFp1[] = "201f47a09e7228b1";
constexpr char kJson1[] = R"({"format":1,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[2],"release":"0.1"})";
constexpr char kFp2[] = "af19111ba64fafe7";
constexpr char kShmClass[] = "0ccf22620ca1e2fc";

class MixedVersions : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.File("state"));
    std::filesystem::copy_file(HCCL_TUNE_TEST_DATA "/schema2-format1.db", dir_.File("state/tuning.db"));
    DaemonConfig c;
    c.socket = dir_.File("run/tuned.sock");
    c.db = dir_.File("state/tuning.db");
    c.log_level = LogLevel::kError;
    c.online.enabled = false;  // no version of the daemon's own while the test counts them
    auto server = TunerServer::Start(c);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::Tuner::NewStub(grpc::CreateChannel("unix:" + c.socket, grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }
  std::unique_ptr<grpc::ClientContext> Ctx() {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return c;
  }
  // GetTable as the runtime of format 1 sends it: fingerprint and JSON, world size, if_newer_than.
  grpc::Status RuntimeGetTable(int64_t if_newer_than, v1::GetTableResponse* resp) {
    v1::GetTableRequest req;
    req.mutable_topology()->set_fingerprint(kFp1);
    req.mutable_topology()->set_json(kJson1);
    req.set_world_size(2);
    req.set_if_newer_than(if_newer_than);
    return stub_->GetTable(Ctx().get(), req, resp);
  }
  // GetTable as the CLI of format 1 sends it (show/get --topology, a sweep's merge): the fingerprint alone.
  grpc::Status CliGetTable(const std::string& fp, v1::GetTableResponse* resp) {
    v1::GetTableRequest req;
    req.mutable_topology()->set_fingerprint(fp);
    return stub_->GetTable(Ctx().get(), req, resp);
  }

  TempDir dir_;
  std::unique_ptr<TunerServer> server_;
  std::unique_ptr<v1::Tuner::Stub> stub_;
};

TEST_F(MixedVersions, AnOlderRuntimeGetsItsTableAndReportsUnderTheNewKey) {
  v1::GetTableResponse resp;
  grpc::Status s = RuntimeGetTable(0, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.table().version(), 4);
  EXPECT_EQ(resp.table().entries_size(), 3);  // the world-2 entries of version 4
  EXPECT_EQ(resp.table().topology().fingerprint(), kFp2);
  EXPECT_EQ(resp.table().topology().topology_class(), kShmClass);
  // Its background poll: nothing newer.
  v1::GetTableResponse poll;
  ASSERT_TRUE(RuntimeGetTable(4, &poll).ok());
  EXPECT_TRUE(poll.unchanged());

  // Its timings, with its client id "<fingerprint>/<pid>/<rank>", count for the table's format-2 key.
  v1::ReportTimingsResponse reported;
  auto ctx = Ctx();
  auto writer = stub_->ReportTimings(ctx.get(), &reported);
  v1::TimingBatch b;
  b.mutable_topology()->set_fingerprint(kFp1);
  b.mutable_topology()->set_json(kJson1);
  b.set_client_id(absl::StrCat(kFp1, "/4242/0"));
  for (int i = 0; i < 50; ++i) {
    v1::TimingSample* t = b.add_samples();
    t->set_collective("allreduce");
    t->set_dtype("fp32");
    t->set_world_size(2);
    t->set_bytes(1024);
    t->set_configuration("one_shot(channels=1,link=shm)");
    t->set_duration_us(1.5);
    t->set_sequence(static_cast<uint64_t>(i));
  }
  ASSERT_TRUE(writer->Write(b));
  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_EQ(reported.accepted(), 50u);
  v1::GetActivityResponse act;
  ASSERT_TRUE(stub_->GetActivity(Ctx().get(), v1::GetActivityRequest(), &act).ok());
  ASSERT_EQ(act.reporters_size(), 1);
  EXPECT_EQ(act.reporters(0).fingerprint(), kFp2);
  EXPECT_EQ(act.reporters(0).samples(), 50u);
  server_->Stop();  // persists the queue
  server_.reset();
  auto store = db::OpenSqliteTuningStore(dir_.File("state/tuning.db"));
  ASSERT_TRUE(store.ok());
  auto live = (*store)->GetLiveStats(kFp2);
  ASSERT_TRUE(live.ok()) << live.status();
  uint64_t calls = 0;
  for (const db::LiveStats& l : *live) calls += l.count;
  EXPECT_EQ(calls, 616u + 50u);
  EXPECT_TRUE((*store)->GetLiveStats(kFp1)->empty());
}

// `hccl-tune sweep` of format 1 publishing its winners: it reads the latest table by fingerprint alone, merges,
// and puts it back with the JSON and a compare-and-swap on the version it read.
TEST_F(MixedVersions, AnOlderSweepMergesIntoTheMigratedTable) {
  v1::GetTableResponse read;
  grpc::Status s = CliGetTable(kFp1, &read);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(read.table().version(), 4);
  v1::PutTableRequest put;
  put.mutable_topology()->set_fingerprint(kFp1);
  put.mutable_topology()->set_json(kJson1);
  *put.mutable_entries() = read.table().entries();
  v1::TableEntry* e = put.add_entries();
  e->mutable_key()->set_collective("reducescatter");
  e->mutable_key()->set_dtype("fp32");
  e->mutable_key()->set_world_size(2);
  e->mutable_key()->set_min_bytes(1024);
  e->mutable_key()->set_max_bytes(2048);
  e->set_configuration("direct(channels=4,link=shm)");
  e->set_time_us(0.9);
  e->set_samples(5);
  put.set_expected_version(4);
  v1::PutTableResponse stored;
  s = stub_->PutTable(Ctx().get(), put, &stored);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(stored.version(), 5);
  EXPECT_TRUE(stored.changed());
  // A stale compare-and-swap is refused as before.
  put.set_expected_version(4);
  s = stub_->PutTable(Ctx().get(), put, &stored);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ABORTED) << s.error_message();

  v1::GetTableResponse now;
  ASSERT_TRUE(CliGetTable(kFp2, &now).ok());
  EXPECT_EQ(now.table().version(), 5);
  EXPECT_EQ(now.table().entries_size(), 4);
  v1::ListTablesResponse list;
  ASSERT_TRUE(stub_->ListTables(Ctx().get(), v1::ListTablesRequest(), &list).ok());
  EXPECT_EQ(list.tables_size(), 3);  // no format-1 twin appeared
}

TEST_F(MixedVersions, AnOlderCliLooksUpRollsBackWatchesAndForgetsByFormat1Fingerprints) {
  v1::GetConfigRequest get;
  get.mutable_topology()->set_fingerprint(kFp1);
  get.set_collective("allreduce");
  get.set_dtype("fp32");
  get.set_world_size(2);
  get.set_bytes(1024);
  v1::GetConfigResponse found;
  grpc::Status s = stub_->GetConfig(Ctx().get(), get, &found);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(found.found());
  EXPECT_EQ(found.table_version(), 4);

  v1::RollbackRequest back;
  back.mutable_topology()->set_fingerprint(kFp1);
  back.set_to_version(2);
  v1::RollbackResponse rolled;
  s = stub_->Rollback(Ctx().get(), back, &rolled);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(rolled.new_version(), 5);

  grpc::ClientContext watch_ctx;
  watch_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::WatchTableRequest watch;
  watch.mutable_topology()->set_fingerprint(kFp1);
  watch.set_world_size(2);
  auto reader = stub_->WatchTable(&watch_ctx, watch);
  v1::Table t;
  ASSERT_TRUE(reader->Read(&t));
  EXPECT_EQ(t.version(), 5);
  watch_ctx.TryCancel();

  // 1 node x 3 ranks, forgotten by its format-1 fingerprint.
  v1::DeleteTableRequest del;
  del.mutable_topology()->set_fingerprint("7d365a069bbf9f0e");
  v1::DeleteTableResponse deleted;
  s = stub_->DeleteTable(Ctx().get(), del, &deleted);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(deleted.versions_deleted(), 1u);
  v1::GetTableResponse gone;
  EXPECT_EQ(CliGetTable("2c0c238cc61fddfd", &gone).error_code(), grpc::StatusCode::NOT_FOUND);
  // An unknown fingerprint is still NOT_FOUND, a malformed one INVALID_ARGUMENT.
  EXPECT_EQ(CliGetTable("0123456789abcdef", &gone).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(CliGetTable("zz", &gone).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// What an older `hccl-tune status`/`show` receives: its fields as before, the additions besides.
TEST_F(MixedVersions, StatusAndListsSayTheFormatAndClass) {
  v1::StatusResponse st;
  ASSERT_TRUE(stub_->Status(Ctx().get(), v1::StatusRequest(), &st).ok());
  EXPECT_EQ(st.topology_format(), 2);
  EXPECT_EQ(st.schema_version(), db::kSchemaVersion);
  EXPECT_EQ(st.tables(), 3u);
  v1::ListTablesRequest of_class;
  of_class.set_topology_class(kShmClass);
  v1::ListTablesResponse list;
  ASSERT_TRUE(stub_->ListTables(Ctx().get(), of_class, &list).ok());
  ASSERT_EQ(list.tables_size(), 2);
  for (const v1::TableSummary& t : list.tables()) {
    EXPECT_EQ(t.topology().topology_class(), kShmClass);
    EXPECT_EQ(t.topology().json().rfind(R"({"format":2,)", 0), 0u) << t.topology().json();
  }
}

TEST_F(MixedVersions, ANewerFormatOrAMismatchedJsonIsRefusedClearly) {
  v1::GetTableRequest req;
  const std::string json3 = R"({"format":3,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[2],"release":"0.1"})";
  req.mutable_topology()->set_fingerprint(db::Sha256Hex(json3).substr(0, 16));
  req.mutable_topology()->set_json(json3);
  v1::GetTableResponse resp;
  grpc::Status s = stub_->GetTable(Ctx().get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("hccl-tuned"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("format 3"), std::string::npos) << s.error_message();
  req.mutable_topology()->set_fingerprint("0123456789abcdef");
  req.mutable_topology()->set_json(kJson1);
  s = stub_->GetTable(Ctx().get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("does not match its JSON"), std::string::npos) << s.error_message();
}

}  // namespace
}  // namespace hccltune::daemon
