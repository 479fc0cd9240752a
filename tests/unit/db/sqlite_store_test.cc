// What only the SQLite store has: a file that persists, migrations, refusal of foreign files.
#include "db/sqlite_store.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <string>
#include <tuple>
#include <utility>

#include "db/table_json.h"
#include "tests/unit/db/test_util.h"

namespace hccltune::db {
namespace {

using testing::MakeEntry;
using testing::MakeTopology;
using testing::TempDir;

void RunSql(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(SqliteStore, PersistsAcrossReopen) {
  TempDir dir;
  Topology topo = MakeTopology(2);
  {
    auto s = OpenSqliteTuningStore(dir.File("t.db"));
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE((*s)->PutTable(topo, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "ring")}, {}).ok());
  }
  auto s = OpenSqliteTuningStore(dir.File("t.db"));
  ASSERT_TRUE(s.ok()) << s.status();
  auto t = (*s)->GetTable(topo.fingerprint, 0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->entries.size(), 1u);
  auto info = (*s)->Info();
  EXPECT_EQ(info->schema_version, kSchemaVersion);
  EXPECT_EQ(info->path, dir.File("t.db"));
  EXPECT_GT(info->db_bytes, 0u);
}

TEST(SqliteStore, UsesWal) {
  TempDir dir;
  ASSERT_TRUE(OpenSqliteTuningStore(dir.File("t.db")).ok());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(dir.File("t.db").c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "wal");
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST(SqliteStore, RefusesAFileThatIsNotSqliteAndLeavesItAlone) {
  TempDir dir;
  const std::string path = dir.File("t.db");
  std::ofstream(path) << "my precious notes\n";
  auto s = OpenSqliteTuningStore(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("not an SQLite database"), std::string::npos) << s.status();
  EXPECT_EQ(ReadAll(path), "my precious notes\n");
}

TEST(SqliteStore, RefusesACorruptDatabase) {
  TempDir dir;
  const std::string path = dir.File("t.db");
  {
    auto s = OpenSqliteTuningStore(path);
    ASSERT_TRUE(s.ok());
  }
  std::string bytes = ReadAll(path);
  // Keep the header magic, scribble over the rest of the first page.
  for (size_t i = 16; i < bytes.size() && i < 4096; ++i) bytes[i] = static_cast<char>(0xA5);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  ::unlink((path + "-wal").c_str());
  ::unlink((path + "-shm").c_str());
  auto s = OpenSqliteTuningStore(path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("is not an hccl-tune database"), std::string::npos) << s.status();
  EXPECT_EQ(ReadAll(path), bytes);
}

// `body()` as an unprivileged user: root may write any file, so as root it runs in a child process that has
// become `nobody` (65534); otherwise here. Returns the status's code and message.
std::pair<absl::StatusCode, std::string> AsUnprivileged(const std::function<absl::Status()>& body) {
  auto open = [&body] {
    const absl::Status s = body();
    return std::make_pair(s.code(), std::string(s.message()));
  };
  if (::geteuid() != 0) return open();
  int fds[2];
  if (::pipe(fds) != 0) return {absl::StatusCode::kInternal, "pipe failed"};
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    auto [code, message] = open();
    const std::string out = absl::StrCat(static_cast<int>(code), " ", message);
    (void)!::write(fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || out.find(' ') == std::string::npos) {
    return {absl::StatusCode::kInternal, absl::StrCat("child failed (status ", status, "): ", out)};
  }
  return {static_cast<absl::StatusCode>(std::stoi(out.substr(0, out.find(' ')))), out.substr(out.find(' ') + 1)};
}

// OpenSqliteTuningStore(path) as an unprivileged user.
std::pair<absl::StatusCode, std::string> OpenAsUnprivileged(const std::string& path) {
  return AsUnprivileged([&path] { return OpenSqliteTuningStore(path).status(); });
}

// A valid database this user may not write is reported as such, naming the path, not as a foreign file.
TEST(SqliteStore, AReadOnlyDatabaseIsReportedAsPermissionDenied) {
  TempDir dir;
  const std::string path = dir.File("t.db");
  ASSERT_TRUE(OpenSqliteTuningStore(path).ok());
  ::unlink((path + "-wal").c_str());
  ::unlink((path + "-shm").c_str());
  // Neither the file nor its directory is writable. (A read-only file in a writable directory opens read-only:
  // SQLite can make the -shm file, and reading works.)
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  ASSERT_EQ(::chmod(path.c_str(), 0444), 0);
  auto [code, message] = OpenAsUnprivileged(path);
  EXPECT_EQ(code, absl::StatusCode::kPermissionDenied) << message;
  EXPECT_NE(message.find("cannot open database " + path + " read-write: permission denied"), std::string::npos)
      << message;
  EXPECT_EQ(message.find("not an hccl-tune database"), std::string::npos) << message;
  // The file is writable but its directory is not (no -wal or -shm file can be made).
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  std::tie(code, message) = OpenAsUnprivileged(path);
  EXPECT_EQ(code, absl::StatusCode::kPermissionDenied) << message;
  EXPECT_NE(message.find("permission denied"), std::string::npos) << message;
  EXPECT_NE(message.find("directory " + dir.path()), std::string::npos) << message;
  // A file this user may not read at all.
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  std::tie(code, message) = OpenAsUnprivileged(path);
  EXPECT_EQ(code, absl::StatusCode::kPermissionDenied) << message;
  EXPECT_NE(message.find("cannot open database " + path), std::string::npos) << message;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0700), 0);
  // The database itself was left alone.
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  EXPECT_TRUE(OpenSqliteTuningStore(path).ok());
}

// A read-only database file in a writable directory opens (reading works); a write is refused as such, naming
// the file (it was an INTERNAL "sqlite: attempt to write a readonly database" that named nothing).
TEST(SqliteStore, AWriteToAReadOnlyFileNamesItAndIsPermissionDenied) {
  TempDir dir;
  const std::string path = dir.File("t.db");
  const Topology topo = MakeTopology(1, 2);
  {
    auto store = OpenSqliteTuningStore(path);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->PutTable(topo, {MakeEntry(Collective::kAllreduce, 2, 0, kUnbounded, "ring")}, {}).ok());
  }
  ASSERT_EQ(::chmod(dir.path().c_str(), 0777), 0);
  ASSERT_EQ(::chmod(path.c_str(), 0444), 0);
  auto [code, message] = AsUnprivileged([&]() -> absl::Status {
    auto store = OpenSqliteTuningStore(path);
    if (!store.ok()) return absl::InternalError(absl::StrCat("open failed: ", store.status().ToString()));
    auto t = (*store)->GetTable(topo.fingerprint, 0);
    if (!t.ok() || t->entries.size() != 1) return absl::InternalError("reading the read-only database failed");
    return (*store)->PutTable(topo, {MakeEntry(Collective::kAllreduce, 2, 0, kUnbounded, "one_shot")}, {}).status();
  });
  EXPECT_EQ(code, absl::StatusCode::kPermissionDenied) << message;
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("readonly"), std::string::npos) << message;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0700), 0);
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  auto store = OpenSqliteTuningStore(path);
  ASSERT_TRUE(store.ok());
  auto t = (*store)->GetTable(topo.fingerprint, 0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->version, 1);  // nothing was written
}

TEST(SqliteStore, RefusesAnotherApplicationsDatabase) {
  TempDir dir;
  const std::string path = dir.File("other.db");
  RunSql(path, "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers VALUES (1, 'a');");
  auto s = OpenSqliteTuningStore(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("another application"), std::string::npos) << s.status();
  RunSql(path, "SELECT * FROM customers");  // still there
}

TEST(SqliteStore, RefusesANewerSchema) {
  TempDir dir;
  const std::string path = dir.File("t.db");
  ASSERT_TRUE(OpenSqliteTuningStore(path).ok());
  RunSql(path, "PRAGMA user_version = 99");
  auto s = OpenSqliteTuningStore(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("schema version 99, newer"), std::string::npos) << s.status();
}

TEST(SqliteStore, AdoptsAnEmptySqliteFile) {
  TempDir dir;
  const std::string path = dir.File("t.db");
  RunSql(path, "PRAGMA user_version = 0");
  std::ofstream(dir.File("empty.db")).close();  // zero bytes: a new database
  EXPECT_TRUE(OpenSqliteTuningStore(path).ok());
  EXPECT_TRUE(OpenSqliteTuningStore(dir.File("empty.db")).ok());
}

TEST(SqliteStore, RefusesADirectoryAndAMissingParent) {
  TempDir dir;
  EXPECT_EQ(OpenSqliteTuningStore(dir.path()).status().code(), absl::StatusCode::kFailedPrecondition);
  auto missing = OpenSqliteTuningStore(dir.File("no/such/dir/t.db"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot open database"), std::string::npos) << missing.status();
}

// A database written before versions were bounded may hold a next version at int64's end: a change is refused
// with an error naming it instead of overflowing, and the table is still readable.
TEST(SqliteStore, AStoredNextVersionAtInt64sEndIsAnErrorNotAnOverflow) {
  TempDir dir;
  const std::string path = dir.File("t.db");
  Topology topo = MakeTopology(2);
  {
    auto s = OpenSqliteTuningStore(path);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE((*s)->PutTable(topo, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "ring")}, {}).ok());
  }
  RunSql(path, "UPDATE topologies SET next_version = 9223372036854775807");
  auto s = OpenSqliteTuningStore(path);
  ASSERT_TRUE(s.ok()) << s.status();
  auto v = (*s)->PutTable(topo, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "one_shot")}, {});
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(v.status().message().find("9223372036854775807"), std::string::npos) << v.status();
  auto t = (*s)->GetTable(topo.fingerprint, 0);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->version, 1);
}

// An import whose tables all check out but whose second write fails in the store says how many were stored.
TEST(SqliteStore, AnImportFailingPartWaySaysHowManyTablesWereStored) {
  TempDir dir;
  const std::string path = dir.File("t.db");
  Topology a = MakeTopology(2), b = MakeTopology(4);
  {
    auto s = OpenSqliteTuningStore(path);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE((*s)->PutTable(b, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "ring")}, {}).ok());
  }
  RunSql(
      path,
      ("UPDATE topologies SET next_version = 9223372036854775807 WHERE fingerprint = '" + b.fingerprint + "'").c_str());
  auto s = OpenSqliteTuningStore(path);
  ASSERT_TRUE(s.ok()) << s.status();
  Table ta{a, 5, "", 1000, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "ring")}};
  Table tb{b, 1, "", 1000, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "one_shot")}};
  auto r = ImportIntoStore(**s, TablesToJson({ta, tb}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(b.fingerprint), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("1 of 2 table(s) were stored before this error"), std::string::npos)
      << r.status();
  EXPECT_EQ((*s)->GetTable(a.fingerprint, 0)->version, 5);
}

TEST(SqliteStore, TwoHandlesOnOneFileSeeEachOther) {
  TempDir dir;
  auto a = OpenSqliteTuningStore(dir.File("t.db"));
  auto b = OpenSqliteTuningStore(dir.File("t.db"));
  ASSERT_TRUE(a.ok() && b.ok());
  Topology topo = MakeTopology(2);
  ASSERT_TRUE((*a)->PutTable(topo, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "ring")}, {}).ok());
  EXPECT_TRUE((*b)->GetTable(topo.fingerprint, 0).ok());
}

TEST(LatencyHistogram, QuantilesAreWithinFivePercent) {
  LatencyHistogram h;
  for (int i = 1; i <= 1000; ++i) h.Add(i * 1.0);
  EXPECT_EQ(h.Count(), 1000u);
  EXPECT_NEAR(h.Quantile(0.5), 500, 25);
  EXPECT_NEAR(h.Quantile(0.9), 900, 45);
  auto round = LatencyHistogram::Decode(h.Encode());
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->Quantile(0.9), h.Quantile(0.9));
  EXPECT_FALSE(LatencyHistogram::Decode("short").ok());
  LatencyHistogram extremes;
  extremes.Add(0);
  extremes.Add(1e15);
  EXPECT_EQ(extremes.Count(), 2u);
}

TEST(SizeBucket, PowersOfTwo) {
  EXPECT_EQ(SizeBucket(0), (ByteRange{0, 1}));
  EXPECT_EQ(SizeBucket(1), (ByteRange{1, 2}));
  EXPECT_EQ(SizeBucket(1000), (ByteRange{512, 1024}));
  EXPECT_EQ(SizeBucket(1024), (ByteRange{1024, 2048}));
}

}  // namespace
}  // namespace hccltune::db
