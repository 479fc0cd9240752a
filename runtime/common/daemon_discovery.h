// Where the tuning daemon is (docs/CONVENTIONS.md, Daemon discovery). One implementation shared by the CLI,
// the daemon's own defaults and the runtime's tuning client:
//
//   HCCL_TUNE_DAEMON (or a --daemon flag) = "unix:/path/to.sock" | "host:port" | "off"
//   otherwise: /run/hccl-tune/tuned.sock if a daemon answers there,
//              else $XDG_RUNTIME_DIR/hccl-tune/tuned.sock, else /tmp/hccl-tune-$UID/tuned.sock.
//
// Thread-safety: pure functions, except that ResolveDaemonTarget calls `answers` (a connect() by default).
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/common/config.h"

namespace hccltune {

inline constexpr absl::string_view kSystemDaemonSocket = "/run/hccl-tune/tuned.sock";
inline constexpr absl::string_view kSystemStateDir = "/var/lib/hccl-tune";

struct DaemonTarget {
  bool disabled = false;    // "off"
  std::string grpc_target;  // "unix:/path" or "host:port"
  std::string socket_path;  // the path for unix targets, else empty
};

// The user-mode socket: $XDG_RUNTIME_DIR/hccl-tune/tuned.sock, else /tmp/hccl-tune-$UID/tuned.sock.
std::string UserDaemonSocket(const Environment& env, uid_t uid);
// Whether something accepts connections on the unix socket at `path` (a plain connect(), no RPC).
bool UnixSocketAnswers(const std::string& path);
// Parses "unix:/abs/path", "unix:///abs/path", "host:port", "[v6]:port" or "off".
absl::StatusOr<DaemonTarget> ParseDaemonTarget(absl::string_view text);

// `explicit_target` (a --daemon flag) wins, then HCCL_TUNE_DAEMON, then discovery.
absl::StatusOr<DaemonTarget> ResolveDaemonTarget(
    const Environment& env, absl::string_view explicit_target, uid_t uid,
    const std::function<bool(const std::string&)>& answers = UnixSocketAnswers);

}  // namespace hccltune
