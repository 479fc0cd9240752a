#include "daemon/job_table.h"

#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hccltune::daemon {
namespace {

constexpr size_t kMaxJobIdBytes = 256;
constexpr int kMaxNodeAddresses = 16;
constexpr size_t kMaxAddressBytes = 64;

std::string LocalHost() {
  char buf[256] = {};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// A heartbeat's node list: at most one node per rank, kMaxNodeAddresses addresses each, ranks within the world.
absl::Status CheckNodes(const v1::HeartbeatRequest& req) {
  auto bad = [&req](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("Heartbeat of job ", req.job_id(), ": ", what));
  };
  if (req.nodes_size() > req.world_size()) {
    return bad(absl::StrCat(req.nodes_size(), " nodes for world_size ", req.world_size()));
  }
  int ranks = 0;
  for (const v1::JobNode& n : req.nodes()) {
    if (n.name().size() > kMaxJobIdBytes || n.addresses_size() > kMaxNodeAddresses) {
      return bad(absl::StrCat("node '", n.name().substr(0, 64), "' has a name over ", kMaxJobIdBytes, " bytes or over ",
                              kMaxNodeAddresses, " addresses"));
    }
    for (const std::string& a : n.addresses()) {
      if (a.size() > kMaxAddressBytes) return bad(absl::StrCat("node ", n.name(), ": an address over 64 bytes"));
    }
    for (int r : n.ranks()) {
      if (r < 0 || r >= req.world_size()) return bad(absl::StrCat("node ", n.name(), " lists rank ", r));
    }
    ranks += n.ranks_size();
  }
  if (ranks > req.world_size()) return bad(absl::StrCat("its nodes list ", ranks, " ranks"));
  return absl::OkStatus();
}

absl::Status CheckHeartbeat(const v1::HeartbeatRequest& req) {
  if (req.job_id().empty() || req.job_id().size() > kMaxJobIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("Heartbeat: job_id must have 1 to ", kMaxJobIdBytes, " bytes, got ", req.job_id().size()));
  }
  if (req.world_size() < 1 || req.rank() < 0 || req.rank() >= req.world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("Heartbeat of job ", req.job_id(), ": rank ", req.rank(),
                                                   " is not within world_size ", req.world_size()));
  }
  return CheckNodes(req);
}

// The part of a job id after its "KIND:" prefix.
std::string Bare(const std::string& id) {
  const size_t colon = id.find(':');
  return colon == std::string::npos ? id : id.substr(colon + 1);
}

}  // namespace

JobTable::JobTable(JobLimits limits, std::string host)
    : limits_(limits), host_(host.empty() ? LocalHost() : std::move(host)) {}

void JobTable::ExpireLocked(absl::Time now) {
  for (auto job = jobs_.begin(); job != jobs_.end();) {
    auto& ranks = job->second.ranks;
    for (auto r = ranks.begin(); r != ranks.end();) {
      r = now - r->second.seen >= limits_.expire_after ? ranks.erase(r) : std::next(r);
    }
    job = ranks.empty() && !job->second.request ? jobs_.erase(job) : std::next(job);
  }
}

absl::StatusOr<JobTable::Job*> JobTable::FindLocked(const std::string& id) {
  auto exact = jobs_.find(id);
  if (exact != jobs_.end() && !exact->second.ranks.empty()) return &exact->second;
  std::vector<Job*> matches;
  std::vector<std::string> names;
  for (auto& [name, job] : jobs_) {
    if (job.ranks.empty()) continue;
    names.push_back(name);
    if (Bare(name) == id) matches.push_back(&job);
  }
  if (matches.size() == 1) return matches[0];
  if (matches.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("job id '", id, "' is ambiguous on ", host_,
                                                   ": give it whole (jobs: ", absl::StrJoin(names, ", "), ")"));
  }
  return absl::NotFoundError(absl::StrCat(
      "no running job '", id, "' on ", host_, " (",
      names.empty() ? "no job reports to this hccl-tuned" : absl::StrCat("jobs: ", absl::StrJoin(names, ", ")),
      "; hccl-tune jobs lists them)"));
}

absl::StatusOr<v1::HeartbeatResponse> JobTable::Heartbeat(const v1::HeartbeatRequest& req, std::optional<uint32_t> uid,
                                                          absl::Time now) {
  if (absl::Status s = CheckHeartbeat(req); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked(now);
  auto it = jobs_.find(req.job_id());
  if (it == jobs_.end()) {
    if (jobs_.size() >= limits_.max_jobs) {
      return absl::ResourceExhaustedError(absl::StrCat("hccl-tuned's job table is full (", limits_.max_jobs,
                                                       " jobs); job ", req.job_id(), " is not shown"));
    }
    it = jobs_.emplace(req.job_id(), Job{}).first;
    it->second.id = req.job_id();
    it->second.uid = uid;
  }
  Job& job = it->second;
  if (job.uid && uid && *job.uid != *uid) {
    return absl::PermissionDeniedError(absl::StrCat("job ", req.job_id(), " is reported by uid ", *job.uid,
                                                    "; a heartbeat from uid ", *uid, " is refused"));
  }
  if (!job.ranks.count(req.rank()) && job.ranks.size() >= limits_.max_ranks) {
    return absl::ResourceExhaustedError(
        absl::StrCat("job ", req.job_id(), " has ", limits_.max_ranks, " ranks on this node already (the bound)"));
  }
  job.world = req.world_size();
  Rank& rank = job.ranks[req.rank()];
  rank.seen = now;
  if (req.answers_request() != 0) {
    if (absl::Status s = RecordDumpsLocked(job, req); !s.ok()) return s;
    return v1::HeartbeatResponse();
  }
  rank.beat = req;
  if (req.nodes_size() > 0) {
    job.nodes.assign(req.nodes().begin(), req.nodes().end());
    rank.beat.clear_nodes();
  }
  if (rank.beat.comms_size() > limits_.max_comms) {
    rank.beat.mutable_comms()->DeleteSubrange(limits_.max_comms, rank.beat.comms_size() - limits_.max_comms);
  }
  v1::HeartbeatResponse resp;
  if (job.request && job.request->asked.count(req.rank()) && !job.request->answers[req.rank()].done) {
    // Asked, and not answered yet (a lost answer is asked for again).
    resp.set_dump_request(job.request->id);
  }
  return resp;
}

absl::Status JobTable::RecordDumpsLocked(Job& job, const v1::HeartbeatRequest& req) {
  if (!job.request || job.request->id != req.answers_request()) return absl::OkStatus();  // a late answer
  Request& r = *job.request;
  Answer& a = r.answers[req.rank()];
  if (a.done) return absl::OkStatus();
  a.total = req.dumps_total();
  a.error = req.dump_error();
  for (const v1::FlightDump& d : req.dumps()) {
    if (r.bytes + d.json().size() > limits_.max_dump_bytes) {
      absl::StrAppend(&a.error, a.error.empty() ? "" : "; ", d.file_name(), ": left out, the request's dumps are over ",
                      limits_.max_dump_bytes >> 20, " MiB");
      --a.total;
      continue;
    }
    r.bytes += d.json().size();
    a.dumps.push_back(d);
  }
  a.done = a.dumps.size() >= a.total;
  if (RequestDone(r)) cv_.notify_all();
  return absl::OkStatus();
}

bool JobTable::RequestDone(const Request& r) {
  for (int rank : r.asked) {
    auto a = r.answers.find(rank);
    if (a == r.answers.end() || !a->second.done) return false;
  }
  return true;
}

std::string JobTable::StateOf(const Job& job, const Rank& rank, absl::Time now) const {
  const double age = absl::ToDoubleSeconds(now - rank.seen);
  if (now - rank.seen >= limits_.silent_after) return "silent";
  const double stall = absl::ToDoubleSeconds(limits_.stall_after);
  bool in_call = false;
  for (const v1::CommProgress& c : rank.beat.comms()) {
    if (!c.in_call()) continue;
    in_call = true;
    if (c.blocked_s() > 0 && c.blocked_s() + age >= stall) return "waiting";
  }
  if (in_call) return "in-call";
  // Between calls: stalled when a rank of one of its communicators waits in a later operation.
  for (const v1::CommProgress& mine : rank.beat.comms()) {
    for (const auto& entry : job.ranks) {
      const Rank& other = entry.second;
      if (&other == &rank || now - other.seen >= limits_.silent_after) continue;
      const double other_age = absl::ToDoubleSeconds(now - other.seen);
      for (const v1::CommProgress& c : other.beat.comms()) {
        if (c.comm_tag() == mine.comm_tag() && c.in_call() && c.last_started() > mine.last_started() &&
            c.blocked_s() > 0 && c.blocked_s() + other_age >= stall) {
          return "stalled";
        }
      }
    }
  }
  return "idle";
}

void JobTable::FillJob(const Job& job, absl::Time now, v1::Job* out) const {
  out->set_job_id(job.id);
  out->set_world_size(job.world);
  for (const v1::JobNode& n : job.nodes) *out->add_nodes() = n;
  for (const auto& [r, rank] : job.ranks) {
    v1::JobRank* jr = out->add_ranks();
    const double age = absl::ToDoubleSeconds(now - rank.seen);
    jr->set_rank(r);
    jr->set_pid(rank.beat.pid());
    jr->set_host(rank.beat.host());
    if (job.uid) jr->set_uid(*job.uid);
    jr->set_state(StateOf(job, rank, now));
    jr->set_heartbeat_age_s(age);
    double since = -1;
    for (const v1::CommProgress& c : rank.beat.comms()) {
      if (since < 0 || c.since_progress_s() < since) since = c.since_progress_s();
      v1::CommProgress* copy = jr->add_comms();
      *copy = c;
      copy->set_since_progress_s(c.since_progress_s() + age);
      if (c.blocked_s() > 0) copy->set_blocked_s(c.blocked_s() + age);
    }
    jr->set_since_progress_s(since < 0 ? 0 : since + age);
  }
}

absl::StatusOr<v1::GetJobsResponse> JobTable::List(const std::string& job_id, absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked(now);
  v1::GetJobsResponse resp;
  resp.set_host(host_);
  if (!job_id.empty()) {
    auto job = FindLocked(job_id);
    if (!job.ok()) return job.status();
    FillJob(**job, now, resp.add_jobs());
    return resp;
  }
  for (const auto& [id, job] : jobs_) {
    if (!job.ranks.empty()) FillJob(job, now, resp.add_jobs());
  }
  return resp;
}

absl::StatusOr<std::vector<v1::JobDump>> JobTable::Dump(const std::string& job_id, std::optional<uint32_t> uid,
                                                        bool privileged, absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const absl::Time now = absl::Now();
  ExpireLocked(now);
  auto found = FindLocked(job_id);
  if (!found.ok()) return found.status();
  Job* job = *found;
  const std::string id = job->id;
  if (!privileged && job->uid && (!uid || *uid != *job->uid)) {
    return absl::PermissionDeniedError(absl::StrCat("job ", id, " belongs to uid ", *job->uid, "; ",
                                                    uid ? absl::StrCat("uid ", *uid) : std::string("this caller"),
                                                    " may not have it dump (its owner or a tuner may)"));
  }
  if (job->request) {
    return absl::FailedPreconditionError(absl::StrCat("a dump of job ", id, " is in progress already"));
  }
  Request& r = job->request.emplace();
  r.id = next_request_++;
  std::vector<v1::JobDump> out;
  for (const auto& [rank, state] : job->ranks) {
    if (now - state.seen < limits_.silent_after) {
      r.asked.insert(rank);
    } else {
      v1::JobDump& d = out.emplace_back();
      d.set_job_id(id);
      d.set_rank(rank);
      d.set_host(host_);
      d.set_error(absl::StrCat("no heartbeat for ",
                               absl::FormatDuration(absl::Trunc(now - state.seen, absl::Seconds(1))),
                               " (stopped, stuck outside the runtime, or gone): not asked"));
    }
  }
  cv_.wait_until(lock, absl::ToChronoTime(now + timeout), [&] { return shutdown_ || RequestDone(r); });
  // The job may have expired meanwhile; it stays while its request does (ExpireLocked keeps it).
  for (int rank : r.asked) {
    const Answer& a = r.answers[rank];
    for (const v1::FlightDump& dump : a.dumps) {
      v1::JobDump& d = out.emplace_back();
      d.set_job_id(id);
      d.set_rank(rank);
      d.set_host(host_);
      *d.mutable_dump() = dump;
    }
    if (a.dumps.empty() || !a.error.empty()) {
      v1::JobDump& d = out.emplace_back();
      d.set_job_id(id);
      d.set_rank(rank);
      d.set_host(host_);
      d.set_error(!a.error.empty() ? a.error
                  : a.done         ? "no dump"
                                   : absl::StrCat("no answer within ", absl::FormatDuration(timeout)));
    }
  }
  jobs_[id].request.reset();
  return out;
}

void JobTable::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutdown_ = true;
  cv_.notify_all();
}

}  // namespace hccltune::daemon
