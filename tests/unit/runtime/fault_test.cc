// Real processes: a rank killed with SIGKILL mid-collective (shm, TCP, and UCX over tcp and over shared memory) and
// a rank that never joins; the surviving ranks must return an error naming the problem within the timeouts, and
// /dev/shm stays clean.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/api/communicator.h"
#include "runtime/bootstrap/store.h"
#include "tests/unit/runtime/fault_util.h"

namespace hccltune {
namespace {

using testing::ShmSegmentsOf;

// Child body: join, run allreduces; `victim` kills itself after two calls. Exit codes: 0 ok, 10 + reason.
// `ucx_tls`: UCX_TLS for link=ucx (UCX reads it when the communicator makes its UCP context).
int ChildMain(const std::string& dir, int rank, int n, int victim, const std::string& link, int pipe_fd,
              const std::string& ucx_tls) {
  if (!ucx_tls.empty()) ::setenv("UCX_TLS", ucx_tls.c_str(), 1);
  auto store = NewFileStore(dir);
  if (!store.ok()) return 11;
  Environment env;
  env.connect_timeout_s = 20;
  env.exec_timeout_s = 60;  // the failure must be found by liveness/EOF/abort, long before this
  env.buffsize_bytes = 2u << 20;
  auto comm = Communicator::Create(rank, n, *store, env);
  if (!comm.ok()) return 12;
  std::vector<float> buf(1 << 20, 1.0f);
  CallOptions opt;
  opt.config = absl::StrCat("ring(link=", link, ")");
  for (int i = 0; i < 1000; ++i) {
    if (rank == victim && i == 2) ::raise(SIGKILL);
    absl::Status s = (*comm)->Allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum, opt);
    if (!s.ok()) {
      const std::string msg(s.message());
      (void)!::write(pipe_fd, msg.data(), msg.size());
      return 20;
    }
  }
  return 0;
}

struct Outcome {
  std::vector<pid_t> pids;
  std::map<int, int> exit_codes;  // rank -> exit code (-signal for signals)
  std::string messages;
  double seconds = 0;
};

Outcome RunJob(int n, int victim, const std::string& link, bool victim_never_joins, const std::string& ucx_tls = "") {
  char dir[] = "/tmp/hccltune-fault-XXXXXX";
  EXPECT_NE(::mkdtemp(dir), nullptr);
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const auto t0 = std::chrono::steady_clock::now();
  std::map<pid_t, int> pids;
  for (int r = 0; r < n; ++r) {
    if (victim_never_joins && r == victim) continue;
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      ::_exit(ChildMain(dir, r, n, victim_never_joins ? -1 : victim, link, fds[1], ucx_tls));
    }
    pids[pid] = r;
  }
  ::close(fds[1]);
  Outcome out;
  for (const auto& [pid, rank] : pids) out.pids.push_back(pid);
  while (!pids.empty()) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid <= 0) break;
    out.exit_codes[pids[pid]] = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    pids.erase(pid);
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  char buf[4096];
  ssize_t k;
  while ((k = ::read(fds[0], buf, sizeof(buf))) > 0) out.messages.append(buf, static_cast<size_t>(k));
  ::close(fds[0]);
  std::filesystem::remove_all(dir);
  return out;
}

TEST(Faults, RankKilledMidAllreduceOverShm) {
  Outcome o = RunJob(3, 1, "shm", false);
  EXPECT_EQ(o.exit_codes[1], -SIGKILL);
  EXPECT_EQ(o.exit_codes[0], 20) << o.messages;
  EXPECT_EQ(o.exit_codes[2], 20) << o.messages;
  EXPECT_NE(o.messages.find("rank 1"), std::string::npos) << o.messages;
  EXPECT_LT(o.seconds, 30) << o.messages;
  EXPECT_EQ(ShmSegmentsOf(o.pids), 0u) << "shared-memory segments leaked";
}

// Two ranks: the survivor's ring allreduce waits in an in-place return period (its chunks in the ring, their
// results never coming back) and must still name the dead rank.
TEST(Faults, RankKilledDuringTwoRankReturnPeriodOverShm) {
  Outcome o = RunJob(2, 1, "shm", false);
  EXPECT_EQ(o.exit_codes[1], -SIGKILL);
  EXPECT_EQ(o.exit_codes[0], 20) << o.messages;
  EXPECT_NE(o.messages.find("rank 1"), std::string::npos) << o.messages;
  EXPECT_LT(o.seconds, 30) << o.messages;
  EXPECT_EQ(ShmSegmentsOf(o.pids), 0u) << "shared-memory segments leaked";
}

TEST(Faults, RankKilledMidAllreduceOverTcp) {
  Outcome o = RunJob(3, 2, "tcp", false);
  EXPECT_EQ(o.exit_codes[2], -SIGKILL);
  EXPECT_EQ(o.exit_codes[0], 20) << o.messages;
  EXPECT_EQ(o.exit_codes[1], 20) << o.messages;
  EXPECT_NE(o.messages.find("rank 2"), std::string::npos) << o.messages;
  EXPECT_LT(o.seconds, 30) << o.messages;
}

#if HCCL_TUNE_HAVE_UCX
// UCX over tcp: UCX's peer failure handling reports the dead endpoint; the survivors name the rank and "ucx", and
// say it is gone (UCX's own status for it reads "Endpoint timeout").
TEST(Faults, RankKilledMidAllreduceOverUcxTcp) {
  Outcome o = RunJob(3, 2, "ucx", false, "tcp");
  EXPECT_EQ(o.exit_codes[2], -SIGKILL);
  EXPECT_EQ(o.exit_codes[0], 20) << o.messages;
  EXPECT_EQ(o.exit_codes[1], 20) << o.messages;
  EXPECT_NE(o.messages.find("rank 2"), std::string::npos) << o.messages;
  EXPECT_NE(o.messages.find("ucx"), std::string::npos) << o.messages;
  EXPECT_NE(o.messages.find("exited or was killed"), std::string::npos) << o.messages;
  EXPECT_LT(o.seconds, 30) << o.messages;
}

// UCX over shared memory only: UCX 1.13 has no peer failure handling there; the dead peer is found by its process.
TEST(Faults, RankKilledMidAllreduceOverUcxShm) {
  Outcome o = RunJob(3, 1, "ucx", false, "posix,sysv,cma,self");
  EXPECT_EQ(o.exit_codes[1], -SIGKILL);
  EXPECT_EQ(o.exit_codes[0], 20) << o.messages;
  EXPECT_EQ(o.exit_codes[2], 20) << o.messages;
  EXPECT_NE(o.messages.find("rank 1"), std::string::npos) << o.messages;
  EXPECT_NE(o.messages.find("ucx"), std::string::npos) << o.messages;
  EXPECT_LT(o.seconds, 30) << o.messages;
}
#endif

}  // namespace
}  // namespace hccltune
