// Helpers of the runtime's fault tests: a raw TCP connection to play a misbehaving peer, and the /dev/shm
// segments a job's processes left.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace hccltune::testing {

// A plain TCP connection to 127.0.0.1:port (blocking connect; the peer listens); reads give up after 5 s.
inline int RawConnect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0) << std::strerror(errno);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// Segments are named hccltune-<pid of the creating rank>-...: those of the given processes.
inline size_t ShmSegmentsOf(const std::vector<pid_t>& pids) {
  size_t count = 0;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    for (pid_t p : pids) {
      if (e.path().filename().string().rfind(absl::StrCat("hccltune-", p, "-"), 0) == 0) ++count;
    }
  }
  return count;
}

}  // namespace hccltune::testing
