#include "runtime/tuning_client/heartbeat.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/common/flight_ring.h"
#include "runtime/common/logging.h"

namespace hccltune::tuning {
namespace {

std::string HostName() {
  char buf[256] = {};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

void ToProto(const CommProgress& p, double since_progress_s, v1::CommProgress* out) {
  out->set_name(p.name);
  out->set_comm_tag(absl::StrCat(absl::Hex(p.tag, absl::kZeroPad16)));
  out->set_rank(p.rank);
  out->set_size(p.size);
  out->set_recorder_off(p.recorder_off);
  out->set_last_started(p.last_started);
  out->set_last_completed(p.last_completed);
  if (p.last_started >= 0) {
    out->set_started_collective(std::string(CollectiveName(p.started_collective)));
    out->set_started_bytes(p.started_bytes);
  }
  if (p.last_completed >= 0) {
    out->set_completed_collective(std::string(CollectiveName(p.completed_collective)));
    out->set_completed_bytes(p.completed_bytes);
  }
  out->set_in_call(p.in_call);
  if (p.in_call && p.blocked_since_ns > 0) out->set_blocked_s((CoarseNowNs() - p.blocked_since_ns) / 1e9);
  out->set_since_progress_s(since_progress_s);
}

void AddNodes(const std::vector<JobNodeInfo>& nodes, v1::HeartbeatRequest* req) {
  for (const JobNodeInfo& n : nodes) {
    v1::JobNode* out = req->add_nodes();
    out->set_name(n.name);
    for (const std::string& a : n.addresses) out->add_addresses(a);
    for (int r : n.ranks) out->add_ranks(r);
  }
}

}  // namespace

Heartbeats& Heartbeats::Get() {
  static Heartbeats* all = new Heartbeats();
  return *all;
}

uint64_t Heartbeats::Register(HeartbeatSource source) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  sources_[id] = Entry{std::move(source), -2, absl::Now()};
  return id;
}

void Heartbeats::Unregister(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  sources_.erase(id);
}

v1::HeartbeatRequest Heartbeats::Build(const std::string& target) {
  std::lock_guard<std::mutex> lock(mu_);
  return BuildLocked(target, absl::Now(), true);
}

// The identity is the oldest source's (the process's first live communicator); every source adds its progress.
v1::HeartbeatRequest Heartbeats::BuildLocked(const std::string& target, absl::Time now, bool with_nodes) {
  v1::HeartbeatRequest req;
  for (auto& [id, e] : sources_) {
    if (e.source.target != target) continue;
    if (with_nodes && req.nodes().empty()) AddNodes(e.source.nodes, &req);
    if (req.job_id().empty()) {
      req.set_job_id(e.source.job_id);
      req.set_rank(e.source.job_rank);
      req.set_world_size(e.source.job_world);
      req.set_pid(::getpid());
      req.set_host(HostName());
    }
    if (!e.source.progress) continue;
    const CommProgress p = e.source.progress();
    if (p.last_completed != e.seen_completed) {
      e.seen_completed = p.last_completed;
      e.progressed = now;
    }
    ToProto(p, absl::ToDoubleSeconds(now - e.progressed), req.add_comms());
  }
  return req;
}

void Heartbeats::Tick(const std::string& target, const HeartbeatSend& send) {
  v1::HeartbeatRequest req;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Target& t = targets_[target];
    const absl::Time now = absl::Now();
    if (t.unsupported || t.sending || now - t.last_sent < kHeartbeatInterval) return;
    req = BuildLocked(target, now, now - t.nodes_sent >= kNodesInterval);
    if (req.job_id().empty()) return;  // no source for this daemon
    t.sending = true;
    t.last_sent = now;
  }
  auto resp = send(req);
  uint64_t request = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Target& t = targets_[target];
    t.sending = false;
    if (resp.ok() && !req.nodes().empty()) t.nodes_sent = t.last_sent;
    if (!resp.ok() && absl::IsUnimplemented(resp.status())) {
      t.unsupported = true;
      Log(LogLevel::kInfo, "hccl-tuned at ", target, " has no job view (Heartbeat): no heartbeats are sent to it");
    }
    if (resp.ok() && resp->dump_request() != 0 && resp->dump_request() != t.answered) {
      request = resp->dump_request();
      t.answered = request;  // claimed: another client thread's heartbeat does not answer it twice
    }
  }
  if (request != 0) AnswerDumpRequest(target, request, req, send);
}

void Heartbeats::AnswerDumpRequest(const std::string& target, uint64_t request, const v1::HeartbeatRequest& identity,
                                   const HeartbeatSend& send) {
  std::vector<FlightDumpText> dumps;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, e] : sources_) {
      if (e.source.target == target && e.source.dump) dumps.push_back(e.source.dump());
    }
  }
  v1::HeartbeatRequest base;
  base.set_job_id(identity.job_id());
  base.set_rank(identity.rank());
  base.set_world_size(identity.world_size());
  base.set_pid(identity.pid());
  base.set_host(identity.host());
  base.set_answers_request(request);
  std::string errors;
  uint32_t total = 0;
  for (const FlightDumpText& d : dumps) {
    if (d.error.empty()) ++total;
    if (!d.error.empty()) absl::StrAppend(&errors, errors.empty() ? "" : "; ", d.file_name, ": ", d.error);
  }
  bool ok = true;
  for (const FlightDumpText& d : dumps) {
    if (!d.error.empty()) continue;
    v1::HeartbeatRequest msg = base;
    msg.set_dumps_total(total);
    msg.set_dump_error(errors);
    v1::FlightDump* out = msg.add_dumps();
    out->set_file_name(d.file_name);
    out->set_json(d.json);
    auto sent = send(msg);
    if (!sent.ok()) {
      Log(LogLevel::kWarn, "hccl-tuned at ", target, " asked for this rank's flight-recorder dumps; sending ",
          d.file_name, " failed: ", sent.status().message());
      ok = false;
    }
  }
  if (total == 0) {
    v1::HeartbeatRequest msg = base;
    msg.set_dump_error(errors.empty() ? "no communicator with a flight recorder" : errors);
    ok = send(msg).ok();
  }
  std::lock_guard<std::mutex> lock(mu_);
  Target& t = targets_[target];
  if (!ok && t.answered == request) t.answered = 0;  // asked again in a later reply
}

}  // namespace hccltune::tuning
