#include "daemon/unix_listener.h"

#include <fcntl.h>
#include <grpcpp/server_posix.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/common/logging.h"

namespace hccltune::daemon {

absl::StatusOr<std::unique_ptr<UnixListener>> UnixListener::Bind(const std::string& path) {
  std::unique_ptr<UnixListener> l(new UnixListener());
  l->fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (l->fd_ < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);  // the caller checked the length
  const mode_t old_umask = ::umask(0117);                     // the socket is born 0660
  const int rc = ::bind(l->fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  ::umask(old_umask);
  if (rc != 0 || ::listen(l->fd_, 256) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", path, ": ", std::strerror(errno)));
  }
  ::chmod(path.c_str(), 0660);
  return l;
}

void UnixListener::Serve(grpc::Server* server, PeerRegistry* registry) {
  thread_ = std::thread([this, server, registry] { AcceptLoop(server, registry); });
}

void UnixListener::AcceptLoop(grpc::Server* server, PeerRegistry* registry) {
  for (;;) {
    const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE) {
        Log(LogLevel::kWarn, "unix socket: accept: ", std::strerror(errno), "; retrying in 100 ms");
        ::usleep(100000);
        continue;
      }
      return;  // Stop() shut the socket down (EINVAL)
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      Log(LogLevel::kWarn, "unix socket: SO_PEERCRED: ", std::strerror(errno), "; connection closed");
      ::close(fd);
      continue;
    }
    registry->Remember(fd, PeerRegistry::Cred{cred.uid, cred.gid, cred.pid});
    grpc::AddInsecureChannelFromFd(server, fd);  // gRPC owns the fd from here
  }
}

void UnixListener::Stop() {
  if (fd_ < 0) return;
  ::shutdown(fd_, SHUT_RDWR);  // wakes accept4 with EINVAL
  if (thread_.joinable()) thread_.join();
  ::close(fd_);
  fd_ = -1;
}

UnixListener::~UnixListener() { Stop(); }

}  // namespace hccltune::daemon
