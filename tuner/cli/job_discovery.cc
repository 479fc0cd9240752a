#include "tuner/cli/job_discovery.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "runtime/common/config.h"
#include "tuner/cli/job_view.h"

namespace hccltune::cli {
namespace {

constexpr absl::Duration kProbeDeadline = absl::Seconds(3);

// "node n1 (ranks 2,3)".
std::string NodeName(const v1::JobNode& n) {
  return absl::StrCat("node ", n.name().empty() ? "?" : n.name(), " (rank", n.ranks_size() == 1 ? " " : "s ",
                      absl::StrJoin(n.ranks(), ","), ")");
}

bool Covered(const v1::JobNode& n, const std::set<int>& ranks) {
  for (int r : n.ranks()) {
    if (ranks.count(r)) return true;
  }
  return false;
}

void AddRanks(const v1::GetJobsResponse& resp, std::set<int>* ranks) {
  for (const v1::Job& j : resp.jobs()) {
    for (const v1::JobRank& r : j.ranks()) ranks->insert(r.rank());
  }
}

// Daemons that listen on TCP for other nodes take TLS client certificates (docs/SECURITY.md): say so when none is set.
std::string TlsHint() {
  auto tls = Environment::LoadDaemonTls();
  if (tls.ok() && tls->enabled()) return "";
  return " (no client certificate is set: a daemon listening with TLS needs HCCL_TUNE_DAEMON_TLS_CA, _CERT and _KEY)";
}

}  // namespace

absl::StatusOr<JobDaemons> FindJobDaemons(const std::string& local, const std::string& job_id, int port) {
  auto here = GetJobs(local, job_id);
  if (!here.ok()) return here.status();
  JobDaemons out;
  out.targets.push_back(local);
  if (here->jobs().empty()) return out;
  std::set<int> covered;
  AddRanks(*here, &covered);
  if (port == 0) port = static_cast<int>(here->listen_port());
  for (const v1::JobNode& node : here->jobs(0).nodes()) {
    if (Covered(node, covered)) continue;
    if (port == 0) {
      out.notes.push_back(absl::StrCat(NodeName(node), ": not asked, the daemon at ", local,
                                       " has no TCP listener to take the port from; give --daemon-port PORT, "
                                       "or --daemon HOST:PORT for every node"));
      continue;
    }
    std::vector<std::string> tried;
    bool reached = false;
    for (const std::string& address : node.addresses()) {
      const std::string target = absl::StrCat(address, ":", port);
      auto there = GetJobs(target, job_id, kProbeDeadline);
      if (there.ok()) {
        out.targets.push_back(target);
        AddRanks(*there, &covered);
        reached = true;
        break;
      }
      tried.push_back(std::string(there.status().message()));
    }
    if (reached) continue;
    if (tried.empty()) tried.push_back("it has no address on the networks between the nodes");
    out.notes.push_back(absl::StrCat(NodeName(node), ": ", absl::StrJoin(tried, "; "), TlsHint()));
  }
  return out;
}

}  // namespace hccltune::cli
