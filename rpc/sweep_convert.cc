#include "rpc/sweep_convert.h"

#include "absl/strings/str_cat.h"
#include "rpc/proto_convert.h"

namespace hccltune::rpc {

void SweepToProto(const db::Sweep& s, v1::SweepRecord* out) {
  out->set_id(s.id);
  out->set_params_json(s.params_json);
  out->set_status(std::string(db::SweepStatusName(s.status)));
  out->set_progress(s.progress);
  out->set_started_unix_ms(s.started_unix_ms);
  out->set_finished_unix_ms(s.finished_unix_ms);
  out->set_message(s.message);
}

absl::StatusOr<db::Sweep> SweepFromProto(const v1::SweepRecord& s) {
  auto status = db::ParseSweepStatus(s.status());
  if (!status.ok()) return absl::InvalidArgumentError(absl::StrCat("sweep status: ", status.status().message()));
  db::Sweep out;
  out.id = s.id();
  out.params_json = s.params_json();
  out.status = *status;
  out.progress = s.progress();
  out.started_unix_ms = s.started_unix_ms();
  out.finished_unix_ms = s.finished_unix_ms();
  out.message = s.message();
  return out;
}

void SweepSampleToProto(const db::SweepSample& s, v1::SweepSample* out) {
  out->set_collective(std::string(CollectiveName(s.collective)));
  out->set_dtype(std::string(DataTypeName(s.dtype)));
  out->set_world_size(s.world_size);
  out->set_bytes(s.bytes);
  out->set_configuration(s.configuration);
  out->set_time_us(s.time_us);
  out->set_rank_time_us(s.rank_time_us);
  out->set_iteration(s.iteration);
}

absl::StatusOr<db::SweepSample> SweepSampleFromProto(const v1::SweepSample& s) {
  auto coll = CollectiveFromWire(s.collective());
  if (!coll.ok()) return coll.status();
  auto dtype = DataTypeFromWire(s.dtype());
  if (!dtype.ok()) return dtype.status();
  if (absl::Status st = CheckWorldFromWire(s.world_size(), false); !st.ok()) return st;
  if (absl::Status st = CheckBytesFromWire(s.bytes()); !st.ok()) return st;
  db::SweepSample out;
  out.collective = *coll;
  out.dtype = *dtype;
  out.world_size = s.world_size();
  out.bytes = s.bytes();
  out.configuration = s.configuration();
  out.time_us = s.time_us();
  out.rank_time_us = s.rank_time_us();
  out.iteration = s.iteration();
  return out;
}

}  // namespace hccltune::rpc
