#include "runtime/common/launcher_env.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/common/status_macros.h"

namespace hccltune {
namespace {

absl::Status Bad(absl::string_view var, absl::string_view value, absl::string_view accepted) {
  return absl::InvalidArgumentError(absl::StrCat(var, "='", value, "' is invalid: expected ", accepted));
}

// The first of `names` that is set, with its name; nullopt when none is.
std::optional<std::pair<std::string, std::string>> FirstSet(const Environment::Source& src,
                                                            std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (auto v = src(n)) return std::make_pair(std::string(n), std::string(absl::StripAsciiWhitespace(*v)));
  }
  return std::nullopt;
}

absl::Status ReadRanks(const Environment::Source& src, Environment& e, const char* rank, const char* size,
                       const char* local_rank, const char* local_size) {
  HT_RETURN_IF_ERROR(ReadOptInt(src, rank, 0, kMaxRanks - 1, e.rank));
  HT_RETURN_IF_ERROR(ReadOptInt(src, size, 1, kMaxRanks, e.world_size));
  HT_RETURN_IF_ERROR(ReadOptInt(src, local_rank, 0, kMaxRanks - 1, e.local_rank));
  if (local_size != nullptr) HT_RETURN_IF_ERROR(ReadOptInt(src, local_size, 1, kMaxRanks, e.local_world_size));
  return absl::OkStatus();
}

// Slurm's local size: the entry of the step's tasks per node for this task's node (SLURM_NODEID), which covers
// uneven steps; SLURM_NTASKS_PER_NODE (set only with --ntasks-per-node) when the step's list is absent.
absl::Status ReadSlurmLocalSize(const Environment::Source& src, Environment& e) {
  auto per_node = FirstSet(src, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"});
  if (!per_node) return ReadOptInt(src, "SLURM_NTASKS_PER_NODE", 1, kMaxRanks, e.local_world_size);
  auto counts = ParseSlurmTasksPerNode(per_node->first, per_node->second);
  if (!counts.ok()) return counts.status();
  std::optional<int> node;
  HT_RETURN_IF_ERROR(ReadOptInt(src, "SLURM_NODEID", 0, kMaxRanks - 1, node));
  const size_t index = static_cast<size_t>(node.value_or(0));
  if (index >= counts->size()) {
    return absl::InvalidArgumentError(absl::StrCat("SLURM_NODEID=", index, " has no entry in ", per_node->first, "='",
                                                   per_node->second, "' (", counts->size(), " nodes)"));
  }
  e.local_world_size = (*counts)[index];
  return absl::OkStatus();
}

// Slurm's rendezvous: the first node of the step, and the first reserved port or one derived from the job.
absl::Status ReadSlurmRendezvous(const Environment::Source& src, Environment& e) {
  auto nodes = FirstSet(src, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  if (!nodes) return absl::OkStatus();
  auto host = FirstSlurmHost(nodes->first, nodes->second);
  if (!host.ok()) return host.status();
  e.launcher_rdzv_host = *host;
  e.slurmd_nodename = std::string(absl::StripAsciiWhitespace(src("SLURMD_NODENAME").value_or("")));
  if (auto resv = FirstSet(src, {"SLURM_STEP_RESV_PORTS"})) {
    auto port = FirstReservedPort(resv->first, resv->second);
    if (!port.ok()) return port.status();
    e.launcher_rdzv_port = *port;
    e.launcher_rdzv_origin =
        absl::StrCat("the first node of ", nodes->first, ", the first port of SLURM_STEP_RESV_PORTS");
    return absl::OkStatus();
  }
  auto job = FirstSet(src, {"SLURM_JOB_ID", "SLURM_JOBID"});
  auto step = FirstSet(src, {"SLURM_STEP_ID", "SLURM_STEPID"});
  if (!job) return absl::OkStatus();
  const std::string id = absl::StrCat(job->second, ".", step ? step->second : "");
  e.launcher_rdzv_port = DerivedPort(id, e.port_range_lo, e.port_range_hi);
  e.launcher_rdzv_origin = absl::StrCat("the first node of ", nodes->first, ", a port derived from job.step ", id,
                                        " in HCCL_TUNE_PORT_RANGE ", e.port_range_lo, "-", e.port_range_hi);
  return absl::OkStatus();
}

// Open MPI's rendezvous: mpirun's host (its URI) and a port derived from the job id.
absl::Status ReadOmpiRendezvous(const Environment::Source& src, Environment& e) {
  auto uri = FirstSet(src, {"OMPI_MCA_orte_hnp_uri"});
  auto job = FirstSet(src, {"OMPI_MCA_ess_base_jobid"});
  if (!uri || !job) return absl::OkStatus();
  auto host = OmpiHnpHost(uri->first, uri->second);
  if (!host.ok()) return host.status();
  e.launcher_rdzv_host = *host;
  e.launcher_rdzv_port = DerivedPort(job->second, e.port_range_lo, e.port_range_hi);
  e.launcher_rdzv_origin = absl::StrCat("mpirun's host in OMPI_MCA_orte_hnp_uri, a port derived from job ", job->second,
                                        " in HCCL_TUNE_PORT_RANGE ", e.port_range_lo, "-", e.port_range_hi);
  return absl::OkStatus();
}

// Which launcher started this process: torchrun (RANK, or WORLD_SIZE alone), Open MPI (OMPI_COMM_WORLD_RANK),
// MPICH's hydra (PMI_RANK with MPI_LOCALRANKID: Slurm's own PMI-2 sets PMI_RANK too, never MPI_LOCALRANKID),
// Slurm (SLURM_PROCID), a PMIx server alone (PMIX_RANK with PMIX_NAMESPACE: prterun, or any launcher whose own
// variables are gone).
std::string DetectLauncher(const Environment::Source& src) {
  if (src("RANK") || src("WORLD_SIZE")) return "torchrun";
  if (src("OMPI_COMM_WORLD_RANK")) return "openmpi";
  if (src("PMI_RANK") && src("MPI_LOCALRANKID")) return "mpich";
  if (src("SLURM_PROCID")) return "slurm";
  if (src("PMIX_RANK") && src("PMIX_NAMESPACE")) return "pmix";
  return "";
}

// PMIX_NAMESPACE, PMIX_RANK and HCCL_TUNE_PMIX; whether the rendezvous goes through the PMIx server: Open MPI's
// and Slurm's (srun --mpi=pmix) and a PMIx server alone, unless HCCL_TUNE_PMIX=off. Alone, the rank is PMIX_RANK;
// the world size and the local facts come from the server (runtime/bootstrap/pmix_rendezvous.h).
absl::Status ReadPmix(const Environment::Source& src, Environment& e) {
  if (auto v = src("HCCL_TUNE_PMIX")) {
    const std::string mode = absl::AsciiStrToLower(absl::StripAsciiWhitespace(*v));
    if (mode != "auto" && mode != "off") return Bad("HCCL_TUNE_PMIX", *v, "auto (the default) or off");
    e.pmix_off = mode == "off";
  }
  auto ns = FirstSet(src, {"PMIX_NAMESPACE"});
  if (ns) e.pmix_namespace = ns->second;
  HT_RETURN_IF_ERROR(ReadOptInt(src, "PMIX_RANK", 0, kMaxRanks - 1, e.pmix_rank));
  const bool present = !e.pmix_namespace.empty() && e.pmix_rank.has_value();
  e.launcher_pmix =
      present && !e.pmix_off && (e.launcher == "openmpi" || e.launcher == "slurm" || e.launcher == "pmix");
  if (e.launcher == "pmix") e.rank = e.pmix_rank;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int>> ParseSlurmTasksPerNode(absl::string_view var, absl::string_view text) {
  constexpr absl::string_view kForm = "counts such as 2(x3),1 (2 tasks on each of 3 nodes, then 1)";
  std::vector<int> out;
  for (absl::string_view item : absl::StrSplit(absl::StripAsciiWhitespace(text), ',')) {
    int count = 0, repeat = 1;
    absl::string_view n = item;
    if (const size_t paren = item.find('('); paren != absl::string_view::npos) {
      n = item.substr(0, paren);
      absl::string_view rep = item.substr(paren + 1);
      if (!absl::ConsumePrefix(&rep, "x") || !absl::ConsumeSuffix(&rep, ")") || !absl::SimpleAtoi(rep, &repeat) ||
          repeat < 1 || repeat > kMaxRanks) {
        return Bad(var, text, absl::StrCat(kForm, " ('", item, "': the repeat is not (xN) with N >= 1)"));
      }
    }
    if (!absl::SimpleAtoi(n, &count) || count < 1 || count > kMaxRanks) {
      return Bad(var, text, absl::StrCat(kForm, " ('", item, "': the count is not an integer >= 1)"));
    }
    if (out.size() + static_cast<size_t>(repeat) > static_cast<size_t>(kMaxRanks)) {
      return Bad(var, text, absl::StrCat(kForm, " (more than ", kMaxRanks, " nodes)"));
    }
    out.insert(out.end(), static_cast<size_t>(repeat), count);
  }
  return out;
}

absl::StatusOr<std::string> FirstSlurmHost(absl::string_view var, absl::string_view text) {
  constexpr absl::string_view kForm = "a Slurm host list such as node[01-04,07],gpu5";
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  std::string host;
  while (!rest.empty() && rest.front() != ',') {
    const size_t open = rest.find_first_of("[,");
    if (open == absl::string_view::npos || rest[open] == ',') {
      absl::StrAppend(&host, rest.substr(0, open));
      break;
    }
    const size_t close = rest.find(']', open);
    if (close == absl::string_view::npos) return Bad(var, text, absl::StrCat(kForm, " (a '[' is never closed)"));
    absl::StrAppend(&host, rest.substr(0, open));
    // The first item of the bracket: a number, or the start of a range "01-04".
    absl::string_view first = rest.substr(open + 1, close - open - 1);
    first = first.substr(0, first.find_first_of(",-"));
    if (first.empty() || !std::all_of(first.begin(), first.end(), absl::ascii_isdigit)) {
      return Bad(var, text,
                 absl::StrCat(kForm, " ('[", rest.substr(open + 1, close - open - 1),
                              "]' does not start "
                              "with a number)"));
    }
    absl::StrAppend(&host, first);
    rest = rest.substr(close + 1);
  }
  if (host.empty()) return Bad(var, text, absl::StrCat(kForm, " (no first host)"));
  return host;
}

absl::StatusOr<int> FirstReservedPort(absl::string_view var, absl::string_view text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  absl::string_view first = t.substr(0, t.find_first_of(",-"));
  int port = 0;
  if (!absl::SimpleAtoi(first, &port) || port < 1 || port > 65535) {
    return Bad(var, text, "ports such as 12000-12003 or 12000,12005 (each from 1 to 65535)");
  }
  return port;
}

absl::StatusOr<std::pair<int, int>> ParsePortRange(absl::string_view var, absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(absl::StripAsciiWhitespace(text), '-');
  int lo = 0, hi = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &lo) || !absl::SimpleAtoi(parts[1], &hi) || lo < 1 ||
      hi > 65535 || lo > hi) {
    return Bad(var, text, "LO-HI with 1 <= LO <= HI <= 65535, such as 20000-29999");
  }
  return std::make_pair(lo, hi);
}

absl::StatusOr<std::string> OmpiHnpHost(absl::string_view var, absl::string_view text) {
  for (absl::string_view item : absl::StrSplit(text, ';')) {
    if (!absl::ConsumePrefix(&item, "tcp://")) continue;
    // "tcp://10.0.0.1,192.0.2.2:36181": the addresses, then the port.
    const size_t colon = item.rfind(':');
    absl::string_view addrs = colon == absl::string_view::npos ? item : item.substr(0, colon);
    absl::string_view host = addrs.substr(0, addrs.find(','));
    if (!host.empty()) return std::string(host);
  }
  return Bad(var, text, "mpirun's URI with a tcp://HOST:PORT address");
}

int DerivedPort(absl::string_view job, int lo, int hi) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a, 64 bits
  for (char c : job) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return lo + static_cast<int>(h % static_cast<uint64_t>(hi - lo + 1));
}

std::string LauncherJobId(const Environment::Source& src) {
  if (auto job = src("SLURM_JOB_ID"); job && !job->empty()) {
    auto step = src("SLURM_STEP_ID");
    return absl::StrCat("slurm:", *job, step && !step->empty() ? absl::StrCat(".", *step) : "");
  }
  if (auto job = src("OMPI_MCA_ess_base_jobid"); job && !job->empty()) return absl::StrCat("openmpi:", *job);
  if (auto ns = src("PMIX_NAMESPACE"); ns && !ns->empty()) return absl::StrCat("pmix:", *ns);
  if (auto run = src("TORCHELASTIC_RUN_ID"); run && !run->empty()) {
    if (*run != "none") return absl::StrCat("torchrun:", *run);
    auto addr = src("MASTER_ADDR");
    auto port = src("MASTER_PORT");
    return absl::StrCat("torchrun:none@", addr.value_or(""), ":", port.value_or(""));
  }
  return "";
}

absl::Status ReadLauncherEnvironment(const Environment::Source& src, Environment& e) {
  e.launcher_job_id = LauncherJobId(src);
  if (auto v = src("HCCL_TUNE_PORT_RANGE")) {
    auto range = ParsePortRange("HCCL_TUNE_PORT_RANGE", *v);
    if (!range.ok()) return range.status();
    std::tie(e.port_range_lo, e.port_range_hi) = *range;
    e.port_range_set = true;
  }
  e.launcher = DetectLauncher(src);
  if (e.launcher == "torchrun") {
    HT_RETURN_IF_ERROR(ReadRanks(src, e, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"));
  } else if (e.launcher == "openmpi") {
    HT_RETURN_IF_ERROR(ReadRanks(src, e, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                                 "OMPI_COMM_WORLD_LOCAL_SIZE"));
    HT_RETURN_IF_ERROR(ReadOmpiRendezvous(src, e));
  } else if (e.launcher == "mpich") {
    HT_RETURN_IF_ERROR(ReadRanks(src, e, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"));
    HT_RETURN_IF_ERROR(ReadOptInt(src, "PMI_FD", 0, INT32_MAX, e.pmi_fd));
  } else if (e.launcher == "slurm") {
    // The step's task count: inside an allocation, SLURM_NTASKS may be the job's.
    const char* size = src("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS"
                       : src("SLURM_NTASKS")       ? "SLURM_NTASKS"
                                                   : "SLURM_NPROCS";
    HT_RETURN_IF_ERROR(ReadRanks(src, e, "SLURM_PROCID", size, "SLURM_LOCALID", nullptr));
    HT_RETURN_IF_ERROR(ReadSlurmLocalSize(src, e));
    HT_RETURN_IF_ERROR(ReadSlurmRendezvous(src, e));
  }
  HT_RETURN_IF_ERROR(ReadPmix(src, e));
  if (e.rank && e.world_size && *e.rank >= *e.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", *e.rank, " from ", e.launcher, " is not below the world size ", *e.world_size));
  }
  return absl::OkStatus();
}

}  // namespace hccltune
