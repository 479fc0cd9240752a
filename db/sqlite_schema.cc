// The SQLite store's schema, as migration steps (db/sqlite_schema.h).
#include "db/sqlite_schema.h"

#include "db/sqlite_store.h"

namespace hccltune::db {

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
};
static_assert(sizeof(kSqliteMigrations) / sizeof(kSqliteMigrations[0]) == kSchemaVersion);

}  // namespace hccltune::db
