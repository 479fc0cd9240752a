#include "runtime/api/flight_recorder.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/logging.h"
#include "runtime/selector/selector.h"
#include "runtime/selector/tuning.h"

namespace hccltune {
namespace {

std::mutex& RegistryMutex() {
  static std::mutex mu;
  return mu;
}
std::vector<FlightRecorder*>& Registry() {
  static std::vector<FlightRecorder*> all;
  return all;
}

// s as a JSON string literal.
void AppendJsonString(std::string* out, absl::string_view s) {
  out->push_back('"');
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppend(out, "\\u00", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

// A timestamp field: null when not taken.
std::string NsOrNull(int64_t ns) { return ns == 0 ? "null" : absl::StrCat(ns); }

void AppendEntry(std::string* out, const FlightRecord& r, int64_t timeout_ms) {
  const std::string config = InternedConfiguration(r.config_id);
  absl::StrAppend(out, "{\"record_id\":", r.id, ",\"collective_seq_id\":", r.op,
                  ",\"profiling_name\":\"hccl-tune:", CollectiveName(r.collective), "\",\"collective\":\"",
                  CollectiveName(r.collective), "\",\"input_dtypes\":[\"", DataTypeName(r.dtype),
                  "\"],\"bytes\":", r.bytes, ",\"configuration\":");
  AppendJsonString(out, config);
  absl::StrAppend(out, ",\"source\":\"", r.config_id == 0 ? "" : ChoiceSourceName(static_cast<ChoiceSource>(r.source)),
                  "\",\"state\":\"", FlightStateName(r.state), "\",\"time_created_ns\":", NsOrNull(r.start_ns),
                  ",\"time_discovered_started_ns\":", NsOrNull(r.start_ns),
                  ",\"time_discovered_completed_ns\":", NsOrNull(r.end_ns), ",\"duration_ms\":",
                  r.start_ns != 0 && r.end_ns != 0 ? absl::StrCat((r.end_ns - r.start_ns) / 1e6) : "null",
                  ",\"time_blocked_ns\":", NsOrNull(r.blocked_ns), ",\"timeout_ms\":", timeout_ms, "}");
}

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

// mkdir -p with mode 0700 for what it creates.
absl::Status MakeDirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i < dir.size() && dir[i] != '/') continue;
    const std::string part = dir.substr(0, i);
    if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::InternalError(absl::StrCat("flight recorder: cannot create ", part, ": ", strerror(errno)));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = absl::StrCat(path, ".", getpid(), ".", counter.fetch_add(1), ".tmp");
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("flight recorder: cannot write ", tmp, ": ", strerror(errno)));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      close(fd);
      unlink(tmp.c_str());
      return absl::InternalError(absl::StrCat("flight recorder: cannot write ", tmp, ": ", strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("flight recorder: cannot rename ", tmp, " to ", path, ": ", strerror(err)));
  }
  return absl::OkStatus();
}

// The signal's pipe: the handler writes a byte, SignalThread reads it and dumps.
int g_signal_pipe[2] = {-1, -1};
int g_signal = 0;

void OnSignal(int) {
  const int saved = errno;
  const char b = 1;
  ssize_t n = write(g_signal_pipe[1], &b, 1);  // a full pipe already holds a pending dump
  (void)n;
  errno = saved;
}

void SignalThread(int fd) {
  char buf[64];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    auto paths = DumpFlightRecorders("signal");
    if (!paths.ok()) Log(LogLevel::kWarn, paths.status().message());
    for (const std::string& p : paths.ok() ? *paths : std::vector<std::string>{}) {
      Log(LogLevel::kInfo, "flight recorder dumped to ", p);
    }
  }
}

}  // namespace

std::string FlightDumpDir(const Environment& env) {
  if (env.fr_dump_dir == "off") return "";
  if (!env.fr_dump_dir.empty()) return env.fr_dump_dir;
  if (!env.xdg_runtime_dir.empty()) return absl::StrCat(env.xdg_runtime_dir, "/hccl-tune/fr");
  return absl::StrCat("/tmp/hccl-tune-", getuid(), "/fr");
}

FlightRecorder::FlightRecorder(const Environment& env, FlightIdentity id)
    : ring_(env.fr_entries),
      id_(std::move(id)),
      dir_(FlightDumpDir(env)),
      hccl_algo_(env.hccl_algo),
      tune_algo_(env.tune_algo),
      buffsize_bytes_(env.buffsize_bytes),
      device_ip_(env.rank_table_device_ip),
      host_nic_ip_(env.rank_table_host_nic_ip),
      created_ns_(SteadyNs(std::chrono::steady_clock::now())) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  Registry().push_back(this);
}

FlightRecorder::~FlightRecorder() {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto& all = Registry();
  all.erase(std::remove(all.begin(), all.end(), this), all.end());
}

void FlightRecorder::SetJobFacts(FlightJobFacts facts) {
  std::lock_guard<std::mutex> lock(facts_mu_);
  facts_ = std::move(facts);
}

void FlightRecorder::NoteOverflow(uint32_t op, uint64_t call_bytes, uint64_t need) {
  Overflow& o = overflow_[static_cast<size_t>(std::bit_width(call_bytes))];
  if (o.last_op != op || o.calls.load(std::memory_order_relaxed) == 0) {
    o.last_op = op;
    o.calls.store(o.calls.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  if (need > o.max_need.load(std::memory_order_relaxed)) o.max_need.store(need, std::memory_order_relaxed);
}

// "settings": what decides configurations and buffers, as the rank ran with.
std::string FlightRecorder::SettingsJson() const {
  std::string out = ",\"settings\":{\"HCCL_ALGO\":";
  AppendJsonString(&out, hccl_algo_);
  out += ",\"HCCL_TUNE_ALGO\":";
  AppendJsonString(&out, tune_algo_);
  absl::StrAppend(&out, ",\"HCCL_BUFFSIZE_bytes\":", buffsize_bytes_, "}");
  return out;
}

// "cpu": the process's affinity (CPU numbers), the node's online CPUs, the process's CPU and wall time since the
// recorder was made (read now).
std::string FlightRecorder::HostJson() const {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(getpid(), sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  rusage ru = {};
  getrusage(RUSAGE_SELF, &ru);
  const double cpu_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                       static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  const double wall_s = static_cast<double>(SteadyNs(std::chrono::steady_clock::now()) - created_ns_) / 1e9;
  return absl::StrCat(",\"cpu\":{\"affinity\":[", absl::StrJoin(cpus, ","),
                      "],\"online\":", sysconf(_SC_NPROCESSORS_ONLN), ",\"process_cpu_s\":", cpu_s,
                      ",\"process_wall_s\":", wall_s, "}");
}

// "buffer_overflows": per call-size bucket with any, the calls over HCCL_BUFFSIZE and their largest need.
std::string FlightRecorder::OverflowJson() const {
  std::string out = ",\"buffer_overflows\":[";
  bool first = true;
  for (size_t i = 0; i < overflow_.size(); ++i) {
    const uint64_t calls = overflow_[i].calls.load(std::memory_order_relaxed);
    if (calls == 0) continue;
    const uint64_t lo = i == 0 ? 0 : uint64_t{1} << (i - 1);
    const uint64_t hi = i == 0 ? 1 : i == 64 ? UINT64_MAX : uint64_t{1} << i;  // [lo, hi)
    absl::StrAppend(&out, first ? "" : ",", "{\"min_bytes\":", lo, ",\"max_bytes\":", hi, ",\"calls\":", calls,
                    ",\"max_need_bytes\":", overflow_[i].max_need.load(std::memory_order_relaxed), "}");
    first = false;
  }
  return out + "]";
}

std::string FlightRecorder::Json(absl::string_view reason, absl::string_view error) const {
  uint32_t torn = 0;
  const std::vector<FlightRecord> records = ring_.Snapshot(&torn);
  int64_t last_completed = -1;
  for (const FlightRecord& r : records) {
    if (r.state == FlightState::kCompleted) last_completed = std::max<int64_t>(last_completed, r.op);
  }
  std::string out = "{\"version\":\"hccl-tune-fr-1\",\"reason\":";
  AppendJsonString(&out, reason);
  absl::StrAppend(&out, ",\"rank\":", id_.rank, ",\"world_size\":", id_.size, ",\"pid\":", getpid(), ",\"host\":");
  AppendJsonString(&out, Hostname());
  out += ",\"process_group\":";
  AppendJsonString(&out, id_.name);
  absl::StrAppend(&out, ",\"comm_tag\":\"", absl::Hex(id_.tag, absl::kZeroPad16),
                  "\",\"dump_time_ns\":", SteadyNs(std::chrono::steady_clock::now()),
                  ",\"timeout_ms\":", id_.timeout_ms, ",\"capacity\":", ring_.capacity(),
                  ",\"records_written\":", ring_.written(), ",\"torn\":", torn,
                  ",\"last_completed_seq\":", last_completed, ",\"error\":");
  AppendJsonString(&out, error);
  {
    std::lock_guard<std::mutex> lock(facts_mu_);
    out += ",\"topology_fingerprint\":";
    AppendJsonString(&out, facts_.fingerprint);
    out += ",\"node\":";
    AppendJsonString(&out, facts_.node);
    absl::StrAppend(&out, ",\"local_ranks\":", facts_.local_ranks, ",\"nodes\":", facts_.nodes);
  }
  out += SettingsJson() + HostJson() + OverflowJson() + LinksJson();
  out += ",\"entries\":[";
  for (size_t i = 0; i < records.size(); ++i) {
    if (i > 0) out += ",\n";
    AppendEntry(&out, records[i], id_.timeout_ms);
  }
  out += "]}\n";
  return out;
}

absl::StatusOr<std::string> FlightRecorder::Dump(absl::string_view reason, absl::string_view error) const {
  if (dir_.empty()) return absl::FailedPreconditionError("flight recorder dumps are off (HCCL_TUNE_FR_DUMP_DIR=off)");
  if (absl::Status s = MakeDirs(dir_); !s.ok()) return s;
  const std::string path = absl::StrCat(dir_, "/fr-", absl::Hex(id_.tag, absl::kZeroPad16), "-r", id_.rank, ".json");
  if (absl::Status s = WriteFile(path, Json(reason, error)); !s.ok()) return s;
  return path;
}

absl::StatusOr<std::vector<std::string>> DumpFlightRecorders(absl::string_view reason) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  std::vector<std::string> paths;
  for (const FlightRecorder* r : Registry()) {
    auto p = r->Dump(reason);
    if (!p.ok()) return p.status();
    paths.push_back(*std::move(p));
  }
  return paths;
}

absl::Status InstallFlightSignal(int signo) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (g_signal == signo) return absl::OkStatus();
  if (g_signal != 0) {
    return absl::FailedPreconditionError(absl::StrCat("HCCL_TUNE_FR_SIGNAL: signal ", g_signal,
                                                      " is installed in this process already; asked for ", signo));
  }
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat("HCCL_TUNE_FR_SIGNAL: pipe: ", strerror(errno)));
  }
  // The reading end blocks (the thread waits in read); the writing end never does (the handler).
  fcntl(g_signal_pipe[0], F_SETFL, fcntl(g_signal_pipe[0], F_GETFL) & ~O_NONBLOCK);
  std::thread(SignalThread, g_signal_pipe[0]).detach();
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (sigaction(signo, &sa, nullptr) != 0) {
    return absl::InternalError(absl::StrCat("HCCL_TUNE_FR_SIGNAL: sigaction: ", strerror(errno)));
  }
  g_signal = signo;
  return absl::OkStatus();
}

}  // namespace hccltune
