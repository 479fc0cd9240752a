#include "runtime/transport/shm/symmetric_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
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
constexpr uint64_t kMagic = 0x314d4d5953544c48ull;  // "HLTSYMM1"

// The first page of every piece: who wrote it, so a peer can tell it opened the right file.
struct Header {
  uint64_t magic;
  uint64_t nonce;
  uint64_t bytes;
};

absl::Status Errno(absl::string_view what) {
  return absl::InternalError(absl::StrCat("symmetric memory: ", what, ": ", std::strerror(errno)));
}

uint64_t Nonce() {
  uint64_t v = 0;
  if (::getrandom(&v, sizeof(v), 0) != sizeof(v)) v = static_cast<uint64_t>(::getpid()) * 0x9e3779b97f4a7c15ull;
  return v | 1;  // never 0 (a fresh page reads 0)
}

}  // namespace

absl::StatusOr<std::unique_ptr<SymmetricMemory>> SymmetricMemory::Create(Store& store, const std::string& key_prefix,
                                                                         uint64_t id, int rank, int size, size_t bytes,
                                                                         absl::Duration timeout) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("symmetric memory: rank ", rank, " of ", size));
  }
  const std::string prefix = absl::StrCat(key_prefix, "/symm/", id, "/");
  auto m = Setup(store, prefix, id, rank, size, bytes, timeout);
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
                                                                        absl::Duration timeout) {
  if (bytes == 0) return absl::InvalidArgumentError("symmetric memory: 0 bytes requested");
  std::unique_ptr<SymmetricMemory> m(new SymmetricMemory());
  m->id_ = id;
  m->bytes_ = bytes;
  m->rank_ = rank;
  m->map_bytes_ = kPage + (bytes + kPage - 1) / kPage * kPage;
  m->maps_.assign(static_cast<size_t>(size), nullptr);
  m->bases_.assign(static_cast<size_t>(size), nullptr);

  m->fd_ = ::memfd_create(absl::StrCat("hccltune-symm-", id).c_str(), MFD_CLOEXEC);
  if (m->fd_ < 0) return Errno("memfd_create");
  if (::ftruncate(m->fd_, static_cast<off_t>(m->map_bytes_)) != 0) {
    return Errno(absl::StrCat("cannot size ", m->map_bytes_, " bytes"));
  }
  void* own = ::mmap(nullptr, m->map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, m->fd_, 0);
  if (own == MAP_FAILED) return Errno(absl::StrCat("cannot map ", m->map_bytes_, " bytes"));
  m->maps_[static_cast<size_t>(rank)] = static_cast<char*>(own);
  const uint64_t nonce = Nonce();
  const Header h{kMagic, nonce, bytes};
  std::memcpy(own, &h, sizeof(h));

  if (absl::Status s =
          store.Set(absl::StrCat(prefix, rank), absl::StrCat(::getpid(), " ", m->fd_, " ", bytes, " ", nonce));
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
    uint64_t peer_bytes = 0, peer_nonce = 0;
    if (f.size() != 4 || !absl::SimpleAtoi(f[0], &pid) || !absl::SimpleAtoi(f[1], &fd) ||
        !absl::SimpleAtoi(f[2], &peer_bytes) || !absl::SimpleAtoi(f[3], &peer_nonce)) {
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
    void* p = ::mmap(nullptr, m->map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, peer_fd, 0);
    ::close(peer_fd);
    if (p == MAP_FAILED) return Errno(absl::StrCat("cannot map rank ", q, "'s memory"));
    m->maps_[static_cast<size_t>(q)] = static_cast<char*>(p);
    Header ph;
    std::memcpy(&ph, p, sizeof(ph));
    if (ph.magic != kMagic || ph.nonce != peer_nonce || ph.bytes != bytes) {
      return absl::FailedPreconditionError(absl::StrCat("symmetric memory ", id, ": ", path, " is not rank ", q,
                                                        "'s memory (is rank ", q, " in another pid namespace?)"));
    }
  }
  for (int q = 0; q < size; ++q) m->bases_[static_cast<size_t>(q)] = m->maps_[static_cast<size_t>(q)] + kPage;
  // Nobody returns (and so nobody may free its piece and close the fd) before every rank has mapped every piece.
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
  ::close(m->fd_);  // every mapping holds the memory from here on
  m->fd_ = -1;
  return m;
}

SymmetricMemory::~SymmetricMemory() {
  for (char* p : maps_) {
    if (p != nullptr) ::munmap(p, map_bytes_);
  }
  if (fd_ >= 0) ::close(fd_);
}

int64_t SymmetricMemory::OffsetOf(const void* p, size_t n) const {
  const char* c = static_cast<const char*>(p);
  const char* b = bases_[static_cast<size_t>(rank_)];
  if (b == nullptr || c < b || n > bytes_ || static_cast<size_t>(c - b) > bytes_ - n) return -1;
  return c - b;
}

}  // namespace hccltune
