#include "runtime/transport/shm/symmetric_memory.h"

#include <fcntl.h>
#include <linux/memfd.h>  // MFD_HUGE_2MB
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace hccltune {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kHugePage = 2u << 20;  // MFD_HUGE_2MB
absl::Status Errno(absl::string_view what) {
  return absl::InternalError(absl::StrCat("symmetric memory: ", what, ": ", std::strerror(errno)));
}

size_t RoundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

// This rank's piece: a memfd of `map_bytes` mapped shared and populated, from the hugetlb pool when `huge`.
// Returns false (nothing left open) when the pool cannot hold it: memfd_create, the reservation at mmap, or —
// huge pages only — populating them fails, and the caller then takes ordinary pages. Huge pages are populated
// with MADV_POPULATE_WRITE, which reports a page it cannot get (a hugetlb cgroup limit, a pool raced empty)
// where MAP_POPULATE would leave it to a SIGBUS at the first touch.
bool MapOwnPiece(uint64_t id, size_t map_bytes, bool huge, int* fd, char** map) {
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;  // Linux 5.14
#endif
  const unsigned flags = MFD_CLOEXEC | (huge ? MFD_HUGETLB | MFD_HUGE_2MB : 0u);
  *fd = ::memfd_create(absl::StrCat("hccltune-symm-", id).c_str(), flags);
  if (*fd < 0) return false;
  void* p = MAP_FAILED;
  if (::ftruncate(*fd, static_cast<off_t>(map_bytes)) == 0) {
    p = ::mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | (huge ? 0 : MAP_POPULATE), *fd, 0);
    if (p != MAP_FAILED && huge && ::madvise(p, map_bytes, MADV_POPULATE_WRITE) != 0) {
      const int e = errno;
      ::munmap(p, map_bytes);
      p = MAP_FAILED;
      errno = e;
    }
  }
  if (p == MAP_FAILED) {
    const int e = errno;
    ::close(*fd);
    *fd = -1;
    errno = e;
    return false;
  }
  *map = static_cast<char*>(p);
  return true;
}

// Nobody returns (and so nobody may free its piece and close the fd) before every rank has mapped every piece:
// publishes this rank's "mapped/<rank>" and waits for every rank's (a rank that failed published why).
absl::Status AwaitMapped(Store& store, const std::string& prefix, uint64_t id, int rank, int size,
                         absl::Duration timeout) {
  if (absl::Status s = store.Set(absl::StrCat(prefix, "mapped/", rank), "1"); !s.ok()) return s;
  std::vector<std::string> keys;
  for (int q = 0; q < size; ++q) keys.push_back(absl::StrCat(prefix, "mapped/", q));
  if (absl::Status s = store.Wait(keys, timeout); !s.ok()) {
    return absl::DeadlineExceededError(
        absl::StrCat("symmetric memory ", id, ": not every rank mapped the others' memory: ", s.message()));
  }
  for (int q = 0; q < size; ++q) {
    absl::StatusOr<std::string> v = store.Get(keys[static_cast<size_t>(q)], timeout);
    if (!v.ok()) return v.status();
    if (absl::StartsWith(*v, "failed ")) {
      return absl::FailedPreconditionError(
          absl::StrCat("symmetric memory ", id, ": rank ", q, " could not map: ", v->substr(7)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SymmetricMemory>> SymmetricMemory::Create(Store& store, const std::string& key_prefix,
                                                                         uint64_t id, int rank, int size, size_t bytes,
                                                                         size_t huge_from, absl::Duration timeout) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("symmetric memory: rank ", rank, " of ", size));
  }
  const std::string prefix = absl::StrCat(key_prefix, "/symm/", id, "/");
  auto m = Setup(store, prefix, id, rank, size, bytes, huge_from, timeout);
  if (!m.ok()) {
    // Tell the others at once (they would otherwise wait for this rank until the timeout). Best effort: a key
    // this rank already published is overwritten, which a peer still waiting on it reads as the failure.
    const std::string failed = absl::StrCat("failed ", m.status().message());
    (void)store.Set(absl::StrCat(prefix, rank), failed);
    (void)store.Set(absl::StrCat(prefix, "mapped/", rank), failed);
  }
  return m;
}

absl::StatusOr<std::unique_ptr<SymmetricMemory>> SymmetricMemory::Setup(Store& store, const std::string& prefix,
                                                                        uint64_t id, int rank, int size, size_t bytes,
                                                                        size_t huge_from, absl::Duration timeout) {
  if (bytes == 0) return absl::InvalidArgumentError("symmetric memory: 0 bytes requested");
  std::unique_ptr<SymmetricMemory> m(new SymmetricMemory());
  m->id_ = id;
  m->bytes_ = bytes;
  m->rank_ = rank;
  m->map_bytes_.assign(static_cast<size_t>(size), 0);
  m->bases_.assign(static_cast<size_t>(size), nullptr);

  // Huge pages first when asked (one TLB entry per 2 MiB instead of per 4 KiB: a large call touches every page
  // of n inputs and n outputs), ordinary pages when the pool is short. Pieces may differ between ranks: each
  // publishes its own mapping size.
  const size_t r = static_cast<size_t>(rank);
  char* own = nullptr;
  if (bytes >= huge_from && MapOwnPiece(id, RoundUp(bytes, kHugePage), true, &m->fd_, &own)) {
    m->map_bytes_[r] = RoundUp(bytes, kHugePage);
    m->huge_ = true;
  } else if (MapOwnPiece(id, RoundUp(bytes, kPage), false, &m->fd_, &own)) {
    m->map_bytes_[r] = RoundUp(bytes, kPage);
  } else {
    return Errno(absl::StrCat("cannot allocate and map ", RoundUp(bytes, kPage), " bytes"));
  }
  m->bases_[r] = own;
  // The file's identity: a peer that opens /proc/<pid>/fd/<fd> checks it reached this very file (in another pid
  // namespace the pid names another process, whose descriptor would be a different file).
  struct stat st {};
  if (::fstat(m->fd_, &st) != 0) return Errno("fstat of this rank's memfd");

  if (absl::Status s = store.Set(absl::StrCat(prefix, rank),
                                 absl::StrCat(::getpid(), " ", m->fd_, " ", bytes, " ", m->map_bytes_[r], " ",
                                              static_cast<uint64_t>(st.st_dev), " ", static_cast<uint64_t>(st.st_ino)));
      !s.ok()) {
    return s;
  }
  for (int q = 0; q < size; ++q) {
    if (q == rank) continue;
    absl::StatusOr<std::string> v = store.Get(absl::StrCat(prefix, q), timeout);
    if (!v.ok()) {
      return absl::DeadlineExceededError(absl::StrCat("symmetric memory ", id, ": rank ", q,
                                                      " did not allocate within the timeout (every rank must call "
                                                      "AllocSymmetric with the same size): ",
                                                      v.status().message()));
    }
    if (absl::StartsWith(*v, "failed ")) {
      return absl::FailedPreconditionError(
          absl::StrCat("symmetric memory ", id, ": rank ", q, " could not allocate: ", v->substr(7)));
    }
    std::vector<std::string> f = absl::StrSplit(*v, ' ');
    int pid = 0, fd = 0;
    uint64_t peer_bytes = 0, peer_map = 0, dev = 0, ino = 0;
    if (f.size() != 6 || !absl::SimpleAtoi(f[0], &pid) || !absl::SimpleAtoi(f[1], &fd) ||
        !absl::SimpleAtoi(f[2], &peer_bytes) || !absl::SimpleAtoi(f[3], &peer_map) || !absl::SimpleAtoi(f[4], &dev) ||
        !absl::SimpleAtoi(f[5], &ino) || peer_map < peer_bytes) {
      return absl::DataLossError(absl::StrCat("symmetric memory ", id, ": rank ", q, " published '", *v, "'"));
    }
    if (peer_bytes != bytes) {
      return absl::InvalidArgumentError(absl::StrCat("symmetric memory ", id, ": rank ", rank, " asked for ", bytes,
                                                     " bytes, rank ", q, " for ", peer_bytes,
                                                     " (every rank must ask for the same size)"));
    }
    const std::string path = absl::StrCat("/proc/", pid, "/fd/", fd);
    const int peer_fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (peer_fd < 0) {
      return Errno(absl::StrCat("cannot open rank ", q, "'s memory ", path,
                                " (another user, pid namespace or a ptrace restriction?)"));
    }
    struct stat pst {};
    if (::fstat(peer_fd, &pst) != 0 || static_cast<uint64_t>(pst.st_dev) != dev ||
        static_cast<uint64_t>(pst.st_ino) != ino || static_cast<uint64_t>(pst.st_size) != peer_map) {
      ::close(peer_fd);
      return absl::FailedPreconditionError(absl::StrCat("symmetric memory ", id, ": ", path, " is not rank ", q,
                                                        "'s memory (is rank ", q, " in another pid namespace?)"));
    }
    void* p = ::mmap(nullptr, peer_map, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, peer_fd, 0);
    ::close(peer_fd);
    if (p == MAP_FAILED) return Errno(absl::StrCat("cannot map rank ", q, "'s memory"));
    m->bases_[static_cast<size_t>(q)] = static_cast<char*>(p);
    m->map_bytes_[static_cast<size_t>(q)] = peer_map;
  }
  if (absl::Status s = AwaitMapped(store, prefix, id, rank, size, timeout); !s.ok()) return s;
  ::close(m->fd_);  // every mapping holds the memory from here on
  m->fd_ = -1;
  return m;
}

SymmetricMemory::~SymmetricMemory() {
  for (size_t q = 0; q < bases_.size(); ++q) {
    if (bases_[q] != nullptr) ::munmap(bases_[q], map_bytes_[q]);
  }
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace hccltune
