// Fault campaign: trials of real jobs (2-5 processes; shm, TCP, or UCX restricted by UCX_TLS to tcp or to shared
// memory; every collective and point-to-point) in which one random rank is SIGKILLed or SIGSTOPped at a random
// operation. Every surviving rank must return an error within HCCL_EXEC_TIMEOUT + 1 s of the fault naming a rank:
// every survivor names a killed rank; a stopped rank looks alive, so a survivor names the rank it waited for (the
// stopped one, or a neighbour waiting on it). No process and no shared-memory segment of the job (ours or UCX's,
// in /dev/shm or System V) may be left. FaultCampaign.Short (12 trials) runs in the default set; FaultCampaign.Long
// (100 trials, label `slow`) prints the figures docs/RELIABILITY.md quotes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/api/communicator.h"
#include "runtime/bootstrap/store.h"
#include "runtime/common/configuration.h"
#include "tests/unit/runtime/fault_util.h"

namespace hccltune {
namespace {

constexpr int kExecTimeoutS = 2;

double MonotonicSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The transports in turn: UCX (builds that have it) over tcp, where its peer failure handling reports a dead peer,
// and over shared memory only, where UCX 1.13 has none and a dead peer is found by its process.
struct Transport {
  const char* link;
  const char* ucx_tls;  // UCX_TLS of every rank ("" leaves it unset)
};
std::vector<Transport> Transports() {
  std::vector<Transport> t = {{"shm", ""}, {"tcp", ""}};
#if HCCL_TUNE_HAVE_UCX
  t.push_back({"ucx", "tcp"});
  t.push_back({"ucx", "posix,sysv,cma,self"});
#endif
  return t;
}

struct Trial {
  int ranks = 2;
  std::string link = "shm";
  std::string ucx_tls;
  Collective collective = Collective::kAllreduce;
  int victim = 0;
  int op = 0;  // the victim's fault comes before this operation
  int signal = SIGKILL;
  std::string Describe() const {
    const std::string over = ucx_tls.empty() ? link : absl::StrCat(link, " (UCX_TLS=", ucx_tls, ")");
    return absl::StrCat(CollectiveName(collective), " over ", over, " at ", ranks, " ranks, rank ", victim,
                        signal == SIGKILL ? " killed" : " stopped", " before operation ", op);
  }
};

// The configuration `comm` would pick for the call, moved onto the trial's link.
std::string OnLink(Communicator& comm, Collective c, uint64_t bytes, const std::string& link) {
  auto resolved = comm.ResolveConfig(c, DataType::kFloat32, bytes, "auto");
  if (!resolved.ok()) return "auto";
  auto config = Configuration::Parse(*resolved);
  auto l = ParseLink(link);
  if (!config.ok() || !l.ok()) return "auto";
  if (config->Has(ParamKind::kLink)) config->link = *l;
  return config->ToString();
}

// One call of the trial's collective with `count` elements per rank part.
absl::Status Call(Communicator& comm, const Trial& t, int i, std::vector<float>& a, std::vector<float>& b,
                  size_t count) {
  const int n = comm.size(), root = i % n;
  std::vector<size_t> counts(static_cast<size_t>(n), count), displs;
  for (int r = 0; r < n; ++r) displs.push_back(static_cast<size_t>(r) * count);
  CallOptions opt;
  opt.config = OnLink(comm, t.collective, count * 4, t.link);
  const DataType f = DataType::kFloat32;
  switch (t.collective) {
    case Collective::kAllreduce: return comm.Allreduce(a.data(), b.data(), count, f, ReduceOp::kSum, opt);
    case Collective::kAllgather: return comm.Allgather(a.data(), b.data(), count, f, opt);
    case Collective::kAllgatherv: return comm.Allgatherv(a.data(), b.data(), counts, displs, f, opt);
    case Collective::kReducescatter: return comm.Reducescatter(a.data(), b.data(), count, f, ReduceOp::kSum, opt);
    case Collective::kBroadcast: return comm.Broadcast(a.data(), b.data(), count, f, root, opt);
    case Collective::kReduce: return comm.Reduce(a.data(), b.data(), count, f, ReduceOp::kSum, root, opt);
    case Collective::kGather: return comm.Gather(a.data(), b.data(), count, f, root, opt);
    case Collective::kScatter: return comm.Scatter(a.data(), b.data(), count, f, root, opt);
    case Collective::kAlltoall: return comm.Alltoall(a.data(), b.data(), count, f, opt);
    case Collective::kAlltoallv: return comm.Alltoallv(a.data(), counts, displs, b.data(), counts, displs, f, opt);
    case Collective::kBarrier: return comm.Barrier(opt);
    case Collective::kSendRecv: {
      const int me = comm.rank(), next = (me + 1) % n, prev = (me + n - 1) % n;
      if (absl::Status s = comm.Send(a.data(), count, f, next); !s.ok()) return s;
      return comm.Recv(b.data(), count, f, prev);
    }
  }
  return absl::InternalError("unknown collective");
}

// A rank of the trial: joins, runs calls; the victim signals itself before operation t.op after writing
// "F <time>". A survivor that fails writes "E <rank> <time> <message>". Exit codes: 0 all calls done, 20 a call
// failed, 11/12 setup failed.
int RankMain(const std::string& dir, int rank, const Trial& t, int pipe_fd) {
  if (!t.ucx_tls.empty()) ::setenv("UCX_TLS", t.ucx_tls.c_str(), 1);  // read when the UCP context is made
  auto store = NewFileStore(dir);
  if (!store.ok()) return 11;
  Environment env;
  env.connect_timeout_s = 30;
  env.exec_timeout_s = kExecTimeoutS;
  env.buffsize_bytes = 2u << 20;
  auto comm = Communicator::Create(rank, t.ranks, *store, env);
  if (!comm.ok()) return 12;
  const size_t count = 1024 + static_cast<size_t>(t.op) * 257;
  std::vector<float> a(count * static_cast<size_t>(t.ranks), 1.0f), b(count * static_cast<size_t>(t.ranks));
  for (int i = 0; i < 400; ++i) {
    if (rank == t.victim && i == t.op) {
      const std::string line = absl::StrCat("F ", MonotonicSeconds(), "\n");
      (void)!::write(pipe_fd, line.data(), line.size());
      ::raise(t.signal);
    }
    absl::Status s = Call(**comm, t, i, a, b, count);
    if (!s.ok()) {
      std::string msg(s.message().substr(0, 3000));
      for (char& c : msg) c = c == '\n' ? ' ' : c;
      const std::string line = absl::StrCat("E ", rank, " ", MonotonicSeconds(), " ", msg, "\n");
      (void)!::write(pipe_fd, line.data(), line.size());
      return 20;
    }
  }
  return 0;
}

struct TrialResult {
  bool hang = false;          // a survivor still ran 30 s after the fault
  int late = 0;               // survivors that failed later than HCCL_EXEC_TIMEOUT + 1 s after the fault
  int unnamed = 0;            // survivors whose error named no other rank (killed: not the victim)
  bool victim_named = false;  // some survivor named the victim
  int bad_exits = 0;          // survivors that did not fail with an error
  int leaked_processes = 0;
  int leaked_segments = 0;
  double slowest = 0;  // seconds from the fault to the last survivor's error
  std::string log;
  std::string sample;  // the first survivor's error
};

// Collects the children: exits, and the victim's stop. Returns false when survivors were still running at
// `deadline` (they are killed then).
bool Reap(std::map<pid_t, int>& alive, pid_t victim, double deadline, std::map<int, int>* exits) {
  bool stopped_seen = false;
  while (true) {
    bool survivors = false;
    for (const auto& [pid, rank] : alive) survivors = survivors || pid != victim;
    if (!survivors) break;
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG | WUNTRACED);
    if (pid > 0 && WIFSTOPPED(status)) {
      stopped_seen = true;
      continue;
    }
    if (pid > 0) {
      (*exits)[alive[pid]] = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      alive.erase(pid);
      continue;
    }
    if (MonotonicSeconds() > deadline) return false;
    ::usleep(2000);
  }
  (void)stopped_seen;
  return true;
}

TrialResult RunTrial(const Trial& t) {
  TrialResult res;
  const std::set<std::string> ucx_files_before = testing::UcxShmFiles();
  char dir[] = "/tmp/hccltune-campaign-XXXXXX";
  if (::mkdtemp(dir) == nullptr) return res;
  int fds[2];
  if (::pipe(fds) != 0) return res;
  std::map<pid_t, int> alive;
  std::vector<pid_t> pids;
  pid_t victim_pid = -1;
  for (int r = 0; r < t.ranks; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      ::_exit(RankMain(dir, r, t, fds[1]));
    }
    alive[pid] = r;
    pids.push_back(pid);
    if (r == t.victim) victim_pid = pid;
  }
  ::close(fds[1]);
  std::map<int, int> exits;
  const bool in_time = Reap(alive, victim_pid, MonotonicSeconds() + 60, &exits);
  res.hang = !in_time;
  // The victim (stopped, or survivors that hung) goes now; then everything is reaped.
  for (const auto& [pid, rank] : alive) {
    ::kill(pid, SIGKILL);
    ::kill(pid, SIGCONT);
  }
  for (const auto& [pid, rank] : alive) {
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
  std::string text;
  char buf[4096];
  ssize_t k;
  while ((k = ::read(fds[0], buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(k));
  ::close(fds[0]);
  double fault_at = 0;
  std::map<int, std::pair<double, std::string>> errors;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(' ', 3));
    if (f[0] == "F" && f.size() >= 2) (void)absl::SimpleAtod(f[1], &fault_at);
    int rank = 0;
    double at = 0;
    if (f[0] == "E" && f.size() == 4 && absl::SimpleAtoi(f[1], &rank) && absl::SimpleAtod(f[2], &at)) {
      errors[rank] = {at, f[3]};
    }
  }
  const std::string victim_name = absl::StrCat("rank ", t.victim);
  for (int r = 0; r < t.ranks; ++r) {
    if (r == t.victim) continue;
    auto e = errors.find(r);
    if (exits[r] != 20 || e == errors.end()) {
      ++res.bad_exits;
      absl::StrAppend(&res.log, "  rank ", r, " exit ", exits[r], " without an error\n");
      continue;
    }
    const double after = e->second.first - fault_at;
    res.slowest = std::max(res.slowest, after);
    if (after > kExecTimeoutS + 1.0) ++res.late;
    const std::string& msg = e->second.second;
    const bool names_victim = msg.find(victim_name) != std::string::npos &&
                              (msg.size() == msg.find(victim_name) + victim_name.size() ||
                               !isdigit(static_cast<unsigned char>(msg[msg.find(victim_name) + victim_name.size()])));
    res.victim_named = res.victim_named || names_victim;
    bool names_other = names_victim;
    for (int o = 0; o < t.ranks && !names_other; ++o) {
      names_other = o != r && (msg.find(absl::StrCat("rank ", o)) != std::string::npos ||
                               msg.find(absl::StrCat("ranks ", o)) != std::string::npos);
    }
    if (t.signal == SIGKILL ? !names_victim : !names_other) ++res.unnamed;
    absl::StrAppend(&res.log, "  rank ", r, " after ", after, " s: ", msg.substr(0, 300), "\n");
    if (res.sample.empty()) res.sample = absl::StrCat("rank ", r, ": ", msg.substr(0, 200));
  }
  // Every process of the job is gone: no child is left to reap (checking the pids themselves would count a pid
  // another test's process reused).
  pid_t left = 0;
  while ((left = ::waitpid(-1, nullptr, WNOHANG)) > 0) ++res.leaked_processes;
  if (left == 0) ++res.leaked_processes;  // a child still running
  // A segment named after a rank's pid is the job's unless that pid lives again (reused by another process); so
  // is a System V segment one of them created. UCX's /dev/shm files name no pid: those that appeared during the
  // trial and are still there.
  for (pid_t p : pids) {
    if (::kill(p, 0) != 0) {
      res.leaked_segments += static_cast<int>(testing::ShmSegmentsOf({p}) + testing::SysvSegmentsOf({p}));
    }
  }
  for (const std::string& f : testing::UcxShmFiles()) {
    if (ucx_files_before.count(f) == 0) {
      ++res.leaked_segments;
      absl::StrAppend(&res.log, "  left /dev/shm/", f, "\n");
    }
  }
  std::filesystem::remove_all(dir);
  return res;
}

struct CampaignFigures {
  int trials = 0, kills = 0, stops = 0, hangs = 0, late = 0, unnamed = 0, victim_unnamed = 0, bad_exits = 0;
  int stops_victim_named = 0;  // SIGSTOP trials where some survivor named the stopped rank itself
  int leaked_processes = 0, leaked_segments = 0;
  double slowest = 0;
};

CampaignFigures RunCampaign(int trials, uint64_t seed) {
  std::mt19937_64 rng(seed);
  CampaignFigures fig;
  const std::vector<Collective> colls(AllCollectives().begin(), AllCollectives().end());
  const std::vector<Transport> transports = Transports();
  const int kinds = static_cast<int>(transports.size());
  for (int i = 0; i < trials; ++i) {
    Trial t;
    // Every collective in turn, each round on the next transport and with the other signal (within a round the
    // signal flips every `kinds` trials, so every transport gets both); the size, victim and operation at random.
    const int per_round = static_cast<int>(colls.size()), round = i / per_round, j = i % per_round;
    t.collective = colls[static_cast<size_t>(j)];
    const Transport& tr = transports[static_cast<size_t>((i + round) % kinds)];
    // Point-to-point (Communicator::Send/Recv) takes no configuration: it runs on the default link (auto).
    const bool p2p = t.collective == Collective::kSendRecv;
    t.link = p2p ? "auto" : tr.link;
    t.ucx_tls = p2p ? "" : tr.ucx_tls;
    t.signal = (j / kinds + round) % 2 == 0 ? SIGKILL : SIGSTOP;
    t.ranks = 2 + static_cast<int>(rng() % 4);
    t.victim = static_cast<int>(rng() % static_cast<uint64_t>(t.ranks));
    t.op = static_cast<int>(rng() % 6);
    const TrialResult r = RunTrial(t);
    ++fig.trials;
    (t.signal == SIGKILL ? fig.kills : fig.stops) += 1;
    fig.hangs += r.hang ? 1 : 0;
    fig.late += r.late;
    fig.unnamed += r.unnamed;
    fig.victim_unnamed += r.victim_named || t.signal == SIGSTOP ? 0 : 1;
    fig.stops_victim_named += t.signal == SIGSTOP && r.victim_named ? 1 : 0;
    fig.bad_exits += r.bad_exits;
    fig.leaked_processes += r.leaked_processes;
    fig.leaked_segments += r.leaked_segments;
    fig.slowest = std::max(fig.slowest, r.slowest);
    // A stopped rank looks alive: a survivor may time out on a neighbour that waits for it, and name that one.
    const bool named = r.victim_named || t.signal == SIGSTOP;
    const bool ok = !r.hang && r.late == 0 && r.unnamed == 0 && named && r.bad_exits == 0 && r.leaked_processes == 0 &&
                    r.leaked_segments == 0;
    std::printf("trial %d: %s: %s (slowest survivor %.2f s); %s\n", i, t.Describe().c_str(), ok ? "ok" : "FAILED",
                r.slowest, r.sample.c_str());
    if (!ok) std::printf("%s", r.log.c_str());
    std::fflush(stdout);
  }
  std::printf(
      "fault campaign: %d trials (%d SIGKILL, %d SIGSTOP), hangs %d, late survivors %d, errors naming no rank %d, "
      "SIGKILL trials where no survivor named the killed rank %d, SIGSTOP trials where one named the stopped rank "
      "itself %d of %d, survivors without an error %d, leaked processes %d, leaked shared-memory segments %d, slowest "
      "survivor %.2f s after the fault (HCCL_EXEC_TIMEOUT=%d)\n",
      fig.trials, fig.kills, fig.stops, fig.hangs, fig.late, fig.unnamed, fig.victim_unnamed, fig.stops_victim_named,
      fig.stops, fig.bad_exits, fig.leaked_processes, fig.leaked_segments, fig.slowest, kExecTimeoutS);
  return fig;
}

void ExpectClean(const CampaignFigures& f) {
  EXPECT_EQ(f.hangs, 0);
  EXPECT_EQ(f.late, 0);
  EXPECT_EQ(f.unnamed, 0);
  EXPECT_EQ(f.victim_unnamed, 0);
  EXPECT_EQ(f.bad_exits, 0);
  EXPECT_EQ(f.leaked_processes, 0);
  EXPECT_EQ(f.leaked_segments, 0);
}

TEST(FaultCampaign, Short) { ExpectClean(RunCampaign(12, 1)); }

// 100 trials: every collective over each transport with SIGKILL and SIGSTOP (run with --gtest_also_run_disabled_tests).
TEST(FaultCampaign, DISABLED_Long) { ExpectClean(RunCampaign(100, 20261202)); }

}  // namespace
}  // namespace hccltune
