#include "db/sqlite_store.h"

#include <libgen.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <tuple>
#include <type_traits>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "db/sqlite_schema.h"
#include "db/sqlite_stmt.h"
#include "db/store_util.h"
#include "runtime/common/peer_configuration.h"
#include "runtime/common/status_macros.h"

namespace hccltune::db {
namespace {

absl::StatusOr<Collective> ColumnCollective(Stmt& st, int c) {
  auto v = ParseCollective(st.Text(c));
  if (!v.ok()) return absl::DataLossError(absl::StrCat("database holds ", v.status().message()));
  return v;
}
absl::StatusOr<DataType> ColumnDtype(Stmt& st, int c) {
  auto v = ParseDataType(st.Text(c));
  if (!v.ok()) return absl::DataLossError(absl::StrCat("database holds ", v.status().message()));
  return v;
}

// rank_time_us, stale, explore, explore_every, explore_calls (schema 2) and model_version (schema 5) from column
// `first` on.
void ReadOnlineColumns(Stmt& st, int first, TunedEntry* e) {
  e->rank_time_us = st.Real(first);
  e->stale = st.Int(first + 1) != 0;
  e->explore = st.Text(first + 2);
  e->explore_every = static_cast<uint32_t>(st.Int(first + 3));
  e->explore_calls = static_cast<uint32_t>(st.Int(first + 4));
  e->model_version = st.Int(first + 5);
}

class SqliteTuningStore final : public TuningStore {
 public:
  SqliteTuningStore(std::string path, StoreOptions options) : path_(std::move(path)), options_(options) {}
  ~SqliteTuningStore() override {
    absl::MutexLock lock(&mu_);
    for (auto& [sql, s] : cache_) sqlite3_finalize(s);
    if (db_ != nullptr) sqlite3_close(db_);
  }

  absl::Status Open();

  absl::StatusOr<int64_t> PutTable(const Topology& topology, absl::Span<const TunedEntry> entries,
                                   const PutOptions& options) override;
  absl::StatusOr<Table> GetTable(absl::string_view fingerprint, int64_t version) override;
  absl::StatusOr<std::optional<TunedEntry>> Lookup(absl::string_view fingerprint, Collective collective, DataType dtype,
                                                   int world_size, uint64_t bytes, int64_t version) override;
  absl::StatusOr<std::vector<TableSummary>> ListTables() override;
  absl::StatusOr<std::vector<TableSummary>> ListTablesOfClass(absl::string_view topology_class) override;
  absl::StatusOr<uint64_t> DeleteTable(absl::string_view fingerprint) override;
  absl::StatusOr<int64_t> Rollback(absl::string_view fingerprint, int64_t to_version) override;
  absl::Status RecordLiveSamples(absl::string_view fingerprint, absl::Span<const LiveSample> samples) override;
  absl::StatusOr<std::vector<LiveStats>> GetLiveStats(absl::string_view fingerprint) override;
  absl::Status PutSweep(const Sweep& sweep) override;
  absl::StatusOr<Sweep> GetSweep(absl::string_view id) override;
  absl::StatusOr<std::vector<Sweep>> ListSweeps() override;
  absl::Status AddSweepSamples(absl::string_view sweep_id, absl::Span<const SweepSample> samples) override;
  absl::StatusOr<std::vector<SweepSample>> GetSweepSamples(absl::string_view sweep_id) override;
  absl::Status PutLinks(const StoredLinks& links) override;
  absl::StatusOr<StoredLinks> GetLinks(absl::string_view fingerprint) override;
  absl::StatusOr<int64_t> PutModel(const StoredModel& model) override;
  absl::StatusOr<StoredModel> GetModel(absl::string_view topology_class, int64_t version) override;
  absl::StatusOr<std::vector<StoredModel>> ListModels() override;
  absl::StatusOr<StoreInfo> Info() override;

 private:
  absl::Status Exec(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      sqlite3_free(err);  // the same text as sqlite3_errmsg
      return SqliteError(db_);
    }
    return absl::OkStatus();
  }
  absl::StatusOr<sqlite3_stmt*> PrepareRaw(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = cache_.find(sql);
    if (it != cache_.end()) return it->second;
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK) {
      return SqliteError(db_, "prepare");
    }
    cache_.emplace(sql, s);
    return s;
  }
  // One transaction; rolled back when `body` fails.
  template <typename F>
  std::invoke_result_t<F&> InTransaction(F&& body) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (absl::Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
    auto result = body();
    if (result.ok()) {
      if (absl::Status s = Exec("COMMIT"); !s.ok()) {
        (void)Exec("ROLLBACK");
        return s;
      }
    } else {
      (void)Exec("ROLLBACK");
    }
    return result;
  }

  absl::Status CheckIdentity() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Migrate() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `error_code`, when given, gets SQLite's extended error code of a failure.
  absl::StatusOr<int64_t> PragmaInt(const char* sql, int* error_code = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // PermissionDenied naming the path: the database could not be opened for writing.
  absl::Status CannotOpenReadWrite(absl::string_view detail) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Latest version of the topology's table (0 when it has none) and its content hash.
  absl::StatusOr<std::pair<int64_t, std::string>> LatestLocked(absl::string_view fp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<int64_t> ResolveVersionLocked(absl::string_view fp, int64_t version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::vector<TunedEntry>> EntriesLocked(absl::string_view fp, int64_t version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<int64_t> PutLocked(absl::string_view fp, const std::vector<TunedEntry>& sorted,
                                    const PutOptions& options) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::vector<int64_t>> VersionsLocked(absl::string_view fp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The summaries of the topologies `st` selects (fingerprint, json, class) that have a table.
  absl::StatusOr<std::vector<TableSummary>> SummariesLocked(Stmt& st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const StoreOptions options_;
  absl::Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::map<const char*, sqlite3_stmt*> cache_ ABSL_GUARDED_BY(mu_);  // keyed by the SQL literal's address
};

#define PREP(var, sql)                             \
  HT_ASSIGN_OR_RETURN(var##_raw, PrepareRaw(sql)); \
  Stmt var(var##_raw)

absl::StatusOr<int64_t> SqliteTuningStore::PragmaInt(const char* sql, int* error_code) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db_, sql, -1, &raw, nullptr) != SQLITE_OK) {
    std::string msg = sqlite3_errmsg(db_);
    if (error_code != nullptr) *error_code = sqlite3_extended_errcode(db_);
    sqlite3_finalize(raw);
    return absl::FailedPreconditionError(msg);
  }
  int64_t v = 0;
  int rc = sqlite3_step(raw);
  if (rc == SQLITE_ROW) v = sqlite3_column_int64(raw, 0);
  std::string msg = sqlite3_errmsg(db_);
  if (error_code != nullptr) *error_code = sqlite3_extended_errcode(db_);
  sqlite3_finalize(raw);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return absl::FailedPreconditionError(msg);
  return v;
}

absl::Status SqliteTuningStore::CannotOpenReadWrite(absl::string_view detail) {
  // A file this user may not write is opened read-only without a word, and a directory it may not write keeps
  // SQLite from creating the -wal and -shm files beside it: name which one.
  auto denied = [](const std::string& p) {
    return ::access(p.c_str(), W_OK) != 0 && (errno == EACCES || errno == EPERM);
  };
  std::string dir_buf = path_;
  const std::string dir = ::dirname(dir_buf.data());
  std::string why;
  if (denied(path_)) {
    why = absl::StrCat("permission denied (this user may not write ", path_, "; sqlite: ", detail, ")");
  } else if (denied(dir)) {
    why = absl::StrCat("permission denied (this user may not write its directory ", dir,
                       ", where the -wal and -shm files go; sqlite: ", detail, ")");
  } else if (const int err = sqlite3_system_errno(db_); err == EACCES || err == EPERM) {
    why = absl::StrCat("permission denied (sqlite: ", detail, ")");
  } else if (struct statvfs fs{}; ::statvfs(dir.c_str(), &fs) == 0 && (fs.f_flag & ST_RDONLY) != 0) {
    why = absl::StrCat("the file system holding ", dir, " is mounted read-only (sqlite: ", detail, ")");
  } else if (err == ENOSPC || (::statvfs(dir.c_str(), &fs) == 0 && fs.f_bavail == 0)) {
    why = absl::StrCat("no space left on the file system holding ", dir,
                       ", where the -wal and -shm files go (sqlite: ", detail, ")");
  } else {
    why = absl::StrCat(detail, " (the file, its directory and its -wal and -shm files must be writable)");
  }
  return absl::PermissionDeniedError(absl::StrCat("cannot open database ", path_, " read-write: ", why));
}

absl::Status SqliteTuningStore::CheckIdentity() {
  int code = SQLITE_OK;
  auto app = PragmaInt("PRAGMA application_id", &code);
  if (!app.ok()) {
    switch (code & 0xff) {
      case SQLITE_READONLY:
      case SQLITE_CANTOPEN:
      case SQLITE_PERM:
      case SQLITE_AUTH:
      case SQLITE_IOERR: return CannotOpenReadWrite(app.status().message());
      case SQLITE_BUSY:
      case SQLITE_LOCKED:
        return absl::UnavailableError(absl::StrCat("cannot read database ", path_, ": ", app.status().message()));
      default:  // SQLITE_NOTADB, SQLITE_CORRUPT: the file is something else
        return absl::FailedPreconditionError(absl::StrCat(
            path_, " is not an hccl-tune database (", app.status().message(), "); refusing to use or overwrite it"));
    }
  }
  if (*app == kApplicationId) return absl::OkStatus();
  auto objects = PragmaInt("SELECT count(*) FROM sqlite_master");
  if (!objects.ok()) return objects.status();
  if (*app == 0 && *objects == 0) return absl::OkStatus();  // a fresh, empty database: ours to initialize
  return absl::FailedPreconditionError(
      absl::StrCat(path_, " is an SQLite database of another application (application_id ", *app, ", ", *objects,
                   " objects); refusing to use or overwrite it"));
}

absl::Status SqliteTuningStore::Migrate() {
  auto current = PragmaInt("PRAGMA user_version");
  if (!current.ok()) return current.status();
  if (*current > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(path_, " has schema version ", *current,
                                                      ", newer than this hccl-tune supports (", kSchemaVersion,
                                                      "); upgrade hccl-tune or use another --db"));
  }
  for (int v = static_cast<int>(*current); v < kSchemaVersion; ++v) {
    absl::Status s = InTransaction([&]() -> absl::Status {
      HT_RETURN_IF_ERROR(Exec(kSqliteMigrations[v]));
      HT_RETURN_IF_ERROR(Exec(absl::StrCat("PRAGMA application_id = ", kApplicationId).c_str()));
      return Exec(absl::StrCat("PRAGMA user_version = ", v + 1).c_str());
    });
    if (!s.ok()) return absl::InternalError(absl::StrCat("migrating ", path_, " to schema ", v + 1, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status SqliteTuningStore::Open() {
  absl::MutexLock lock(&mu_);
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(path_, " is not a regular file; refusing to use it as the database"));
    }
    if (st.st_size > 0) {
      char header[16] = {};
      FILE* f = std::fopen(path_.c_str(), "rb");
      if (f == nullptr) {
        const int err = errno;
        return absl::Status(
            err == EACCES || err == EPERM ? absl::StatusCode::kPermissionDenied : absl::StatusCode::kFailedPrecondition,
            absl::StrCat("cannot open database ", path_, ": ", std::strerror(err)));
      }
      size_t n = std::fread(header, 1, sizeof(header), f);
      std::fclose(f);
      if (n != sizeof(header) || absl::string_view(header, 16) != absl::string_view("SQLite format 3\0", 16)) {
        return absl::FailedPreconditionError(
            absl::StrCat(path_, " is not an SQLite database; refusing to use or overwrite it"));
      }
    }
  }
  int rc =
      sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    return absl::FailedPreconditionError(absl::StrCat("cannot open database ", path_, ": ",
                                                      db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc),
                                                      " (does the directory exist and is it writable?)"));
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, options_.busy_timeout_ms);
  HT_RETURN_IF_ERROR(CheckIdentity());
  {
    auto mode = PragmaInt("PRAGMA journal_mode = WAL");  // returns text; checked below
    (void)mode;
    sqlite3_stmt* raw = nullptr;
    sqlite3_prepare_v2(db_, "PRAGMA journal_mode", -1, &raw, nullptr);
    std::string jm =
        (raw && sqlite3_step(raw) == SQLITE_ROW) ? reinterpret_cast<const char*>(sqlite3_column_text(raw, 0)) : "";
    sqlite3_finalize(raw);
    if (jm != "wal") {
      return absl::FailedPreconditionError(absl::StrCat("cannot put ", path_, " in WAL mode (journal mode '", jm,
                                                        "'): ", sqlite3_errmsg(db_), " (is the directory writable?)"));
    }
  }
  HT_RETURN_IF_ERROR(Exec("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON"));
  HT_RETURN_IF_ERROR(RegisterMigrationFunctions(db_));
  absl::Status s = Migrate();
  if (!s.ok() && absl::StrContains(s.message(), "readonly")) {
    return absl::FailedPreconditionError(absl::StrCat(s.message(), " (is the directory writable?)"));
  }
  return s;
}

absl::StatusOr<std::pair<int64_t, std::string>> SqliteTuningStore::LatestLocked(absl::string_view fp) {
  PREP(st, "SELECT version, content_hash FROM table_versions WHERE fingerprint = ? ORDER BY version DESC LIMIT 1");
  st.Bind(1, fp);
  HT_ASSIGN_OR_RETURN(row, st.Step());
  if (!row) return std::pair<int64_t, std::string>{0, ""};
  return std::pair<int64_t, std::string>{st.Int(0), st.Text(1)};
}

absl::StatusOr<std::vector<int64_t>> SqliteTuningStore::VersionsLocked(absl::string_view fp) {
  PREP(st, "SELECT version FROM table_versions WHERE fingerprint = ? ORDER BY version");
  st.Bind(1, fp);
  std::vector<int64_t> out;
  while (true) {
    HT_ASSIGN_OR_RETURN(row, st.Step());
    if (!row) break;
    out.push_back(st.Int(0));
  }
  return out;
}

absl::StatusOr<int64_t> SqliteTuningStore::ResolveVersionLocked(absl::string_view fp, int64_t version) {
  HT_RETURN_IF_ERROR(ValidateFingerprint(fp));
  HT_ASSIGN_OR_RETURN(versions, VersionsLocked(fp));
  if (versions.empty()) return absl::NotFoundError(absl::StrCat("no table for topology ", fp));
  if (version == 0) return versions.back();
  for (int64_t v : versions) {
    if (v == version) return v;
  }
  return absl::NotFoundError(absl::StrCat("topology ", fp, " has no version ", version, " (kept: ", versions.front(),
                                          "..", versions.back(), ")"));
}

absl::StatusOr<std::vector<TunedEntry>> SqliteTuningStore::EntriesLocked(absl::string_view fp, int64_t version) {
  PREP(st,
       "SELECT collective, dtype, world_size, min_bytes, max_bytes, configuration, time_us, busbw_gbps, samples, "
       "runner_up, margin, default_margin, sweep_id, library_version, measured_ms, rank_time_us, stale, explore, "
       "explore_every, explore_calls, model_version FROM entries WHERE fingerprint = ? AND version = ?");
  st.Bind(1, fp).Bind(2, version);
  std::vector<TunedEntry> out;
  while (true) {
    HT_ASSIGN_OR_RETURN(row, st.Step());
    if (!row) break;
    TunedEntry e;
    HT_ASSIGN_OR_RETURN(coll, ColumnCollective(st, 0));
    HT_ASSIGN_OR_RETURN(dtype, ColumnDtype(st, 1));
    e.key.collective = coll;
    e.key.dtype = dtype;
    e.key.world_size = static_cast<int>(st.Int(2));
    e.key.range.min = static_cast<uint64_t>(st.Int(3));
    e.key.range.max = st.IsNull(4) ? kUnbounded : static_cast<uint64_t>(st.Int(4));
    e.configuration = st.Text(5);
    e.time_us = st.Real(6);
    e.busbw_gbps = st.Real(7);
    e.samples = static_cast<uint64_t>(st.Int(8));
    e.runner_up = st.Text(9);
    e.margin = st.Real(10);
    e.default_margin = st.Real(11);
    e.sweep_id = st.Text(12);
    e.library_version = st.Text(13);
    e.measured_unix_ms = st.Int(14);
    ReadOnlineColumns(st, 15, &e);
    out.push_back(std::move(e));
  }
  // The key columns are stored as names; restore the enum order.
  std::sort(out.begin(), out.end(),
            [](const TunedEntry& a, const TunedEntry& b) { return EntryKeyLess(a.key, b.key); });
  return out;
}

absl::StatusOr<int64_t> SqliteTuningStore::PutLocked(absl::string_view fp, const std::vector<TunedEntry>& sorted,
                                                     const PutOptions& options) {
  std::string hash = ContentHash(sorted);
  HT_ASSIGN_OR_RETURN(latest, LatestLocked(fp));
  HT_RETURN_IF_ERROR(CheckExpectedVersion(fp, latest.first, options));
  if (latest.first != 0 && latest.second == hash) return latest.first;
  PREP(next, "SELECT next_version FROM topologies WHERE fingerprint = ?");
  next.Bind(1, fp);
  HT_ASSIGN_OR_RETURN(has, next.Step());
  if (!has) return absl::InternalError("topology row missing");
  HT_ASSIGN_OR_RETURN(version, NewVersion(fp, next.Int(0), options));
  {
    PREP(up, "UPDATE topologies SET next_version = ? WHERE fingerprint = ?");
    HT_RETURN_IF_ERROR(up.Bind(1, version + 1).Bind(2, fp).Run());
  }
  {
    PREP(ins, "INSERT INTO table_versions(fingerprint, version, content_hash, created_ms) VALUES (?, ?, ?, ?)");
    HT_RETURN_IF_ERROR(ins.Bind(1, fp)
                           .Bind(2, version)
                           .Bind(3, hash)
                           .Bind(4, options.created_unix_ms ? options.created_unix_ms : NowUnixMs())
                           .Run());
  }
  for (const TunedEntry& e : sorted) {
    PREP(ins,
         "INSERT INTO entries(fingerprint, version, collective, dtype, world_size, min_bytes, max_bytes, "
         "configuration, time_us, busbw_gbps, samples, runner_up, margin, default_margin, sweep_id, "
         "library_version, measured_ms, rank_time_us, stale, explore, explore_every, explore_calls, model_version) "
         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    ins.Bind(1, fp).Bind(2, version).Bind(3, CollectiveName(e.key.collective)).Bind(4, DataTypeName(e.key.dtype));
    ins.Bind(5, static_cast<int64_t>(e.key.world_size)).Bind(6, static_cast<int64_t>(e.key.range.min));
    if (e.key.range.max == kUnbounded) {
      ins.BindNull(7);
    } else {
      ins.Bind(7, static_cast<int64_t>(e.key.range.max));
    }
    ins.Bind(8, e.configuration).Bind(9, e.time_us).Bind(10, e.busbw_gbps).Bind(11, static_cast<int64_t>(e.samples));
    ins.Bind(12, e.runner_up).Bind(13, e.margin).Bind(14, e.default_margin).Bind(15, e.sweep_id);
    ins.Bind(16, e.library_version).Bind(17, e.measured_unix_ms).Bind(18, e.rank_time_us);
    ins.Bind(19, static_cast<int64_t>(e.stale)).Bind(20, e.explore).Bind(21, static_cast<int64_t>(e.explore_every));
    ins.Bind(22, static_cast<int64_t>(e.explore_calls)).Bind(23, e.model_version);
    HT_RETURN_IF_ERROR(ins.Run());
  }
  // Keep the newest max_versions.
  HT_ASSIGN_OR_RETURN(versions, VersionsLocked(fp));
  for (size_t i = 0; i + options_.max_versions < versions.size(); ++i) {
    PREP(de, "DELETE FROM entries WHERE fingerprint = ? AND version = ?");
    HT_RETURN_IF_ERROR(de.Bind(1, fp).Bind(2, versions[i]).Run());
    PREP(dv, "DELETE FROM table_versions WHERE fingerprint = ? AND version = ?");
    HT_RETURN_IF_ERROR(dv.Bind(1, fp).Bind(2, versions[i]).Run());
  }
  return version;
}

absl::StatusOr<int64_t> SqliteTuningStore::PutTable(const Topology& topology, absl::Span<const TunedEntry> entries,
                                                    const PutOptions& options) {
  HT_ASSIGN_OR_RETURN(sorted, ValidatePut(topology, entries, options));
  absl::MutexLock lock(&mu_);
  return InTransaction([&]() -> absl::StatusOr<int64_t> {
    PREP(find, "SELECT json FROM topologies WHERE fingerprint = ?");
    find.Bind(1, topology.fingerprint);
    HT_ASSIGN_OR_RETURN(known, find.Step());
    if (!known) {
      HT_ASSIGN_OR_RETURN(topology_class, ValidateTopology(topology));  // the JSON is required the first time
      PREP(ins, "INSERT INTO topologies(fingerprint, json, class) VALUES (?, ?, ?)");
      HT_RETURN_IF_ERROR(ins.Bind(1, topology.fingerprint).Bind(2, topology.json).Bind(3, topology_class).Run());
    }
    return PutLocked(topology.fingerprint, sorted, options);
  });
}

absl::StatusOr<Table> SqliteTuningStore::GetTable(absl::string_view fp, int64_t version) {
  absl::MutexLock lock(&mu_);
  HT_ASSIGN_OR_RETURN(v, ResolveVersionLocked(fp, version));
  Table t;
  t.version = v;
  {
    PREP(st,
         "SELECT t.json, v.content_hash, v.created_ms, t.class FROM table_versions v JOIN topologies t "
         "USING(fingerprint) WHERE v.fingerprint = ? AND v.version = ?");
    st.Bind(1, fp).Bind(2, v);
    HT_ASSIGN_OR_RETURN(row, st.Step());
    if (!row) return absl::NotFoundError(absl::StrCat("no table for topology ", fp));
    t.topology = Topology{std::string(fp), st.Text(0), st.Text(3)};
    t.content_hash = st.Text(1);
    t.created_unix_ms = st.Int(2);
  }
  HT_ASSIGN_OR_RETURN(entries, EntriesLocked(fp, v));
  t.entries = std::move(entries);
  return t;
}

absl::StatusOr<std::optional<TunedEntry>> SqliteTuningStore::Lookup(absl::string_view fp, Collective collective,
                                                                    DataType dtype, int world_size, uint64_t bytes,
                                                                    int64_t version) {
  if (bytes > kMaxBytes) return absl::InvalidArgumentError(absl::StrCat("bytes ", bytes, " is absurd"));
  absl::MutexLock lock(&mu_);
  HT_ASSIGN_OR_RETURN(v, ResolveVersionLocked(fp, version));
  PREP(st,
       "SELECT min_bytes, max_bytes, configuration, time_us, busbw_gbps, samples, runner_up, margin, default_margin, "
       "sweep_id, library_version, measured_ms, rank_time_us, stale, explore, explore_every, explore_calls, "
       "model_version FROM entries "
       "WHERE fingerprint = ? AND version = ? AND collective = ? "
       "AND dtype = ? AND world_size = ? AND min_bytes <= ? ORDER BY min_bytes DESC LIMIT 1");
  st.Bind(1, fp).Bind(2, v).Bind(3, CollectiveName(collective)).Bind(4, DataTypeName(dtype));
  st.Bind(5, static_cast<int64_t>(world_size)).Bind(6, static_cast<int64_t>(bytes));
  HT_ASSIGN_OR_RETURN(row, st.Step());
  if (!row) return std::optional<TunedEntry>();
  TunedEntry e;
  e.key = EntryKey{
      collective, dtype, world_size,
      ByteRange{static_cast<uint64_t>(st.Int(0)), st.IsNull(1) ? kUnbounded : static_cast<uint64_t>(st.Int(1))}};
  if (!e.key.range.Contains(bytes)) return std::optional<TunedEntry>();
  e.configuration = st.Text(2);
  e.time_us = st.Real(3);
  e.busbw_gbps = st.Real(4);
  e.samples = static_cast<uint64_t>(st.Int(5));
  e.runner_up = st.Text(6);
  e.margin = st.Real(7);
  e.default_margin = st.Real(8);
  e.sweep_id = st.Text(9);
  e.library_version = st.Text(10);
  e.measured_unix_ms = st.Int(11);
  ReadOnlineColumns(st, 12, &e);
  return std::optional<TunedEntry>(std::move(e));
}

absl::StatusOr<std::vector<TableSummary>> SqliteTuningStore::ListTables() {
  absl::MutexLock lock(&mu_);
  PREP(st, "SELECT fingerprint, json, class FROM topologies ORDER BY fingerprint");
  return SummariesLocked(st);
}

absl::StatusOr<std::vector<TableSummary>> SqliteTuningStore::ListTablesOfClass(absl::string_view topology_class) {
  HT_RETURN_IF_ERROR(ValidateTopologyClass(topology_class));
  absl::MutexLock lock(&mu_);
  PREP(st, "SELECT fingerprint, json, class FROM topologies WHERE class = ? ORDER BY fingerprint");
  st.Bind(1, topology_class);
  return SummariesLocked(st);
}

absl::StatusOr<std::vector<TableSummary>> SqliteTuningStore::SummariesLocked(Stmt& st) {
  std::vector<TableSummary> out;
  while (true) {
    HT_ASSIGN_OR_RETURN(row, st.Step());
    if (!row) break;
    TableSummary s;
    s.topology = Topology{st.Text(0), st.Text(1), st.Text(2)};
    HT_ASSIGN_OR_RETURN(versions, VersionsLocked(s.topology.fingerprint));
    if (versions.empty()) continue;
    s.versions = versions;
    s.latest_version = versions.back();
    PREP(cnt,
         "SELECT (SELECT count(*) FROM entries WHERE fingerprint = ?1 AND version = ?2), "
         "(SELECT created_ms FROM table_versions WHERE fingerprint = ?1 AND version = ?2)");
    cnt.Bind(1, s.topology.fingerprint).Bind(2, s.latest_version);
    HT_ASSIGN_OR_RETURN(crow, cnt.Step());
    if (crow) {
      s.entries = static_cast<uint64_t>(cnt.Int(0));
      s.updated_unix_ms = cnt.Int(1);
    }
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<uint64_t> SqliteTuningStore::DeleteTable(absl::string_view fp) {
  HT_RETURN_IF_ERROR(ValidateFingerprint(fp));
  absl::MutexLock lock(&mu_);
  return InTransaction([&]() -> absl::StatusOr<uint64_t> {
    HT_ASSIGN_OR_RETURN(versions, VersionsLocked(fp));
    if (versions.empty()) return absl::NotFoundError(absl::StrCat("no table for topology ", fp));
    PREP(de, "DELETE FROM entries WHERE fingerprint = ?");
    HT_RETURN_IF_ERROR(de.Bind(1, fp).Run());
    PREP(dv, "DELETE FROM table_versions WHERE fingerprint = ?");
    HT_RETURN_IF_ERROR(dv.Bind(1, fp).Run());
    return static_cast<uint64_t>(versions.size());  // the topologies row keeps next_version: numbers only grow
  });
}

absl::StatusOr<int64_t> SqliteTuningStore::Rollback(absl::string_view fp, int64_t to_version) {
  HT_RETURN_IF_ERROR(ValidateFingerprint(fp));
  absl::MutexLock lock(&mu_);
  return InTransaction([&]() -> absl::StatusOr<int64_t> {
    HT_ASSIGN_OR_RETURN(versions, VersionsLocked(fp));
    if (versions.empty()) return absl::NotFoundError(absl::StrCat("no table for topology ", fp));
    int64_t target = to_version;
    if (target == 0) {
      if (versions.size() < 2) {
        return absl::FailedPreconditionError(absl::StrCat("topology ", fp, " has no earlier version"));
      }
      target = versions[versions.size() - 2];
    }
    HT_ASSIGN_OR_RETURN(v, ResolveVersionLocked(fp, target));
    HT_ASSIGN_OR_RETURN(entries, EntriesLocked(fp, v));
    return PutLocked(fp, entries, PutOptions{});
  });
}

absl::Status SqliteTuningStore::RecordLiveSamples(absl::string_view fp, absl::Span<const LiveSample> samples) {
  HT_RETURN_IF_ERROR(ValidateFingerprint(fp));
  using Key = std::tuple<Collective, DataType, int, uint64_t, absl::string_view>;
  std::map<Key, LiveDelta> deltas;
  for (const LiveSample& s : samples) {
    HT_RETURN_IF_ERROR(ValidateLiveSample(s));
    LiveDelta& d = deltas[Key{s.collective, s.dtype, s.world_size, SizeBucket(s.bytes).min, s.configuration}];
    d.count++;
    d.sum_us += s.duration_us;
    d.last_seen_unix_ms = std::max(d.last_seen_unix_ms, s.unix_ms);
    d.histogram.Add(s.duration_us);
  }
  absl::MutexLock lock(&mu_);
  return InTransaction([&]() -> absl::Status {
    for (auto& [key, d] : deltas) {
      const auto& [coll, dtype, world, bucket, config] = key;
      PREP(sel,
           "SELECT count, sum_us, histogram, last_seen_ms FROM live_stats WHERE fingerprint = ? AND collective = ? "
           "AND dtype = ? AND world_size = ? AND bucket_min = ? AND configuration = ?");
      sel.Bind(1, fp).Bind(2, CollectiveName(coll)).Bind(3, DataTypeName(dtype)).Bind(4, static_cast<int64_t>(world));
      sel.Bind(5, static_cast<int64_t>(bucket)).Bind(6, config);
      HT_ASSIGN_OR_RETURN(row, sel.Step());
      if (row) {
        HT_ASSIGN_OR_RETURN(h, LatencyHistogram::Decode(sel.Blob(2)));
        d.histogram.Merge(h);
        d.count += static_cast<uint64_t>(sel.Int(0));
        d.sum_us += sel.Real(1);
        d.last_seen_unix_ms = std::max(d.last_seen_unix_ms, sel.Int(3));
      }
      PREP(up,
           "INSERT OR REPLACE INTO live_stats(fingerprint, collective, dtype, world_size, bucket_min, configuration, "
           "count, sum_us, histogram, last_seen_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
      up.Bind(1, fp).Bind(2, CollectiveName(coll)).Bind(3, DataTypeName(dtype)).Bind(4, static_cast<int64_t>(world));
      up.Bind(5, static_cast<int64_t>(bucket)).Bind(6, config).Bind(7, static_cast<int64_t>(d.count));
      up.Bind(8, d.sum_us).BindBlob(9, d.histogram.Encode()).Bind(10, d.last_seen_unix_ms);
      HT_RETURN_IF_ERROR(up.Run());
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<LiveStats>> SqliteTuningStore::GetLiveStats(absl::string_view fp) {
  HT_RETURN_IF_ERROR(ValidateFingerprint(fp));
  absl::MutexLock lock(&mu_);
  PREP(st,
       "SELECT collective, dtype, world_size, bucket_min, configuration, count, sum_us, histogram, last_seen_ms "
       "FROM live_stats WHERE fingerprint = ?");
  st.Bind(1, fp);
  std::vector<LiveStats> out;
  while (true) {
    HT_ASSIGN_OR_RETURN(row, st.Step());
    if (!row) break;
    LiveStats s;
    s.fingerprint = std::string(fp);
    HT_ASSIGN_OR_RETURN(coll, ColumnCollective(st, 0));
    HT_ASSIGN_OR_RETURN(dtype, ColumnDtype(st, 1));
    s.collective = coll;
    s.dtype = dtype;
    s.world_size = static_cast<int>(st.Int(2));
    s.bucket = SizeBucket(static_cast<uint64_t>(st.Int(3)));
    s.configuration = st.Text(4);
    s.count = static_cast<uint64_t>(st.Int(5));
    s.mean_us = s.count ? st.Real(6) / static_cast<double>(s.count) : 0;
    HT_ASSIGN_OR_RETURN(h, LatencyHistogram::Decode(st.Blob(7)));
    s.median_us = h.Quantile(0.5);
    s.p90_us = h.Quantile(0.9);
    s.last_seen_unix_ms = st.Int(8);
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const LiveStats& a, const LiveStats& b) {
    return std::tie(a.collective, a.dtype, a.world_size, a.bucket.min, a.configuration) <
           std::tie(b.collective, b.dtype, b.world_size, b.bucket.min, b.configuration);
  });
  return out;
}

absl::Status SqliteTuningStore::PutSweep(const Sweep& s) {
  HT_RETURN_IF_ERROR(ValidateSweep(s));
  absl::MutexLock lock(&mu_);
  PREP(
      st,
      "INSERT INTO sweeps(id, params, status, progress, started_ms, finished_ms, message) VALUES (?, ?, ?, ?, ?, ?, ?) "
      "ON CONFLICT(id) DO UPDATE SET params = excluded.params, status = excluded.status, progress = "
      "excluded.progress, started_ms = excluded.started_ms, finished_ms = excluded.finished_ms, message = "
      "excluded.message");
  st.Bind(1, s.id).Bind(2, s.params_json).Bind(3, SweepStatusName(s.status)).Bind(4, s.progress);
  st.Bind(5, s.started_unix_ms).Bind(6, s.finished_unix_ms).Bind(7, s.message);
  return st.Run();
}

absl::Status SqliteTuningStore::PutLinks(const StoredLinks& l) {
  HT_RETURN_IF_ERROR(ValidateLinks(l));
  absl::MutexLock lock(&mu_);
  PREP(st,
       "INSERT INTO links(fingerprint, json, measured_ms, stored_ms) VALUES (?, ?, ?, ?) ON CONFLICT(fingerprint) DO "
       "UPDATE SET json = excluded.json, measured_ms = excluded.measured_ms, stored_ms = excluded.stored_ms");
  st.Bind(1, l.fingerprint).Bind(2, l.links_json).Bind(3, l.measured_unix_ms).Bind(4, NowUnixMs());
  return st.Run();
}

absl::StatusOr<StoredLinks> SqliteTuningStore::GetLinks(absl::string_view fingerprint) {
  HT_RETURN_IF_ERROR(ValidateFingerprint(fingerprint));
  absl::MutexLock lock(&mu_);
  PREP(st, "SELECT json, measured_ms, stored_ms FROM links WHERE fingerprint = ?");
  st.Bind(1, fingerprint);
  HT_ASSIGN_OR_RETURN(row, st.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("no link measurement stored for topology ", fingerprint));
  return StoredLinks{std::string(fingerprint), st.Text(0), st.Int(1), st.Int(2)};
}

absl::StatusOr<int64_t> SqliteTuningStore::PutModel(const StoredModel& m) {
  HT_RETURN_IF_ERROR(ValidateModel(m));
  absl::MutexLock lock(&mu_);
  // One statement: the next version of the class is computed where it is inserted.
  PREP(st,
       "INSERT INTO models(class, version, json, source, fitted_ms, stored_ms) SELECT ?1, "
       "COALESCE(MAX(version), 0) + 1, ?2, ?3, ?4, ?5 FROM models WHERE class = ?1 RETURNING version");
  st.Bind(1, m.topology_class).Bind(2, m.profile_json).Bind(3, m.source).Bind(4, m.fitted_unix_ms);
  st.Bind(5, NowUnixMs());
  HT_ASSIGN_OR_RETURN(row, st.Step());
  if (!row) return absl::InternalError("storing a model returned no version");
  const int64_t version = st.Int(0);
  HT_ASSIGN_OR_RETURN(done, st.Step());  // finish the statement so the insert is complete
  (void)done;
  return version;
}

absl::StatusOr<StoredModel> SqliteTuningStore::GetModel(absl::string_view topology_class, int64_t version) {
  HT_RETURN_IF_ERROR(ValidateTopologyClass(topology_class));
  if (version < 0) return absl::InvalidArgumentError(absl::StrCat("model version ", version, " must not be negative"));
  absl::MutexLock lock(&mu_);
  PREP(st,
       "SELECT version, json, source, fitted_ms, stored_ms FROM models WHERE class = ?1 AND (?2 = 0 OR version = ?2) "
       "ORDER BY version DESC LIMIT 1");
  st.Bind(1, topology_class).Bind(2, version);
  HT_ASSIGN_OR_RETURN(row, st.Step());
  if (!row) return ModelNotFound(topology_class, version);
  return StoredModel{std::string(topology_class), st.Int(0), st.Text(1), st.Text(2), st.Int(3), st.Int(4)};
}

absl::StatusOr<std::vector<StoredModel>> SqliteTuningStore::ListModels() {
  absl::MutexLock lock(&mu_);
  PREP(st,
       "SELECT class, version, json, source, fitted_ms, stored_ms FROM models m WHERE version = "
       "(SELECT MAX(version) FROM models WHERE class = m.class) ORDER BY class");
  std::vector<StoredModel> out;
  while (true) {
    HT_ASSIGN_OR_RETURN(row, st.Step());
    if (!row) break;
    out.push_back(StoredModel{st.Text(0), st.Int(1), st.Text(2), st.Text(3), st.Int(4), st.Int(5)});
  }
  return out;
}

absl::StatusOr<Sweep> SqliteTuningStore::GetSweep(absl::string_view id) {
  HT_ASSIGN_OR_RETURN(all, ListSweeps());
  for (Sweep& s : all) {
    if (s.id == id) return std::move(s);
  }
  return absl::NotFoundError(absl::StrCat("no sweep '", id, "'"));
}

absl::StatusOr<std::vector<Sweep>> SqliteTuningStore::ListSweeps() {
  absl::MutexLock lock(&mu_);
  PREP(st,
       "SELECT id, params, status, progress, started_ms, finished_ms, message FROM sweeps "
       "ORDER BY started_ms DESC, id DESC");
  std::vector<Sweep> out;
  while (true) {
    HT_ASSIGN_OR_RETURN(row, st.Step());
    if (!row) break;
    Sweep s;
    s.id = st.Text(0);
    s.params_json = st.Text(1);
    HT_ASSIGN_OR_RETURN(status, ParseSweepStatus(st.Text(2)));
    s.status = status;
    s.progress = st.Real(3);
    s.started_unix_ms = st.Int(4);
    s.finished_unix_ms = st.Int(5);
    s.message = st.Text(6);
    out.push_back(std::move(s));
  }
  return out;
}

absl::Status SqliteTuningStore::AddSweepSamples(absl::string_view sweep_id, absl::Span<const SweepSample> samples) {
  for (const SweepSample& s : samples) HT_RETURN_IF_ERROR(ValidateSweepSample(s));
  absl::MutexLock lock(&mu_);
  return InTransaction([&]() -> absl::Status {
    PREP(find, "SELECT 1 FROM sweeps WHERE id = ?");
    find.Bind(1, sweep_id);
    HT_ASSIGN_OR_RETURN(known, find.Step());
    if (!known) return absl::NotFoundError(absl::StrCat("no sweep '", sweep_id, "'"));
    for (const SweepSample& s : samples) {
      PREP(ins,
           "INSERT INTO sweep_samples(sweep_id, collective, dtype, world_size, bytes, configuration, time_us, "
           "rank_time_us, iteration) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
      ins.Bind(1, sweep_id).Bind(2, CollectiveName(s.collective)).Bind(3, DataTypeName(s.dtype));
      ins.Bind(4, static_cast<int64_t>(s.world_size)).Bind(5, static_cast<int64_t>(s.bytes));
      ins.Bind(6, *CanonicalConfigurationString(s.configuration)).Bind(7, s.time_us).Bind(8, s.rank_time_us);
      ins.Bind(9, static_cast<int64_t>(s.iteration));
      HT_RETURN_IF_ERROR(ins.Run());
    }
    // Retention: raw samples only for the newest max_sweeps_with_samples sweeps, never for the one being written
    // nor one marked running (a resumed sweep keeps its first start time: it may be older than the newest ones).
    PREP(trim,
         "DELETE FROM sweep_samples WHERE sweep_id <> ?1 AND sweep_id NOT IN (SELECT id FROM sweeps WHERE status = ?2) "
         "AND sweep_id NOT IN (SELECT id FROM sweeps ORDER BY started_ms DESC, id DESC LIMIT ?3)");
    trim.Bind(1, sweep_id).Bind(2, SweepStatusName(SweepStatus::kRunning));
    return trim.Bind(3, static_cast<int64_t>(options_.max_sweeps_with_samples)).Run();
  });
}

absl::StatusOr<std::vector<SweepSample>> SqliteTuningStore::GetSweepSamples(absl::string_view sweep_id) {
  {
    absl::MutexLock lock(&mu_);
    PREP(find, "SELECT 1 FROM sweeps WHERE id = ?");
    find.Bind(1, sweep_id);
    HT_ASSIGN_OR_RETURN(known, find.Step());
    if (!known) return absl::NotFoundError(absl::StrCat("no sweep '", sweep_id, "'"));
  }
  absl::MutexLock lock(&mu_);
  PREP(st,
       "SELECT collective, dtype, world_size, bytes, configuration, time_us, rank_time_us, iteration "
       "FROM sweep_samples WHERE sweep_id = ? ORDER BY seq");
  st.Bind(1, sweep_id);
  std::vector<SweepSample> out;
  while (true) {
    HT_ASSIGN_OR_RETURN(row, st.Step());
    if (!row) break;
    SweepSample s;
    HT_ASSIGN_OR_RETURN(coll, ColumnCollective(st, 0));
    HT_ASSIGN_OR_RETURN(dtype, ColumnDtype(st, 1));
    s.collective = coll;
    s.dtype = dtype;
    s.world_size = static_cast<int>(st.Int(2));
    s.bytes = static_cast<uint64_t>(st.Int(3));
    s.configuration = st.Text(4);
    s.time_us = st.Real(5);
    s.rank_time_us = st.Real(6);
    s.iteration = static_cast<int>(st.Int(7));
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<StoreInfo> SqliteTuningStore::Info() {
  absl::MutexLock lock(&mu_);
  StoreInfo info;
  info.path = path_;
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) info.db_bytes = static_cast<uint64_t>(st.st_size);
  if (::stat((path_ + "-wal").c_str(), &st) == 0) info.db_bytes += static_cast<uint64_t>(st.st_size);
  HT_ASSIGN_OR_RETURN(schema, PragmaInt("PRAGMA user_version"));
  info.schema_version = static_cast<int>(schema);
  PREP(q,
       "SELECT (SELECT count(DISTINCT fingerprint) FROM table_versions), "
       "(SELECT count(*) FROM entries e WHERE e.version = (SELECT max(version) FROM table_versions v "
       "WHERE v.fingerprint = e.fingerprint)), (SELECT coalesce(sum(count), 0) FROM live_stats)");
  HT_ASSIGN_OR_RETURN(row, q.Step());
  if (row) {
    info.tables = static_cast<uint64_t>(q.Int(0));
    info.entries = static_cast<uint64_t>(q.Int(1));
    info.live_samples = static_cast<uint64_t>(q.Int(2));
  }
  return info;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TuningStore>> OpenSqliteTuningStore(const std::string& path,
                                                                   const StoreOptions& options) {
  if (options.max_versions < 2) return absl::InvalidArgumentError("max_versions must be at least 2");
  auto store = std::make_unique<SqliteTuningStore>(path, options);
  if (absl::Status s = store->Open(); !s.ok()) return s;
  return std::unique_ptr<TuningStore>(std::move(store));
}

}  // namespace hccltune::db
