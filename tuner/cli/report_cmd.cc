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
#include "tuner/cli/sweep_common.h"
#include "tuner/sweep/search.h"

namespace hccltune::cli {
namespace {

struct ReportArgs {
  std::string out, sweep_id, journal;
  StoreFlags store;
};

std::string Esc(absl::string_view s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                         "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};

struct Curve {
  std::map<uint64_t, std::pair<double, std::string>> best;  // bytes -> (busbw, configuration)
};

std::string Plot(const std::string& title, const std::map<std::string, Curve>& curves,
                 const std::vector<db::TunedEntry>& winners) {
  const double W = 820, H = 380, L = 70, R = 20, T = 30, B = 50;
  uint64_t lo = UINT64_MAX, hi = 0;
  double ymax = 0;
  for (const auto& [alg, c] : curves) {
    for (const auto& [b, v] : c.best) {
      lo = std::min(lo, std::max<uint64_t>(b, 1));
      hi = std::max(hi, std::max<uint64_t>(b, 1));
      ymax = std::max(ymax, v.first);
    }
  }
  if (hi == 0) return "";
  if (hi == lo) hi = lo * 2;
  ymax = ymax > 0 ? ymax * 1.1 : 1;
  const double llo = std::log2(static_cast<double>(lo)), lhi = std::log2(static_cast<double>(hi));
  auto X = [&](double bytes) { return L + (std::log2(std::max(bytes, 1.0)) - llo) / (lhi - llo) * (W - L - R); };
  auto Y = [&](double v) { return H - B - v / ymax * (H - T - B); };
  std::string s = absl::StrFormat(
      "<h2>%s</h2>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n",
      Esc(title), W + 260, H);
  // Winner bands.
  int band = 0;
  for (const auto& e : winners) {
    const double x0 = std::max(L, X(static_cast<double>(std::max<uint64_t>(e.key.range.min, lo))));
    const double x1 = std::min(W - R, X(static_cast<double>(std::min<uint64_t>(e.key.range.max, hi * 2)) / 1.0001));
    if (x1 <= x0) continue;
    absl::StrAppendFormat(&s,
                          "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"%.0f\" fill=\"%s\" opacity=\"0.08\">"
                          "<title>%s %s: %s</title></rect>\n"
                          "<text x=\"%.1f\" y=\"%.0f\" fill=\"#444\">winner: %s</text>\n",
                          x0, T, x1 - x0, H - T - B, band % 2 ? "#000" : "#06c", Esc(FormatByteRange(e.key.range)),
                          "winner", Esc(e.configuration), x0 + 2, T - 6 + (band % 2) * 12,
                          Esc(e.configuration.substr(0, e.configuration.find('('))));
    ++band;
  }
  // Axes.
  absl::StrAppendFormat(&s, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#000\"/>\n", L, H - B,
                        W - R, H - B);
  absl::StrAppendFormat(&s, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#000\"/>\n", L, T, L,
                        H - B);
  for (uint64_t b = lo; b <= hi; b *= 4) {
    absl::StrAppendFormat(&s, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n",
                          X(static_cast<double>(b)), H - B + 15, FormatBytes(b));
  }
  for (int i = 0; i <= 4; ++i) {
    const double v = ymax * i / 4;
    absl::StrAppendFormat(&s, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>\n", L - 5, Y(v) + 4, v);
  }
  absl::StrAppendFormat(&s, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">bytes</text>\n", (L + W) / 2, H - 12);
  absl::StrAppendFormat(&s, "<text x=\"14\" y=\"%.0f\" transform=\"rotate(-90 14 %.0f)\">busbw GB/s</text>\n", H / 2,
                        H / 2);
  int k = 0;
  for (const auto& [alg, c] : curves) {
    const char* color = kColors[k % (sizeof(kColors) / sizeof(kColors[0]))];
    std::string pts;
    for (const auto& [b, v] : c.best) absl::StrAppendFormat(&pts, "%.1f,%.1f ", X(static_cast<double>(b)), Y(v.first));
    absl::StrAppendFormat(&s, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>\n", color, pts);
    for (const auto& [b, v] : c.best) {
      absl::StrAppendFormat(&s,
                            "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>%s %s: %.3f GB/s</title>"
                            "</circle>\n",
                            X(static_cast<double>(b)), Y(v.first), color, FormatBytes(b), Esc(v.second), v.first);
    }
    absl::StrAppendFormat(&s,
                          "<rect x=\"%.0f\" y=\"%d\" width=\"12\" height=\"3\" fill=\"%s\"/>"
                          "<text x=\"%.0f\" y=\"%d\">%s</text>\n",
                          W + 10, 40 + 16 * k, color, W + 28, 44 + 16 * k, Esc(alg));
    ++k;
  }
  s += "</svg>\n";
  return s;
}

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
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>hccl-tune sweep ", Esc(id),
      "</title>\n<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
      "td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px}</style></head><body>\n<h1>hccl-tune sweep ",
      Esc(id), "</h1>\n<p>", world, " ranks; ", samples->size(), " samples; status ",
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
                              Esc(FormatByteRange(e.key.range)), Esc(e.configuration), e.busbw_gbps, Esc(e.runner_up),
                              100 * e.margin, 100 * e.default_margin);
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
