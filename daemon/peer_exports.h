// PeerExports: hccl-tuned keeps the files each peer runtime reads (tuner/peer_export/peer_files.h: Open MPI's rules,
// MPICH's two JSON files) for every peer table of its store in `<state directory>/exports`, so that a job's
// `eval "$(hccl-tune env --runtime openmpi)"` points the runtime at the current ones. The files of a table are
// rewritten whenever the table changes through the daemon (PutTable, import, rollback, the online policy) and
// removed with it; at start every peer table's files are written. A file is replaced whole (written beside and
// renamed), so a job starting meanwhile reads the old or the new version, never a mix.
//
// MPICH's files extend MPICH's built-in selection, read once from the system's libmpich.so.12; without it MPICH
// tables get no files (logged once) and `hccl-tune env --runtime mpich` says so.
//
// Thread-safety: Refresh may be called concurrently (serialized inside).
#pragma once

#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "db/tuning_store.h"
#include "tuner/peer_export/mpich_json.h"

namespace hccltune::daemon {

class PeerExports {
 public:
  // `store` outlives this object; `dir` is created (0755) on first write.
  PeerExports(db::TuningStore* store, std::string dir);

  const std::string& dir() const { return dir_; }
  // Writes the files of `fingerprint`'s latest version when it is a peer table, removes them when the table is
  // gone; errors are logged (the table is served regardless).
  void Refresh(const std::string& fingerprint);
  // Refresh for every table of the store.
  void RefreshAll();

 private:
  const exporter::MpichBuiltin* Mpich() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  db::TuningStore* store_;
  const std::string dir_;
  absl::Mutex mu_;
  bool mpich_read_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<exporter::MpichBuiltin> mpich_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hccltune::daemon
