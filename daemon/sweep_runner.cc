#include "daemon/sweep_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "runtime/common/json_field.h"
#include "runtime/common/logging.h"

extern char** environ;

namespace hccltune::daemon {
namespace {

constexpr size_t kStderrLines = 20;

bool IsFinal(v1::SweepProgress::State s) {
  return s == v1::SweepProgress::DONE || s == v1::SweepProgress::FAILED || s == v1::SweepProgress::CANCELLED;
}

// Names passed to the child: identifiers and canonical configuration fragments only (no options smuggled in).
absl::Status CheckWord(const std::string& w, absl::string_view field) {
  if (w.empty() || w.size() > 64 || w[0] == '-') {
    return absl::InvalidArgumentError(absl::StrCat(field, ": '", w, "' is not a name"));
  }
  for (char c : w) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '/' && c != '@' &&
        c != '-') {
      return absl::InvalidArgumentError(absl::StrCat(field, ": '", w, "' has the character '", std::string(1, c),
                                                     "' (letters, digits, _ . / @ - accepted)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> JoinWords(const google::protobuf::RepeatedPtrField<std::string>& words,
                                      absl::string_view field) {
  for (const std::string& w : words) {
    if (absl::Status s = CheckWord(w, field); !s.ok()) return s;
  }
  return absl::StrJoin(words, ",");
}

std::string NewId() {
  std::random_device rd;
  return absl::StrCat("sw-", absl::FormatTime("%Y%m%d-%H%M%S", absl::Now(), absl::UTCTimeZone()), "-",
                      absl::Hex(rd() & 0xffff, absl::kZeroPad4));
}

std::string Describe(int wait_status) {
  if (WIFEXITED(wait_status)) return absl::StrCat("exit status ", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) return absl::StrCat("killed by signal ", WTERMSIG(wait_status));
  return "ended";
}

}  // namespace

std::string DefaultSweepCommand() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const std::filesystem::path dir = exe.parent_path();
  for (const auto& p : {dir / "hccl-tune", dir / ".." / "bin" / "hccl-tune", dir / ".." / "tuner" / "hccl-tune"}) {
    if (::access(p.c_str(), X_OK) == 0) return std::filesystem::weakly_canonical(p, ec).string();
  }
  return "";
}

absl::StatusOr<std::vector<std::string>> SweepChildArgs(const v1::StartSweepRequest& req, const std::string& id,
                                                        const std::string& daemon_target, int max_ranks) {
  const int ranks = req.ranks() == 0 ? 2 : req.ranks();
  if (ranks < 1 || ranks > max_ranks) {
    return absl::InvalidArgumentError(absl::StrCat("ranks ", req.ranks(), " is out of range 1..", max_ranks));
  }
  std::vector<std::string> a = {
      "sweep", "--json", "--plain", "--daemon", daemon_target, "--ranks", std::to_string(ranks)};
  if (!req.resume().empty()) {
    if (absl::Status s = CheckWord(req.resume(), "resume"); !s.ok()) return s;
    a.insert(a.end(), {"--resume", req.resume()});
  } else {
    a.insert(a.end(), {"--sweep-id", id});
  }
  struct Words {
    const google::protobuf::RepeatedPtrField<std::string>& words;
    const char* field;
    const char* flag;
  };
  for (const Words& w : {Words{req.collectives(), "collectives", "--coll"}, Words{req.dtypes(), "dtypes", "--dtype"},
                         Words{req.algorithms(), "algorithms", "--algo"}, Words{req.links(), "links", "--links"}}) {
    if (w.words.empty()) continue;
    auto joined = JoinWords(w.words, w.field);
    if (!joined.ok()) return joined.status();
    a.insert(a.end(), {w.flag, *joined});
  }
  if (req.max_bytes() != 0 && req.min_bytes() > req.max_bytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("inverted size range: min_bytes ", req.min_bytes(), " > max_bytes ", req.max_bytes()));
  }
  if (req.min_bytes() != 0) a.insert(a.end(), {"--min-bytes", std::to_string(req.min_bytes())});
  if (req.max_bytes() != 0) a.insert(a.end(), {"--max-bytes", std::to_string(req.max_bytes())});
  if (req.step() < 0) return absl::InvalidArgumentError(absl::StrCat("step ", req.step(), " must be >= 2"));
  if (req.step() != 0) a.insert(a.end(), {"--step", std::to_string(req.step())});
  if (!(req.ci() >= 0 && req.ci() < 1))
    return absl::InvalidArgumentError(absl::StrCat("ci ", req.ci(), " not in [0, 1)"));
  if (req.ci() != 0) a.insert(a.end(), {"--ci", absl::StrCat(req.ci())});
  if (!(req.cap_ms() >= 0 && req.cap_ms() < 3.6e6)) {
    return absl::InvalidArgumentError(absl::StrCat("cap_ms ", req.cap_ms(), " is out of range"));
  }
  if (req.cap_ms() != 0) a.insert(a.end(), {"--cap-ms", absl::StrCat(req.cap_ms())});
  if (req.max_iters() < 0) return absl::InvalidArgumentError(absl::StrCat("max_iters ", req.max_iters(), " < 0"));
  if (req.max_iters() != 0) a.insert(a.end(), {"--max-iters", std::to_string(req.max_iters())});
  if (req.exhaustive()) a.push_back("--exhaustive");
  if (req.force()) a.push_back("--force");
  return a;
}

SweepRunner::SweepRunner(SweepRunnerOptions options)
    : options_(std::move(options)), daemon_target_(options_.daemon_target) {}

void SweepRunner::set_daemon_target(const std::string& target) {
  absl::MutexLock lock(&mu_);
  daemon_target_ = target;
}

SweepRunner::~SweepRunner() { Shutdown(); }

absl::StatusOr<std::string> SweepRunner::Start(const v1::StartSweepRequest& req) { return Start(req, {}); }

absl::StatusOr<std::string> SweepRunner::Start(const v1::StartSweepRequest& req,
                                               const std::vector<std::string>& extra_args) {
  const std::string command = options_.command.empty() ? DefaultSweepCommand() : options_.command;
  if (command.empty() || ::access(command.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("hccl-tuned cannot run sweeps: no executable hccl-tune ",
                     command.empty() ? "beside hccl-tuned" : absl::StrCat("at ", command),
                     "; set sweep_command in the config file or pass --sweep-command"));
  }
  const std::string id = req.resume().empty() ? NewId() : req.resume();
  absl::MutexLock lock(&mu_);
  if (daemon_target_.empty()) return absl::FailedPreconditionError("hccl-tuned does not know its own address yet");
  auto args = SweepChildArgs(req, id, daemon_target_, options_.max_ranks);
  if (!args.ok()) return args.status();
  args->insert(args->end(), extra_args.begin(), extra_args.end());
  if (shutting_down_) return absl::UnavailableError("hccl-tuned is shutting down");
  if (!running_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("sweep ", running_,
                                                      " is running on this daemon; one sweep at a time (watch it "
                                                      "with: hccl-tune sweep --watch ",
                                                      running_, ", or cancel it with --cancel ", running_, ")"));
  }
  if (runs_.count(id) != 0 && !IsFinal(runs_[id]->progress.state())) {
    return absl::FailedPreconditionError(absl::StrCat("sweep ", id, " is still being started"));
  }

  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);  // its own process group: the ranks it spawns join it
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> argv;
  std::string arg0 = command;
  argv.push_back(arg0.data());
  for (std::string& s : *args) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, command.c_str(), &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    ::close(out[0]);
    ::close(err[0]);
    return absl::InternalError(absl::StrCat("cannot run ", command, ": ", std::strerror(rc)));
  }
  auto run = std::make_shared<Run>();
  run->pid = pid;
  run->progress.set_sweep_id(id);
  run->progress.set_state(v1::SweepProgress::STARTING);
  run->progress.set_started_unix_ms(absl::ToUnixMillis(absl::Now()));
  run->seq = 1;
  if (runs_.count(id) == 0) order_.push_back(id);
  runs_[id] = run;
  while (order_.size() > options_.keep_finished) {
    if (order_.front() == id) break;
    runs_.erase(order_.front());
    order_.pop_front();
  }
  running_ = id;
  Log(LogLevel::kInfo, "sweep ", id, " started (pid ", pid, "): ", command, " ", absl::StrJoin(*args, " "));
  for (auto it = supervisors_.begin(); it != supervisors_.end();) {
    // Finished supervisors (nothing runs now) are joined here so they do not accumulate.
    it->join();
    it = supervisors_.erase(it);
  }
  supervisors_.emplace_back([this, run, fd0 = out[0], fd1 = err[0]] { Supervise(run, fd0, fd1); });
  return id;
}

void SweepRunner::Supervise(std::shared_ptr<Run> run, int out_fd, int err_fd) {
  std::string out_buf, err_buf;
  bool out_open = true, err_open = true, reaped = false;
  int wait_status = 0;
  absl::Time reaped_at;
  const pid_t pid = run->pid;
  while (out_open || err_open) {
    pollfd fds[2] = {{out_open ? out_fd : -1, POLLIN, 0}, {err_open ? err_fd : -1, POLLIN, 0}};
    const int n = ::poll(fds, 2, 200);
    for (int i = 0; i < 2 && n > 0; ++i) {
      if (fds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        (i == 0 ? out_open : err_open) = false;
        continue;
      }
      std::string& b = i == 0 ? out_buf : err_buf;
      b.append(buf, static_cast<size_t>(got));
      size_t nl;
      while ((nl = b.find('\n')) != std::string::npos) {
        std::string line = b.substr(0, nl);
        b.erase(0, nl + 1);
        absl::MutexLock lock(&mu_);
        if (i == 0) {
          OnStdoutLine(*run, line);
        } else if (!absl::StripAsciiWhitespace(line).empty()) {
          Log(LogLevel::kDebug, "sweep ", run->progress.sweep_id(), ": ", line);
          run->stderr_tail.push_back(std::string(absl::StripAsciiWhitespace(line)));
          if (run->stderr_tail.size() > kStderrLines) run->stderr_tail.pop_front();
        }
      }
    }
    if (!reaped && ::waitpid(pid, &wait_status, WNOHANG) == pid) {
      reaped = true;
      reaped_at = absl::Now();
      ::kill(-pid, SIGKILL);  // rank processes that outlived the sweep process
    }
    if (reaped && absl::Now() - reaped_at > absl::Seconds(2)) break;  // a straggler holding the pipe
    absl::MutexLock lock(&mu_);
    if (run->cancel_requested && !reaped && absl::Now() - run->cancel_time > options_.stop_grace) {
      Log(LogLevel::kWarn, "sweep ", run->progress.sweep_id(), " did not stop within ",
          absl::FormatDuration(options_.stop_grace), " of SIGINT: killing its process group");
      ::kill(-pid, SIGKILL);
    }
  }
  ::close(out_fd);
  ::close(err_fd);
  if (!reaped) {
    while (::waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
    }
    ::kill(-pid, SIGKILL);
  }
  absl::MutexLock lock(&mu_);
  Finish(*run, wait_status);
}

void SweepRunner::OnStdoutLine(Run& run, const std::string& line) {
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return;
  const std::string event = JsonOr(j, "event", "");
  v1::SweepProgress& p = run.progress;
  if (event == "progress") {
    if (p.state() == v1::SweepProgress::STARTING) p.set_state(v1::SweepProgress::RUNNING);
    p.set_done(JsonOr(j, "done", uint64_t{0}));
    p.set_total(JsonOr(j, "total", uint64_t{0}));
    p.set_point(JsonOr(j, "point", ""));
    p.set_configuration(JsonOr(j, "config", ""));
    p.set_eta_s(JsonOr(j, "eta_s", 0.0));
  } else if (event == "done") {
    p.set_result_json(line);
  } else if (event == "failed") {
    run.failure = JsonOr(j, "message", "");
    return;  // shown when the process has ended (Finish)
  } else {
    return;
  }
  ++run.seq;
}

void SweepRunner::Finish(Run& run, int wait_status) {
  v1::SweepProgress& p = run.progress;
  const int code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
  p.set_exit_code(code);
  p.set_finished_unix_ms(absl::ToUnixMillis(absl::Now()));
  if (code == 0 && !p.result_json().empty()) {
    p.set_state(v1::SweepProgress::DONE);
  } else if (run.cancel_requested || code == 130) {
    p.set_state(v1::SweepProgress::CANCELLED);
    p.set_message(absl::StrCat("cancelled (", Describe(wait_status), "); continue with: hccl-tune sweep --resume ",
                               p.sweep_id()));
  } else {
    p.set_state(v1::SweepProgress::FAILED);
    std::string why = run.failure;  // its "failed" event, else its last error line
    for (const std::string& l : run.stderr_tail) {
      if (run.failure.empty() && absl::StrContains(l, "hccl-tune")) why = l;
    }
    if (why.empty() && !run.stderr_tail.empty()) why = run.stderr_tail.back();
    p.set_message(absl::StrCat("the sweep process ended with ", Describe(wait_status), why.empty() ? "" : ": ", why));
  }
  ++run.seq;
  if (running_ == p.sweep_id()) running_.clear();
  Log(p.state() == v1::SweepProgress::FAILED ? LogLevel::kWarn : LogLevel::kInfo, "sweep ", p.sweep_id(), " ",
      v1::SweepProgress::State_Name(p.state()), p.message().empty() ? "" : ": ", p.message());
}

absl::StatusOr<std::string> SweepRunner::Cancel(const std::string& id) {
  absl::MutexLock lock(&mu_);
  const std::string target = id.empty() ? running_ : id;
  if (target.empty()) return absl::FailedPreconditionError("no sweep is running on this daemon");
  auto it = runs_.find(target);
  if (it == runs_.end()) return absl::NotFoundError(absl::StrCat("this daemon knows no sweep ", target));
  Run& run = *it->second;
  if (IsFinal(run.progress.state())) {
    return absl::FailedPreconditionError(
        absl::StrCat("sweep ", target, " is not running (", v1::SweepProgress::State_Name(run.progress.state()), ")"));
  }
  if (!run.cancel_requested) {
    run.cancel_requested = true;
    run.cancel_time = absl::Now();
    ::kill(-run.pid, SIGINT);
    run.progress.set_message("cancelling");
    ++run.seq;
    Log(LogLevel::kInfo, "sweep ", target, ": cancelling (SIGINT to process group ", run.pid, ")");
  }
  return target;
}

absl::Status SweepRunner::Unknown(const std::string& id) const {
  return absl::NotFoundError(
      absl::StrCat("this daemon knows no sweep ", id, " (it keeps the last ", options_.keep_finished, " it ran)"));
}

absl::StatusOr<std::string> SweepRunner::Resolve(const std::string& id) {
  absl::MutexLock lock(&mu_);
  if (!id.empty()) {
    if (runs_.count(id) == 0) return Unknown(id);
    return id;
  }
  if (!running_.empty()) return running_;
  if (order_.empty()) return absl::NotFoundError("this daemon has run no sweep");
  return order_.back();
}

absl::StatusOr<bool> SweepRunner::Wait(const std::string& id, uint64_t* seq, absl::Duration timeout,
                                       v1::SweepProgress* out) {
  absl::MutexLock lock(&mu_);
  auto it = runs_.find(id);
  if (it == runs_.end()) return Unknown(id);
  std::shared_ptr<Run> run = it->second;
  const uint64_t after = *seq;
  auto changed = [&run, after]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return run->seq > after; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&changed), timeout)) return false;
  *out = run->progress;
  *seq = run->seq;
  return true;
}

std::string SweepRunner::running_id() {
  absl::MutexLock lock(&mu_);
  return running_;
}

void SweepRunner::Shutdown() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
  }
  (void)Cancel("");  // FailedPrecondition when nothing runs
  {
    absl::MutexLock lock(&mu_);
    threads.swap(supervisors_);
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace hccltune::daemon
