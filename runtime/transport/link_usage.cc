#include "runtime/transport/link_usage.h"

namespace hccltune {

LinkUsage::~LinkUsage() {
  for (std::atomic<Slot*>& c : chunks_) delete[] c.load(std::memory_order_relaxed);
}

void LinkUsage::Add(const Pair* pair, Link link) {
  std::lock_guard<std::mutex> lock(mu_);
  if (pair == nullptr || !seen_.insert(pair).second) return;
  const size_t i = count_.load(std::memory_order_relaxed);
  if (i >= kMaxPairs) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::atomic<Slot*>& chunk = chunks_[i / kChunk];
  if (chunk.load(std::memory_order_relaxed) == nullptr) chunk.store(new Slot[kChunk], std::memory_order_release);
  Slot& s = chunk.load(std::memory_order_relaxed)[i % kChunk];
  s.pair = pair;
  s.link = std::move(link);
  count_.store(i + 1, std::memory_order_release);  // publishes the slot (and its chunk)
}

std::vector<LinkUsage::Link> LinkUsage::Snapshot() const {
  const size_t n = count_.load(std::memory_order_acquire);
  std::vector<Link> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const Slot& s = chunks_[i / kChunk].load(std::memory_order_acquire)[i % kChunk];
    out.push_back(s.link);
    out.back().bytes_sent = s.pair->BytesSent();
  }
  return out;
}

}  // namespace hccltune
