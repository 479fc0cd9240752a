// A cached SQLite prepared statement in use: bind, step, read columns; reset when it goes out of scope so the
// cached handle can be reused. Internal to db/sqlite_store.cc.
#pragma once

#include <sqlite3.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace hccltune::db {

// SQLite's last error on `db` as a Status that names the database file (a daemon's log or a CLI error says which
// file is read-only, full or damaged), coded for what it is: read-only or not permitted -> PermissionDenied, disk
// or quota full -> ResourceExhausted, corrupt or not a database -> DataLoss, anything else Internal. `what` names
// the step ("prepare"), or is empty.
inline absl::Status SqliteError(sqlite3* db, absl::string_view what = {}) {
  const char* file = sqlite3_db_filename(db, "main");
  const std::string msg = absl::StrCat("sqlite (", file != nullptr && *file != 0 ? file : ":memory:", ")",
                                       what.empty() ? "" : " ", what, ": ", sqlite3_errmsg(db));
  switch (sqlite3_errcode(db) & 0xff) {
    case SQLITE_READONLY:
    case SQLITE_PERM: return absl::PermissionDeniedError(msg);
    case SQLITE_FULL: return absl::ResourceExhaustedError(msg);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return absl::DataLossError(msg);
    default: return absl::InternalError(msg);
  }
}

// A prepared statement, reset on destruction so the cached handle can be reused.
class Stmt {
 public:
  explicit Stmt(sqlite3_stmt* s) : s_(s) {}
  ~Stmt() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& Bind(int i, absl::string_view v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& BindBlob(int i, absl::string_view v) {
    sqlite3_bind_blob(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& Bind(int i, double v) {
    sqlite3_bind_double(s_, i, v);
    return *this;
  }
  Stmt& BindNull(int i) {
    sqlite3_bind_null(s_, i);
    return *this;
  }
  // SQLITE_ROW -> true, SQLITE_DONE -> false, else error.
  absl::StatusOr<bool> Step() {
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqliteError(sqlite3_db_handle(s_));
  }
  absl::Status Run() {
    auto r = Step();
    return r.ok() ? absl::OkStatus() : r.status();
  }
  int64_t Int(int c) { return sqlite3_column_int64(s_, c); }
  double Real(int c) { return sqlite3_column_double(s_, c); }
  bool IsNull(int c) { return sqlite3_column_type(s_, c) == SQLITE_NULL; }
  std::string Text(int c) {
    const unsigned char* p = sqlite3_column_text(s_, c);
    return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(s_, c)) : std::string();
  }
  std::string Blob(int c) {
    const void* p = sqlite3_column_blob(s_, c);
    return p ? std::string(static_cast<const char*>(p), sqlite3_column_bytes(s_, c)) : std::string();
  }

 private:
  sqlite3_stmt* s_;
};

}  // namespace hccltune::db
