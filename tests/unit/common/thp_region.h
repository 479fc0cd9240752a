// Test helpers: private anonymous memory faulted in 4 KiB pages but eligible for transparent huge pages, and a
// mapping's page sizes read back from /proc/self/smaps.
#pragma once

#include <sys/mman.h>
#include <sys/prctl.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace hccltune::testing {

// `huge` whole, aligned 2 MiB pages, with 4 KiB of the same mapping before and after them (data() is 4 KiB
// before the first whole page), in a mapping of its own (PROT_NONE guard pages keep the kernel from merging it
// with a neighbour). Every page is faulted as a 4 KiB page on any system setting (THP is disabled for the
// process while they are written: prctl PR_SET_THP_DISABLE). `eligible`: the mapping carries no THP mark, as
// a malloc'd buffer; else MADV_NOHUGEPAGE (the program's refusal). (On a system whose setting is "always",
// khugepaged may still collapse an eligible region in the background, later.)
class ThpRegion {
 public:
  static constexpr size_t kHuge = size_t{2} << 20;
  ThpRegion(size_t huge, bool eligible) : bytes_(huge * kHuge + 8192), map_bytes_(bytes_ + 2 * kHuge) {
    void* m = ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return;
    map_ = static_cast<char*>(m);
    ::mprotect(map_, 4096, PROT_NONE);
    ::mprotect(map_ + map_bytes_ - 4096, 4096, PROT_NONE);
    if (!eligible) ::madvise(map_, map_bytes_, MADV_NOHUGEPAGE);
    const uintptr_t first = (reinterpret_cast<uintptr_t>(map_) + 4096 + kHuge - 1) & ~uintptr_t{kHuge - 1};
    data_ = reinterpret_cast<char*>(first) - 4096;
    ::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    for (size_t i = 0; i < bytes_; ++i) data_[i] = Pattern(i);
    ::prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0);
  }
  ~ThpRegion() {
    if (map_ != nullptr) ::munmap(map_, map_bytes_);
  }
  ThpRegion(const ThpRegion&) = delete;
  ThpRegion& operator=(const ThpRegion&) = delete;

  bool ok() const { return map_ != nullptr; }
  char* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // Whether the pattern written at construction is still there.
  bool Intact() const {
    for (size_t i = 0; i < bytes_; ++i) {
      if (data_[i] != Pattern(i)) return false;
    }
    return true;
  }

 private:
  static char Pattern(size_t i) { return static_cast<char>(i * 7 + i / 4096); }
  size_t bytes_, map_bytes_;
  char* map_ = nullptr;
  char* data_ = nullptr;
};

// A field of /proc/self/smaps (in KiB: "AnonHugePages:", "KernelPageSize:") for this process's mapping that
// contains p; -1 if none.
inline long SmapsKb(const void* p, absl::string_view field) {
  std::ifstream smaps("/proc/self/smaps");
  const auto a = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= a && a < hi;
    } else if (inside && absl::StartsWith(line, field)) {
      return std::stol(line.substr(field.size()));
    }
  }
  return -1;
}

// How much of the mapping that contains p is in transparent huge pages (KiB).
inline long AnonHugeKb(const void* p) { return SmapsKb(p, "AnonHugePages:"); }

// Why this machine cannot collapse memory into a transparent huge page right now ("" if it can): a kernel without
// MADV_COLLAPSE (Linux 6.1), or no free 2 MiB page even after compaction (a test that needs one skips, naming it).
inline std::string CannotCollapse() {
  ThpRegion probe(1, true);
  if (!probe.ok()) return "cannot map a probe region";
  if (::madvise(probe.data() + 4096, ThpRegion::kHuge, 25 /* MADV_COLLAPSE */) == 0) return "";
  const int e = errno;
  return e == EINVAL ? "this kernel has no MADV_COLLAPSE (Linux 6.1)"
                     : std::string("no 2 MiB page to collapse into right now: ") + std::strerror(e);
}

}  // namespace hccltune::testing
