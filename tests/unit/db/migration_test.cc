// Schema 3 (topology fingerprint format 2) opening a database written by the last release of format 1
// (tests/unit/db/data/schema2-format1.db, made by make-schema2-format1-db.sh): every table version, its entries,
// the live statistics and the sweeps follow their topology to its format-2 key, nothing else changes, and the
// migrated file reopens as it is.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "db/sqlite_store.h"
#include "db/store_util.h"
#include "nlohmann/json.hpp"
#include "tests/unit/db/test_util.h"

namespace hccltune::db {
namespace {

using testing::MakeEntry;
using testing::TempDir;
using Rows = std::vector<std::vector<std::string>>;

// Every row of `sql` on the file at `path`, each column as text ("NULL" for NULL).
Rows Query(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  Rows rows;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(db) << ": " << sql;
  while (st != nullptr && sqlite3_step(st) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int c = 0; c < sqlite3_column_count(st); ++c) {
      const unsigned char* t = sqlite3_column_text(st, c);
      row.push_back(t == nullptr ? "NULL" : reinterpret_cast<const char*>(t));
    }
    rows.push_back(std::move(row));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rows;
}

// Everything a database holds, as text, with the fingerprints replaced by `rename` (old -> new); the rows of each
// table sorted as text (after renaming).
std::string Dump(const std::string& path, const std::map<std::string, std::string>& rename = {}) {
  std::string out;
  for (const char* sql :
       {"SELECT fingerprint, version, content_hash, created_ms FROM table_versions ORDER BY 1, 2",
        // The columns of schema 2 (later schemas add columns with defaults).
        "SELECT fingerprint, version, collective, dtype, world_size, min_bytes, max_bytes, configuration, time_us, "
        "busbw_gbps, samples, runner_up, margin, default_margin, sweep_id, library_version, measured_ms, rank_time_us, "
        "stale, explore, explore_every, explore_calls FROM entries ORDER BY fingerprint, version, collective, dtype, "
        "world_size, min_bytes",
        "SELECT fingerprint, collective, dtype, world_size, bucket_min, configuration, count, sum_us, hex(histogram), "
        "last_seen_ms FROM live_stats ORDER BY 1, 2, 3, 4, 5, 6",
        "SELECT id, status, progress, started_ms, finished_ms, message FROM sweeps ORDER BY id",
        "SELECT * FROM sweep_samples ORDER BY seq", "SELECT fingerprint, next_version FROM topologies ORDER BY 1"}) {
    std::vector<std::string> lines;
    for (std::vector<std::string> row : Query(path, sql)) {
      for (std::string& c : row) {
        if (auto it = rename.find(c); it != rename.end()) c = it->second;
      }
      lines.push_back(absl::StrJoin(row, "|"));
    }
    std::sort(lines.begin(), lines.end());
    absl::StrAppend(&out, sql, "\n", absl::StrJoin(lines, "\n"), "\n");
  }
  return out;
}

// The fixture's topologies: format-1 fingerprint -> format-2 fingerprint (both `printf '%s' JSON | sha256sum`).
const std::map<std::string, std::string> kRekeyed = {
    {"201f47a09e7228b1", "af19111ba64fafe7"},  // 1 node x 2 ranks: 4 versions, sweeps, live statistics
    {"7d365a069bbf9f0e", "2c0c238cc61fddfd"},  // 1 node x 3 ranks: 1 version
    {"6b487fbad99606e2", "3db5bed48e4fa4c7"},  // 2 nodes x 2 ranks over 2 TCP networks: 4 versions
    {"1158a96ff9ac3c2e", "15124d3b1750397b"},  // 1 node x 4 ranks, forgotten: no version, next version 6
};
constexpr char kShmClass[] = "0ccf22620ca1e2fc";
constexpr char kTcpClass[] = "5093e503b2e22f7f";

class Format2Migration : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("tuning.db");
    std::filesystem::copy_file(HCCL_TUNE_TEST_DATA "/schema2-format1.db", path_);
    before_ = Dump(path_, kRekeyed);
    ASSERT_EQ(Query(path_, "PRAGMA user_version"), (Rows{{"2"}}));
  }

  TempDir dir_;
  std::string path_;
  std::string before_;  // the fixture's content under the fingerprints it should have after the migration
};

TEST_F(Format2Migration, EveryVersionHistoryAndSampleFollowsItsTopology) {
  auto store = OpenSqliteTuningStore(path_);
  ASSERT_TRUE(store.ok()) << store.status();
  // Rows move, nothing else changes: the same dump under the new keys.
  EXPECT_TRUE(Dump(path_) == before_) << "the migrated database holds other rows than the old one under new keys";
  EXPECT_EQ(Query(path_, "PRAGMA integrity_check"), (Rows{{"ok"}}));
  EXPECT_TRUE(Query(path_, "PRAGMA foreign_key_check").empty());
  auto info = (*store)->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->schema_version, kSchemaVersion);
  EXPECT_EQ(info->tables, 3u);
  EXPECT_EQ(info->live_samples, 616u);

  auto tables = (*store)->ListTables();
  ASSERT_TRUE(tables.ok()) << tables.status();
  std::map<std::string, std::vector<int64_t>> versions;
  for (const TableSummary& s : *tables) versions[s.topology.fingerprint] = s.versions;
  EXPECT_EQ(versions,
            (std::map<std::string, std::vector<int64_t>>{
                {"af19111ba64fafe7", {1, 2, 3, 4}}, {"2c0c238cc61fddfd", {1}}, {"3db5bed48e4fa4c7", {1, 2, 3, 4}}}));
  // Every version reads back whole: its entries still hash to the content hash the old release computed.
  for (const auto& [fp, vs] : versions) {
    for (int64_t v : vs) {
      auto t = (*store)->GetTable(fp, v);
      ASSERT_TRUE(t.ok()) << fp << " v" << v << ": " << t.status();
      EXPECT_FALSE(t->entries.empty());
      EXPECT_EQ(ContentHash(t->entries), t->content_hash) << fp << " v" << v;
      auto parsed = nlohmann::json::parse(t->topology.json);
      EXPECT_EQ(parsed["format"], 2);
      EXPECT_EQ(parsed["runtime"], "hccl-tune");
      EXPECT_EQ(Sha256Hex(t->topology.json).substr(0, 16), fp);
      EXPECT_EQ(t->topology.topology_class, fp == "3db5bed48e4fa4c7" ? kTcpClass : kShmClass);
    }
  }
  for (const auto& [old_fp, new_fp] : kRekeyed) {
    EXPECT_EQ((*store)->GetTable(old_fp, 0).status().code(), absl::StatusCode::kNotFound) << old_fp;
    EXPECT_TRUE((*store)->GetLiveStats(old_fp)->empty()) << old_fp;
  }
  EXPECT_EQ((*store)->GetTable("3db5bed48e4fa4c7", 0)->topology.json,
            R"({"format":2,"inter":[{"link":"tcp","network":"10.77.1.0/24"},{"link":"tcp","network":"10.77.2.0/24"}],)"
            R"("intra":["shm"],"nodes":2,"ranks_per_node":[2,2],"release":"0.1","runtime":"hccl-tune"})");
  auto live = (*store)->GetLiveStats("af19111ba64fafe7");
  ASSERT_TRUE(live.ok());
  uint64_t calls = 0;
  for (const LiveStats& l : *live) calls += l.count;
  EXPECT_EQ(calls, 616u);

  // The class lists the tables of any node count.
  auto shm = (*store)->ListTablesOfClass(kShmClass);
  ASSERT_TRUE(shm.ok());
  ASSERT_EQ(shm->size(), 2u);
  EXPECT_EQ((*shm)[0].topology.fingerprint, "2c0c238cc61fddfd");
  EXPECT_EQ((*shm)[1].topology.fingerprint, "af19111ba64fafe7");
  EXPECT_EQ((*store)->ListTablesOfClass(kTcpClass)->size(), 1u);
}

TEST_F(Format2Migration, SweepsNameTheirTopologyInFormat2) {
  auto store = OpenSqliteTuningStore(path_);
  ASSERT_TRUE(store.ok()) << store.status();
  auto sweeps = (*store)->ListSweeps();
  ASSERT_TRUE(sweeps.ok());
  ASSERT_EQ(sweeps->size(), 4u);
  size_t samples = 0;
  for (const Sweep& s : *sweeps) {
    auto params = nlohmann::json::parse(s.params_json);
    const std::string fp = params["fingerprint"];
    EXPECT_TRUE(fp == "af19111ba64fafe7" || fp == "2c0c238cc61fddfd") << s.params_json;
    EXPECT_EQ(Sha256Hex(params["topology"].get<std::string>()).substr(0, 16), fp) << s.params_json;
    EXPECT_TRUE(params.contains("spec") && params.contains("owner") && params.contains("world")) << s.params_json;
    samples += (*store)->GetSweepSamples(s.id)->size();
  }
  EXPECT_EQ(samples, 1219u);
}

TEST_F(Format2Migration, TablesKeepTakingVersionsUnderTheNewKey) {
  auto store = OpenSqliteTuningStore(path_);
  ASSERT_TRUE(store.ok()) << store.status();
  // A rollback of the migrated history.
  auto v = (*store)->Rollback("af19111ba64fafe7", 2);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 5);
  EXPECT_EQ((*store)->GetTable("af19111ba64fafe7", 5)->content_hash,
            (*store)->GetTable("af19111ba64fafe7", 2)->content_hash);
  // The forgotten topology kept its next version number.
  Topology four{
      "15124d3b1750397b",
      R"({"format":2,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[4],"release":"0.1","runtime":"hccl-tune"})"};
  auto put = (*store)->PutTable(four, {MakeEntry(Collective::kAllreduce, 4, 0, kUnbounded, "ring")}, {});
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(*put, 6);
}

TEST_F(Format2Migration, AMigratedDatabaseReopensUnchanged) {
  ASSERT_TRUE(OpenSqliteTuningStore(path_).ok());
  const std::string once = Dump(path_);
  const Rows schema = Query(path_, "SELECT sql FROM sqlite_master ORDER BY name");
  auto again = OpenSqliteTuningStore(path_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Dump(path_), once);
  EXPECT_EQ(Query(path_, "SELECT sql FROM sqlite_master ORDER BY name"), schema);
  EXPECT_EQ(Query(path_, "PRAGMA user_version"), (Rows{{absl::StrCat(kSchemaVersion)}}));
  EXPECT_EQ((*again)->ListTables()->size(), 3u);
}

TEST_F(Format2Migration, AMigratedDatabaseStoresLinkMeasurements) {
  auto store = OpenSqliteTuningStore(path_);
  ASSERT_TRUE(store.ok()) << store.status();
  const StoredLinks links{"af19111ba64fafe7", R"({"links":[],"ranks":2})", 1234, 0};
  ASSERT_TRUE((*store)->PutLinks(links).ok());
  store->reset();
  auto again = OpenSqliteTuningStore(path_);
  ASSERT_TRUE(again.ok()) << again.status();
  auto got = (*again)->GetLinks(links.fingerprint);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->links_json, links.links_json);
  EXPECT_EQ(got->measured_unix_ms, 1234);
  EXPECT_EQ((*again)->ListTables()->size(), 3u);
}

// A database of format 1 may already hold the format-2 twin of one of its topologies (a newer client wrote it
// through a daemon of schema 2): the twin keeps its table, the format-1 topology its own key, nothing merges.
TEST_F(Format2Migration, AFormat2TwinAlreadyStoredKeepsBothTables) {
  const Rows old_config = Query(path_, "SELECT configuration FROM entries WHERE fingerprint = '7d365a069bbf9f0e'");
  ASSERT_EQ(old_config.size(), 1u);
  const std::string twin =
      R"({"format":2,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[3],"release":"0.1","runtime":"hccl-tune"})";
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    const std::string sql = absl::StrCat(
        "INSERT INTO topologies(fingerprint, json, next_version) VALUES ('2c0c238cc61fddfd', '", twin, "', 2);",
        "INSERT INTO table_versions VALUES ('2c0c238cc61fddfd', 1, 'x', 5);",
        "INSERT INTO entries SELECT '2c0c238cc61fddfd', 1, collective, dtype, world_size, min_bytes, max_bytes, "
        "'one_shot', time_us, busbw_gbps, samples, runner_up, margin, default_margin, sweep_id, library_version, "
        "measured_ms, rank_time_us, stale, explore, explore_every, explore_calls FROM entries "
        "WHERE fingerprint = '7d365a069bbf9f0e'");
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  auto store = OpenSqliteTuningStore(path_);
  ASSERT_TRUE(store.ok()) << store.status();
  auto old = (*store)->GetTable("7d365a069bbf9f0e", 0);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->version, 1);
  EXPECT_EQ(old->topology.topology_class, kShmClass);
  EXPECT_EQ(old->entries.front().configuration, old_config[0][0]);
  auto kept = (*store)->GetTable("2c0c238cc61fddfd", 0);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->topology.json, twin);
  EXPECT_EQ(kept->entries.front().configuration, "one_shot");
  EXPECT_EQ((*store)->ListTables()->size(), 4u);
  EXPECT_EQ(Query(path_, "PRAGMA integrity_check"), (Rows{{"ok"}}));
}

}  // namespace
}  // namespace hccltune::db
