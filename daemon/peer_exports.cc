#include "daemon/peer_exports.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/common/fingerprint.h"
#include "runtime/common/logging.h"
#include "runtime/common/peer_configuration.h"
#include "tuner/peer_export/peer_files.h"

namespace hccltune::daemon {

PeerExports::PeerExports(db::TuningStore* store, std::string dir) : store_(store), dir_(std::move(dir)) {}

const exporter::MpichBuiltin* PeerExports::Mpich() {
  if (!mpich_read_) {
    mpich_read_ = true;
    const std::string lib = exporter::DefaultMpichLibrary();
    auto b = lib.empty() ? absl::StatusOr<exporter::MpichBuiltin>(absl::NotFoundError("no libmpich.so.12 found"))
                         : exporter::ReadMpichBuiltin(lib);
    if (b.ok()) {
      mpich_ = *std::move(b);
    } else {
      Log(LogLevel::kWarn, "MPICH tables get no exported files: ", b.status().message());
    }
  }
  return mpich_ ? &*mpich_ : nullptr;
}

void PeerExports::Refresh(const std::string& fingerprint) {
  absl::MutexLock lock(&mu_);
  auto table = store_->GetTable(fingerprint, 0);
  if (!table.ok()) {
    if (absl::IsNotFound(table.status())) {
      for (const std::string& p : exporter::PeerFilePaths(dir_, fingerprint)) ::unlink(p.c_str());
    } else {
      Log(LogLevel::kWarn, "exported files of table ", fingerprint, ": ", table.status().message());
    }
    return;
  }
  if (IsOwnRuntimeTopology(table->topology.json)) return;
  auto d = ParseTopologyJson(table->topology.json);
  const bool is_mpich = d.ok() && PeerRuntimeName(d->runtime) == kMpich;
  const exporter::MpichBuiltin* mpich = is_mpich ? Mpich() : nullptr;
  if (is_mpich && mpich == nullptr) return;
  auto files = exporter::PeerFiles(*table, dir_, mpich);
  if (!files.ok()) {
    Log(LogLevel::kWarn, "exported files of table ", fingerprint, ": ", files.status().message());
    return;
  }
  if (::mkdir(dir_.c_str(), 0755) != 0 && errno != EEXIST) {
    Log(LogLevel::kWarn, "cannot create ", dir_, ": ", std::strerror(errno));
    return;
  }
  for (const exporter::PeerFile& f : *files) {
    if (absl::Status s = exporter::WriteFileAtomically(f.path, f.text); !s.ok()) {
      Log(LogLevel::kWarn, "exported files of table ", fingerprint, ": ", s.message());
    }
  }
}

void PeerExports::RefreshAll() {
  auto tables = store_->ListTables();
  if (!tables.ok()) {
    Log(LogLevel::kWarn, "exported files: cannot list the tables: ", tables.status().message());
    return;
  }
  for (const db::TableSummary& t : *tables) Refresh(t.topology.fingerprint);
}

}  // namespace hccltune::daemon
