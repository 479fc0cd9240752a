// Conversions between the db/ sweep journal types (Sweep, SweepSample) and their hccltune.v1 messages, with the
// checks the wire needs: unknown names and statuses are InvalidArgument. Used by the daemon's sweep-journal
// handlers and by RemoteTuningStore.
//
// Thread-safety: pure functions.
#pragma once

#include "absl/status/statusor.h"
#include "db/tuning_store.h"
#include "hccltune/v1/tuner.pb.h"

namespace hccltune::rpc {

namespace v1 = ::hccltune::v1;

void SweepToProto(const db::Sweep& s, v1::SweepRecord* out);
absl::StatusOr<db::Sweep> SweepFromProto(const v1::SweepRecord& s);
void SweepSampleToProto(const db::SweepSample& s, v1::SweepSample* out);
absl::StatusOr<db::SweepSample> SweepSampleFromProto(const v1::SweepSample& s);

}  // namespace hccltune::rpc
