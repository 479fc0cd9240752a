// Blocking whole-buffer socket I/O for setup paths (rendezvous store, connection hellos); the collective hot
// path uses non-blocking partial I/O in TcpPair instead.
//
// Thread-safety: stateless; concurrent calls on one fd interleave like send/recv do.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstddef>

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

}  // namespace hccltune
