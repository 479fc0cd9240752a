// hccl-tuned's settings: built-in defaults (system mode when run as root, user mode otherwise; paths per
// docs/CONVENTIONS.md, Daemon discovery), then the config file, then command-line flags.
//
// Config file: `key = value` lines, `#` comments, blank lines ignored; an unknown key or a bad value is an
// error naming the file and line. Keys: socket, listen, insecure_listen (on|off), tls_cert, tls_key,
// tls_client_ca, tls_tuner_names, tuner_group,
// db, log_level, max_versions, ingest_queue_samples,
// max_message_bytes, sweep_command, metrics_port (0 = no /metrics), metrics_address, and the online policy's
// (daemon/online_policy.h; docs/ENVIRONMENT.md lists defaults): online_policy (on|off), online_regression_ratio,
// online_min_samples, online_window, online_explore_every, online_explore_calls, online_explore_max_ratio,
// online_explore_min_samples, online_interval_ms, online_explore_timeout_s, online_cooldown_s,
// online_min_regression_us; and the mini-sweeps' (daemon/mini_sweep.h): mini_sweep (on|off), mini_sweep_idle_s,
// mini_sweep_max_per_hour. SIGHUP re-reads the file: log_level applies at once, the rest at the next start (the daemon
// logs a warning naming each such changed key).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/mini_sweep.h"
#include "daemon/online_policy.h"
#include "runtime/common/config.h"

namespace hccltune::daemon {

// A config file holds at most this many bytes, a value (a path, a command) at most kMaxConfigValueBytes.
inline constexpr size_t kMaxConfigFileBytes = 1u << 20;
inline constexpr size_t kMaxConfigValueBytes = 4096;

struct DaemonConfig {
  std::string socket;            // unix socket path; "" = no unix socket (then listen must be set)
  std::string listen;            // optional TCP "host:port"
  bool insecure_listen = false;  // plaintext `listen` on a non-loopback address (its callers are tuners)
  // TLS on `listen` with client certificates (all three files, PEM, or none): the server's certificate and key
  // and the CA that signs client certificates. A client certificate whose subject common name is in
  // tls_tuner_names (comma-separated) is a tuner, any other valid one a reader.
  std::string tls_cert, tls_key, tls_client_ca;
  std::vector<std::string> tls_tuner_names;
  std::string tuner_group;  // members may write (daemon/peer_auth.h); "" = only root and the daemon's user
  std::string db;
  LogLevel log_level = LogLevel::kInfo;
  int max_versions = 16;
  size_t ingest_queue_samples = 262144;
  int max_message_bytes = 4 << 20;
  std::string sweep_command;                  // hccl-tune binary for daemon-run sweeps; "" = the one beside hccl-tuned
  int metrics_port = 0;                       // Prometheus /metrics over HTTP (daemon/metrics_http.h); 0 = off
  std::string metrics_address = "127.0.0.1";  // where /metrics listens
  OnlinePolicyOptions online;
  MiniSweepOptions mini_sweep;  // runs only while the online policy is on
};

// Defaults for this process: root -> /run/hccl-tune/tuned.sock and /var/lib/hccl-tune/tuning.db; otherwise the
// user-mode socket and $XDG_STATE_HOME/hccl-tune/tuning.db (else ~/.local/state/hccl-tune/tuning.db).
DaemonConfig DefaultDaemonConfig(const Environment& env, bool system_mode);

// Applies the settings of `path` onto `config`. `keys_set` (optional) receives the keys the file set. NotFound
// only when the file does not exist; PermissionDenied when it may not be read, FailedPrecondition for other
// errors (a directory, an I/O error); each names the path and the reason. InvalidArgument for a file over
// kMaxConfigFileBytes or a value over kMaxConfigValueBytes, naming the limit.
absl::Status ApplyConfigFile(const std::string& path, DaemonConfig* config,
                             std::vector<std::string>* keys_set = nullptr);
// The config-file keys whose values differ between `a` and `b`, in the order the header lists them.
std::vector<std::string> ChangedConfigKeys(const DaemonConfig& a, const DaemonConfig& b);
absl::Status ApplyConfigText(absl::string_view text, absl::string_view origin, DaemonConfig* config,
                             std::vector<std::string>* keys_set = nullptr);

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text);

}  // namespace hccltune::daemon
