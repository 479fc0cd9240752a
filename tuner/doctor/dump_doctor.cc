#include "tuner/doctor/dump_doctor.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tuner/doctor/rules.h"

namespace hccltune::doctor {
namespace {

Finding Summary(const Comm& comm) {
  Finding f;
  f.kind = "summary";
  f.title = absl::StrCat("communicator ", comm.front().tag, ": dumps of ", comm.size(), " of ", comm.front().world,
                         " ranks, no finding above info");
  for (const RankDump& d : comm) {
    f.evidence.push_back(absl::StrCat("rank ", d.rank, " (", d.path, ", dumped on ", d.reason, "): ", d.ops.size(),
                                      " calls recorded, last completed ", d.last_completed));
  }
  f.fix = "nothing to do";
  return f;
}

absl::StatusOr<std::vector<std::string>> ListDumps(const std::string& dir) {
  DIR* dp = opendir(dir.c_str());
  if (dp == nullptr) return absl::NotFoundError(absl::StrCat("cannot read directory ", dir, ": ", strerror(errno)));
  std::vector<std::string> paths;
  while (const dirent* e = readdir(dp)) {
    const std::string name = e->d_name;
    if (absl::StartsWith(name, "fr-") && absl::EndsWith(name, ".json")) paths.push_back(absl::StrCat(dir, "/", name));
  }
  closedir(dp);
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) {
    return absl::NotFoundError(absl::StrCat(dir, " holds no flight-recorder dump (fr-<tag>-r<rank>.json; ",
                                            "docs/TROUBLESHOOTING.md, Dumps)"));
  }
  return paths;
}

// Every rule on one communicator, in the chain's order; a summary (info) when nothing was wrong.
void DiagnoseComm(const Comm& comm, const DoctorOptions& options, std::vector<Finding>* out) {
  const size_t before = out->size();
  if (auto m = DiagnoseMismatch(comm)) out->push_back(*std::move(m));
  if (auto h = DiagnoseHang(comm, options.hang_after_s)) out->push_back(*std::move(h));
  for (Finding& f : DiagnoseAlgorithms(comm, options)) out->push_back(std::move(f));
  for (Finding& f : DiagnoseLinks(comm, options)) out->push_back(std::move(f));
  if (auto b = DiagnoseBuffers(comm)) out->push_back(*std::move(b));
  for (Finding& f : DiagnoseBinding(comm)) out->push_back(std::move(f));
  if (auto s = DiagnoseStraggler(comm)) out->push_back(*std::move(s));
  const bool trouble = std::any_of(out->begin() + static_cast<std::ptrdiff_t>(before), out->end(),
                                   [](const Finding& f) { return f.severity != Severity::kInfo; });
  if (!trouble) out->push_back(Summary(comm));
  if (auto e = DiagnoseExposure(comm)) out->push_back(*std::move(e));
}

}  // namespace

const char* SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kWarn: return "warn";
    case Severity::kError: return "error";
  }
  return "info";
}

absl::StatusOr<std::vector<Finding>> DiagnoseDumps(const std::vector<DumpText>& dumps, const DoctorOptions& options) {
  if (dumps.empty()) return absl::NotFoundError("no flight-recorder dump to diagnose");
  std::map<std::string, Comm> comms;  // by comm_tag, each by rank
  for (const DumpText& t : dumps) {
    auto d = ParseDump(t.name, t.text);
    if (!d.ok()) return d.status();
    comms[d->tag].push_back(*std::move(d));
  }
  std::vector<Finding> out;
  for (auto& [tag, comm] : comms) {
    std::sort(comm.begin(), comm.end(), [](const RankDump& a, const RankDump& b) { return a.rank < b.rank; });
    DiagnoseComm(comm, options, &out);
  }
  std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    return a.severity != b.severity ? a.severity > b.severity : a.cost > b.cost;
  });
  return out;
}

absl::StatusOr<std::vector<Finding>> DiagnoseDumpDir(const std::string& dir, const DoctorOptions& options) {
  auto paths = ListDumps(dir);
  if (!paths.ok()) return paths.status();
  std::vector<DumpText> dumps;
  for (const std::string& p : *paths) {
    std::ifstream in(p);
    if (!in) return absl::NotFoundError(absl::StrCat(p, ": cannot be read"));
    std::ostringstream text;
    text << in.rdbuf();
    dumps.push_back({p, text.str()});
  }
  return DiagnoseDumps(dumps, options);
}

absl::StatusOr<std::vector<Finding>> DiagnoseDumpDir(const std::string& dir, double hang_after_s) {
  DoctorOptions options;
  options.hang_after_s = hang_after_s;
  return DiagnoseDumpDir(dir, options);
}

std::string FormatFindings(const std::vector<Finding>& findings) {
  std::string out;
  for (size_t i = 0; i < findings.size(); ++i) {
    const Finding& f = findings[i];
    absl::StrAppend(&out, i + 1, ". [", SeverityName(f.severity), "] ", f.kind, ": ", f.title, "\n");
    for (const std::string& e : f.evidence) absl::StrAppend(&out, "   evidence: ", e, "\n");
    absl::StrAppend(&out, "   fix: ", f.fix, "\n");
  }
  return out;
}

}  // namespace hccltune::doctor
