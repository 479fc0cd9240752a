// The verdict on a failed local job (tuner/bench/job_verdict.h) and the blame a rank's report carries
// (tuner/bench/rank_report.h): which rank the runtime's errors name, and which rank the spawner's message names
// for a frozen, killed or failing rank. The processes themselves: tests/process/rank_failure.sh.
#include "tuner/bench/job_verdict.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include "absl/strings/match.h"
#include "tuner/bench/rank_report.h"

namespace hccltune::bench {
namespace {

TEST(BlamedPeer, NamesTheRankTheRuntimeWaitedForOrLost) {
  struct Case {
    const char* message;
    std::optional<int> peer;
  } cases[] = {
      // A wait that ran out (stream endpoint, shm mailbox).
      {"rank 0: allreduce (operation 9) waited 2s for rank 2 to send a 8-byte message over shm (HCCL_EXEC_TIMEOUT); "
       "is rank 2 stuck, or did it call something else?",
       2},
      {"rank 1: allgather (operation 3) waited 2s for rank 0 to post its 64-byte block in the shm mailbox "
       "(HCCL_EXEC_TIMEOUT); is rank 0 stuck, or did it call something else?",
       0},
      // A dead peer (shm, tcp).
      {"rank 12 (pid 4242) exited or was killed; shm link to it is dead", 12},
      {"tcp link to rank 3 (127.0.0.1:4000) lost: the peer closed the connection (did it exit or crash?)", 3},
      {"rank 0: cannot connect to rank 5 at 10.0.0.2:3000 within 120 s", 5},
      // Setup.
      {"rank 0: ranks 4, 7 never joined the communicator of 8 ranks within 2 s (HCCL_CONNECT_TIMEOUT)", 4},
      {"rank 1: tcp connections from ranks 2 3 never arrived (HCCL_CONNECT_TIMEOUT)", 2},
      // Another rank's announcement: what it blamed, else that rank.
      {"rank 0 aborted allreduce (operation 9): rank 0: allreduce (operation 9) waited 2s for rank 2 to send a "
       "8-byte message over shm (HCCL_EXEC_TIMEOUT); is rank 2 stuck, or did it call something else?",
       2},
      {"rank 1 aborted allreduce (operation 4): rank 1: check failed at element 7", 1},
      {"rank 3 could not set up the communicator: HCCL_BUFFSIZE='x' is invalid", 3},
      {"rank 2 refused its allreduce (operation 5): count mismatch; rank 0 stops waiting for it", 2},
      {"rank 0 stopped the sweep", 0},
      // A rank's own failure names nobody.
      {"rank 0: check failed: element 3 is 5, expected 6 [ring, 1024 bytes]", std::nullopt},
      {"HCCL_TUNE_KILL_GRACE='x' is invalid: expected an integer from 0 to 3600", std::nullopt},
      {"rank 1 is at operation 5 (allreduce), rank 0 at operation 4 (allreduce)", std::nullopt},
      {"franks 3 never", std::nullopt},
      {"", std::nullopt},
  };
  for (const Case& c : cases) EXPECT_EQ(BlamedPeer(c.message), c.peer) << c.message;
}

TEST(RankReport, ParsesTheReportLine) {
  auto r = ParseRankReport(R"({"code":"DEADLINE_EXCEEDED","message":"waited for rank 2","peer":2})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->code, "DEADLINE_EXCEEDED");
  EXPECT_EQ(r->message, "waited for rank 2");
  EXPECT_EQ(r->peer, 2);
  auto own = ParseRankReport(R"({"code":"DATA_LOSS","message":"check failed"})");
  ASSERT_TRUE(own);
  EXPECT_FALSE(own->peer);
  for (const char* bad : {"", "not json", "[]", R"({"code":"X"})", R"({"message":7})"}) {
    EXPECT_FALSE(ParseRankReport(bad)) << bad;
  }
}

int Exited(int code) { return code << 8; }
int Killed(int sig) { return sig; }

RankEnd Failed(int rank, int order, int wait_status, const std::string& message, std::optional<int> peer) {
  RankEnd r;
  r.rank = rank;
  r.pid = 1000 + rank;
  r.wait_status = wait_status;
  r.failure_order = order;
  if (!message.empty()) r.report = RankReport{"DEADLINE_EXCEEDED", message, peer};
  return r;
}

// A rank the spawner found stopped (SIGSTOP) and ended with SIGTERM, having said nothing.
RankEnd Stopped(int rank) {
  RankEnd r;
  r.rank = rank;
  r.pid = 1000 + rank;
  r.signal_sent = SIGTERM;
  r.state = 'T';
  r.wait_status = Killed(SIGTERM);
  return r;
}

TEST(JobVerdict, AFrozenRankIsNamedNotTheFirstSurvivorToExit) {
  const std::string waited = "rank 1: allreduce (operation 9) waited 2s for rank 2 to send a 8-byte message";
  const RankEnd frozen = Stopped(2);
  // Rank 0's report, relaying rank 1's announcement, came first; rank 1's own observation is the one quoted.
  std::vector<RankEnd> ranks = {Failed(0, 0, Exited(1), "rank 1 aborted allreduce: " + waited, 2),
                                Failed(1, 1, Exited(1), waited, 2), frozen};
  ranks[0].report->code = "ABORTED";
  const absl::Status s = JobVerdict(ranks, absl::Seconds(1));
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(s.message(),
            "rank 2 (pid 1002) was stopped (SIGSTOP or job control) and was ended by signal 15 (SIGTERM) after the 1s "
            "grace period; ranks 0, 1 failed because of it, rank 1 saying: " +
                waited);
}

TEST(JobVerdict, AChainOfBlameEndsAtTheFrozenRank) {
  // Rank 1 froze; rank 0 timed out waiting for it and exited first; rank 2 then waited for rank 0 and blames it.
  const std::string waited = "rank 0: allreduce (operation 345) waited 2s for rank 1 to send a 1024-byte message";
  const RankEnd frozen = Stopped(1);
  const std::vector<RankEnd> ranks = {
      Failed(0, 0, Exited(1), waited, 1), frozen,
      Failed(2, 1, Exited(1), "rank 2: barrier (operation 346) waited 2s for rank 0 to post its block", 0)};
  EXPECT_EQ(JobVerdict(ranks, absl::Seconds(1)).message(),
            "rank 1 (pid 1001) was stopped (SIGSTOP or job control) and was ended by signal 15 (SIGTERM) after the 1s "
            "grace period; ranks 0, 2 failed because of it, rank 0 saying: " +
                waited);
  // Two ranks that blame each other (a cycle) and nobody else: each chain ends where it closes, and the tie goes
  // to the rank blamed by the earliest failure (rank 0 blames rank 1).
  const std::vector<RankEnd> cycle = {Failed(0, 0, Exited(1), "a", 1), Failed(1, 1, Exited(1), "b", 0)};
  EXPECT_EQ(JobVerdict(cycle, absl::Seconds(1)).message(),
            "rank 1 (pid 1001) failed (exit status 1): b; rank 0 failed because of it, rank 0 saying: a");
}

TEST(JobVerdict, BlameAroundAStoppedRankEndsAtIt) {
  // Rank 1 stopped; rank 2 waited for it, rank 0 waited for rank 2 and timed out first; rank 2 then relayed rank
  // 0's abort. The blame closes on ranks 0 and 2, both of which ran: the stopped rank 1 is named.
  const std::string waited = "rank 0: allreduce (operation 39) waited 6s for rank 2 to send a 344-byte message";
  const RankEnd stopped = Stopped(1);
  std::vector<RankEnd> ranks = {Failed(0, 0, Exited(1), waited, 2), stopped,
                                Failed(2, 1, Exited(1), "rank 0 aborted allreduce (operation 39): " + waited, 0)};
  ranks[2].report->code = "ABORTED";
  EXPECT_EQ(JobVerdict(ranks, absl::Seconds(1)).message(),
            "rank 1 (pid 1001) was stopped (SIGSTOP or job control) and was ended by signal 15 (SIGTERM) after the 1s "
            "grace period; ranks 0, 2 failed because of it, rank 0 saying: " +
                waited);
  // A rank merely still running when the spawner ended it ('S') is not taken for the cause.
  ranks[1].state = 'S';
  EXPECT_TRUE(absl::StartsWith(JobVerdict(ranks, absl::Seconds(1)).message(), "rank 2 (pid 1002) failed"))
      << JobVerdict(ranks, absl::Seconds(1));
}

TEST(JobVerdict, AKilledRankAndADebuggedOne) {
  const std::vector<RankEnd> killed = {
      Failed(0, 1, Exited(1), "rank 1 (pid 1001) exited or was killed; shm link to it is dead", 1),
      Failed(1, 0, Killed(SIGKILL), "", std::nullopt),
      Failed(2, 2, Exited(1), "rank 1 (pid 1001) exited or was killed; shm link to it is dead", 1)};
  EXPECT_TRUE(absl::StartsWith(JobVerdict(killed, absl::Seconds(10)).message(),
                               "rank 1 (pid 1001) was killed by signal 9 (SIGKILL); ranks 0, 2 failed because of it"))
      << JobVerdict(killed, absl::Seconds(10));
  // No report names a peer: the rank that died without a word.
  std::vector<RankEnd> silent = killed;
  silent[0].report->peer.reset();
  silent[2].report->peer.reset();
  EXPECT_TRUE(absl::StartsWith(JobVerdict(silent, absl::Seconds(10)).message(),
                               "rank 1 (pid 1001) was killed by signal 9 (SIGKILL)"));
  // Nothing said and nobody died: the rank that had to be ended, a traced one before a running one.
  RankEnd running, traced;
  running.rank = 0;
  traced.rank = 1;
  running.signal_sent = traced.signal_sent = SIGKILL;
  running.state = 'S';
  traced.state = 't';
  running.wait_status = traced.wait_status = Killed(SIGKILL);
  RankEnd failed = Failed(2, 0, Exited(1), "rank 2: a store error", std::nullopt);
  const std::string m(JobVerdict({running, traced, failed}, absl::Seconds(3)).message());
  EXPECT_TRUE(absl::StrContains(m,
                                "rank 1 (pid 0) was stopped by a debugger (ptrace) and was ended by signal 9 "
                                "(SIGKILL) after the 3s grace period"))
      << m;
}

TEST(JobVerdict, ARanksOwnFailureAndTheMajority) {
  // Rank 1's wrong result; the others report its announcement.
  const std::vector<RankEnd> own = {
      Failed(0, 1, Exited(1), "rank 1 aborted allreduce: rank 1: check failed", 1),
      Failed(1, 0, Exited(3), "rank 1: check failed", std::nullopt),
  };
  EXPECT_EQ(JobVerdict(own, absl::Seconds(1)).message(),
            "rank 1 (pid 1001) failed (exit status 3): rank 1: check failed; rank 0 failed because of it, rank 0 "
            "saying: rank 1 aborted allreduce: rank 1: check failed");
  const std::vector<RankEnd> alone = {Failed(0, 0, Exited(2), "HCCL_TUNE_KILL_GRACE='x' is invalid", std::nullopt)};
  EXPECT_EQ(JobVerdict(alone, absl::Seconds(1)).message(),
            "rank 0 (pid 1000) failed (exit status 2): HCCL_TUNE_KILL_GRACE='x' is invalid");
  // Two ranks blame rank 3, one blames rank 0: rank 3; a peer out of range or the rank itself counts for nothing.
  const std::vector<RankEnd> vote = {Failed(0, 0, Exited(1), "x", 0), Failed(1, 1, Exited(1), "y", 3),
                                     Failed(2, 2, Exited(1), "z", 3), Failed(3, 3, Exited(1), "w", 9),
                                     Failed(4, 4, Exited(1), "v", 0)};
  const std::string m(JobVerdict(vote, absl::Seconds(1)).message());
  EXPECT_EQ(m, "rank 3 (pid 1003) failed (exit status 1): w; ranks 1, 2 failed because of it, rank 1 saying: y");
}

TEST(SignalName, NamesTheSignal) {
  EXPECT_EQ(SignalName(SIGKILL), "signal 9 (SIGKILL)");
  EXPECT_EQ(SignalName(SIGSEGV), "signal 11 (SIGSEGV)");
}

}  // namespace
}  // namespace hccltune::bench
