#include "tuner/bench/spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/bootstrap/tcp_store.h"
#include "runtime/common/config.h"
#include "runtime/common/job_auth.h"
#include "tuner/bench/job_verdict.h"
#include "tuner/bench/rank_report.h"

extern char** environ;

namespace hccltune::bench {
namespace {

volatile sig_atomic_t g_terminate = 0;
void OnTerminate(int) { g_terminate = 1; }

// Catches SIGTERM while the job runs (when nobody else handles or ignores it), to pass it on to the ranks.
class TermForwarder {
 public:
  TermForwarder() {
    g_terminate = 0;
    struct sigaction sa {};
    sa.sa_handler = OnTerminate;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGTERM, nullptr, &old_);
    if (old_.sa_handler == SIG_DFL) installed_ = ::sigaction(SIGTERM, &sa, nullptr) == 0;
  }
  ~TermForwarder() {
    if (installed_) ::sigaction(SIGTERM, &old_, nullptr);
  }
  TermForwarder(const TermForwarder&) = delete;
  TermForwarder& operator=(const TermForwarder&) = delete;

 private:
  struct sigaction old_ {};
  bool installed_ = false;
};

// The file to execute for a rank: the path /proc/self/exe links to while that is still this very file (an
// upgrade may have replaced it since this process started), else /proc/self/exe itself.
std::string SelfExecutable() {
  std::error_code ec;
  const std::filesystem::path path = std::filesystem::read_symlink("/proc/self/exe", ec);
  struct stat a {
  }, b{};
  if (!ec && ::stat(path.c_str(), &a) == 0 && ::stat("/proc/self/exe", &b) == 0 && a.st_dev == b.st_dev &&
      a.st_ino == b.st_ino) {
    return path.string();
  }
  return "/proc/self/exe";
}

// This process's environment with the rank variables replaced.
std::vector<std::string> RankEnvironment(int rank, int ranks, const std::string& store) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const absl::string_view kv(*e);
    bool ours = false;
    for (absl::string_view name : {"RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE=", "HCCL_TUNE_STORE="}) {
      ours = ours || absl::StartsWith(kv, name);
    }
    if (!ours) env.emplace_back(kv);
  }
  env.insert(env.end(),
             {absl::StrCat("RANK=", rank), absl::StrCat("WORLD_SIZE=", ranks), absl::StrCat("LOCAL_RANK=", rank),
              absl::StrCat("LOCAL_WORLD_SIZE=", ranks), absl::StrCat("HCCL_TUNE_STORE=", store)});
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& v) {
  std::vector<char*> p;
  for (std::string& s : v) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

// /proc/PID/stat's state letter; 0 when unreadable.
char ProcState(pid_t pid) {
  char path[64], buf[512] = {};
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return 0;
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  const char* close = n > 0 ? std::strrchr(buf, ')') : nullptr;
  return close != nullptr && close[1] == ' ' ? close[2] : 0;
}

// In the forked child: only async-signal-safe calls (the parent has threads: the store server).
[[noreturn]] void ExecRank(const char* exe, char* const* argv, char* const* envp, int report_fd, const cpu_set_t* cpu,
                           pid_t parent) {
  if (cpu != nullptr) (void)::sched_setaffinity(0, sizeof(*cpu), cpu);
  (void)::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (::getppid() != parent) ::_exit(1);  // the spawner died before the line above
  (void)::fcntl(report_fd, F_SETFD, 0);   // the one inherited descriptor
  ::execve(exe, argv, envp);
  ::execve("/proc/self/exe", argv, envp);
  static const char kMsg[] = "hccl-tune: cannot execute itself for a rank\n";
  (void)!::write(2, kMsg, sizeof kMsg - 1);
  ::_exit(127);
}

struct Child {
  RankEnd end;
  int report_fd = -1;  // read end of its report pipe; -1 once closed
  std::string pending;
  bool reaped = true;  // until started
};

class LocalJob {
 public:
  LocalJob(int ranks, absl::Duration grace) : children_(static_cast<size_t>(ranks)), grace_(grace) {}
  ~LocalJob() {
    for (Child& c : children_) {
      if (c.report_fd >= 0) ::close(c.report_fd);
    }
  }
  LocalJob(const LocalJob&) = delete;
  LocalJob& operator=(const LocalJob&) = delete;

  absl::Status Start(const std::vector<std::string>& args, const std::string& store);
  // Waits for every rank, ending the job as spawn.h says; the outcome.
  absl::Status Supervise(absl::Time deadline, absl::Duration timeout);
  // Ends the ranks started so far as a SIGTERM to this process would (after a failed Start).
  void Stop() { stop_ = true; }

 private:
  void MarkFailed(Child& c) {
    if (c.end.failure_order < 0) c.end.failure_order = failures_++;
  }
  void ReadReport(Child& c);
  void PollReports(absl::Duration timeout);
  void Reap();
  void Signal(int sig);
  size_t Running() const;
  absl::Status Outcome(absl::Duration timeout) const;

  std::vector<Child> children_;
  const absl::Duration grace_;
  int failures_ = 0;
  bool timed_out_ = false, interrupted_ = false, stop_ = false;
};

absl::Status LocalJob::Start(const std::vector<std::string>& args, const std::string& store) {
  // Like mpirun's default (--bind-to core for <= 2 ranks): when every rank can have a CPU of its own, rank r is
  // bound to the r-th CPU this process may use, so two ranks never start out sharing one CPU (the scheduler
  // spreads forked children only after milliseconds, which turns every wait into a context switch).
  // More ranks than CPUs: rank r is bound to CPU r mod n (4 ranks on 2 CPUs: 2 + 2). Unbound, ranks that wait
  // by yielding stay runnable and cache-hot, so the load balancer never moves them apart once the bootstrap's
  // wake-ups have pulled them together: all four ran on one CPU in every sample.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
    }
  }
  const int ranks = static_cast<int>(children_.size());
  const bool bind = ranks > 1 && cpus.size() > 1;
  const std::string exe = SelfExecutable();
  const pid_t self = ::getpid();
  for (int r = 0; r < ranks; ++r) {
    Child& c = children_[static_cast<size_t>(r)];
    c.end.rank = r;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      return absl::ResourceExhaustedError(absl::StrCat("cannot start rank ", r, ": pipe: ", std::strerror(errno)));
    }
    (void)::fcntl(fds[0], F_SETFL, O_NONBLOCK);
    // Everything the child needs is built here: after fork it may not allocate.
    std::vector<std::string> argv_s = {absl::StrCat("hccl-tune/r", r), kReportFdOption, std::to_string(fds[1])};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<std::string> env_s = RankEnvironment(r, ranks, store);
    std::vector<char*> argv = Pointers(argv_s), envp = Pointers(env_s);
    cpu_set_t one;
    CPU_ZERO(&one);
    if (bind) CPU_SET(cpus[static_cast<size_t>(r) % cpus.size()], &one);
    const pid_t pid = ::fork();
    if (pid == 0) ExecRank(exe.c_str(), argv.data(), envp.data(), fds[1], bind ? &one : nullptr, self);
    ::close(fds[1]);
    if (pid < 0) {
      ::close(fds[0]);
      return absl::ResourceExhaustedError(absl::StrCat("cannot start rank ", r, ": ", std::strerror(errno)));
    }
    c.end.pid = pid;
    c.report_fd = fds[0];
    c.reaped = false;
  }
  return absl::OkStatus();
}

void LocalJob::ReadReport(Child& c) {
  char buf[4096];
  while (c.report_fd >= 0) {
    const ssize_t n = ::read(c.report_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {
      ::close(c.report_fd);
      c.report_fd = -1;
      break;
    }
    if (c.pending.size() < (64u << 10)) c.pending.append(buf, static_cast<size_t>(n));
  }
  for (size_t nl; (nl = c.pending.find('\n')) != std::string::npos;) {
    const std::string line = c.pending.substr(0, nl);
    c.pending.erase(0, nl + 1);
    // The first report is the rank's failure; one written after this process signalled the rank is what ending
    // it did (a sweep rank stopping on SIGTERM finds its peers gone), not what went wrong.
    if (c.end.report || c.end.signal_sent != 0) continue;
    if ((c.end.report = ParseRankReport(line))) MarkFailed(c);
  }
}

void LocalJob::PollReports(absl::Duration timeout) {
  std::vector<pollfd> fds;
  std::vector<Child*> who;
  for (Child& c : children_) {
    if (c.report_fd < 0) continue;
    fds.push_back({c.report_fd, POLLIN, 0});
    who.push_back(&c);
  }
  const int ms = static_cast<int>(absl::ToInt64Milliseconds(timeout));
  if (fds.empty()) {
    absl::SleepFor(timeout);
    return;
  }
  if (::poll(fds.data(), fds.size(), ms) <= 0) return;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents != 0) ReadReport(*who[i]);
  }
}

void LocalJob::Reap() {
  for (Child& c : children_) {
    if (c.reaped || ::waitpid(c.end.pid, &c.end.wait_status, WNOHANG) != c.end.pid) continue;
    c.reaped = true;
    // Its write end closed with it: what it wrote is all there, then end of file.
    ReadReport(c);
    const int st = c.end.wait_status;
    const bool bad = WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) != 0);
    if (bad && c.end.signal_sent == 0) MarkFailed(c);
  }
}

void LocalJob::Signal(int sig) {
  for (Child& c : children_) {
    if (c.reaped) continue;
    const char state = ProcState(c.end.pid);
    if (state == 'Z') continue;  // it has just ended on its own: reaped next round
    if (c.end.state == 0) c.end.state = state;
    ::kill(c.end.pid, sig);
    if (sig != SIGKILL) ::kill(c.end.pid, SIGCONT);  // a stopped rank acts on it now
    c.end.signal_sent = sig;
  }
}

size_t LocalJob::Running() const {
  size_t n = 0;
  for (const Child& c : children_) n += c.reaped ? 0 : 1;
  return n;
}

absl::Status LocalJob::Supervise(absl::Time deadline, absl::Duration timeout) {
  absl::Time term_at = absl::InfiniteFuture(), kill_at = absl::InfiniteFuture();
  while (Running() > 0) {
    PollReports(absl::Milliseconds(20));
    Reap();
    const absl::Time now = absl::Now();
    if (failures_ > 0 && term_at == absl::InfiniteFuture()) term_at = now + grace_;
    if (now > deadline && term_at == absl::InfiniteFuture()) {
      timed_out_ = true;
      term_at = now;
    }
    if ((g_terminate != 0 || stop_) && !interrupted_) {
      interrupted_ = true;
      term_at = std::min(term_at, now);
    }
    if (now >= term_at && kill_at == absl::InfiniteFuture()) {
      Signal(SIGTERM);
      kill_at = now + grace_;
    }
    if (now >= kill_at) Signal(SIGKILL);  // again every round: the rare rank that outlives SIGKILL's delivery
  }
  return Outcome(timeout);
}

absl::Status LocalJob::Outcome(absl::Duration timeout) const {
  const size_t n = children_.size();
  if (interrupted_) return absl::CancelledError(absl::StrCat("interrupted (SIGTERM): its ", n, " ranks were ended"));
  if (timed_out_) {
    return absl::DeadlineExceededError(
        absl::StrCat("the ", n, " local ranks did not finish within ", absl::FormatDuration(timeout)));
  }
  if (failures_ == 0) return absl::OkStatus();
  // Ctrl-C: the ranks that stopped exited with 130 and reported nothing.
  const Child* first = nullptr;
  bool interrupted = true;
  for (const Child& c : children_) {
    if (c.end.failure_order < 0) continue;
    const int st = c.end.wait_status;
    interrupted = interrupted && !c.end.report && WIFEXITED(st) && WEXITSTATUS(st) == 130;
    if (first == nullptr || c.end.failure_order < first->end.failure_order) first = &c;
  }
  if (interrupted) {
    return absl::CancelledError(absl::StrCat("rank ", first->end.rank, " exited with status 130 (interrupted)"));
  }
  std::vector<RankEnd> ends;
  for (const Child& c : children_) ends.push_back(c.end);
  return JobVerdict(ends, grace_);
}

}  // namespace

absl::Status SpawnLocalRanks(const SpawnOptions& opt) {
  if (opt.ranks < 1) return absl::InvalidArgumentError(absl::StrCat("--ranks must be >= 1, got ", opt.ranks));
  auto env = Environment::Load();
  if (!env.ok()) return env.status();
  const absl::Duration grace = opt.grace.value_or(absl::Seconds(env->kill_grace_s));
  auto auth = LoadJobAuth(*env);
  if (!auth.ok()) return auth.status();
  auto server = TcpStoreServer::Start("127.0.0.1", 0, {}, *auth);
  if (!server.ok()) return server.status();
  const std::string store = absl::StrCat("tcp://127.0.0.1:", (*server)->port());
  TermForwarder forward;
  LocalJob job(opt.ranks, grace);
  absl::Status started = job.Start(opt.args, store);
  if (!started.ok()) job.Stop();
  absl::Status outcome = job.Supervise(absl::Now() + opt.timeout, opt.timeout);
  return started.ok() ? outcome : started;
}

}  // namespace hccltune::bench
