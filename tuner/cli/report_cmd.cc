// `hccl-tune report --out FILE`: a self-contained HTML page (inline SVG, no scripts, no external files) with,
// per (collective, dtype), busbw against size, one curve per algorithm (its best configuration at each size,
// from the sweep's raw samples), and the winner of each byte range marked as a labelled band.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "db/sqlite_store.h"
#include "runtime/common/sizes.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/store_access.h"
#include "tuner/cli/svg_plot.h"
#include "tuner/cli/sweep_common.h"
#include "tuner/sweep/search.h"

namespace hccltune::cli {
namespace {

struct ReportArgs {
  std::string out, sweep_id, journal;
  StoreFlags store;
};

absl::Status WriteReport(const ReportArgs& a) {
  auto opened = OpenStore(a.store);
  if (!opened.ok()) return opened.status();
  db::TuningStore* journal = opened->store.get();
  std::unique_ptr<db::TuningStore> own;
  if (a.store.db.empty() && !a.journal.empty()) {  // samples kept in a local file (sweep --journal)
    auto path = ResolveJournal(a.journal);
    if (!path.ok()) return path.status();
    auto j = db::OpenSqliteTuningStore(*path);
    if (!j.ok()) return j.status();
    own = *std::move(j);
    journal = own.get();
  }
  std::string id = a.sweep_id;
  if (id.empty()) {
    auto sweeps = journal->ListSweeps();
    if (!sweeps.ok()) return sweeps.status();
    for (const auto& s : *sweeps) {
      if (s.status == db::SweepStatus::kDone) {
        id = s.id;
        break;
      }
    }
    if (id.empty()) return absl::NotFoundError("no finished sweep to report on; run hccl-tune sweep first");
  }
  auto sweep = journal->GetSweep(id);
  if (!sweep.ok()) return sweep.status();
  auto samples = journal->GetSweepSamples(id);
  if (!samples.ok()) return samples.status();
  if (samples->empty()) return absl::NotFoundError(absl::StrCat("sweep ", id, " kept no samples"));
  // Median per (coll, dtype, bytes, configuration).
  using Key = std::tuple<int, int, uint64_t, std::string>;
  std::map<Key, std::vector<double>> times;
  int world = 1;
  for (const auto& s : *samples) {
    times[Key{static_cast<int>(s.collective), static_cast<int>(s.dtype), s.bytes, s.configuration}].push_back(
        s.time_us);
    world = s.world_size;
  }
  std::map<std::pair<int, int>, std::map<std::string, Curve>> plots;
  for (const auto& [k, v] : times) {
    const auto& [coll, dtype, bytes, cfg] = k;
    const double med = sweep::MedianWithCI(v).median;
    const double busbw =
        med > 0 ? static_cast<double>(bytes) / med / 1e3 * BusBandwidthFactor(static_cast<Collective>(coll), world) : 0;
    auto& curve = plots[{coll, dtype}][cfg.substr(0, cfg.find('('))];
    auto it = curve.best.find(bytes);
    if (it == curve.best.end() || busbw > it->second.first) curve.best[bytes] = {busbw, cfg};
  }
  // The winners this sweep stored.
  std::vector<db::TunedEntry> winners;
  if (auto tables = opened->store->ListTables(); tables.ok()) {
    for (const auto& t : *tables) {
      auto full = opened->store->GetTable(t.topology.fingerprint, 0);
      if (!full.ok()) continue;
      for (const auto& e : full->entries) {
        if (e.sweep_id == id) winners.push_back(e);
      }
    }
  }
  std::string html = absl::StrCat(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>hccl-tune sweep ", HtmlEscape(id),
      "</title>\n<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
      "td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px}</style></head><body>\n<h1>hccl-tune sweep ",
      HtmlEscape(id), "</h1>\n<p>", world, " ranks; ", samples->size(), " samples; status ",
      db::SweepStatusName(sweep->status),
      ". Curves: each algorithm's best configuration per size (median of the "
      "iterations, max over ranks). Bands: the stored winner per byte range.</p>\n");
  for (const auto& [key, curves] : plots) {
    std::vector<db::TunedEntry> mine;
    for (const auto& e : winners) {
      if (static_cast<int>(e.key.collective) == key.first && static_cast<int>(e.key.dtype) == key.second) {
        mine.push_back(e);
      }
    }
    html += Plot(absl::StrCat(CollectiveName(static_cast<Collective>(key.first)), " ",
                              DataTypeName(static_cast<DataType>(key.second))),
                 curves, mine);
    if (!mine.empty()) {
      html +=
          "<table><tr><th>bytes</th><th>winner</th><th>busbw GB/s</th><th>runner-up</th><th>margin</th>"
          "<th>vs default</th></tr>\n";
      for (const auto& e : mine) {
        absl::StrAppendFormat(&html,
                              "<tr><td>%s</td><td>%s</td><td>%.3f</td><td>%s</td><td>%.1f%%</td>"
                              "<td>%.1f%%</td></tr>\n",
                              HtmlEscape(FormatByteRange(e.key.range)), HtmlEscape(e.configuration), e.busbw_gbps,
                              HtmlEscape(e.runner_up), 100 * e.margin, 100 * e.default_margin);
      }
      html += "</table>\n";
    }
  }
  html += "</body></html>\n";
  std::ofstream f(a.out, std::ios::trunc);
  if (!f) return absl::InvalidArgumentError(absl::StrCat("--out: cannot write ", a.out));
  f << html;
  if (!f.flush()) return absl::InternalError(absl::StrCat("writing ", a.out, " failed"));
  std::printf("wrote %s (sweep %s, %zu plots)\n", a.out.c_str(), id.c_str(), plots.size());
  return absl::OkStatus();
}

}  // namespace

void RegisterReport(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<ReportArgs>();
  auto* cmd = app.add_subcommand("report", "Write a self-contained HTML report of a sweep (busbw curves, winners)");
  cmd->add_option("--out", a->out, "HTML file to write")->required();
  cmd->add_option("--sweep", a->sweep_id, "Sweep id (default: the newest finished one)");
  cmd->add_option("--journal", a->journal,
                  "With the daemon: read the samples from this file (sweep --journal) instead of the daemon");
  AddStoreFlags(cmd, &a->store);
  cmd->callback([a, exit_code] {
    absl::Status s = WriteReport(*a);
    *exit_code = s.ok() ? 0 : ReportError(s);
  });
}

}  // namespace hccltune::cli
