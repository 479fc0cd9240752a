// The one place environment variables are read (docs/CONVENTIONS.md, Environment variables). Every
// variable is parsed and validated here; a bad value is an error naming the variable, the value and what is
// accepted. Other modules receive an `Environment` value and never call getenv.
//
// Thread-safety: Environment is a plain value. Load*() read the process environment and must not race with
// setenv() in the same process (POSIX).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/common/rdma_env.h"
#include "runtime/common/sizes.h"
#include "runtime/common/types.h"

namespace hccltune {

// The largest world size accepted anywhere (the launchers' variables, Communicator::Create, the C ABI).
inline constexpr int kMaxRanks = 1 << 20;

// The range of HCCL_EXEC_TIMEOUT (s), also what a timeout from elsewhere (torch's process-group timeout) is
// clamped to.
inline constexpr int kMinExecTimeoutS = 1;
inline constexpr int kMaxExecTimeoutS = 24 * 3600;

// HCCL_TUNE_TEST_DELAY (a test hook, docs/ENVIRONMENT.md): every call of `collective` that runs a matching
// configuration takes `delay_us` longer (slept after the algorithm, inside the measured call time).
struct TestDelay {
  Collective collective = Collective::kAllreduce;
  std::string match;  // an algorithm name, or a canonical configuration string
  double delay_us = 0;
};
// Parses "allreduce:ring=200us,one_shot=1ms/allgather:ring(chunk=64K)=50us" (units us, ms, s).
absl::StatusOr<std::vector<TestDelay>> ParseTestDelay(absl::string_view text);

enum class TuneMode : uint8_t { kOff, kStatic, kOnline };
absl::string_view TuneModeName(TuneMode m);

enum class LogLevel : uint8_t { kError, kWarn, kInfo, kDebug, kTrace };
absl::string_view LogLevelName(LogLevel l);

struct Environment {
  // --- seed-compatible (HCCL) ---
  std::string hccl_algo;                   // HCCL_ALGO, raw; parsed by policies/
  uint64_t buffsize_bytes = 200ull << 20;  // HCCL_BUFFSIZE (MB), default 200 MB as HCCL
  int connect_timeout_s = 120;             // HCCL_CONNECT_TIMEOUT, default 120 s as HCCL
  int exec_timeout_s = 1836;               // HCCL_EXEC_TIMEOUT, default 1836 s as HCCL
  std::string socket_ifname;               // HCCL_SOCKET_IFNAME
  std::string rank_table_file;             // RANK_TABLE_FILE
  std::optional<int> rank_id;              // RANK_ID (with a rank table)
  // Set by ApplyRankTable (not read from the environment): this rank's device_ip and its server's host_nic_ip
  // ("" when the table has none), for the flight recorder's dump.
  std::string rank_table_device_ip, rank_table_host_nic_ip;

  // --- ours ---
  std::string tune_algo;                 // HCCL_TUNE_ALGO, raw; parsed by policies/
  std::string daemon;                    // HCCL_TUNE_DAEMON ("off" disables), empty = discovery
  TuneMode mode = TuneMode::kOnline;     // HCCL_TUNE_MODE
  double sample_rate = 0.01;             // HCCL_TUNE_SAMPLE_RATE, fraction of calls in [0, 1]
  LogLevel log_level = LogLevel::kWarn;  // HCCL_TUNE_LOG_LEVEL
  std::string node_id;                   // HCCL_TUNE_NODE_ID
  std::optional<int> device;             // HCCL_TUNE_DEVICE
  std::string master_addr;               // HCCL_TUNE_MASTER_ADDR
  std::optional<int> master_port;        // HCCL_TUNE_MASTER_PORT
  std::string store;                     // HCCL_TUNE_STORE (file:///dir or tcp://host:port)
  std::optional<int64_t> table_version;  // HCCL_TUNE_TABLE_VERSION
  bool torch_alias = true;               // HCCL_TUNE_TORCH_ALIAS
  int sync_interval = 256;               // HCCL_TUNE_SYNC_INTERVAL: operations between table checkpoints
  int fetch_timeout_ms = 2000;           // HCCL_TUNE_FETCH_TIMEOUT_MS: init's wait for a daemon whose socket exists
  std::vector<TestDelay> test_delays;    // HCCL_TUNE_TEST_DELAY (test hook)
  bool single_copy = true;               // HCCL_TUNE_SINGLE_COPY: auto (default) | off | a size — shm single copy
  // (CMA); with a size, the smallest message single-copied (else 0: measured at init, transport/shm/cma_cost.h).
  uint64_t single_copy_min_bytes = 0;
  // HCCL_TUNE_NT_STORES: auto | off | a size — calls of at least this many bytes write their output buffer with
  // non-temporal stores (kUnbounded = off). auto = kDefaultNtStoresBytes, and nt_stores_auto: the communicator
  // lowers the threshold of allreduce and reducescatter to what the last-level cache holds (AutoNtStoresBytes).
  uint64_t nt_stores_bytes = kDefaultNtStoresBytes;
  bool nt_stores_auto = true;
  static constexpr uint64_t kDefaultNtStoresBytes = 32ull << 20;
  // HCCL_TUNE_HUGE_PAGES: auto | off | a size — symmetric allocations (AllocSymmetric) of at least this many bytes
  // take 2 MiB pages from the hugetlb pool when it has them (kUnbounded = off). auto = kDefaultHugePagesBytes.
  uint64_t huge_pages_bytes = kDefaultHugePagesBytes;
  static constexpr uint64_t kDefaultHugePagesBytes = 2ull << 20;
  // HCCL_TUNE_THP: auto | off | a size — ordinary (not symmetric) buffers of at least this many bytes have their
  // whole 2 MiB pages collapsed into transparent huge pages at their second use (HugePageAdvisor; kUnbounded =
  // off). auto = kDefaultThpBytes.
  uint64_t thp_bytes = kDefaultThpBytes;
  static constexpr uint64_t kDefaultThpBytes = 4ull << 20;
  // HCCL_TUNE_KILL_GRACE: once a rank of a local job that hccl-tune started itself (bench, sweep, links, verify)
  // has failed, the seconds the others get to end on their own before SIGTERM, and again before SIGKILL.
  int kill_grace_s = kDefaultKillGraceS;
  static constexpr int kDefaultKillGraceS = 10;
  static constexpr int kMaxKillGraceS = 3600;
  // The flight recorder (docs/TROUBLESHOOTING.md). HCCL_TUNE_FR_ENTRIES: calls kept per communicator (0 = off).
  // HCCL_TUNE_FR_DUMP_DIR: where dumps go ("off": none; empty: $XDG_RUNTIME_DIR/hccl-tune/fr, else
  // /tmp/hccl-tune-$UID/fr). HCCL_TUNE_FR_SIGNAL: a signal that dumps every communicator of the process (0 = none;
  // SIGUSR1 or SIGUSR2).
  uint32_t fr_entries = kDefaultFrEntries;
  static constexpr uint32_t kDefaultFrEntries = 2048;
  static constexpr uint32_t kMaxFrEntries = 1u << 20;
  std::string fr_dump_dir;
  int fr_signal = 0;
  // Job membership (runtime/common/job_auth.h, docs/SECURITY.md): HCCL_TUNE_JOB_SECRET (the secret itself) or
  // HCCL_TUNE_JOB_SECRET_FILE (a mode-0600 file holding it), not both; HCCL_WHITELIST_DISABLE (0: on; default 1:
  // off, as HCCL) and HCCL_WHITELIST_FILE (required when it is on).
  std::string job_secret;
  std::string job_secret_file;
  bool whitelist_enabled = false;
  std::string whitelist_file;
  // HCCL_TUNE_IB_HCA, HCCL_TUNE_IB_GID_INDEX, HCCL_RDMA_TC, HCCL_RDMA_SL: the RDMA ports links may use and their
  // GID index, traffic class and service level (rdma_env.h).
  RdmaEnv rdma;

  // --- launchers (torchrun, Open MPI, MPICH, Slurm; runtime/common/launcher_env.h) ---
  // After precedence torchrun > Open MPI > MPICH > Slurm > PMIx alone.
  std::optional<int> rank, world_size, local_rank, local_world_size;
  std::string launcher;  // "torchrun", "openmpi", "mpich", "slurm", "pmix" or ""
  // The launcher's job id as KIND:ID (docs/CONVENTIONS.md, Job id; LauncherJobId in launcher_env.h), "" = none.
  std::string launcher_job_id;
  // The rendezvous the launcher implies when neither HCCL_TUNE_MASTER_ADDR nor MASTER_ADDR is set
  // (docs/LAUNCHING.md). Slurm: the first node of the step, on the first port of SLURM_STEP_RESV_PORTS or one
  // derived from the job and step ids; Open MPI: mpirun's host, on a port derived from its job id; MPICH: none
  // (the PMI server at pmi_fd carries it).
  std::string launcher_rdzv_host;
  std::optional<int> launcher_rdzv_port;
  std::string launcher_rdzv_origin;  // the variables it came from, for messages
  std::string slurmd_nodename;       // SLURMD_NODENAME: the node this Slurm task runs on
  std::optional<int> pmi_fd;         // PMI_FD: the PMI-1 connection of MPICH's mpiexec (hydra)
  // PMIx: PMIX_NAMESPACE and PMIX_RANK, which a launcher running a PMIx server for this process exports (srun
  // --mpi=pmix, Open MPI's mpirun). HCCL_TUNE_PMIX: "auto" (default) or "off". launcher_pmix: the rendezvous goes
  // through that server (PMIx present, not off, and the launcher is Open MPI, Slurm or PMIx alone), in place of
  // the derived host and port (runtime/bootstrap/pmix_rendezvous.h).
  std::string pmix_namespace;
  std::optional<int> pmix_rank;
  bool pmix_off = false;
  bool launcher_pmix = false;
  // HCCL_TUNE_PORT_RANGE: where a derived rendezvous port lies, and (only when set) the TCP data listeners' ports.
  int port_range_lo = kDefaultPortRangeLo, port_range_hi = kDefaultPortRangeHi;
  bool port_range_set = false;  // HCCL_TUNE_PORT_RANGE was given
  static constexpr int kDefaultPortRangeLo = 20000;
  static constexpr int kDefaultPortRangeHi = 29999;
  std::string launcher_master_addr;         // MASTER_ADDR
  std::optional<int> launcher_master_port;  // MASTER_PORT
  std::string xdg_runtime_dir;              // XDG_RUNTIME_DIR
  std::string xdg_state_home;               // XDG_STATE_HOME (hccl-tuned, user mode)
  std::string home;                         // HOME (hccl-tuned, user mode)
  std::string path;                         // PATH (where `sweep --runtime` finds another runtime's launcher)

  using Source = std::function<std::optional<std::string>(const std::string&)>;

  // Reads the process environment.
  static absl::StatusOr<Environment> Load();
  // Reads from `source` (tests pass a map).
  static absl::StatusOr<Environment> LoadFrom(const Source& source);
  static absl::StatusOr<Environment> LoadFrom(const std::map<std::string, std::string>& vars);

  // HCCL_TUNE_TORCH_ALIAS alone, parsed as Load() parses it (a bad value is the same error). The torch backend
  // decides on the `hccl` name with it at import time: a bad value in another variable must not drop the name,
  // creating the group reports that one.
  static absl::StatusOr<bool> LoadTorchAlias();
  // HCCL_TUNE_DAEMON_TLS_CA, _CERT and _KEY alone (all three or none; PEM file paths): the TLS settings of a
  // channel to a TCP daemon target (rpc/channel.h). Read alone so a bad value elsewhere does not stop a client.
  struct DaemonTls {
    std::string ca, cert, key;
    bool enabled() const { return !ca.empty(); }
  };
  static absl::StatusOr<DaemonTls> LoadDaemonTls();
  static absl::StatusOr<DaemonTls> LoadDaemonTlsFrom(const Source& source);
  static absl::StatusOr<bool> LoadTorchAliasFrom(const Source& source);
};

// Reads the integer variable `var` from `src` into `out` when it is set; a value outside [lo, hi] or not an
// integer is an error naming the variable, the value and the range.
absl::Status ReadIntVariable(const Environment::Source& src, const std::string& var, int64_t lo, int64_t hi,
                             std::optional<int64_t>& out);

// ReadIntVariable into an optional of another integer type (the range fits it).
template <typename T>
absl::Status ReadOptInt(const Environment::Source& src, const std::string& var, int64_t lo, int64_t hi,
                        std::optional<T>& out) {
  std::optional<int64_t> v;
  if (absl::Status s = ReadIntVariable(src, var, lo, hi, v); !s.ok()) return s;
  if (v) out = static_cast<T>(*v);
  return absl::OkStatus();
}

}  // namespace hccltune
