// TunerHandlers: the sweep journal and activity methods (declared in daemon/handlers.h). Kept apart from the
// table handlers so the sweep work stays self-contained.
#include "absl/strings/str_cat.h"
#include "daemon/handlers.h"
#include "db/store_util.h"
#include "rpc/sweep_convert.h"

namespace hccltune::daemon {

absl::Status TunerHandlers::PutSweep(const v1::PutSweepRequest& req, v1::PutSweepResponse*) {
  auto s = rpc::SweepFromProto(req.sweep());
  if (!s.ok()) return s.status();
  if (absl::Status st = db::ValidateSweep(*s); !st.ok()) return st;
  return store_->PutSweep(*s);
}

absl::Status TunerHandlers::GetSweep(const v1::GetSweepRequest& req, v1::SweepRecord* resp) {
  if (req.id().empty()) return absl::InvalidArgumentError("GetSweep: the sweep id is empty");
  auto s = store_->GetSweep(req.id());
  if (!s.ok()) return s.status();
  rpc::SweepToProto(*s, resp);
  return absl::OkStatus();
}

absl::Status TunerHandlers::ListSweeps(const v1::ListSweepsRequest&, v1::ListSweepsResponse* resp) {
  auto list = store_->ListSweeps();
  if (!list.ok()) return list.status();
  for (const db::Sweep& s : *list) rpc::SweepToProto(s, resp->add_sweeps());
  return absl::OkStatus();
}

absl::Status TunerHandlers::AddSweepSamples(const v1::AddSweepSamplesRequest& req, v1::AddSweepSamplesResponse* resp) {
  if (req.sweep_id().empty()) return absl::InvalidArgumentError("AddSweepSamples: the sweep id is empty");
  if (req.samples_size() > limits_.max_batch_samples) {
    return absl::InvalidArgumentError(absl::StrCat("batch of ", req.samples_size(),
                                                   " sweep samples exceeds the limit of ", limits_.max_batch_samples));
  }
  std::vector<db::SweepSample> samples;
  samples.reserve(req.samples_size());
  for (int i = 0; i < req.samples_size(); ++i) {
    auto s = rpc::SweepSampleFromProto(req.samples(i));
    absl::Status st = s.ok() ? db::ValidateSweepSample(*s) : s.status();
    if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat("samples[", i, "]: ", st.message()));
    samples.push_back(*std::move(s));
  }
  if (absl::Status st = store_->AddSweepSamples(req.sweep_id(), samples); !st.ok()) return st;
  resp->set_stored(samples.size());
  return absl::OkStatus();
}

absl::Status TunerHandlers::GetSweepSamples(const v1::GetSweepSamplesRequest& req,
                                            std::vector<v1::SweepSampleChunk>* chunks, int chunk) {
  if (req.sweep_id().empty()) return absl::InvalidArgumentError("GetSweepSamples: the sweep id is empty");
  auto samples = store_->GetSweepSamples(req.sweep_id());
  if (!samples.ok()) return samples.status();
  for (size_t i = 0; i < samples->size(); ++i) {
    if (i % static_cast<size_t>(chunk) == 0) chunks->emplace_back();
    rpc::SweepSampleToProto((*samples)[i], chunks->back().add_samples());
  }
  return absl::OkStatus();
}

absl::Status TunerHandlers::GetActivity(const v1::GetActivityRequest& req, v1::GetActivityResponse* resp) {
  if (req.window_s() < 0 || req.window_s() > 3600) {
    return absl::InvalidArgumentError(absl::StrCat("window_s ", req.window_s(), " is out of range 0..3600"));
  }
  const absl::Duration window = absl::Seconds(req.window_s() == 0 ? 30 : req.window_s());
  for (const ActivityTracker::Reporter& r : activity_.Recent(window)) {
    v1::Reporter* out = resp->add_reporters();
    out->set_client_id(r.client_id);
    out->set_fingerprint(r.fingerprint);
    out->set_samples(r.samples);
    out->set_last_seen_unix_ms(absl::ToUnixMillis(r.last_seen));
  }
  return absl::OkStatus();
}

}  // namespace hccltune::daemon
