// The SQLite store's schema, as migration steps (db/sqlite_schema.h).
#include "db/sqlite_schema.h"

#include <sqlite3.h>

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "db/sqlite_store.h"
#include "runtime/common/fingerprint.h"

namespace hccltune::db {
namespace {

// Text argument 0, or nullopt for NULL.
std::optional<std::string> TextArg(sqlite3_value** argv) {
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return std::nullopt;
  const unsigned char* t = sqlite3_value_text(argv[0]);
  return std::string(reinterpret_cast<const char*>(t), static_cast<size_t>(sqlite3_value_bytes(argv[0])));
}

void Result(sqlite3_context* ctx, const std::string& text) {
  sqlite3_result_text(ctx, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}

void TopologyJsonFn(sqlite3_context* ctx, int, sqlite3_value** argv) {
  auto text = TextArg(argv);
  if (!text) return sqlite3_result_null(ctx);
  auto keys = CanonicalTopology(*text);
  Result(ctx, keys.ok() ? keys->json : *text);
}

void FingerprintFn(sqlite3_context* ctx, int, sqlite3_value** argv) {
  auto text = TextArg(argv);
  if (!text) return sqlite3_result_null(ctx);
  Result(ctx, Fingerprint(*text));
}

void TopologyClassFn(sqlite3_context* ctx, int, sqlite3_value** argv) {
  auto text = TextArg(argv);
  if (!text) return sqlite3_result_null(ctx);
  auto keys = CanonicalTopology(*text);
  Result(ctx, keys.ok() ? keys->topology_class : std::string());
}

}  // namespace

absl::Status RegisterMigrationFunctions(sqlite3* db) {
  using Fn = void (*)(sqlite3_context*, int, sqlite3_value**);
  const std::pair<const char*, Fn> functions[] = {{"hccltune_topology_json", TopologyJsonFn},
                                                  {"hccltune_fingerprint", FingerprintFn},
                                                  {"hccltune_topology_class", TopologyClassFn}};
  for (const auto& [name, fn] : functions) {
    if (sqlite3_create_function_v2(db, name, 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, nullptr, fn, nullptr, nullptr,
                                   nullptr) != SQLITE_OK) {
      return absl::InternalError(absl::StrCat("registering SQL function ", name, ": ", sqlite3_errmsg(db)));
    }
  }
  return absl::OkStatus();
}

const char* const kSqliteMigrations[] = {
    // 0 -> 1
    R"sql(
CREATE TABLE topologies(
  fingerprint TEXT PRIMARY KEY,
  json TEXT NOT NULL,
  next_version INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE table_versions(
  fingerprint TEXT NOT NULL REFERENCES topologies(fingerprint),
  version INTEGER NOT NULL,
  content_hash TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  PRIMARY KEY(fingerprint, version)
) WITHOUT ROWID;
CREATE TABLE entries(
  fingerprint TEXT NOT NULL,
  version INTEGER NOT NULL,
  collective TEXT NOT NULL,
  dtype TEXT NOT NULL,
  world_size INTEGER NOT NULL,
  min_bytes INTEGER NOT NULL,
  max_bytes INTEGER,              -- NULL = unbounded
  configuration TEXT NOT NULL,
  time_us REAL NOT NULL,
  busbw_gbps REAL NOT NULL,
  samples INTEGER NOT NULL,
  runner_up TEXT NOT NULL,
  margin REAL NOT NULL,
  default_margin REAL NOT NULL,
  sweep_id TEXT NOT NULL,
  library_version TEXT NOT NULL,
  measured_ms INTEGER NOT NULL,
  -- The primary key is the lookup index: (fingerprint, version, collective, dtype, world) then min_bytes <= ?.
  PRIMARY KEY(fingerprint, version, collective, dtype, world_size, min_bytes)
) WITHOUT ROWID;
CREATE TABLE live_stats(
  fingerprint TEXT NOT NULL,
  collective TEXT NOT NULL,
  dtype TEXT NOT NULL,
  world_size INTEGER NOT NULL,
  bucket_min INTEGER NOT NULL,
  configuration TEXT NOT NULL,
  count INTEGER NOT NULL,
  sum_us REAL NOT NULL,
  histogram BLOB NOT NULL,
  last_seen_ms INTEGER NOT NULL,
  PRIMARY KEY(fingerprint, collective, dtype, world_size, bucket_min, configuration)
) WITHOUT ROWID;
CREATE TABLE sweeps(
  id TEXT PRIMARY KEY,
  params TEXT NOT NULL,
  status TEXT NOT NULL,
  progress REAL NOT NULL,
  started_ms INTEGER NOT NULL,
  finished_ms INTEGER NOT NULL,
  message TEXT NOT NULL
);
CREATE INDEX sweeps_by_start ON sweeps(started_ms DESC, id DESC);
CREATE TABLE sweep_samples(
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  sweep_id TEXT NOT NULL REFERENCES sweeps(id),
  collective TEXT NOT NULL,
  dtype TEXT NOT NULL,
  world_size INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  configuration TEXT NOT NULL,
  time_us REAL NOT NULL,
  rank_time_us REAL NOT NULL,
  iteration INTEGER NOT NULL
);
CREATE INDEX sweep_samples_by_sweep ON sweep_samples(sweep_id, seq);
)sql",
    // 1 -> 2: online tuning (baseline per rank, stale mark, exploration plan).
    R"sql(
ALTER TABLE entries ADD COLUMN rank_time_us REAL NOT NULL DEFAULT 0;
ALTER TABLE entries ADD COLUMN stale INTEGER NOT NULL DEFAULT 0;
ALTER TABLE entries ADD COLUMN explore TEXT NOT NULL DEFAULT '';
ALTER TABLE entries ADD COLUMN explore_every INTEGER NOT NULL DEFAULT 0;
ALTER TABLE entries ADD COLUMN explore_calls INTEGER NOT NULL DEFAULT 0;
)sql",
    // 2 -> 3: topology fingerprint format 2 and the topology class. Every topology whose JSON is of format 1 is
    // re-keyed under its format-2 JSON's fingerprint, with every version, its entries and live statistics, and
    // the sweeps run on it; a format-1 topology whose format-2 twin is already stored (written through a daemon
    // of this schema by a newer client) keeps its own key. Each topology gets its class hash.
    R"sql(
ALTER TABLE topologies ADD COLUMN class TEXT NOT NULL DEFAULT '';
CREATE TEMP TABLE topology_rekey(old TEXT PRIMARY KEY, new TEXT NOT NULL, json TEXT NOT NULL);
INSERT INTO topology_rekey
  SELECT fingerprint, hccltune_fingerprint(hccltune_topology_json(json)), hccltune_topology_json(json) FROM topologies;
DELETE FROM topology_rekey WHERE new = old OR new IN (SELECT fingerprint FROM main.topologies);
INSERT INTO topologies(fingerprint, json, next_version)
  SELECT r.new, r.json, t.next_version FROM topology_rekey r JOIN topologies t ON t.fingerprint = r.old;
UPDATE table_versions SET fingerprint = (SELECT new FROM topology_rekey WHERE old = fingerprint)
  WHERE fingerprint IN (SELECT old FROM topology_rekey);
UPDATE entries SET fingerprint = (SELECT new FROM topology_rekey WHERE old = fingerprint)
  WHERE fingerprint IN (SELECT old FROM topology_rekey);
UPDATE live_stats SET fingerprint = (SELECT new FROM topology_rekey WHERE old = fingerprint)
  WHERE fingerprint IN (SELECT old FROM topology_rekey);
DELETE FROM topologies WHERE fingerprint IN (SELECT old FROM topology_rekey);
DROP TABLE topology_rekey;
UPDATE topologies SET class = hccltune_topology_class(json);
CREATE INDEX topologies_by_class ON topologies(class);
-- A sweep's parameters name the topology it ran on (fingerprint and JSON): a resumed sweep must match its job.
UPDATE sweeps SET params = json_set(params,
    '$.topology', hccltune_topology_json(json_extract(params, '$.topology')),
    '$.fingerprint', hccltune_fingerprint(hccltune_topology_json(json_extract(params, '$.topology'))))
  WHERE json_valid(params) AND json_type(params, '$.topology') = 'text'
    AND json_extract(params, '$.fingerprint') = hccltune_fingerprint(json_extract(params, '$.topology'))
    AND hccltune_topology_json(json_extract(params, '$.topology')) <> json_extract(params, '$.topology');
)sql",
    // 3 -> 4: the newest link-inspector measurement per topology.
    R"sql(
CREATE TABLE links(
  fingerprint TEXT PRIMARY KEY,
  json TEXT NOT NULL,
  measured_ms INTEGER NOT NULL,
  stored_ms INTEGER NOT NULL
);
)sql",
    // 4 -> 5: cost models per topology class, and entries predicted by one.
    R"sql(
CREATE TABLE models(
  class TEXT NOT NULL,
  version INTEGER NOT NULL,
  json TEXT NOT NULL,
  source TEXT NOT NULL,
  fitted_ms INTEGER NOT NULL,
  stored_ms INTEGER NOT NULL,
  PRIMARY KEY(class, version)
) WITHOUT ROWID;
ALTER TABLE entries ADD COLUMN model_version INTEGER NOT NULL DEFAULT 0;
)sql",
};
static_assert(sizeof(kSqliteMigrations) / sizeof(kSqliteMigrations[0]) == kSchemaVersion);

}  // namespace hccltune::db
