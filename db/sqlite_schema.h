// The SQLite store's schema as migration steps: step i takes a database from schema version i to i + 1
// (db/sqlite_store.cc applies them, one transaction each). Never edit a released step; append one and raise
// kSchemaVersion (db/sqlite_store.h).
#pragma once

namespace hccltune::db {

// kSchemaVersion steps.
extern const char* const kSqliteMigrations[];

}  // namespace hccltune::db
