#include "tuner/bench/spawn.h"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "runtime/bootstrap/tcp_store.h"

namespace hccltune::bench {

absl::Status SpawnLocalRanks(const SpawnOptions& opt) {
  if (opt.ranks < 1) return absl::InvalidArgumentError(absl::StrCat("--ranks must be >= 1, got ", opt.ranks));
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  if (!server.ok()) return server.status();
  const std::string store = absl::StrCat("tcp://127.0.0.1:", (*server)->port());
  std::map<pid_t, int> children;
  // Like mpirun's default (--bind-to core for <= 2 ranks): when every rank can have a CPU of its own, rank r is
  // bound to the r-th CPU this process may use, so two ranks never start out sharing one CPU (the scheduler
  // spreads forked children only after milliseconds, which turns every wait into a context switch).
  // More ranks than CPUs: rank r is bound to CPU r mod n (4 ranks on 2 CPUs: 2 + 2). Unbound, ranks that wait
  // by yielding stay runnable and cache-hot, so the load balancer never moves them apart once the bootstrap's
  // wake-ups have pulled them together: all four ran on one CPU in every sample (docs/PERFORMANCE.md).
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
    }
  }
  const bool bind = opt.ranks > 1 && cpus.size() > 1;
  for (int r = 0; r < opt.ranks; ++r) {
    std::vector<std::string> env_kv = {absl::StrCat("RANK=", r), absl::StrCat("WORLD_SIZE=", opt.ranks),
                                       absl::StrCat("LOCAL_RANK=", r), absl::StrCat("LOCAL_WORLD_SIZE=", opt.ranks),
                                       absl::StrCat("HCCL_TUNE_STORE=", store)};
    const pid_t pid = ::fork();
    if (pid < 0) {
      for (auto& [p, rank] : children) ::kill(p, SIGKILL);
      return absl::ResourceExhaustedError(absl::StrCat("cannot start rank ", r, ": ", std::strerror(errno)));
    }
    if (pid == 0) {
      if (bind) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[static_cast<size_t>(r) % cpus.size()], &one);
        (void)::sched_setaffinity(0, sizeof(one), &one);
      }
      for (auto& kv : env_kv) ::putenv(kv.data());
      std::vector<char*> argv;
      std::string self = "hccl-tune";
      argv.push_back(self.data());
      std::vector<std::string> args = opt.args;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv("/proc/self/exe", argv.data());
      std::fprintf(stderr, "hccl-tune: exec failed: %s\n", std::strerror(errno));
      ::_exit(127);
    }
    children[pid] = r;
  }
  absl::Status first;
  const absl::Time deadline = absl::Now() + opt.timeout;
  absl::Time kill_at = absl::InfiniteFuture();
  while (!children.empty()) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0 && children.count(pid)) {
      const int rank = children[pid];
      children.erase(pid);
      std::string how;
      if (WIFEXITED(status) && WEXITSTATUS(status) != 0) how = absl::StrCat("exited with status ", WEXITSTATUS(status));
      if (WIFSIGNALED(status)) how = absl::StrCat("was killed by signal ", WTERMSIG(status));
      if (!how.empty() && first.ok()) {
        first = absl::AbortedError(absl::StrCat("rank ", rank, " ", how));
        kill_at = absl::Now() + absl::Seconds(10);  // let the others report their own errors first
      }
      continue;
    }
    const absl::Time now = absl::Now();
    if (now > deadline && first.ok()) {
      first = absl::DeadlineExceededError("local ranks did not finish within the time limit");
      kill_at = now;
    }
    if (now >= kill_at) {
      for (auto& [p, rank] : children) ::kill(p, now > kill_at + absl::Seconds(5) ? SIGKILL : SIGTERM);
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return first;
}

}  // namespace hccltune::bench
