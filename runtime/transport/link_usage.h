// LinkUsage: every pair a communicator has connected (its link kind, addresses, peer and the peer's node) and,
// read at any time, the bytes each has sent (Pair::BytesSent) — the flight recorder's "links_used"
// (docs/TROUBLESHOOTING.md, The flight recorder), which `hccl-tune doctor` checks against the fastest network
// between the nodes.
//
// Thread-safety: Add takes a mutex (it runs when an endpoint attaches a newly connected pair, never per call).
// Snapshot takes no lock and may run on any thread at any time, also while the communicator's calling thread is
// blocked inside a call holding the communicator's locks: a slot is filled before it is published (the count,
// release/acquire) and never changes afterwards, and byte counts are relaxed reads. The pairs must outlive every
// Snapshot: the devices own them, and CommImpl destroys its flight recorder (which owns this) before its devices.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "runtime/transport/pair.h"

namespace hccltune {

class LinkUsage {
 public:
  // At most this many pairs are recorded (more are counted in dropped()).
  static constexpr size_t kChunk = 256, kMaxPairs = 64 * kChunk;
  struct Link {
    std::string kind;           // "tcp", "ucx", "roce", "ib", "shm"
    std::string network;        // the configuration's network (a CIDR subnet), "" for the default route
    std::string local_address;  // this side's IPv4 address on the link ("" when the transport has none: shm, ucx)
    std::string peer_address;
    std::string describe;  // Pair::Describe() ("tcp 10.77.2.2:4000 x1", "ucx tcp/slow0")
    int peer = -1;
    int peer_node = -1;  // the peer's node index (DeviceLayout)
    bool cross_node = false;
    uint64_t bytes_sent = 0;  // filled by Snapshot
  };
  LinkUsage() = default;
  ~LinkUsage();
  LinkUsage(const LinkUsage&) = delete;
  LinkUsage& operator=(const LinkUsage&) = delete;

  // Records `pair` (once: a pair added again is ignored). `link.bytes_sent` is ignored.
  void Add(const Pair* pair, Link link);
  // Every recorded pair with its bytes sent so far.
  std::vector<Link> Snapshot() const;
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  struct Slot {
    const Pair* pair = nullptr;
    Link link;
  };
  std::mutex mu_;                                                // Add
  std::set<const Pair*> seen_;                                   // guarded by mu_
  std::array<std::atomic<Slot*>, kMaxPairs / kChunk> chunks_{};  // arrays of kChunk slots, made on demand
  std::atomic<size_t> count_{0};                                 // published slots
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace hccltune
