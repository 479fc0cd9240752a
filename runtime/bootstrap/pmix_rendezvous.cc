#include "runtime/bootstrap/pmix_rendezvous.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "runtime/common/job_auth.h"
#include "runtime/common/logging.h"
#include "runtime/common/status_macros.h"

#if HCCL_TUNE_HAVE_PMIX
#include <pmix.h>
#endif

namespace hccltune {

bool PmixBuilt() { return HCCL_TUNE_HAVE_PMIX; }

#if HCCL_TUNE_HAVE_PMIX
namespace {

absl::Status PmixError(absl::string_view call, const std::string& nspace, pmix_status_t rc) {
  return absl::UnavailableError(absl::StrCat(call, " failed (PMIx namespace ", nspace, "): ", PMIx_Error_string(rc)));
}

// An integer-valued PMIx value (the job-level facts come as uint32 or uint16).
std::optional<int64_t> Number(const pmix_value_t& v) {
  switch (v.type) {
    case PMIX_UINT8: return v.data.uint8;
    case PMIX_UINT16: return v.data.uint16;
    case PMIX_UINT32: return v.data.uint32;
    case PMIX_UINT64: return static_cast<int64_t>(v.data.uint64);
    case PMIX_INT: return v.data.integer;
    case PMIX_INT32: return v.data.int32;
    case PMIX_UINT: return v.data.uint;
    case PMIX_SIZE: return static_cast<int64_t>(v.data.size);
    case PMIX_PROC_RANK: return v.data.rank;
    default: return std::nullopt;
  }
}

// PMIx_Get of a numeric job fact `key` for `proc` (this process, or the job's wildcard rank).
absl::StatusOr<int> GetNumber(const pmix_proc_t& proc, const char* key) {
  pmix_value_t* v = nullptr;
  const pmix_status_t rc = PMIx_Get(&proc, key, nullptr, 0, &v);
  if (rc != PMIX_SUCCESS) return PmixError(absl::StrCat("PMIx_Get(", key, ")"), proc.nspace, rc);
  std::optional<int64_t> n = Number(*v);
  PMIX_VALUE_RELEASE(v);
  if (!n || *n < 0 || *n > kMaxRanks) {
    return absl::DataLossError(
        absl::StrCat("PMIx_Get(", key, ") (PMIx namespace ", proc.nspace, ") gave no integer from 0 to ", kMaxRanks));
  }
  return static_cast<int>(*n);
}

}  // namespace

absl::StatusOr<std::unique_ptr<PmixSession>> PmixSession::Open() {
  pmix_proc_t me;
  const pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
  if (rc != PMIX_SUCCESS) {
    return absl::UnavailableError(absl::StrCat(
        "PMIx_Init failed: ", PMIx_Error_string(rc),
        " (PMIX_NAMESPACE and PMIX_RANK are set, but no PMIx server accepted this process; HCCL_TUNE_PMIX=off "
        "uses the rendezvous derived from the launcher's variables)"));
  }
  std::unique_ptr<PmixSession> s(new PmixSession());  // finalizes from here on
  s->facts_.nspace = me.nspace;
  s->facts_.rank = static_cast<int>(me.rank);
  pmix_proc_t job;
  PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
  auto size = GetNumber(job, PMIX_JOB_SIZE);
  auto local_rank = GetNumber(me, PMIX_LOCAL_RANK);
  auto local_size = GetNumber(job, PMIX_LOCAL_SIZE);
  for (const auto* n : {&size, &local_rank, &local_size}) {
    if (!n->ok()) return n->status();
  }
  s->facts_.size = *size;
  s->facts_.local_rank = *local_rank;
  s->facts_.local_size = *local_size;
  return s;
}

PmixSession::~PmixSession() { PMIx_Finalize(nullptr, 0); }

absl::Status PmixSession::Publish(const std::string& key, const std::string& value) {
  pmix_value_t v;
  pmix_status_t rc = PMIx_Value_load(&v, value.c_str(), PMIX_STRING);
  if (rc == PMIX_SUCCESS) rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &v);
  PMIx_Value_destruct(&v);
  if (rc != PMIX_SUCCESS) return PmixError(absl::StrCat("PMIx_Put(", key, ")"), facts_.nspace, rc);
  rc = PMIx_Commit();
  if (rc != PMIX_SUCCESS) return PmixError("PMIx_Commit", facts_.nspace, rc);
  return absl::OkStatus();
}

// PMIx_Get of a remote key. The server holds a request until the owner commits, but one that reaches it while the
// owner is still starting may come back NOT-FOUND at once: such a get is repeated (refreshing the client's cache)
// every few milliseconds until the deadline.
absl::StatusOr<std::string> PmixSession::Lookup(int rank, const std::string& key, absl::Duration timeout) {
  pmix_proc_t from;
  PMIX_LOAD_PROCID(&from, facts_.nspace.c_str(), static_cast<pmix_rank_t>(rank));
  const absl::Time deadline = absl::Now() + timeout;
  pmix_status_t rc = PMIX_ERR_TIMEOUT;
  pmix_value_t* v = nullptr;
  for (absl::Duration pause = absl::Milliseconds(1); absl::Now() < deadline;
       pause = std::min(pause * 2, absl::Milliseconds(50))) {
    int seconds = static_cast<int>(std::max<int64_t>(1, absl::ToInt64Seconds(deadline - absl::Now())));
    bool refresh = true;
    pmix_info_t info[2];
    PMIx_Info_load(&info[0], PMIX_TIMEOUT, &seconds, PMIX_INT);
    PMIx_Info_load(&info[1], PMIX_GET_REFRESH_CACHE, &refresh, PMIX_BOOL);
    rc = PMIx_Get(&from, key.c_str(), info, 2, &v);
    for (pmix_info_t& i : info) PMIx_Value_destruct(&i.value);
    if (rc != PMIX_ERR_NOT_FOUND) break;
    absl::SleepFor(std::min(pause, deadline - absl::Now()));
  }
  if (rc == PMIX_ERR_TIMEOUT || rc == PMIX_ERR_NOT_FOUND) {
    return absl::DeadlineExceededError(absl::StrCat("PMIx_Get(", key, ") from rank ", rank, " found nothing within ",
                                                    absl::FormatDuration(timeout), ": ", PMIx_Error_string(rc)));
  }
  if (rc != PMIX_SUCCESS) {
    return PmixError(absl::StrCat("PMIx_Get(", key, ") from rank ", rank), facts_.nspace, rc);
  }
  std::string out = v->type == PMIX_STRING && v->data.string != nullptr ? v->data.string : "";
  PMIX_VALUE_RELEASE(v);
  if (out.empty()) {
    return absl::DataLossError(
        absl::StrCat("PMIx_Get(", key, ") from rank ", rank, " (PMIx namespace ", facts_.nspace, ") gave no string"));
  }
  return out;
}

#else  // !HCCL_TUNE_HAVE_PMIX

absl::StatusOr<std::unique_ptr<PmixSession>> PmixSession::Open() {
  return absl::UnimplementedError("this build has no PMIx client (libpmix-dev was not found when it was built)");
}
PmixSession::~PmixSession() = default;
absl::Status PmixSession::Publish(const std::string&, const std::string&) {
  return absl::UnimplementedError("this build has no PMIx client");
}
absl::StatusOr<std::string> PmixSession::Lookup(int, const std::string&, absl::Duration) {
  return absl::UnimplementedError("this build has no PMIx client");
}

#endif  // HCCL_TUNE_HAVE_PMIX

std::string PmixAddressValue(const std::vector<InterfaceAddress>& interfaces, int port) {
  std::vector<std::string> addresses;
  for (const InterfaceAddress& i : interfaces) {
    if (!absl::StartsWith(i.address, "127.")) addresses.push_back(i.address);
  }
  if (addresses.empty()) addresses.push_back("127.0.0.1");
  return absl::StrCat(absl::StrJoin(addresses, ","), ":", port);
}

absl::StatusOr<PmixAddress> ChoosePmixAddress(const std::string& value,
                                              const std::vector<InterfaceAddress>& interfaces) {
  const size_t colon = value.rfind(':');
  PmixAddress out;
  std::vector<std::string> hosts;
  if (colon != std::string::npos) {
    hosts = absl::StrSplit(value.substr(0, colon), ',', absl::SkipEmpty());
  }
  if (hosts.empty() || !absl::SimpleAtoi(value.substr(colon + 1), &out.port) || out.port < 1 || out.port > 65535) {
    return absl::DataLossError(absl::StrCat("rank 0's address through PMIx (", kPmixAddressKey, ") is '", value,
                                            "': expected ADDRESS[,ADDRESS...]:PORT"));
  }
  out.host = hosts.front();
  for (const std::string& h : hosts) {
    for (const InterfaceAddress& i : interfaces) {
      if (!absl::StartsWith(i.address, "127.") && InSubnet(h, i.Subnet())) {
        out.host = h;
        return out;
      }
    }
  }
  return out;
}

namespace {

// Fills `field` from PMIx, or checks the launcher's value against it.
absl::Status Agree(const Environment& env, const char* what, std::optional<int>& field, int pmix_value,
                   const PmixFacts& facts) {
  if (field && *field != pmix_value) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the PMIx server (namespace ", facts.nspace, ") gives ", what, " ", pmix_value, ", but the ", env.launcher,
        " variables give ", *field, " (docs/LAUNCHING.md); set HCCL_TUNE_PMIX=off to ignore PMIx"));
  }
  field = pmix_value;
  return absl::OkStatus();
}

// What one exchange found: the process's facts, rank 0's published value, and (on rank 0) its server.
struct PmixKnown {
  PmixFacts facts;
  std::string value;
  std::shared_ptr<TcpStoreServer> server;
};

// Steps 1-4 of the header: `serve` starts rank 0's store and returns its port (rank 0 only).
absl::StatusOr<PmixKnown> PmixExchange(const Environment& env, const std::function<absl::StatusOr<int>()>& serve) {
  auto session = PmixSession::Open();
  if (!session.ok()) return session.status();
  PmixKnown known{(*session)->facts(), "", nullptr};
  if (known.facts.rank == 0) {
    auto port = serve();
    if (!port.ok()) return port.status();
    known.value = PmixAddressValue(ListInterfaces(), *port);
    HT_RETURN_IF_ERROR((*session)->Publish(kPmixAddressKey, known.value));
    return known;
  }
  auto value = (*session)->Lookup(0, kPmixAddressKey, absl::Seconds(env.connect_timeout_s));
  if (absl::IsDeadlineExceeded(value.status())) {
    return absl::DeadlineExceededError(
        absl::StrCat("rank ", known.facts.rank, ": rank 0 never published its address through PMIx (namespace ",
                     known.facts.nspace, ") within ", env.connect_timeout_s,
                     " s (HCCL_CONNECT_TIMEOUT): rank 0 never started, or failed before its "
                     "init"));
  }
  if (!value.ok()) return value.status();
  known.value = *value;
  return known;
}

}  // namespace

absl::StatusOr<Environment> ApplyPmixFacts(const Environment& env, const PmixFacts& facts) {
  Environment out = env;
  HT_RETURN_IF_ERROR(Agree(env, "rank", out.rank, facts.rank, facts));
  HT_RETURN_IF_ERROR(Agree(env, "world size", out.world_size, facts.size, facts));
  HT_RETURN_IF_ERROR(Agree(env, "local rank", out.local_rank, facts.local_rank, facts));
  HT_RETURN_IF_ERROR(Agree(env, "local size", out.local_world_size, facts.local_size, facts));
  if (*out.rank >= *out.world_size || *out.local_rank >= *out.local_world_size) {
    return absl::DataLossError(absl::StrCat("the PMIx server (namespace ", facts.nspace, ") gives rank ", facts.rank,
                                            " of ", facts.size, ", local rank ", facts.local_rank, " of ",
                                            facts.local_size));
  }
  out.launcher_rdzv_origin = absl::StrCat("rank 0's address through PMIx, namespace ", facts.nspace);
  return out;
}

// Rank 0's server is kept for the life of the process (never destroyed, as the address is): every later
// communicator from the environment uses it too, under a new tag. Serving the port again after the first
// communicator is gone would race: a rank could reach the old server while it shuts down.
absl::StatusOr<LaunchedRendezvous> PmixRendezvous(const Environment& env) {
  static absl::Mutex mu;
  static std::optional<PmixKnown>& known = *new std::optional<PmixKnown>;  // once PMIx gave it; never destroyed
  absl::MutexLock lock(&mu);
  auto auth = LoadJobAuth(env);
  if (!auth.ok()) return auth.status();
  if (!known) {
    std::shared_ptr<TcpStoreServer> served;
    // All interfaces: rank 0 publishes every address it has, and each rank picks the one on its own subnet.
    auto got = PmixExchange(env, [&]() -> absl::StatusOr<int> {
      auto server = TcpStoreServer::Start("0.0.0.0", 0, {}, *auth);
      if (!server.ok()) return server.status();
      served = *std::move(server);
      return served->port();
    });
    if (!got.ok()) return got.status();
    known = *std::move(got);
    known->server = std::move(served);
  }
  auto resolved = ApplyPmixFacts(env, known->facts);
  if (!resolved.ok()) return resolved.status();
  auto where = ChoosePmixAddress(known->value, ListInterfaces());
  if (!where.ok()) return where.status();
  Log(LogLevel::kInfo, "rank ", known->facts.rank, ": ", env.launcher, " rendezvous at ", where->host, ":", where->port,
      " (", resolved->launcher_rdzv_origin, ")", known->server ? ", served by this rank" : "");
  auto client = ConnectTcpStore(where->host, where->port, absl::Seconds(env.connect_timeout_s), *auth);
  if (!client.ok()) {
    return absl::Status(client.status().code(),
                        absl::StrCat("rank ", known->facts.rank, ": rank 0's store at ", where->host, ":", where->port,
                                     " (published through PMIx as '", known->value, "') did not answer within ",
                                     env.connect_timeout_s, " s (HCCL_CONNECT_TIMEOUT): ", client.status().message()));
  }
  return LaunchedRendezvous{std::make_shared<ServedStore>(known->server, *client), *std::move(resolved)};
}

}  // namespace hccltune
