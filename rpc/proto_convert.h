// Conversions between the db/ types and the hccltune.v1 messages, with the checks the wire needs: unknown
// names and out-of-range numbers are InvalidArgument (mapped 1:1 onto gRPC status codes). Used by the daemon's
// handlers and by clients (CLI, bench, the runtime's tuning client).
//
// Thread-safety: pure functions.
#pragma once

#include "absl/status/statusor.h"
#include "db/tuning_store.h"
#include "hccltune/v1/tuner.pb.h"

namespace hccltune::rpc {

namespace v1 = ::hccltune::v1;

// max_bytes = 0 on the wire means unbounded.
void EntryToProto(const db::TunedEntry& e, v1::TableEntry* out);
absl::StatusOr<db::TunedEntry> EntryFromProto(const v1::TableEntry& e);
void TopologyToProto(const db::Topology& t, v1::Topology* out);
// The class comes from the JSON when the message has none (a reply of a daemon of topology format 1).
db::Topology TopologyFromProto(const v1::Topology& p);
// world_size 0 = every entry.
void TableToProto(const db::Table& t, int world_size, v1::Table* out);
absl::StatusOr<db::Table> TableFromProto(const v1::Table& t);
void SummaryToProto(const db::TableSummary& s, v1::TableSummary* out);
db::TableSummary SummaryFromProto(const v1::TableSummary& s);

absl::StatusOr<Collective> CollectiveFromWire(absl::string_view name);
absl::StatusOr<DataType> DataTypeFromWire(absl::string_view name);
// 0 <= world <= kMaxWorldSize when zero_ok, else 1..kMaxWorldSize.
absl::Status CheckWorldFromWire(int64_t world, bool zero_ok);
absl::Status CheckBytesFromWire(uint64_t bytes);

}  // namespace hccltune::rpc
