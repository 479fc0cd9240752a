// The export/import file format of tuned tables (`hccl-tune export` / `import`): JSON, deterministic (sorted
// keys, entries in canonical order), so export -> import -> export is byte-identical.
//
//   {"format": "hccl-tune-tables", "format_version": 1,
//    "tables": [{"fingerprint": "...", "topology": "<canonical topology JSON>", "topology_class": "...", "version": 3,
//                "created_unix_ms": ..., "content_hash": "...",
//                "entries": [{"collective": "allreduce", "dtype": "fp32", "world_size": 8, "bytes": "0-64K",
//                             "configuration": "...", "time_us": ..., ...}]}]}
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "db/tuning_store.h"

namespace hccltune::db {

inline constexpr int kExportFormatVersion = 1;
// A table file holds at most this many bytes and tables (each table at most kMaxTableEntries entries); more is
// refused before anything is stored, naming the limit.
inline constexpr size_t kMaxTableFileBytes = 1u << 30;
inline constexpr size_t kMaxTableFileTables = 4096;

std::string TablesToJson(const std::vector<Table>& tables);
absl::StatusOr<std::vector<Table>> TablesFromJson(absl::string_view text);

// One entry as the export format writes it (a JSON object, compact), and back. The sweep's `--json` result
// lists its winners this way, so hccl-tuned can read a sweep child's winners (daemon/mini_sweep.h).
std::string EntryToJsonText(const TunedEntry& entry);
// InvalidArgument naming `where` and the field for a missing or mistyped field or an unknown name.
absl::StatusOr<TunedEntry> EntryFromJsonText(absl::string_view text, const std::string& where);

// Exports the latest version of every table in `store`.
absl::StatusOr<std::string> ExportStore(TuningStore& store);
// Stores every table of `text` (keeping its version number where the store allows); returns how many tables
// changed. A topology of format 1 (a file exported before format 2) is stored under its format-2 fingerprint; the
// topology class is the store's, never read from the file. Every table is checked first as PutTable would (fingerprint
// against the topology JSON, entries, version): an invalid one stores nothing and the error names it (tables[i]).
// Should a write still fail, the error says how many tables were stored before it. Tables whose entries no longer match
// the content_hash written at export (edited or damaged since) are imported as they are and appended to `edited` (when
// given; not cleared first, and possibly partly filled when an error is returned) for a warning.
absl::StatusOr<int> ImportIntoStore(TuningStore& store, absl::string_view text,
                                    std::vector<std::string>* edited = nullptr);

}  // namespace hccltune::db
