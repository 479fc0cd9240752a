#include "db/table_json.h"

#include <limits>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "db/store_util.h"
#include "nlohmann/json.hpp"
#include "runtime/common/json_field.h"

namespace hccltune::db {
namespace {

using nlohmann::json;

json EntryToJson(const TunedEntry& e) {
  json j{{"collective", std::string(CollectiveName(e.key.collective))},
         {"dtype", std::string(DataTypeName(e.key.dtype))},
         {"world_size", e.key.world_size},
         {"bytes", FormatByteRange(e.key.range)},
         {"configuration", e.configuration},
         {"time_us", e.time_us},
         {"busbw_gbps", e.busbw_gbps},
         {"samples", e.samples},
         {"runner_up", e.runner_up},
         {"margin", e.margin},
         {"default_margin", e.default_margin},
         {"sweep_id", e.sweep_id},
         {"library_version", e.library_version},
         {"measured_unix_ms", e.measured_unix_ms}};
  // Online tuning fields only when set: exports of tables without them stay as they were.
  if (e.rank_time_us != 0) j["rank_time_us"] = e.rank_time_us;
  if (e.stale) j["stale"] = true;
  if (!e.explore.empty()) {
    j["explore"] = e.explore;
    j["explore_every"] = e.explore_every;
    j["explore_calls"] = e.explore_calls;
  }
  if (e.model_version != 0) j["model_version"] = e.model_version;
  return j;
}

// Whether `v` is a JSON integer that T holds.
template <typename T>
bool FitsInteger(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  if (!v.is_number_integer()) return false;
  const int64_t x = v.get<int64_t>();
  if (x < 0) return std::is_signed_v<T> && x >= static_cast<int64_t>(std::numeric_limits<T>::min());
  return static_cast<uint64_t>(x) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
}

template <typename T>
absl::StatusOr<T> Field(const json& j, const char* name, absl::string_view where) {
  auto it = j.find(name);
  if (it == j.end()) return absl::InvalidArgumentError(absl::StrCat(where, ": missing field '", name, "'"));
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // Converting a float (1e86) or an integer out of T's range is undefined or silently wrong: refuse both.
    if (!FitsInteger<T>(*it)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": field '", name, "' is ", it->dump().substr(0, 64),
                                                     ", expected an integer from ", std::numeric_limits<T>::min(),
                                                     " to ", std::numeric_limits<T>::max()));
    }
  }
  try {
    return it->get<T>();
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": field '", name, "': ", e.what()));
  }
}

template <typename T>
absl::Status Get(const json& j, const char* name, absl::string_view where, T* out) {
  auto v = Field<T>(j, name, where);
  if (!v.ok()) return v.status();
  *out = *std::move(v);
  return absl::OkStatus();
}

#define HT_FIELD(var, type, j, name, where) \
  if (absl::Status _s = Get<type>(j, name, where, &(var)); !_s.ok()) return _s

absl::StatusOr<TunedEntry> EntryFromJson(const json& j, const std::string& where) {
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": not an object"));
  TunedEntry e;
  std::string coll, dtype, bytes;
  HT_FIELD(coll, std::string, j, "collective", where);
  HT_FIELD(dtype, std::string, j, "dtype", where);
  HT_FIELD(bytes, std::string, j, "bytes", where);
  auto c = ParseCollective(coll);
  if (!c.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", c.status().message()));
  auto d = ParseDataType(dtype);
  if (!d.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", d.status().message()));
  auto r = ParseByteRange(bytes);
  if (!r.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", r.status().message()));
  e.key.collective = *c;
  e.key.dtype = *d;
  e.key.range = *r;
  HT_FIELD(e.key.world_size, int, j, "world_size", where);
  HT_FIELD(e.configuration, std::string, j, "configuration", where);
  HT_FIELD(e.time_us, double, j, "time_us", where);
  HT_FIELD(e.busbw_gbps, double, j, "busbw_gbps", where);
  HT_FIELD(e.samples, uint64_t, j, "samples", where);
  HT_FIELD(e.runner_up, std::string, j, "runner_up", where);
  HT_FIELD(e.margin, double, j, "margin", where);
  HT_FIELD(e.default_margin, double, j, "default_margin", where);
  HT_FIELD(e.sweep_id, std::string, j, "sweep_id", where);
  HT_FIELD(e.library_version, std::string, j, "library_version", where);
  HT_FIELD(e.measured_unix_ms, int64_t, j, "measured_unix_ms", where);
  if (j.contains("rank_time_us")) {
    HT_FIELD(e.rank_time_us, double, j, "rank_time_us", where);
  }
  if (j.contains("stale")) {
    HT_FIELD(e.stale, bool, j, "stale", where);
  }
  if (j.contains("explore")) {
    HT_FIELD(e.explore, std::string, j, "explore", where);
    HT_FIELD(e.explore_every, uint32_t, j, "explore_every", where);
    HT_FIELD(e.explore_calls, uint32_t, j, "explore_calls", where);
  }
  if (j.contains("model_version")) {
    HT_FIELD(e.model_version, int64_t, j, "model_version", where);
  }
  return e;
}

}  // namespace

std::string EntryToJsonText(const TunedEntry& entry) { return EntryToJson(entry).dump(); }

absl::StatusOr<TunedEntry> EntryFromJsonText(absl::string_view text, const std::string& where) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(where, ": not valid JSON"));
  return EntryFromJson(j, where);
}

std::string TablesToJson(const std::vector<Table>& tables) {
  json out{{"format", "hccl-tune-tables"}, {"format_version", kExportFormatVersion}, {"tables", json::array()}};
  for (const Table& t : tables) {
    json entries = json::array();
    for (const TunedEntry& e : t.entries) entries.push_back(EntryToJson(e));
    out["tables"].push_back(json{{"fingerprint", t.topology.fingerprint},
                                 {"topology", t.topology.json},
                                 {"topology_class", t.topology.topology_class},
                                 {"version", t.version},
                                 {"created_unix_ms", t.created_unix_ms},
                                 {"content_hash", t.content_hash},
                                 {"entries", std::move(entries)}});
  }
  return out.dump(2) + "\n";
}

absl::StatusOr<std::vector<Table>> TablesFromJson(absl::string_view text) {
  if (text.size() > kMaxTableFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("table file of ", text.size(), " bytes is over the limit of ", kMaxTableFileBytes, " bytes"));
  }
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("table file is not valid JSON");
  if (!j.is_object() || JsonOr(j, "format", "") != "hccl-tune-tables") {
    return absl::InvalidArgumentError("not an hccl-tune table file (expected \"format\": \"hccl-tune-tables\")");
  }
  int format_version = 0;
  HT_FIELD(format_version, int, j, "format_version", "table file");
  if (format_version > kExportFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat("table file format version ", format_version,
                                                      " is newer than this hccl-tune reads (", kExportFormatVersion,
                                                      ")"));
  }
  auto tables = j.find("tables");
  if (tables == j.end() || !tables->is_array())
    return absl::InvalidArgumentError("table file: 'tables' must be an array");
  if (tables->size() > kMaxTableFileTables) {
    return absl::InvalidArgumentError(
        absl::StrCat("table file: ", tables->size(), " tables, over the limit of ", kMaxTableFileTables));
  }
  std::vector<Table> out;
  for (size_t i = 0; i < tables->size(); ++i) {
    const json& tj = (*tables)[i];
    const std::string where = absl::StrCat("tables[", i, "]");
    if (!tj.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": not an object"));
    Table t;
    HT_FIELD(t.topology.fingerprint, std::string, tj, "fingerprint", where);
    HT_FIELD(t.topology.json, std::string, tj, "topology", where);
    HT_FIELD(t.version, int64_t, tj, "version", where);
    HT_FIELD(t.created_unix_ms, int64_t, tj, "created_unix_ms", where);
    if (tj.contains("content_hash")) HT_FIELD(t.content_hash, std::string, tj, "content_hash", where);
    auto entries = tj.find("entries");
    if (entries == tj.end() || !entries->is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": 'entries' must be an array"));
    }
    if (entries->size() > kMaxTableEntries) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", entries->size(), " entries, over the limit of ", kMaxTableEntries));
    }
    for (size_t k = 0; k < entries->size(); ++k) {
      auto e = EntryFromJson((*entries)[k], absl::StrCat(where, ".entries[", k, "]"));
      if (!e.ok()) return e.status();
      t.entries.push_back(*std::move(e));
    }
    out.push_back(std::move(t));
  }
  return out;
}

absl::StatusOr<std::string> ExportStore(TuningStore& store) {
  auto summaries = store.ListTables();
  if (!summaries.ok()) return summaries.status();
  std::vector<Table> tables;
  for (const TableSummary& s : *summaries) {
    auto t = store.GetTable(s.topology.fingerprint, 0);
    if (!t.ok()) return t.status();
    tables.push_back(*std::move(t));
  }
  return TablesToJson(tables);
}

absl::StatusOr<int> ImportIntoStore(TuningStore& store, absl::string_view text, std::vector<std::string>* edited) {
  auto tables = TablesFromJson(text);
  if (!tables.ok()) return tables.status();
  // Files exported before topology format 2 name format-1 topologies: each is stored under its format-2 key.
  for (Table& t : *tables) {
    if (t.topology.json.empty() || Fingerprint(t.topology.json) != t.topology.fingerprint) continue;
    auto keys = CanonicalTopology(t.topology.json);
    if (keys.ok()) t.topology = Topology{keys->fingerprint, keys->json, keys->topology_class};
  }
  // Every table is checked as PutTable checks it before any is written: a file with one bad table stores none.
  for (size_t i = 0; i < tables->size(); ++i) {
    const Table& t = (*tables)[i];
    auto normalized = ValidatePut(t.topology, t.entries, PutOptions{t.version, t.created_unix_ms});
    absl::Status s = normalized.status();
    if (s.ok() && !t.content_hash.empty() && t.content_hash != ContentHash(*normalized) && edited != nullptr) {
      // The exporter's hash over these entries: a mismatch means they changed after export — a hand edit (a
      // supported workflow: the entries are checked like any others) or damage the checks above cannot see.
      edited->push_back(absl::StrCat("tables[", i, "] (topology ", t.topology.fingerprint, ")"));
    }
    if (s.ok() && t.topology.json.empty()) {
      // Allowed only for a topology the store has (PutTable refuses it otherwise).
      auto cur = store.GetTable(t.topology.fingerprint, 0);
      if (absl::IsNotFound(cur.status())) {
        s = absl::InvalidArgumentError("the topology JSON is empty and the store has no table for this fingerprint");
      } else {
        s = cur.status();
      }
    }
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("tables[", i, "] (topology ", t.topology.fingerprint,
                                                 "): ", s.message(), "; nothing imported"));
    }
  }
  int changed = 0;
  for (size_t i = 0; i < tables->size(); ++i) {
    const Table& t = (*tables)[i];
    int64_t before = 0;
    if (auto cur = store.GetTable(t.topology.fingerprint, 0); cur.ok()) before = cur->version;
    auto v = store.PutTable(t.topology, t.entries, PutOptions{t.version, t.created_unix_ms});
    if (!v.ok()) {
      // Checked above, so the store itself failed (or changed meanwhile): say what is already stored.
      return absl::Status(
          v.status().code(),
          absl::StrCat("table ", t.topology.fingerprint, " (tables[", i, "]): ", v.status().message(), "; ", i, " of ",
                       tables->size(), " table(s) were stored before this error (", changed, " changed)"));
    }
    if (*v != before) ++changed;
  }
  return changed;
}

}  // namespace hccltune::db
