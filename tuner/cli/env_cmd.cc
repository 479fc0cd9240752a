// `hccl-tune env --runtime openmpi|mpich [--world N]`: the shell lines that point an MPI library at the files
// hccl-tuned keeps for this node's table of that library (daemon/peer_exports.h), for
// `eval "$(hccl-tune env --runtime openmpi)"` before mpirun. The table: the daemon's table of the library with one
// node of N ranks (--world), or its only one; the files are those in the daemon's exports directory, which the
// daemon rewrites when the table changes. Errors name what is missing: no such table (listing the daemon's tables
// of the library), a daemon that keeps no files, a file the daemon has not written.
#include <sys/stat.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/fingerprint.h"
#include "runtime/common/peer_configuration.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/store_access.h"
#include "tuner/peer_export/peer_files.h"

namespace hccltune::cli {
namespace {

struct EnvArgs {
  std::string runtime;
  int world = 0;
};

struct Candidate {
  std::string fingerprint, runtime;
  int ranks = 0;
  int64_t version = 0;
};

// The daemon's one-node tables of `runtime`, at `world` ranks when it is set.
absl::StatusOr<Candidate> PickPeerTable(db::TuningStore& store, const EnvArgs& a) {
  auto tables = store.ListTables();
  if (!tables.ok()) return tables.status();
  std::vector<Candidate> all, match;
  for (const db::TableSummary& t : *tables) {
    auto d = ParseTopologyJson(t.topology.json);
    if (!d.ok() || PeerRuntimeName(d->runtime) != a.runtime || d->ranks_per_node.size() != 1) continue;
    Candidate c{t.topology.fingerprint, d->runtime, d->ranks_per_node[0], t.latest_version};
    all.push_back(c);
    if (a.world == 0 || c.ranks == a.world) match.push_back(c);
  }
  if (match.size() == 1) return match.front();
  std::vector<std::string> listed;
  for (const Candidate& c : all)
    listed.push_back(absl::StrCat(c.fingerprint, " (", c.runtime, ", ", c.ranks, " ranks)"));
  if (match.empty()) {
    return absl::NotFoundError(
        absl::StrCat("hccl-tuned has no table of ", a.runtime, " on one node",
                     a.world ? absl::StrCat(" of ", a.world, " ranks") : "",
                     listed.empty() ? std::string(" (hccl-tune sweep --runtime ") + a.runtime + " stores one)"
                                    : absl::StrCat("; it has: ", absl::StrJoin(listed, ", "))));
  }
  return absl::InvalidArgumentError(absl::StrCat("hccl-tuned has several tables of ", a.runtime, ": ",
                                                 absl::StrJoin(listed, ", "), "; pass --world N"));
}

absl::StatusOr<std::string> EnvText(const StoreFlags& flags, const EnvArgs& a) {
  if (!flags.db.empty()) {
    return absl::InvalidArgumentError("env names the files hccl-tuned keeps: reach it with --daemon, not --db");
  }
  auto opened = OpenStore(flags);
  if (!opened.ok()) return opened.status();
  if (opened->remote == nullptr) return absl::InvalidArgumentError("env reaches hccl-tuned only: give --daemon");
  auto status = opened->remote->DaemonStatus();
  if (!status.ok()) return status.status();
  if (status->exports_dir().empty()) {
    return absl::FailedPreconditionError(absl::StrCat("hccl-tuned ", status->library_version(),
                                                      " keeps no files for other runtimes (a newer one does)"));
  }
  auto table = PickPeerTable(*opened->store, a);
  if (!table.ok()) return table.status();
  auto lines = exporter::PeerEnvLines(a.runtime, status->exports_dir(), table->fingerprint);
  if (!lines.ok()) return lines.status();
  for (const std::string& path : exporter::RuntimeFilePaths(a.runtime, status->exports_dir(), table->fingerprint)) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      return absl::NotFoundError(
          absl::StrCat("hccl-tuned has not written ", path, " for table ", table->fingerprint, " (its log says why)"));
    }
  }
  return absl::StrCat("# hccl-tune env: table ", table->fingerprint, " version ", table->version, " (", table->runtime,
                      ", one node of ", table->ranks, " ranks) from ", opened->where, "\n", absl::StrJoin(*lines, "\n"),
                      "\n");
}

}  // namespace

void RegisterEnv(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("env",
                                 "Print the environment that points an MPI library at hccl-tuned's files "
                                 "for its table on this node: eval \"$(hccl-tune env --runtime openmpi)\"");
  auto flags = std::make_shared<StoreFlags>();
  auto a = std::make_shared<EnvArgs>();
  cmd->add_option("--runtime", a->runtime, "openmpi or mpich")->required();
  cmd->add_option("--world", a->world, "Ranks on the node (default: the daemon's only table of the runtime)")
      ->check(CLI::Range(1, 1 << 20));
  AddStoreFlags(cmd, flags.get());
  cmd->callback([flags, a, exit_code] {
    if (a->runtime != kOpenMpi && a->runtime != kMpich) {
      *exit_code = ReportError(
          absl::InvalidArgumentError(absl::StrCat("--runtime ", a->runtime, " is unknown; accepted: openmpi, mpich")));
      return;
    }
    auto text = EnvText(*flags, *a);
    if (!text.ok()) {
      *exit_code = ReportError(text.status());
      return;
    }
    std::cout << *text << std::flush;
    *exit_code = std::cout ? 0 : 1;
  });
}

}  // namespace hccltune::cli
