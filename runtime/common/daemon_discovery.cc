#include "runtime/common/daemon_discovery.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace hccltune {

std::string UserDaemonSocket(const Environment& env, uid_t uid) {
  if (!env.xdg_runtime_dir.empty()) return absl::StrCat(env.xdg_runtime_dir, "/hccl-tune/tuned.sock");
  return absl::StrCat("/tmp/hccl-tune-", uid, "/tuned.sock");
}

bool UnixSocketAnswers(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return false;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

absl::StatusOr<DaemonTarget> ParseDaemonTarget(absl::string_view text) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("daemon target '", text, "' is invalid (", why,
                                                   "): expected unix:/path/to.sock, host:port or off"));
  };
  DaemonTarget t;
  if (text == "off") {
    t.disabled = true;
    return t;
  }
  if (absl::StartsWith(text, "unix:")) {
    absl::string_view path = text.substr(5);
    if (absl::StartsWith(path, "//")) path.remove_prefix(2);
    if (!absl::StartsWith(path, "/")) return bad("the socket path must be absolute");
    if (path.size() >= sizeof(sockaddr_un{}.sun_path)) return bad("the socket path is too long");
    t.socket_path = std::string(path);
    t.grpc_target = absl::StrCat("unix:", path);
    return t;
  }
  size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return bad("no host:port");
  int port = 0;
  if (!absl::SimpleAtoi(text.substr(colon + 1), &port) || port < 1 || port > 65535) return bad("bad port");
  t.grpc_target = std::string(text);
  return t;
}

absl::StatusOr<DaemonTarget> ResolveDaemonTarget(const Environment& env, absl::string_view explicit_target, uid_t uid,
                                                 const std::function<bool(const std::string&)>& answers) {
  if (!explicit_target.empty()) return ParseDaemonTarget(explicit_target);
  if (!env.daemon.empty()) {
    auto t = ParseDaemonTarget(env.daemon);
    if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat("HCCL_TUNE_DAEMON: ", t.status().message()));
    return t;
  }
  std::string path(kSystemDaemonSocket);
  if (!answers(path)) path = UserDaemonSocket(env, uid);
  DaemonTarget t;
  t.socket_path = path;
  t.grpc_target = absl::StrCat("unix:", path);
  return t;
}

}  // namespace hccltune
