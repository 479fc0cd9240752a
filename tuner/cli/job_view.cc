#include "tuner/cli/job_view.h"

#include <unistd.h>

#include <fstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "hccltune/v1/tuner.grpc.pb.h"
#include "rpc/channel.h"
#include "runtime/common/config.h"
#include "runtime/common/daemon_discovery.h"

namespace hccltune::cli {
namespace {

absl::Status FromGrpc(const grpc::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), absl::StrCat(what, ": ", s.error_message()));
}

// "allreduce of 8 B" for one end of a communicator's progress.
std::string Op(int64_t op, const std::string& collective, uint64_t bytes) {
  return absl::StrCat(op, " (", collective, " of ", bytes, " B)");
}

std::string CommLine(const v1::CommProgress& c) {
  if (c.recorder_off()) return "progress unknown (HCCL_TUNE_FR_ENTRIES=0)";
  std::string done =
      c.last_completed() < 0
          ? "no operation completed"
          : absl::StrCat("completed ", Op(c.last_completed(), c.completed_collective(), c.completed_bytes()));
  if (!c.in_call()) return done;
  std::string in = absl::StrCat("in ", Op(c.last_started(), c.started_collective(), c.started_bytes()));
  if (c.blocked_s() > 0) absl::StrAppend(&in, absl::StrFormat(", blocked %.1f s", c.blocked_s()));
  return absl::StrCat(in, "; ", done);
}

// A dump file name from a daemon, checked: fr-<hex>-r<digits>.json only (never a path).
bool SafeDumpName(const std::string& name) {
  if (!absl::StartsWith(name, "fr-") || !absl::EndsWith(name, ".json") || name.size() > 64) return false;
  for (char c : name) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.')) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::string> JobViewTarget(const std::string& flag) {
  auto env = Environment::Load();
  if (!env.ok()) return env.status();
  auto target = ResolveDaemonTarget(*env, flag, ::getuid());
  if (!target.ok()) return target.status();
  if (target->disabled) {
    return absl::FailedPreconditionError("the daemon is disabled (HCCL_TUNE_DAEMON=off); use --daemon TARGET");
  }
  return target->grpc_target;
}

absl::StatusOr<v1::GetJobsResponse> GetJobs(const std::string& target, const std::string& job_id,
                                            absl::Duration deadline) {
  auto stub = v1::Tuner::NewStub(rpc::MakeChannel(target));
  grpc::ClientContext cc;
  cc.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  v1::GetJobsRequest req;
  req.set_job_id(job_id);
  v1::GetJobsResponse resp;
  if (absl::Status s = FromGrpc(stub->GetJobs(&cc, req, &resp), absl::StrCat("hccl-tuned at ", target)); !s.ok()) {
    return s;
  }
  return resp;
}

std::string FormatJobs(const v1::GetJobsResponse& jobs, const std::string& target) {
  if (jobs.jobs().empty()) return absl::StrCat("no running job reports to hccl-tuned at ", target, "\n");
  std::string out;
  for (const v1::Job& job : jobs.jobs()) {
    absl::StrAppend(&out, "job ", job.job_id(), ": world ", job.world_size(), ", ", job.ranks_size(), " rank",
                    job.ranks_size() == 1 ? "" : "s", " on ", jobs.host(), "\n");
    for (const v1::JobNode& n : job.nodes()) {
      absl::StrAppend(&out, "  node ", n.name(), ": ranks ", absl::StrJoin(n.ranks(), ","),
                      n.addresses().empty() ? "" : absl::StrCat(", addresses ", absl::StrJoin(n.addresses(), " ")),
                      "\n");
    }
    absl::StrAppend(&out, absl::StrFormat("  %-5s %-8s %-8s %-9s %s\n", "rank", "pid", "state", "progress",
                                          "operation (per communicator)"));
    for (const v1::JobRank& r : job.ranks()) {
      const std::string progress = absl::StrFormat("%.1fs ago", r.since_progress_s());
      if (r.comms().empty()) {
        absl::StrAppend(&out, absl::StrFormat("  %-5d %-8d %-8s %-9s %s\n", r.rank(), r.pid(), r.state(), progress,
                                              "no communicator"));
      }
      for (int i = 0; i < r.comms_size(); ++i) {
        const v1::CommProgress& c = r.comms(i);
        const std::string what = absl::StrCat(c.name(), " r", c.rank(), "/", c.size(), ": ", CommLine(c));
        if (i == 0) {
          absl::StrAppend(&out,
                          absl::StrFormat("  %-5d %-8d %-8s %-9s %s\n", r.rank(), r.pid(), r.state(), progress, what));
        } else {
          absl::StrAppend(&out, absl::StrFormat("  %-5s %-8s %-8s %-9s %s\n", "", "", "", "", what));
        }
      }
    }
  }
  return out;
}

namespace {

// DumpJob from one daemon: its dumps written under `dir`, a note per rank that sent none.
absl::StatusOr<CollectedDumps> DumpsFrom(const std::string& target, const std::string& job_id, absl::Duration timeout,
                                         const std::string& dir) {
  CollectedDumps out;
  auto stub = v1::Tuner::NewStub(rpc::MakeChannel(target));
  grpc::ClientContext cc;
  cc.set_deadline(absl::ToChronoTime(absl::Now() + timeout + absl::Seconds(10)));
  v1::DumpJobRequest req;
  req.set_job_id(job_id);
  req.set_timeout_ms(static_cast<int>(absl::ToInt64Milliseconds(timeout)));
  auto reader = stub->DumpJob(&cc, req);
  v1::JobDump d;
  absl::Status bad;
  while (reader->Read(&d)) {
    if (!d.error().empty()) {
      out.notes.push_back(absl::StrCat(d.host(), " rank ", d.rank(), ": ", d.error()));
      continue;
    }
    if (!bad.ok()) continue;  // read to the end: Finish needs the stream drained
    if (!SafeDumpName(d.dump().file_name())) {
      bad = absl::DataLossError(absl::StrCat("hccl-tuned at ", target, " sent a dump named '", d.dump().file_name(),
                                             "', not fr-<tag>-r<rank>.json"));
      continue;
    }
    const std::string path = absl::StrCat(dir, "/", d.dump().file_name());
    std::ofstream f(path, std::ios::trunc);
    f << d.dump().json();
    if (!f.good()) bad = absl::InternalError(absl::StrCat("cannot write ", path));
    out.files.push_back(path);
  }
  absl::Status s = FromGrpc(reader->Finish(), absl::StrCat("hccl-tuned at ", target));
  if (!s.ok()) return s;
  if (!bad.ok()) return bad;
  return out;
}

}  // namespace

// The daemons are asked at once (each waits up to `timeout` for its ranks), one thread per daemon.
absl::StatusOr<CollectedDumps> CollectJobDumps(const std::vector<std::string>& targets, const std::string& job_id,
                                               absl::Duration timeout, const std::string& dir) {
  std::vector<absl::StatusOr<CollectedDumps>> got(targets.size(), absl::UnknownError("not asked"));
  {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < targets.size(); ++i) {
      threads.emplace_back([&, i] { got[i] = DumpsFrom(targets[i], job_id, timeout, dir); });
    }
    for (std::thread& t : threads) t.join();
  }
  CollectedDumps out;
  std::vector<std::string> not_found;
  for (absl::StatusOr<CollectedDumps>& g : got) {
    if (absl::IsNotFound(g.status()) && targets.size() > 1) {
      not_found.push_back(std::string(g.status().message()));
      continue;
    }
    if (!g.ok()) return g.status();
    out.files.insert(out.files.end(), g->files.begin(), g->files.end());
    out.notes.insert(out.notes.end(), g->notes.begin(), g->notes.end());
  }
  if (not_found.size() == targets.size()) return absl::NotFoundError(absl::StrJoin(not_found, "; "));
  for (const std::string& n : not_found) out.notes.push_back(n);
  return out;
}

}  // namespace hccltune::cli
