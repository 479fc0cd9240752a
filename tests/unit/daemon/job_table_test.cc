// daemon/job_table: rank states from heartbeats, expiry, job ids, ownership, bounds, the job's nodes, and a dump
// request answered by one rank while another is silent; the heartbeats' node lists as a process sends them.
#include "daemon/job_table.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "runtime/tuning_client/heartbeat.h"

namespace hccltune::daemon {
namespace {

// A heartbeat of `rank` of a 3-rank job with one communicator "world" (tag 00..01).
v1::HeartbeatRequest Beat(const std::string& job, int rank, int64_t started, int64_t completed, double blocked_s) {
  v1::HeartbeatRequest b;
  b.set_job_id(job);
  b.set_rank(rank);
  b.set_world_size(3);
  b.set_pid(1000 + rank);
  b.set_host("h");
  v1::CommProgress* c = b.add_comms();
  c->set_name("world");
  c->set_comm_tag("0000000000000001");
  c->set_rank(rank);
  c->set_size(3);
  c->set_last_started(started);
  c->set_started_collective("allreduce");
  c->set_started_bytes(8);
  c->set_last_completed(completed);
  c->set_completed_collective("allreduce");
  c->set_completed_bytes(8);
  c->set_in_call(started > completed);
  c->set_blocked_s(blocked_s);
  return b;
}

std::map<int, std::string> States(JobTable& t, const std::string& job, absl::Time now) {
  auto jobs = t.List(job, now);
  EXPECT_TRUE(jobs.ok()) << jobs.status();
  std::map<int, std::string> out;
  if (!jobs.ok()) return out;
  for (const v1::JobRank& r : jobs->jobs(0).ranks()) out[r.rank()] = r.state();
  return out;
}

TEST(JobTable, TheRankTheOthersWaitForIsStalled) {
  JobTable t({}, "h");
  const absl::Time now = absl::FromUnixSeconds(1000);
  ASSERT_TRUE(t.Heartbeat(Beat("store:x#1", 0, 11, 10, 3.0), 1000, now).ok());
  ASSERT_TRUE(t.Heartbeat(Beat("store:x#1", 1, 11, 10, 0.5), 1000, now).ok());
  ASSERT_TRUE(t.Heartbeat(Beat("store:x#1", 2, 10, 10, 0), 1000, now).ok());
  EXPECT_EQ(States(t, "store:x#1", now), (std::map<int, std::string>{{0, "waiting"}, {1, "in-call"}, {2, "stalled"}}));
  // Healthy: everyone between calls, or briefly in one.
  ASSERT_TRUE(t.Heartbeat(Beat("store:x#1", 0, 12, 12, 0), 1000, now).ok());
  ASSERT_TRUE(t.Heartbeat(Beat("store:x#1", 1, 13, 12, 0.05), 1000, now).ok());
  EXPECT_EQ(States(t, "store:x#1", now), (std::map<int, std::string>{{0, "idle"}, {1, "in-call"}, {2, "idle"}}));
}

TEST(JobTable, SilentRanksThenExpiredJobs) {
  JobTable t({}, "h");
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  ASSERT_TRUE(t.Heartbeat(Beat("j", 0, 5, 5, 0), std::nullopt, t0).ok());
  ASSERT_TRUE(t.Heartbeat(Beat("j", 1, 5, 5, 0), std::nullopt, t0 + absl::Seconds(3)).ok());
  EXPECT_EQ(States(t, "j", t0 + absl::Seconds(4)), (std::map<int, std::string>{{0, "silent"}, {1, "idle"}}));
  EXPECT_EQ(States(t, "j", t0 + absl::Seconds(11)), (std::map<int, std::string>{{1, "silent"}}));
  auto gone = t.List("j", t0 + absl::Seconds(14));
  EXPECT_TRUE(absl::IsNotFound(gone.status())) << gone.status();
  auto all = t.List("", t0 + absl::Seconds(14));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->jobs_size(), 0);
}

TEST(JobTable, UnknownAndAmbiguousJobIdsAreNamed) {
  JobTable t({}, "node7");
  const absl::Time now = absl::Now();
  ASSERT_TRUE(t.Heartbeat(Beat("slurm:12.0", 0, 1, 1, 0), std::nullopt, now).ok());
  auto bare = t.List("12.0", now);
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->jobs(0).job_id(), "slurm:12.0");
  auto unknown = t.List("nosuch", now);
  ASSERT_TRUE(absl::IsNotFound(unknown.status()));
  EXPECT_NE(unknown.status().message().find("no running job 'nosuch' on node7 (jobs: slurm:12.0"), std::string::npos)
      << unknown.status();
  auto dump = t.Dump("nosuch", std::nullopt, true, absl::Milliseconds(10));
  EXPECT_TRUE(absl::IsNotFound(dump.status())) << dump.status();
  ASSERT_TRUE(t.Heartbeat(Beat("torchrun:12.0", 0, 1, 1, 0), std::nullopt, now).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(t.List("12.0", now).status()));
}

TEST(JobTable, AJobBelongsToItsFirstUid) {
  JobTable t({}, "h");
  const absl::Time now = absl::Now();
  ASSERT_TRUE(t.Heartbeat(Beat("j", 0, 1, 1, 0), 1000, now).ok());
  auto other = t.Heartbeat(Beat("j", 1, 1, 1, 0), 1001, now);
  ASSERT_TRUE(absl::IsPermissionDenied(other.status()));
  EXPECT_NE(other.status().message().find("job j is reported by uid 1000"), std::string::npos) << other.status();
  auto dump = t.Dump("j", 1001, /*privileged=*/false, absl::Milliseconds(10));
  ASSERT_TRUE(absl::IsPermissionDenied(dump.status()));
  EXPECT_NE(dump.status().message().find("belongs to uid 1000"), std::string::npos) << dump.status();
}

TEST(JobTable, BoundsAndBadHeartbeatsAreRefusedNamingThem) {
  JobLimits limits;
  limits.max_jobs = 2;
  limits.max_ranks = 2;
  JobTable t(limits, "h");
  const absl::Time now = absl::Now();
  ASSERT_TRUE(t.Heartbeat(Beat("a", 0, 1, 1, 0), std::nullopt, now).ok());
  ASSERT_TRUE(t.Heartbeat(Beat("a", 1, 1, 1, 0), std::nullopt, now).ok());
  EXPECT_TRUE(absl::IsResourceExhausted(t.Heartbeat(Beat("a", 2, 1, 1, 0), std::nullopt, now).status()));
  ASSERT_TRUE(t.Heartbeat(Beat("b", 0, 1, 1, 0), std::nullopt, now).ok());
  auto full = t.Heartbeat(Beat("c", 0, 1, 1, 0), std::nullopt, now);
  ASSERT_TRUE(absl::IsResourceExhausted(full.status()));
  EXPECT_NE(full.status().message().find("full (2 jobs)"), std::string::npos) << full.status();
  v1::HeartbeatRequest bad = Beat("a", 5, 1, 1, 0);
  auto refused = t.Heartbeat(bad, std::nullopt, now);
  ASSERT_TRUE(absl::IsInvalidArgument(refused.status()));
  EXPECT_NE(refused.status().message().find("rank 5 is not within world_size 3"), std::string::npos);
}

void AddNode(v1::HeartbeatRequest* b, const std::string& name, std::vector<std::string> addresses,
             std::vector<int> ranks) {
  v1::JobNode* n = b->add_nodes();
  n->set_name(name);
  for (const std::string& a : addresses) n->add_addresses(a);
  for (int r : ranks) n->add_ranks(r);
}

TEST(JobTable, TheJobsNodesAreKeptFromTheNewestBeatThatCarriesThem) {
  JobTable t({}, "h");
  const absl::Time now = absl::FromUnixSeconds(1000);
  v1::HeartbeatRequest b = Beat("store:x#1", 0, 1, 1, 0);
  AddNode(&b, "n0", {"10.0.0.1"}, {0, 1});
  AddNode(&b, "n1", {"10.0.0.2", "10.1.0.2"}, {2});
  ASSERT_TRUE(t.Heartbeat(b, 1000, now).ok());
  ASSERT_TRUE(t.Heartbeat(Beat("store:x#1", 0, 2, 2, 0), 1000, now).ok());  // the next beats carry none
  auto jobs = t.List("store:x#1", now);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  const v1::Job& job = jobs->jobs(0);
  ASSERT_EQ(job.nodes_size(), 2);
  EXPECT_EQ(job.nodes(1).name(), "n1");
  EXPECT_EQ(job.nodes(1).addresses(1), "10.1.0.2");
  EXPECT_EQ(job.nodes(0).ranks_size(), 2);
  EXPECT_EQ(job.ranks(0).comms(0).last_completed(), 2);
  // Bad lists are refused naming what is wrong.
  v1::HeartbeatRequest bad = Beat("store:x#1", 0, 3, 3, 0);
  AddNode(&bad, "n9", {}, {7});
  auto r = t.Heartbeat(bad, 1000, now);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
  EXPECT_NE(r.status().message().find("node n9 lists rank 7"), std::string::npos) << r.status();
  bad = Beat("store:x#1", 0, 3, 3, 0);
  for (int i = 0; i < 4; ++i) AddNode(&bad, "n", {}, {});
  r = t.Heartbeat(bad, 1000, now);
  EXPECT_NE(r.status().message().find("4 nodes for world_size 3"), std::string::npos) << r.status();
}

// The sending side: a process's first heartbeat to a daemon carries its job's nodes, the next ones (within 30 s) not.
TEST(Heartbeats, TheFirstBeatCarriesTheJobsNodes) {
  tuning::HeartbeatSource source;
  source.target = "unix:/nonexistent/heartbeats-test.sock";
  source.job_id = "store:nodes#1";
  source.job_world = 3;
  source.nodes = {JobNodeInfo{"n0", {"10.0.0.1"}, {0, 1}}, JobNodeInfo{"n1", {"10.0.0.2"}, {2}}};
  const uint64_t id = tuning::Heartbeats::Get().Register(source);
  std::vector<v1::HeartbeatRequest> sent;
  auto send = [&sent](const v1::HeartbeatRequest& req) -> absl::StatusOr<v1::HeartbeatResponse> {
    sent.push_back(req);
    return v1::HeartbeatResponse();
  };
  tuning::Heartbeats::Get().Tick(source.target, send);
  tuning::Heartbeats::Get().Tick(source.target, send);  // within the interval: nothing sent
  std::this_thread::sleep_for(std::chrono::milliseconds(1050));
  tuning::Heartbeats::Get().Tick(source.target, send);
  tuning::Heartbeats::Get().Unregister(id);
  ASSERT_EQ(sent.size(), 2u);
  ASSERT_EQ(sent[0].nodes_size(), 2);
  EXPECT_EQ(sent[0].nodes(1).name(), "n1");
  EXPECT_EQ(sent[0].nodes(1).addresses(0), "10.0.0.2");
  EXPECT_EQ(sent[0].nodes(0).ranks(1), 1);
  EXPECT_EQ(sent[1].nodes_size(), 0);
  EXPECT_EQ(sent[1].job_id(), "store:nodes#1");
}

TEST(JobTable, ADumpRequestReachesLiveRanksAndNamesTheSilentOnes) {
  JobTable t({}, "h");
  ASSERT_TRUE(t.Heartbeat(Beat("j", 0, 5, 5, 0), std::nullopt, absl::Now()).ok());
  ASSERT_TRUE(t.Heartbeat(Beat("j", 1, 5, 5, 0), std::nullopt, absl::Now() - absl::Seconds(5)).ok());
  std::thread rank0([&] {
    // Rank 0's next heartbeat gets the request and answers it with one dump.
    uint64_t request = 0;
    for (int i = 0; i < 200 && request == 0; ++i) {
      auto r = t.Heartbeat(Beat("j", 0, 5, 5, 0), std::nullopt, absl::Now());
      ASSERT_TRUE(r.ok());
      request = r->dump_request();
      if (request == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_NE(request, 0u);
    v1::HeartbeatRequest answer = Beat("j", 0, 5, 5, 0);
    answer.clear_comms();
    answer.set_answers_request(request);
    answer.set_dumps_total(1);
    answer.add_dumps()->set_file_name("fr-0000000000000001-r0.json");
    answer.mutable_dumps(0)->set_json("{}");
    ASSERT_TRUE(t.Heartbeat(answer, std::nullopt, absl::Now()).ok());
  });
  auto dumps = t.Dump("j", std::nullopt, true, absl::Seconds(5));
  rank0.join();
  ASSERT_TRUE(dumps.ok()) << dumps.status();
  ASSERT_EQ(dumps->size(), 2u);
  EXPECT_EQ((*dumps)[0].rank(), 1);
  EXPECT_NE((*dumps)[0].error().find("no heartbeat for 5s"), std::string::npos) << (*dumps)[0].error();
  EXPECT_EQ((*dumps)[1].rank(), 0);
  EXPECT_EQ((*dumps)[1].dump().file_name(), "fr-0000000000000001-r0.json");
  EXPECT_TRUE((*dumps)[1].error().empty());
  // The request is over: the next heartbeat asks for nothing.
  auto next = t.Heartbeat(Beat("j", 0, 5, 5, 0), std::nullopt, absl::Now());
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->dump_request(), 0u);
}

}  // namespace
}  // namespace hccltune::daemon
