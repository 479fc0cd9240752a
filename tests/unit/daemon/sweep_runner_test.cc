// SweepRunner with a stand-in sweep command (a shell script printing the sweep's --json lines): progress relayed,
// one sweep at a time, cancel by SIGINT to the process group (and SIGKILL after the grace), failures named,
// the end state kept for late watchers. Also SweepChildArgs validation, the activity tracker and the sweep
// journal handlers.
#include "daemon/sweep_runner.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "daemon/activity.h"
#include "daemon/grpc_service.h"
#include "daemon/handlers.h"
#include "db/memory_store.h"
#include "rpc/sweep_convert.h"

namespace hccltune::daemon {
namespace {

class SweepRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sweep_runner_test.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  // A fake hccl-tune: `body` is the shell script's text; "$@" holds the sweep arguments.
  std::string Script(const std::string& body) {
    const std::string path = dir_ + "/fake-hccl-tune";
    std::ofstream(path) << "#!/bin/sh\n" << body;
    ::chmod(path.c_str(), 0755);
    return path;
  }
  SweepRunnerOptions Options(const std::string& command) {
    SweepRunnerOptions o;
    o.command = command;
    o.daemon_target = "unix:/nonexistent.sock";
    o.stop_grace = absl::Seconds(2);
    return o;
  }
  // Follows `id` to its final state; returns every state seen.
  std::vector<v1::SweepProgress> Follow(SweepRunner& r, const std::string& id) {
    std::vector<v1::SweepProgress> seen;
    uint64_t seq = 0;
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      v1::SweepProgress p;
      absl::StatusOr<bool> changed = r.Wait(id, &seq, absl::Milliseconds(100), &p);
      EXPECT_TRUE(changed.ok()) << changed.status();
      if (!changed.ok()) break;
      if (!*changed) continue;
      seen.push_back(p);
      if (p.state() >= v1::SweepProgress::DONE) break;
    }
    return seen;
  }
  std::string dir_;
};

TEST_F(SweepRunnerTest, RelaysProgressAndResult) {
  SweepRunner r(Options(
      Script("echo \"$@\" > \"$(dirname \"$0\")/args\"\n"
             "echo '{\"event\":\"progress\",\"done\":1,\"total\":2,\"point\":\"allreduce fp32 1K\",\"config\":\"ring\","
             "\"eta_s\":1.5}'\n"
             "echo 'not json'\n"
             "echo '{\"event\":\"progress\",\"done\":2,\"total\":2,\"point\":\"allreduce fp32 2K\",\"config\":\"ring\","
             "\"eta_s\":0}'\n"
             "echo '{\"event\":\"done\",\"table_version\":3}'\n")));
  v1::StartSweepRequest req;
  req.set_ranks(3);
  req.add_collectives("allreduce");
  req.add_collectives("allgather");
  req.set_max_bytes(4096);
  auto id = r.Start(req);
  ASSERT_TRUE(id.ok()) << id.status();
  auto seen = Follow(r, *id);
  ASSERT_FALSE(seen.empty());
  const v1::SweepProgress& last = seen.back();
  EXPECT_EQ(last.state(), v1::SweepProgress::DONE) << last.message();
  EXPECT_EQ(last.done(), 2u);
  EXPECT_EQ(last.total(), 2u);
  EXPECT_EQ(last.point(), "allreduce fp32 2K");
  EXPECT_TRUE(absl::StrContains(last.result_json(), "\"table_version\":3"));
  EXPECT_EQ(last.exit_code(), 0);
  EXPECT_EQ(r.running_id(), "");
  std::ifstream args(dir_ + "/args");
  std::string line;
  std::getline(args, line);
  EXPECT_TRUE(absl::StrContains(line, "sweep --json --plain --daemon unix:/nonexistent.sock --ranks 3")) << line;
  EXPECT_TRUE(absl::StrContains(line, "--sweep-id " + *id)) << line;
  EXPECT_TRUE(absl::StrContains(line, "--coll allreduce,allgather --max-bytes 4096")) << line;
  // A late watcher gets the end state at once.
  uint64_t seq = 0;
  v1::SweepProgress again;
  auto changed = r.Wait(*id, &seq, absl::Milliseconds(10), &again);
  ASSERT_TRUE(changed.ok() && *changed) << changed.status();
  EXPECT_EQ(again.state(), v1::SweepProgress::DONE);
  auto resolved = r.Resolve("");
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(*resolved, *id);
}

TEST_F(SweepRunnerTest, OneAtATimeAndCancelBySigint) {
  // Exits 130 on SIGINT like a sweep stopped by Ctrl-C.
  SweepRunner r(
      Options(Script("trap 'exit 130' INT\n"
                     "echo '{\"event\":\"progress\",\"done\":1,\"total\":9,\"point\":\"p\",\"config\":\"c\"}'\n"
                     "while true; do sleep 0.05; done\n")));
  auto id = r.Start(v1::StartSweepRequest());
  ASSERT_TRUE(id.ok()) << id.status();
  auto second = r.Start(v1::StartSweepRequest());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(second.status().message(), "sweep " + *id + " is running")) << second.status();
  EXPECT_EQ(r.running_id(), *id);
  auto c = r.Cancel("");
  ASSERT_TRUE(c.ok()) << c.status();
  auto seen = Follow(r, *id);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().state(), v1::SweepProgress::CANCELLED);
  EXPECT_EQ(seen.back().exit_code(), 130);
  EXPECT_TRUE(absl::StrContains(seen.back().message(), "--resume " + *id)) << seen.back().message();
  EXPECT_EQ(r.Cancel("").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.Cancel("sw-nosuch").status().code(), absl::StatusCode::kNotFound);
  // The next sweep may start now.
  auto next = r.Start(v1::StartSweepRequest());
  ASSERT_TRUE(next.ok()) << next.status();
  r.Shutdown();  // cancels and reaps it
  EXPECT_EQ(r.running_id(), "");
  EXPECT_EQ(r.Start(v1::StartSweepRequest()).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(SweepRunnerTest, KillsAfterTheGraceAndTheWholeGroup) {
  // Ignores SIGINT; a grandchild in the same process group must die too.
  const std::string pidfile = dir_ + "/grandchild";
  SweepRunner r(Options(Script("trap '' INT\n(trap '' INT; sleep 1000) &\necho $! > " + pidfile +
                               "\nwhile true; do sleep 0.05; done\n")));
  auto id = r.Start(v1::StartSweepRequest());
  ASSERT_TRUE(id.ok()) << id.status();
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_TRUE(r.Cancel(*id).ok());
  const absl::Time t0 = absl::Now();
  auto seen = Follow(r, *id);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().state(), v1::SweepProgress::CANCELLED);
  EXPECT_GE(absl::Now() - t0, absl::Seconds(1.5));
  int grandchild = 0;
  std::ifstream(pidfile) >> grandchild;
  ASSERT_GT(grandchild, 0);
  // Gone, or a zombie waiting for init to reap it (its parent died with it).
  auto alive = [](int pid) {
    if (::kill(pid, 0) != 0) return false;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string pid_field, comm, state;
    stat >> pid_field >> comm >> state;
    return state != "Z";
  };
  for (int i = 0; i < 50 && alive(grandchild); ++i) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(alive(grandchild)) << "grandchild " << grandchild << " survived";
}

TEST_F(SweepRunnerTest, EvictedAndUnknownSweepsAreNotFoundAndTheirWatchEnds) {
  SweepRunnerOptions o = Options(Script("echo '{\"event\":\"done\",\"table_version\":1}'\n"));
  o.keep_finished = 1;
  SweepRunner r(o);
  auto first = r.Start(v1::StartSweepRequest());
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_FALSE(Follow(r, *first).empty());
  auto second = r.Start(v1::StartSweepRequest());  // evicts the first (keep_finished = 1)
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_FALSE(Follow(r, *second).empty());
  uint64_t seq = 0;
  v1::SweepProgress p;
  const absl::Time t0 = absl::Now();
  absl::StatusOr<bool> gone = r.Wait(*first, &seq, absl::Seconds(5), &p);
  EXPECT_LT(absl::Now() - t0, absl::Seconds(1));  // at once, not after the timeout
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(gone.status().message(), *first)) << gone.status();
  EXPECT_EQ(r.Resolve(*first).status().code(), absl::StatusCode::kNotFound);

  // Through gRPC: a watch of the evicted sweep and of one never run ends promptly with NOT_FOUND naming it.
  db::InMemoryTuningStore store;
  LiveIngest ingest(&store, IngestOptions{1000, 500, 10});
  TunerHandlers h(&store, &ingest, HandlerLimits{4, 100});
  TunerService service(&h, &r);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + dir_ + "/s.sock", grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = v1::Tuner::NewStub(grpc::CreateChannel("unix:" + dir_ + "/s.sock", grpc::InsecureChannelCredentials()));
  for (const std::string& id : {*first, std::string("sw-nosuch")}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::WatchSweepRequest req;
    req.set_sweep_id(id);
    auto reader = stub->WatchSweep(&ctx, req);
    v1::SweepProgress got;
    EXPECT_FALSE(reader->Read(&got));
    grpc::Status end = reader->Finish();
    EXPECT_EQ(end.error_code(), grpc::StatusCode::NOT_FOUND) << id << ": " << end.error_message();
    EXPECT_TRUE(absl::StrContains(end.error_message(), id)) << end.error_message();
  }
  // The kept sweep is still watched to its end.
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::WatchSweepRequest req;
  req.set_sweep_id(*second);
  auto reader = stub->WatchSweep(&ctx, req);
  v1::SweepProgress got;
  ASSERT_TRUE(reader->Read(&got));
  EXPECT_EQ(got.state(), v1::SweepProgress::DONE);
  EXPECT_FALSE(reader->Read(&got));
  EXPECT_TRUE(reader->Finish().ok());
  server->Shutdown();
}

TEST_F(SweepRunnerTest, FailureNamesTheReason) {
  SweepRunner r(Options(Script("echo 'hccl-tune: refusing to sweep a busy node (load 9)' >&2\nexit 1\n")));
  auto id = r.Start(v1::StartSweepRequest());
  ASSERT_TRUE(id.ok());
  auto seen = Follow(r, *id);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().state(), v1::SweepProgress::FAILED);
  EXPECT_TRUE(absl::StrContains(seen.back().message(), "refusing to sweep a busy node")) << seen.back().message();
}

// A sweep whose rank froze says so in its "failed" event (tests/process/sweep_daemon.sh runs the real thing): that
// account is the FAILED message, not the last error line a rank printed.
TEST_F(SweepRunnerTest, FailureNamesTheRankTheSweepBlamed) {
  SweepRunner r(Options(
      Script("echo '{\"event\":\"progress\",\"done\":1,\"total\":9,\"point\":\"p\",\"config\":\"c\"}'\n"
             "echo 'hccl-tune: rank 0 (pid 41) exited or was killed; shm link to it is dead' >&2\n"
             "echo 'hccl-tune sweep: rank 1 (pid 42) was stopped (SIGSTOP or job control) and was ended' >&2\n"
             "echo '{\"event\":\"failed\",\"message\":\"rank 1 (pid 42) was stopped (SIGSTOP or job control) and was "
             "ended\"}'\n"
             "echo 'hccl-tune: a later line on stderr' >&2\n"
             "exit 1\n")));
  auto id = r.Start(v1::StartSweepRequest());
  ASSERT_TRUE(id.ok()) << id.status();
  auto seen = Follow(r, *id);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().state(), v1::SweepProgress::FAILED);
  EXPECT_EQ(seen.back().exit_code(), 1);
  EXPECT_EQ(seen.back().message(),
            "the sweep process ended with exit status 1: rank 1 (pid 42) was stopped (SIGSTOP or job control) and was "
            "ended");
}

TEST_F(SweepRunnerTest, MissingCommandAndBadRequests) {
  SweepRunner none(Options(dir_ + "/missing"));
  auto s = none.Start(v1::StartSweepRequest());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "sweep_command")) << s.status();
  v1::StartSweepRequest bad;
  bad.set_ranks(1000);
  EXPECT_EQ(SweepChildArgs(bad, "x", "t", 64).status().code(), absl::StatusCode::kInvalidArgument);
  bad = v1::StartSweepRequest();
  bad.add_collectives("--db=/etc/passwd");
  auto a = SweepChildArgs(bad, "x", "t", 64);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  bad = v1::StartSweepRequest();
  bad.set_min_bytes(4096);
  bad.set_max_bytes(1024);
  EXPECT_TRUE(absl::StrContains(SweepChildArgs(bad, "x", "t", 64).status().message(), "inverted"));
}

TEST(ActivityTrackerTest, RecentReportersWithinTheWindow) {
  ActivityTracker t;
  const absl::Time now = absl::FromUnixSeconds(1700000000);
  t.Note("fp/1/0", "fp", 10, now - absl::Seconds(100));
  t.Note("fp/2/0", "fp", 5, now - absl::Seconds(5));
  t.Note("fp/2/0", "fp", 7, now - absl::Seconds(1));
  t.Note("fp/2/1", "fp", 3, now - absl::Seconds(2));
  auto r = t.Recent(absl::Seconds(30), now);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].client_id, "fp/2/0");
  EXPECT_EQ(r[0].samples, 12u);
  EXPECT_EQ(r[1].client_id, "fp/2/1");
  EXPECT_EQ(t.Recent(absl::Seconds(200), now).size(), 3u);
  EXPECT_TRUE(t.Recent(absl::Seconds(30), now + ActivityTracker::kForget + absl::Seconds(1)).empty());
}

TEST(SweepJournalHandlersTest, RoundTripThroughTheHandlers) {
  db::InMemoryTuningStore store;
  LiveIngest ingest(&store, IngestOptions{1000, 500, 10});
  TunerHandlers h(&store, &ingest, HandlerLimits{4, 100});
  db::Sweep sweep{"sw-1", "{}", db::SweepStatus::kRunning, 0.5, 1000, 0, ""};
  v1::PutSweepRequest put;
  rpc::SweepToProto(sweep, put.mutable_sweep());
  v1::PutSweepResponse put_resp;
  ASSERT_TRUE(h.PutSweep(put, &put_resp).ok());
  v1::AddSweepSamplesRequest add;
  add.set_sweep_id("sw-1");
  for (int i = 0; i < 3; ++i) {
    rpc::SweepSampleToProto(db::SweepSample{Collective::kAllreduce, DataType::kFloat32, 2, 1024,
                                            "ring(chunk=1M,channels=1,link=shm)", 10.0 + i, 9.0, i},
                            add.add_samples());
  }
  v1::AddSweepSamplesResponse add_resp;
  ASSERT_TRUE(h.AddSweepSamples(add, &add_resp).ok());
  EXPECT_EQ(add_resp.stored(), 3u);
  std::vector<v1::SweepSampleChunk> chunks;
  v1::GetSweepSamplesRequest get;
  get.set_sweep_id("sw-1");
  ASSERT_TRUE(h.GetSweepSamples(get, &chunks, 2).ok());
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].samples_size() + chunks[1].samples_size(), 3);
  v1::GetSweepRequest gs;
  gs.set_id("sw-1");
  v1::SweepRecord rec;
  ASSERT_TRUE(h.GetSweep(gs, &rec).ok());
  EXPECT_EQ(rec.status(), "running");
  // Over the per-request limit, unknown names, bad status: InvalidArgument naming the problem.
  for (int i = 0; i < 2; ++i) add.add_samples()->CopyFrom(add.samples(0));
  EXPECT_EQ(h.AddSweepSamples(add, &add_resp).code(), absl::StatusCode::kInvalidArgument);
  add.mutable_samples()->DeleteSubrange(1, 4);
  add.mutable_samples(0)->set_collective("warp");
  auto bad = h.AddSweepSamples(add, &add_resp);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.message(), "samples[0]")) << bad;
  put.mutable_sweep()->set_status("sleeping");
  EXPECT_EQ(h.PutSweep(put, &put_resp).code(), absl::StatusCode::kInvalidArgument);
  v1::GetActivityRequest act;
  act.set_window_s(-1);
  v1::GetActivityResponse act_resp;
  EXPECT_EQ(h.GetActivity(act, &act_resp).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hccltune::daemon
