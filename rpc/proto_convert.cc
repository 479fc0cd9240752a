#include "rpc/proto_convert.h"

#include "absl/strings/str_cat.h"
#include "db/store_util.h"
#include "runtime/common/fingerprint.h"

namespace hccltune::rpc {

absl::StatusOr<Collective> CollectiveFromWire(absl::string_view name) {
  auto c = ParseCollective(name);
  if (!c.ok()) return absl::InvalidArgumentError(c.status().message());
  return c;
}

absl::StatusOr<DataType> DataTypeFromWire(absl::string_view name) {
  auto d = ParseDataType(name);
  if (!d.ok()) return absl::InvalidArgumentError(d.status().message());
  return d;
}

absl::Status CheckWorldFromWire(int64_t world, bool zero_ok) {
  if (world < (zero_ok ? 0 : 1) || world > db::kMaxWorldSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("world_size ", world, " is out of range ", zero_ok ? 0 : 1, "..", db::kMaxWorldSize));
  }
  return absl::OkStatus();
}

absl::Status CheckBytesFromWire(uint64_t bytes) {
  if (bytes > db::kMaxBytes) {
    return absl::InvalidArgumentError(absl::StrCat("bytes ", bytes, " is absurd (limit ", db::kMaxBytes, ")"));
  }
  return absl::OkStatus();
}

void EntryToProto(const db::TunedEntry& e, v1::TableEntry* out) {
  v1::EntryKey* k = out->mutable_key();
  k->set_collective(std::string(CollectiveName(e.key.collective)));
  k->set_dtype(std::string(DataTypeName(e.key.dtype)));
  k->set_world_size(e.key.world_size);
  k->set_min_bytes(e.key.range.min);
  k->set_max_bytes(e.key.range.max == kUnbounded ? 0 : e.key.range.max);
  out->set_configuration(e.configuration);
  out->set_time_us(e.time_us);
  out->set_busbw_gbps(e.busbw_gbps);
  out->set_samples(e.samples);
  out->set_runner_up(e.runner_up);
  out->set_margin(e.margin);
  out->set_default_margin(e.default_margin);
  out->set_sweep_id(e.sweep_id);
  out->set_library_version(e.library_version);
  out->set_measured_unix_ms(e.measured_unix_ms);
  out->set_rank_time_us(e.rank_time_us);
  out->set_stale(e.stale);
  out->set_explore(e.explore);
  out->set_explore_every(e.explore_every);
  out->set_explore_calls(e.explore_calls);
  out->set_model_version(e.model_version);
}

absl::StatusOr<db::TunedEntry> EntryFromProto(const v1::TableEntry& p) {
  db::TunedEntry e;
  auto c = CollectiveFromWire(p.key().collective());
  if (!c.ok()) return c.status();
  auto d = DataTypeFromWire(p.key().dtype());
  if (!d.ok()) return d.status();
  if (absl::Status s = CheckWorldFromWire(p.key().world_size(), false); !s.ok()) return s;
  e.key.collective = *c;
  e.key.dtype = *d;
  e.key.world_size = p.key().world_size();
  e.key.range.min = p.key().min_bytes();
  e.key.range.max = p.key().max_bytes() == 0 ? kUnbounded : p.key().max_bytes();
  e.configuration = p.configuration();
  e.time_us = p.time_us();
  e.busbw_gbps = p.busbw_gbps();
  e.samples = p.samples();
  e.runner_up = p.runner_up();
  e.margin = p.margin();
  e.default_margin = p.default_margin();
  e.sweep_id = p.sweep_id();
  e.library_version = p.library_version();
  e.measured_unix_ms = p.measured_unix_ms();
  e.rank_time_us = p.rank_time_us();
  e.stale = p.stale();
  e.explore = p.explore();
  e.explore_every = p.explore_every();
  e.explore_calls = p.explore_calls();
  e.model_version = p.model_version();
  return e;
}

void TopologyToProto(const db::Topology& t, v1::Topology* out) {
  out->set_fingerprint(t.fingerprint);
  out->set_json(t.json);
  out->set_topology_class(t.topology_class);
}

db::Topology TopologyFromProto(const v1::Topology& p) {
  db::Topology t{p.fingerprint(), p.json(), p.topology_class()};
  if (t.topology_class.empty() && !t.json.empty()) {
    // A daemon of format 1 sends no class: the JSON (of either format) says it.
    if (auto keys = CanonicalTopology(t.json); keys.ok()) t.topology_class = keys->topology_class;
  }
  return t;
}

void TableToProto(const db::Table& t, int world_size, v1::Table* out) {
  TopologyToProto(t.topology, out->mutable_topology());
  out->set_world_size(world_size);
  out->set_version(t.version);
  out->set_content_hash(t.content_hash);
  out->set_created_unix_ms(t.created_unix_ms);
  if (world_size == 0) {
    out->mutable_entries()->Reserve(static_cast<int>(t.entries.size()));
  }
  for (const db::TunedEntry& e : t.entries) {
    if (world_size == 0 || e.key.world_size == world_size) EntryToProto(e, out->add_entries());
  }
  if (world_size != 0) {
    // The hash covers what the caller holds: the filtered entries.
    std::vector<db::TunedEntry> subset;
    for (const db::TunedEntry& e : t.entries) {
      if (e.key.world_size == world_size) subset.push_back(e);
    }
    out->set_content_hash(db::ContentHash(subset));
  }
}

absl::StatusOr<db::Table> TableFromProto(const v1::Table& p) {
  db::Table t;
  t.topology = TopologyFromProto(p.topology());
  t.version = p.version();
  t.content_hash = p.content_hash();
  t.created_unix_ms = p.created_unix_ms();
  for (const v1::TableEntry& pe : p.entries()) {
    auto e = EntryFromProto(pe);
    if (!e.ok()) return e.status();
    t.entries.push_back(*std::move(e));
  }
  return t;
}

void SummaryToProto(const db::TableSummary& s, v1::TableSummary* out) {
  TopologyToProto(s.topology, out->mutable_topology());
  out->set_latest_version(s.latest_version);
  for (int64_t v : s.versions) out->add_versions(v);
  out->set_entries(s.entries);
  out->set_updated_unix_ms(s.updated_unix_ms);
}

db::TableSummary SummaryFromProto(const v1::TableSummary& p) {
  db::TableSummary s;
  s.topology = TopologyFromProto(p.topology());
  s.latest_version = p.latest_version();
  s.versions.assign(p.versions().begin(), p.versions().end());
  s.entries = p.entries();
  s.updated_unix_ms = p.updated_unix_ms();
  return s;
}

}  // namespace hccltune::rpc
