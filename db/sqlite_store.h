// SqliteTuningStore: the TuningStore contract in one SQLite file.
//
// Opening: a path that holds anything but an SQLite database, or an SQLite database that is not ours
// (PRAGMA application_id), is refused and never written. The schema is versioned (PRAGMA user_version is the
// schema_version); older schemas are migrated in place, one transaction per step; a schema newer than this build
// knows is refused with FailedPrecondition. The file runs in WAL mode with a busy timeout; every multi-row write
// is one transaction.
//
// Thread-safety: one connection behind a mutex; safe from any thread. Several processes may open one file
// (SQLite locking, busy_timeout).
#pragma once

#include <memory>
#include <string>

#include "db/tuning_store.h"

namespace hccltune::db {

// Schema version this build writes.
inline constexpr int kSchemaVersion = 5;
// PRAGMA application_id of an hccl-tune database ("HCTU").
inline constexpr int32_t kApplicationId = 0x48435455;

// Opens or creates the database at `path` (the directory must exist).
absl::StatusOr<std::unique_ptr<TuningStore>> OpenSqliteTuningStore(const std::string& path,
                                                                   const StoreOptions& options = {});

}  // namespace hccltune::db
