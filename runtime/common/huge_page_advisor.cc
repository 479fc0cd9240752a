#include "runtime/common/huge_page_advisor.h"

#include <sys/mman.h>

#include <fstream>
#include <string>

namespace hccltune {
namespace {

#ifndef MADV_COLLAPSE
constexpr int MADV_COLLAPSE = 25;  // Linux 6.1
#endif

// "always [madvise] never" -> whether "never" is the selected one.
bool SystemThpNever() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(f, line)) return false;  // no THP interface: let the kernel answer each call
  return line.find("[never]") != std::string::npos;
}

}  // namespace

HugePageAdvisor& HugePageAdvisor::Process() {
  static HugePageAdvisor* const advisor = new HugePageAdvisor(SystemThpNever());
  return *advisor;
}

HugePageAdvisor::Outcome HugePageAdvisor::Use(const void* p, size_t bytes) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(p);
  if (p == nullptr || bytes < kHugePage || b > UINTPTR_MAX - bytes) return Outcome::kNoWholePage;
  const uintptr_t begin = (b + kHugePage - 1) & ~uintptr_t{kHugePage - 1};
  const uintptr_t end = (b + bytes) & ~uintptr_t{kHugePage - 1};
  if (begin >= end) return Outcome::kNoWholePage;
  if (never_) return Outcome::kDisabled;
  const Extent extent{begin, end};
  {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = seen_.try_emplace(extent, State::kSeen);
    if (inserted) {
      order_.push_back(extent);
      if (order_.size() > kRemembered) {
        seen_.erase(order_.front());
        order_.pop_front();
      }
      return Outcome::kFirstUse;
    }
    if (it->second == State::kDone) return Outcome::kDone;
    it->second = State::kDone;  // decided here; the collapse itself runs without the lock
  }
  // In place and synchronous: the pages of the extent are copied into huge pages (contents unchanged) or, when
  // the kernel declines (no huge page free, pinned pages, a mapping that is not private anonymous memory, THP
  // disabled for it), left as they are.
  return ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_COLLAPSE) == 0 ? Outcome::kCollapsed
                                                                                    : Outcome::kRefused;
}

}  // namespace hccltune
