#include "tuner/cli/store_access.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "db/sqlite_store.h"
#include "runtime/common/daemon_discovery.h"
#include "tuner/bench/rank_report.h"

namespace hccltune::cli {

void AddStoreFlags(CLI::App* cmd, StoreFlags* flags) {
  auto* d = cmd->add_option("--daemon", flags->daemon,
                            "hccl-tuned target: unix:/path or host:port (default: HCCL_TUNE_DAEMON, then discovery)");
  auto* b = cmd->add_option("--db", flags->db, "Work on this database file directly, without a daemon");
  d->excludes(b);
}

absl::StatusOr<OpenedStore> OpenStore(const StoreFlags& flags) {
  OpenedStore out;
  if (!flags.db.empty()) {
    auto s = db::OpenSqliteTuningStore(flags.db);
    if (!s.ok()) return s.status();
    out.store = *std::move(s);
    out.where = absl::StrCat("database ", flags.db);
    return out;
  }
  auto env = Environment::Load();
  if (!env.ok()) return env.status();
  auto target = ResolveDaemonTarget(*env, flags.daemon, ::getuid());
  if (!target.ok()) return target.status();
  if (target->disabled) {
    return absl::FailedPreconditionError("the daemon is disabled (HCCL_TUNE_DAEMON=off); use --daemon or --db");
  }
  auto remote = std::make_unique<rpc::RemoteTuningStore>(target->grpc_target);
  out.remote = remote.get();
  out.store = std::move(remote);
  out.where = absl::StrCat("daemon ", target->grpc_target);
  return out;
}

std::string EntrySource(const db::TunedEntry& e) {
  return e.model_version > 0 ? absl::StrCat("predicted:", e.model_version) : "measured";
}

int ReportError(const absl::Status& status) {
  std::fprintf(stderr, "hccl-tune: %s\n", std::string(status.message()).c_str());
  // A rank of a local job also tells its spawner (a no-op elsewhere).
  return bench::ReportRankFailure(status, status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1);
}

}  // namespace hccltune::cli
