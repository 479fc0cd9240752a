// Blocking whole-buffer socket I/O for setup paths (rendezvous store, connection hellos); the collective hot
// path uses non-blocking partial I/O in TcpPair instead.
//
// Thread-safety: stateless; concurrent calls on one fd interleave like send/recv do.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace hccltune {

// Writes all `n` bytes (retrying EINTR/EAGAIN); false when the peer is gone.
inline bool SendAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads exactly `n` bytes (retrying EINTR); false on EOF, error or a receive timeout set on the socket.
inline bool RecvAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// connect() that gives up at `deadline` (a blocking connect to an address that drops packets waits for the
// kernel's SYN retries, about 2 minutes, whatever the caller's timeout). Returns 0, or an errno value:
// ETIMEDOUT when the deadline passed first. The socket is left in the blocking mode it had.
inline int ConnectBefore(int fd, const sockaddr* addr, socklen_t len, absl::Time deadline) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return errno;
  int err = 0;
  if (::connect(fd, addr, len) != 0) {
    err = errno;
    if (err == EINPROGRESS || err == EINTR) {
      err = ETIMEDOUT;
      while (true) {
        const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
        if (ms <= 0) break;
        pollfd p{fd, POLLOUT, 0};
        const int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1000)));
        if (n < 0 && errno != EINTR) {
          err = errno;
          break;
        }
        if (n <= 0) continue;
        socklen_t elen = sizeof(err);
        if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) err = errno;
        break;
      }
    }
  }
  if (::fcntl(fd, F_SETFL, flags) != 0 && err == 0) err = errno;
  return err;
}

}  // namespace hccltune
