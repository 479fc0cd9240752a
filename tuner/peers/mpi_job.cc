#include "tuner/peers/mpi_job.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace hccltune::peers {
namespace {

std::string ExeDir() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

bool Executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

bool OnPath(const std::string& name, const std::string& search_path) {
  for (absl::string_view dir :
       absl::StrSplit(search_path.empty() ? "/usr/bin:/bin" : search_path, ':', absl::SkipEmpty())) {
    if (Executable(absl::StrCat(dir, "/", name))) return true;
  }
  return false;
}

std::string CollName(Collective c) { return std::string(CollectiveName(c)); }

}  // namespace

bool PeerCollective(Collective c) {
  return c == Collective::kAllreduce || c == Collective::kAllgather || c == Collective::kBroadcast ||
         c == Collective::kReducescatter;
}

absl::StatusOr<MpiRuntime> FindMpiRuntime(const std::string& name, const std::string& search_path) {
  MpiRuntime rt;
  rt.name = name;
  std::string package;
  if (name == kOpenMpi) {
    rt.launcher = "mpirun.openmpi";
    package = "openmpi-bin libopenmpi-dev";
  } else if (name == kMpich) {
    rt.launcher = "mpiexec.mpich";
    package = "mpich libmpich-dev";
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--runtime ", name, " is unknown; accepted: openmpi, mpich"));
  }
  if (!OnPath(rt.launcher, search_path)) {
    return absl::FailedPreconditionError(
        absl::StrCat(rt.launcher, " is not on PATH: install ", package, " (deploy/install-deps.sh does)"));
  }
  const std::string file = absl::StrCat("hccl-tune-mpi-bench.", name);
  const std::string dir = ExeDir();
  for (const std::string& p : {absl::StrCat(dir, "/", file), absl::StrCat(dir, "/../libexec/hccl-tune/", file)}) {
    if (Executable(p)) {
      rt.bench = p;
      return rt;
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      file, " is neither beside ", dir, " nor in ", dir, "/../libexec/hccl-tune: it is built when CMake finds ",
      name == kOpenMpi ? "mpicc.openmpi" : "mpicc.mpich", " (install ", package, ", then reconfigure)"));
}

absl::StatusOr<std::unique_ptr<MpiJob>> MpiJob::Start(const MpiRuntime& rt, int ranks,
                                                      const std::vector<std::string>& env,
                                                      absl::Duration answer_timeout) {
  if (ranks < 1 || ranks > 256) {
    return absl::InvalidArgumentError(absl::StrCat("--ranks must be between 1 and 256, got ", ranks));
  }
  std::vector<std::string> argv = {rt.launcher};
  if (rt.name == kOpenMpi) {
    // Open MPI refuses root without the flag; more ranks than cores need --oversubscribe (it then yields when
    // idle). use_dynamic_rules makes coll/tuned read the forced algorithms the bench writes.
    if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
    argv.insert(argv.end(), {"--oversubscribe", "--mca", "coll_tuned_use_dynamic_rules", "1"});
  }
  argv.insert(argv.end(), {"-np", std::to_string(ranks), rt.bench});
  int to_child[2], from_child[2];
  if (::pipe2(to_child, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  if (::pipe2(from_child, O_CLOEXEC) != 0) {
    ::close(to_child[0]);
    ::close(to_child[1]);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(to_child[0], 0);
    ::dup2(from_child[1], 1);
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
    ::execvp(cargv[0], cargv.data());
    std::fprintf(stderr, "hccl-tune: cannot run %s: %s\n", cargv[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  if (pid < 0) {
    ::close(to_child[1]);
    ::close(from_child[0]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  ::setpgid(pid, pid);
  std::unique_ptr<MpiJob> job(new MpiJob());
  job->pid_ = pid;
  job->in_ = to_child[1];
  job->out_ = from_child[0];
  job->launcher_ = rt.launcher;
  job->runtime_ = rt.name;
  job->ranks_ = ranks;
  job->timeout_ = answer_timeout;
  auto hello = job->Answer("the start");
  if (!hello.ok()) return hello.status();
  // "hello RUNTIME MAJOR.MINOR RANKS"
  std::vector<std::string> f = absl::StrSplit(*hello, ' ', absl::SkipEmpty());
  int got = 0;
  if (f.size() != 4 || f[0] != "hello" || f[1] != rt.name || !absl::SimpleAtoi(f[3], &got) || got != ranks) {
    return absl::InternalError(absl::StrCat(rt.bench, " under ", rt.launcher, " greeted with '", *hello,
                                            "'; expected 'hello ", rt.name, " MAJOR.MINOR ", ranks, "'"));
  }
  job->version_ = f[2];
  return job;
}

MpiJob::~MpiJob() {
  if (pid_ > 0) {
    (void)Send("quit");
    End();
  }
}

void MpiJob::End() {
  if (in_ >= 0) ::close(in_);
  in_ = -1;
  if (pid_ > 0) {
    // Quit was asked (or the input closed): give the job 5 s, then its group gets SIGTERM, then SIGKILL.
    for (int step = 0; step < 3; ++step) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (std::chrono::steady_clock::now() < until) {
        int st = 0;
        const pid_t r = ::waitpid(pid_, &st, WNOHANG);
        if (r == pid_ || (r < 0 && errno == ECHILD)) {
          pid_ = -1;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (pid_ < 0) break;
      ::kill(-pid_, step == 0 ? SIGTERM : SIGKILL);
    }
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  if (out_ >= 0) ::close(out_);
  out_ = -1;
}

absl::Status MpiJob::Send(const std::string& line) {
  if (in_ < 0) return absl::FailedPreconditionError(absl::StrCat("the ", launcher_, " job has ended"));
  const std::string text = line + "\n";
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(in_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::UnavailableError(absl::StrCat("the ", launcher_, " job stopped reading: ", line));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> MpiJob::Answer(const std::string& asked) {
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(timeout_);
  while (true) {
    for (size_t nl; (nl = buffered_.find('\n')) != std::string::npos;) {
      std::string line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      absl::string_view v = line;
      if (!absl::ConsumePrefix(&v, "@ ")) continue;  // the launcher's or the library's own output
      if (absl::ConsumePrefix(&v, "error ")) {
        return absl::InternalError(absl::StrCat(runtime_, " bench, asked ", asked, ": ", v));
      }
      return std::string(v);
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      End();
      return absl::DeadlineExceededError(absl::StrCat("the ", launcher_, " job gave no answer to ", asked, " within ",
                                                      absl::FormatDuration(timeout_), "; ended it"));
    }
    pollfd p{out_, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (r < 0 && errno != EINTR) return absl::InternalError(absl::StrCat("poll: ", std::strerror(errno)));
    if (r <= 0) continue;
    char buf[65536];
    const ssize_t n = ::read(out_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      End();
      return absl::AbortedError(
          absl::StrCat("the ", launcher_, " job ended before answering ", asked, " (its own output above says why)"));
    }
    buffered_.append(buf, static_cast<size_t>(n));
  }
}

absl::StatusOr<std::vector<std::string>> MpiJob::Algorithms(Collective c) {
  if (!PeerCollective(c)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the MPI bench runs allreduce, allgather, broadcast and reducescatter, not ", CollectiveName(c)));
  }
  const std::string asked = absl::StrCat("algorithms ", CollName(c));
  if (absl::Status s = Send(asked); !s.ok()) return s;
  auto a = Answer(asked);
  if (!a.ok()) return a.status();
  std::vector<std::string> f = absl::StrSplit(*a, ' ', absl::SkipEmpty());
  if (f.size() < 2 || f[0] != "algorithms" || f[1] != CollName(c)) {
    return absl::InternalError(absl::StrCat("unexpected answer to ", asked, ": ", *a));
  }
  return std::vector<std::string>(f.begin() + 2, f.end());
}

absl::StatusOr<sweep::Batch> MpiJob::Measure(Collective c, uint64_t bytes, const PeerConfiguration& config, int iters,
                                             int warmup) {
  if (config.runtime != runtime_) {
    return absl::InvalidArgumentError(
        absl::StrCat("configuration ", config.ToString(), " is not for the ", runtime_, " job"));
  }
  const std::string asked = absl::StrCat("measure ", CollName(c), " ", bytes, " ", config.algorithm, " ",
                                         config.segment, " ", iters, " ", warmup);
  if (absl::Status s = Send(asked); !s.ok()) return s;
  auto a = Answer(absl::StrCat(config.ToString(), " at ", bytes, " bytes (", asked, ")"));
  if (!a.ok()) return a.status();
  absl::string_view v = *a;
  if (!absl::ConsumePrefix(&v, "times ")) return absl::InternalError(absl::StrCat("unexpected answer: ", *a));
  std::vector<std::string> halves = absl::StrSplit(v, '/');
  sweep::Batch b;
  if (halves.size() == 2) {
    for (int h = 0; h < 2; ++h) {
      for (absl::string_view x : absl::StrSplit(halves[static_cast<size_t>(h)], ' ', absl::SkipEmpty())) {
        double t = 0;
        if (!absl::SimpleAtod(x, &t)) return absl::InternalError(absl::StrCat("unexpected answer: ", *a));
        (h == 0 ? b.time_us : b.rank_time_us).push_back(t);
      }
    }
  }
  if (b.time_us.size() != static_cast<size_t>(iters) || b.rank_time_us.size() != static_cast<size_t>(iters)) {
    return absl::InternalError(absl::StrCat("answer to ", asked, " has not ", iters, " times: ", *a));
  }
  return b;
}

}  // namespace hccltune::peers
