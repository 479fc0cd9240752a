// The SQLite store's schema as migration steps: step i takes a database from schema version i to i + 1
// (db/sqlite_store.cc applies them, one transaction each). Never edit a released step; append one and raise
// kSchemaVersion (db/sqlite_store.h).
#pragma once

#include "absl/status/status.h"

struct sqlite3;

namespace hccltune::db {

// kSchemaVersion steps.
extern const char* const kSqliteMigrations[];

// The SQL functions migration steps call, registered on `db` (deterministic, any connection may keep them):
//   hccltune_topology_json(json)   the canonical JSON of the current format of any topology JSON this build reads
//                                  (runtime/common/fingerprint.h); other text unchanged
//   hccltune_fingerprint(text)     the first 16 hex digits of its SHA-256
//   hccltune_topology_class(json)  the topology's class hash; '' for text that is no topology JSON
absl::Status RegisterMigrationFunctions(sqlite3* db);

}  // namespace hccltune::db
