#include "tuner/cli/sweep_common.h"

#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <set>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "db/table_json.h"
#include "runtime/common/configuration.h"
#include "runtime/common/sizes.h"
#include "runtime/common/types.h"

namespace hccltune::cli {

void PrintEntriesTable(const std::vector<db::TunedEntry>& entries, std::FILE* out) {
  std::fprintf(out, "%s\n",
               absl::StrFormat("%-13s %-5s %-11s %-52s %10s %8s %8s %8s", "coll", "dtype", "bytes", "winner", "time_us",
                               "busbw", "vs_2nd", "vs_dflt")
                   .c_str());
  for (const db::TunedEntry& e : entries) {
    std::fprintf(
        out, "%s\n",
        absl::StrFormat("%-13s %-5s %-11s %-52s %10.2f %8.3f %7.1f%% %7.1f%%", CollectiveName(e.key.collective),
                        DataTypeName(e.key.dtype), FormatByteRange(e.key.range), e.configuration, e.time_us,
                        e.busbw_gbps, 100 * e.margin, 100 * e.default_margin)
            .c_str());
    if (!e.runner_up.empty()) std::fprintf(out, "%-31s runner-up: %s\n", "", e.runner_up.c_str());
  }
}

nlohmann::json EntryJson(const db::TunedEntry& e) { return nlohmann::json::parse(db::EntryToJsonText(e)); }

absl::StatusOr<std::string> ResolveJournal(const std::string& journal) {
  if (!journal.empty()) return journal;
  auto env = Environment::Load();
  if (!env.ok()) return env.status();
  return DefaultJournal(*env);
}

absl::StatusOr<std::string> DefaultJournal(const Environment& env) {
  std::string dir;
  if (!env.xdg_state_home.empty())
    dir = env.xdg_state_home + "/hccl-tune";
  else if (!env.home.empty())
    dir = env.home + "/.local/state/hccl-tune";
  else
    dir = absl::StrCat("/tmp/hccl-tune-", ::getuid());
  std::string partial;
  for (absl::string_view part : absl::StrSplit(dir, '/', absl::SkipEmpty())) {
    partial = absl::StrCat(partial, "/", part);
    ::mkdir(partial.c_str(), 0700);
  }
  return dir + "/sweeps.db";
}

ProgressPrinter::ProgressPrinter(bool json, bool plain) : json_(json), tty_(!plain && ::isatty(2)) {}

void ProgressPrinter::operator()(const sweep::Progress& p) {
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start_);
  const double eta = p.done ? elapsed * static_cast<double>(p.total - p.done) / static_cast<double>(p.done) : 0;
  Show(p.done, p.total,
       absl::StrCat(CollectiveName(p.point->collective), " ", DataTypeName(p.point->dtype), " ",
                    FormatBytes(p.point->bytes)),
       *p.config, eta);
}

void ProgressPrinter::Show(uint64_t done, uint64_t total, const std::string& where, const std::string& config,
                           double eta) {
  auto format_eta = [](double s) {
    return absl::StrFormat("%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  };
  if (json_) {
    std::printf("%s\n", nlohmann::json{{"event", "progress"},
                                       {"done", done},
                                       {"total", total},
                                       {"point", where},
                                       {"config", config},
                                       {"eta_s", eta}}
                            .dump()
                            .c_str());
    std::fflush(stdout);
    return;
  }
  if (tty_) {
    const int width = 30;
    const int fill = total ? static_cast<int>(width * done / total) : 0;
    std::fprintf(stderr, "\r\033[K[%s%s] %llu/%llu  %s  %.50s  ETA %s", std::string(fill, '#').c_str(),
                 std::string(width - fill, '.').c_str(), static_cast<unsigned long long>(done),
                 static_cast<unsigned long long>(total), where.c_str(), config.c_str(), format_eta(eta).c_str());
    if (done == total) std::fprintf(stderr, "\n");
    return;
  }
  if (where != last_where_) {
    std::fprintf(stderr, "sweep: [%llu/%llu] %s  ETA %s\n", static_cast<unsigned long long>(done),
                 static_cast<unsigned long long>(total), where.c_str(), format_eta(eta).c_str());
    last_where_ = where;
  }
}

sweep::QuietCheck CheckQuiet(db::TuningStore* journal, rpc::RemoteTuningStore* remote, const std::string& own_id) {
  sweep::QuietCheck q = sweep::CheckNodeQuiet(journal, own_id);
  if (remote == nullptr) return q;
  auto add = [&q](const std::string& what) {
    q.warning = absl::StrCat(q.warning, q.warning.empty() ? "" : "; ", what);
    q.refuse = true;
  };
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::GetActivityRequest req;
  req.set_window_s(30);
  v1::GetActivityResponse resp;
  grpc::Status st = remote->stub().GetActivity(&ctx, req, &resp);
  if (!st.ok()) {
    q.warning = absl::StrCat(q.warning, q.warning.empty() ? "" : "; ",
                             "cannot ask hccl-tuned which jobs run now: ", st.error_message());
    return q;
  }
  if (!resp.running_sweep_id().empty() && resp.running_sweep_id() != own_id) {
    add(absl::StrCat("hccl-tuned is running sweep ", resp.running_sweep_id()));
  }
  // Tuning clients are "<fingerprint>/<pid>/<rank>" (one per rank process): grouped by topology.
  struct Job {
    std::set<int> ranks;
    std::set<std::string> pids;
    uint64_t samples = 0;
    int64_t last_ms = 0;
  };
  std::map<std::string, Job> jobs;
  for (const v1::Reporter& r : resp.reporters()) {
    std::vector<std::string> parts = absl::StrSplit(r.client_id(), '/');
    int rank = -1;
    const bool ours = parts.size() == 3 && absl::SimpleAtoi(parts[2], &rank);
    Job& j = jobs[ours ? absl::StrCat("topology ", parts[0]) : absl::StrCat("client ", r.client_id())];
    if (ours) {
      j.ranks.insert(rank);
      j.pids.insert(parts[1]);
    }
    j.samples += r.samples();
    j.last_ms = std::max(j.last_ms, r.last_seen_unix_ms());
  }
  if (jobs.empty()) return q;
  std::vector<std::string> described;
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  for (const auto& [name, j] : jobs) {
    described.push_back(absl::StrCat(
        name,
        j.ranks.empty()
            ? ""
            : absl::StrCat(" ranks ", absl::StrJoin(j.ranks, ","), " (pids ", absl::StrJoin(j.pids, ","), ")"),
        ": ", j.samples, " samples, last ", std::max<int64_t>(0, now_ms - j.last_ms) / 1000, " s ago"));
  }
  add(absl::StrCat("jobs report live timings to hccl-tuned (last 30 s): ", absl::StrJoin(described, "; ")));
  return q;
}

}  // namespace hccltune::cli
