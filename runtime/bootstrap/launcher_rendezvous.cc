#include "runtime/bootstrap/launcher_rendezvous.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "runtime/bootstrap/pmix_rendezvous.h"
#include "runtime/common/job_auth.h"
#include "runtime/common/logging.h"
#include "runtime/net/interfaces.h"
#include "runtime/net/socket_io.h"

namespace hccltune {
namespace {

// Slurm: local rank 0 of the step's first node; Open MPI: local rank 0 of the node that owns mpirun's address.
// Without the local facts, rank 0.
bool ServesRendezvous(const Environment& env) {
  const bool local_first = env.local_rank ? *env.local_rank == 0 : env.rank.value_or(0) == 0;
  if (env.launcher == "slurm") {
    if (env.slurmd_nodename.empty()) return env.rank.value_or(0) == 0;
    return local_first && env.slurmd_nodename == env.launcher_rdzv_host;
  }
  if (env.launcher == "openmpi") return local_first && IsLocalAddress(env.launcher_rdzv_host);
  return env.rank.value_or(0) == 0;
}

// ---------------------------------------------------------------------------------------------------------------
// PMI-1 over hydra's PMI_FD. The wire protocol is lines of space-separated key=value pairs, the first being
// cmd=NAME; each request gets one reply line. Every read waits at most until the deadline.
class PmiClient {
 public:
  PmiClient(int fd, absl::Time deadline, int timeout_s) : fd_(fd), deadline_(deadline), timeout_s_(timeout_s) {}

  // Sends `request` (without the newline) and returns the reply's pairs; the reply's cmd must be `reply`, and its
  // rc (when present) 0.
  absl::StatusOr<std::map<std::string, std::string>> Call(const std::string& request, absl::string_view reply,
                                                          bool any_rc = false) {
    const std::string line = request + "\n";
    if (!SendAll(fd_, line.data(), line.size())) return Error(request, std::strerror(errno));
    std::string got;
    while (got.empty() || got.back() != '\n') {
      const int64_t left_ms = absl::ToInt64Milliseconds(deadline_ - absl::Now());
      pollfd p{fd_, POLLIN, 0};
      const int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left_ms, 0)));
      if (n == 0) {
        return absl::DeadlineExceededError(
            absl::StrCat("mpiexec's PMI did not answer '", request, "' within ", timeout_s_,
                         " s (HCCL_CONNECT_TIMEOUT): a rank of the job never started, or failed before its init"));
      }
      char c = 0;
      if (n < 0 || ::read(fd_, &c, 1) != 1) return Error(request, "the PMI connection closed");
      got.push_back(c);
    }
    std::map<std::string, std::string> pairs;
    for (absl::string_view kv :
         absl::StrSplit(absl::string_view(got).substr(0, got.size() - 1), ' ', absl::SkipEmpty())) {
      const size_t eq = kv.find('=');
      if (eq != absl::string_view::npos) pairs[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
    }
    if (pairs["cmd"] != reply || (!any_rc && pairs.count("rc") && pairs["rc"] != "0")) {
      return Error(request, absl::StrCat("unexpected reply '", got.substr(0, got.size() - 1), "'"));
    }
    return pairs;
  }

 private:
  absl::Status Error(const std::string& request, absl::string_view why) const {
    return absl::UnavailableError(absl::StrCat("PMI_FD=", fd_, " (mpiexec): '", request, "' failed: ", why));
  }
  int fd_;
  absl::Time deadline_;
  int timeout_s_;
};

// Rank 0 publishes `address` ("host:port") under a service name unique to the job (hydra's name service answers
// at once, unlike the key-value space, whose puts are seen only after a barrier of every rank: a rank that never
// starts would then hide which ranks are missing); every other rank looks it up until the deadline. Returns the
// address rank 0 published.
absl::StatusOr<std::string> PmiExchange(const Environment& env, const std::string& address) {
  const absl::Time deadline = absl::Now() + absl::Seconds(env.connect_timeout_s);
  PmiClient pmi(*env.pmi_fd, deadline, env.connect_timeout_s);
  auto init = pmi.Call("cmd=init pmi_version=1 pmi_subversion=1", "response_to_init");
  if (!init.ok()) return init.status();
  auto kvs = pmi.Call("cmd=get_my_kvsname", "my_kvsname");
  if (!kvs.ok()) return kvs.status();
  const std::string service = absl::StrCat("hccltune-", (*kvs)["kvsname"]);
  std::string found = address;
  if (!address.empty()) {
    auto put = pmi.Call(absl::StrCat("cmd=publish_name service=", service, " port=", address), "publish_result");
    if (!put.ok()) return put.status();
  }
  for (absl::Duration pause = absl::Milliseconds(1); found.empty();
       pause = std::min(pause * 2, absl::Milliseconds(50))) {
    auto got = pmi.Call(absl::StrCat("cmd=lookup_name service=", service), "lookup_result", /*any_rc=*/true);
    if (!got.ok()) return got.status();
    if ((*got)["rc"] == "0") {
      found = (*got)["port"];
    } else if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("rank ", env.rank.value_or(0),
                                                      ": rank 0 never published its address through mpiexec's PMI "
                                                      "within ",
                                                      env.connect_timeout_s,
                                                      " s (HCCL_CONNECT_TIMEOUT): rank 0 never started, or failed "
                                                      "before its init"));
    } else {
      absl::SleepFor(pause);
    }
  }
  auto fin = pmi.Call("cmd=finalize", "finalize_ack");
  if (!fin.ok()) return fin.status();
  ::close(*env.pmi_fd);
  return found;
}

std::string ThisHostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

// MPICH: rank 0 serves on a free port; PMI carries "host:port". A second call in the process (PMI is finalized
// by then) reuses the address of the first; rank 0 serves it again.
absl::StatusOr<std::shared_ptr<ServedStore>> PmiRendezvous(const Environment& env) {
  static absl::Mutex mu;
  static std::string& known = *new std::string;  // "host:port" once PMI gave it; never destroyed
  absl::MutexLock lock(&mu);
  std::unique_ptr<TcpStoreServer> served;
  int port = 0;
  if (!known.empty()) absl::SimpleAtoi(known.substr(known.rfind(':') + 1), &port);
  auto auth = LoadJobAuth(env);
  if (!auth.ok()) return auth.status();
  if (env.rank.value_or(0) == 0) {
    // All interfaces: no master address is given here. Rank 0 publishes its host name, which each node resolves
    // itself, so no one of this host's addresses is known to be the one the other ranks reach.
    auto server = TcpStoreServer::Start("0.0.0.0", port, {}, *auth);
    if (!server.ok()) return server.status();
    port = (*server)->port();
    served = *std::move(server);
  }
  if (known.empty()) {
    auto address = PmiExchange(env, served ? absl::StrCat(ThisHostName(), ":", port) : "");
    if (!address.ok()) return address.status();
    known = *address;
  }
  Log(LogLevel::kInfo, "rank ", env.rank.value_or(0), ": mpich rendezvous at ", known,
      " (rank 0's address through PMI_FD)");
  const size_t colon = known.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(known.substr(colon + 1), &port)) {
    return absl::DataLossError(absl::StrCat("mpiexec's PMI gave rank 0's address as '", known, "'"));
  }
  auto client = ConnectTcpStore(known.substr(0, colon), port, absl::Seconds(env.connect_timeout_s), *auth);
  if (!client.ok()) return client.status();
  return std::make_shared<ServedStore>(std::move(served), *client);
}

// Slurm and Open MPI: the derived host and port; MPICH: PMI-1.
absl::StatusOr<std::shared_ptr<ServedStore>> ConnectDerivedRendezvous(const Environment& env) {
  if (env.launcher == "mpich") return PmiRendezvous(env);
  const std::string& host = env.launcher_rdzv_host;
  const int port = env.launcher_rdzv_port.value_or(0);
  const bool serve = ServesRendezvous(env);
  auto auth = LoadJobAuth(env);
  if (!auth.ok()) return auth.status();
  Log(LogLevel::kInfo, "rank ", env.rank.value_or(0), ": ", env.launcher, " rendezvous at ", host, ":", port, " (",
      env.launcher_rdzv_origin, ")", serve ? ", served by this rank" : "");
  std::unique_ptr<TcpStoreServer> server;
  if (serve) {
    // Listen only on the rendezvous address when it is one of this host's addresses; a host name (Slurm's node
    // name) may resolve differently here and on the other nodes, so it keeps the wildcard.
    auto s = TcpStoreServer::Start(StoreListenAddress(host), port, {}, *auth);
    if (!s.ok()) {
      return absl::UnavailableError(absl::StrCat("cannot serve the ", env.launcher, " rendezvous on port ", port, " (",
                                                 env.launcher_rdzv_origin, "): ", s.status().message(),
                                                 "; choose other ports with HCCL_TUNE_PORT_RANGE, or set ",
                                                 "MASTER_ADDR and MASTER_PORT"));
    }
    server = *std::move(s);
  }
  auto client = ConnectTcpStore(host, port, absl::Seconds(env.connect_timeout_s), *auth);
  if (!client.ok()) {
    return absl::Status(client.status().code(),
                        absl::StrCat("rank ", env.rank.value_or(0), ": no rank served the ", env.launcher,
                                     " rendezvous at ", host, ":", port, " (", env.launcher_rdzv_origin, ") within ",
                                     env.connect_timeout_s, " s (HCCL_CONNECT_TIMEOUT): ", client.status().message(),
                                     env.launcher == "openmpi" ? "; when mpirun's host runs no rank, set MASTER_ADDR "
                                                                 "and MASTER_PORT"
                                                               : ""));
  }
  return std::make_shared<ServedStore>(std::move(server), *client);
}

}  // namespace

bool HasLauncherRendezvous(const Environment& env) {
  if (env.launcher == "mpich") return env.pmi_fd.has_value();
  if (env.launcher_pmix && PmixBuilt()) return true;
  return !env.launcher_rdzv_host.empty() && env.launcher_rdzv_port.has_value();
}

absl::StatusOr<LaunchedRendezvous> ConnectLauncherRendezvous(const Environment& env) {
  if (env.launcher_pmix && PmixBuilt()) return PmixRendezvous(env);
  if (env.launcher_pmix) {
    Log(LogLevel::kInfo, "rank ", env.rank.value_or(0),
        ": the launcher runs a PMIx server (PMIX_NAMESPACE=", env.pmix_namespace,
        "), but this build has no PMIx client: the ", env.launcher, " rendezvous is derived");
  }
  auto store = ConnectDerivedRendezvous(env);
  if (!store.ok()) return store.status();
  return LaunchedRendezvous{*std::move(store), env};
}

}  // namespace hccltune
