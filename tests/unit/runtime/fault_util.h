// Helpers of the runtime's fault tests: a raw TCP connection to play a misbehaving peer, and the shared-memory
// segments a job's processes left (ours in /dev/shm; UCX's in /dev/shm and System V).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
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

// UCX's shared-memory files in /dev/shm (posix transport: "ucx_shm_posix_<id>", unlinked by UCX right after it
// creates them; the name carries no pid, so a test compares the set before and after a job).
inline std::set<std::string> UcxShmFiles() {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ucx_", 0) == 0) names.insert(name);
  }
  return names;
}

// System V segments (UCX's sysv transport) created by the given processes and still there: once all of them are
// gone, every such segment is a leak (UCX marks its own for removal at once, so they go with their last user).
inline size_t SysvSegmentsOf(const std::vector<pid_t>& pids) {
  shm_info info{};
  const int max = ::shmctl(0, SHM_INFO, reinterpret_cast<shmid_ds*>(&info));
  size_t count = 0;
  for (int i = 0; i <= max; ++i) {
    shmid_ds ds{};
    if (::shmctl(i, SHM_STAT, &ds) < 0) continue;
    for (pid_t p : pids) count += ds.shm_cpid == p ? 1 : 0;
  }
  return count;
}

}  // namespace hccltune::testing
