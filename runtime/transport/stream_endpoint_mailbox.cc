// StreamEndpoint, the mailbox exchange (Endpoint::Exchange): one slot written, every other rank's read in place.
#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/transport/stream_endpoint_internal.h"

namespace hccltune {

using namespace stream_internal;  // NOLINT(build/namespaces): this class's own constants

namespace {

// A slot: the exchange number (written last, with release), the sender's header, then the block. 40 bytes, so
// blocks of up to 24 bytes share the number's cache line, and a block starts 8-byte aligned.
constexpr size_t kSlotHeader = sizeof(uint64_t) + sizeof(StreamEndpoint::Header);
static_assert(kSlotHeader == 40);

std::atomic_ref<uint64_t> Number(uint8_t* slot) {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(slot));
}

// A 32-byte header as four words, and whether the header at `p` is `h` byte for byte: four word compares (memcmp
// was a library call per block).
struct HeaderWords {
  uint64_t w[4];
};
static_assert(sizeof(StreamEndpoint::Header) == sizeof(HeaderWords));
inline bool SameHeader(const uint8_t* p, const HeaderWords& h) {
  HeaderWords a;
  std::memcpy(&a, p, sizeof(a));
  return ((a.w[0] ^ h.w[0]) | (a.w[1] ^ h.w[1]) | (a.w[2] ^ h.w[2]) | (a.w[3] ^ h.w[3])) == 0;
}

}  // namespace

absl::Status StreamEndpoint::StrayMessage(int peer, uint64_t bytes) {
  RingReads* ring = caps_[static_cast<size_t>(peer)].ring;
  const void* in = nullptr;
  size_t avail = 0;
  if (ring == nullptr || !ring->Peek(0, &in, &avail) || avail == 0) return absl::OkStatus();
  if (avail >= sizeof(Header)) {
    Header theirs;
    std::memcpy(&theirs, in, sizeof(theirs));
    if (theirs.magic == kHeaderMagic) {
      if (absl::Status s = CheckHeader(theirs, peer, bytes); !s.ok()) return s;
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "rank ", peer, " sent a message in ", CollectiveName(call_.collective), " (operation ", call_.sequence,
      ") while rank ", rank_,
      " exchanges its block through the shm mailbox: the ranks run different "
      "configurations (is HCCL_TUNE_ALGO, HCCL_ALGO or the call's configuration the same on every rank?)"));
}

size_t StreamEndpoint::ExchangeCapacity() const {
  return mailbox_ == nullptr ? 0 : mailbox_->SlotBytes() - kSlotHeader;
}

absl::Status StreamEndpoint::BeginExchange(size_t bytes) {
  if (mailbox_ == nullptr || bytes > ExchangeCapacity()) {
    return Fail(absl::InternalError(
        absl::StrCat("rank ", rank_, ": a ", bytes, "-byte mailbox exchange, capacity ", ExchangeCapacity())));
  }
  if (pending_ != 0) {
    return Fail(
        absl::InternalError(absl::StrCat("rank ", rank_, ": mailbox exchange with ", pending_, " operations pending")));
  }
  if (!mailbox_->broken().ok()) return Fail(mailbox_->broken());
  const size_t n = pairs_.size();
  // A message left in a ring (a call whose ranks disagreed, e.g. on a broadcast's root, so nobody received it)
  // would go unnoticed by an exchange, which reads no ring: report it here, as a receive would have. One look at
  // the rings' counters first (a per-pair check was a tenth of a 4-rank small call's instructions).
  if (mailbox_->InboundPending()) {
    for (size_t q = 0; q < n; ++q) {
      if (pairs_[q] == nullptr) continue;
      if (absl::Status s = StrayMessage(static_cast<int>(q), bytes); !s.ok()) return Fail(s);
    }
  }
  if (slots_.size() != 2 * n) {
    slots_.resize(2 * n);
    for (size_t q = 0; q < n; ++q) {
      for (uint64_t parity = 0; parity < 2; ++parity)
        slots_[2 * q + parity] = mailbox_->Slot(static_cast<int>(q), parity);
    }
  }
  return absl::OkStatus();
}

absl::Status StreamEndpoint::Exchange(const void* data, size_t bytes, const void** blocks) {
  if (!broken_.ok()) return broken_;
  const size_t n = pairs_.size();
  // BeginExchange only when one of its checks has something to say or its slot table is not set up: as a call on
  // every exchange it cost 30 instructions, on top of the ~1200 of a 2-rank 8 B allreduce outside its waits
  // (callgrind).
  const bool ready = mailbox_ != nullptr && bytes <= mailbox_->SlotBytes() - kSlotHeader && pending_ == 0 &&
                     mailbox_->broken().ok() && !mailbox_->InboundPending() && slots_.size() == 2 * n;
  if (!ready) {
    if (absl::Status s = BeginExchange(bytes); !s.ok()) return s;
  }
  const uint64_t k = mailbox_->NextExchange();
  uint8_t* const* const slots = slots_.data() + (k & 1);  // rank q's slot for exchange k: slots[2 * q]
  uint8_t* mine = slots[2 * static_cast<size_t>(rank_)];
  const Header h = CallHeader(bytes);
  std::memcpy(mine + sizeof(uint64_t), &h, sizeof(h));
  if (bytes > 0) std::memcpy(mine + kSlotHeader, data, bytes);
  Number(mine).store(k, std::memory_order_release);
  ++stats_.exchanges;
  exchanged_ = call_.sequence;
  mailbox_->NotifyMembers();                  // a peer asleep on its doorbell wakes up to read it
  if (seen_.size() != n) seen_.assign(n, 0);  // exchange numbers start at 1
  seen_[static_cast<size_t>(rank_)] = k;
  blocks[rank_] = mine + kSlotHeader;
  size_t missing = n - 1;
  HeaderWords hw;
  std::memcpy(&hw, &h, sizeof(hw));
  uint64_t* const seen = seen_.data();
  // One pass over the slots not seen yet. Locals, not members, in the loop: the stores into `blocks` and `seen`
  // made the compiler reload every captured value per rank.
  auto step = [&, seen, slots, k, n](bool* moved, bool* done) -> absl::Status {
    size_t left = missing;
    for (size_t q = 0; q < n; ++q) {
      if (seen[q] == k) continue;
      uint8_t* slot = slots[2 * q];
      if (Number(slot).load(std::memory_order_acquire) != k) continue;
      // A block of the same call carries this rank's own header; anything else is compared field by field.
      if (!SameHeader(slot + sizeof(uint64_t), hw)) {
        Header theirs;
        std::memcpy(&theirs, slot + sizeof(uint64_t), sizeof(theirs));
        if (absl::Status s = CheckHeader(theirs, static_cast<int>(q), bytes); !s.ok()) return s;
      }
      blocks[q] = slot + kSlotHeader;
      seen[q] = k;
      --left;
    }
    *moved = left != missing;
    missing = left;
    *done = left == 0;
    return absl::OkStatus();
  };
  auto check = [&]() -> absl::Status {
    for (size_t q = 0; q < n; ++q) {
      if (seen_[q] == k || pairs_[q] == nullptr) continue;
      if (absl::Status s = pairs_[q]->CheckPeer(); !s.ok()) {
        bool moved = false, done = false;
        if (absl::Status p = step(&moved, &done); !p.ok()) return p;
        if (seen_[q] != k) return s;
        continue;
      }
      // The rings were empty when this exchange began, so a message from a rank that has not posted its block
      // belongs to this call: that rank runs it with an algorithm that sends messages. Unless it did post and
      // went on to its next call since this rank last looked: it posted before it sent (and the ring was read
      // first), so its slot shows it now.
      if (absl::Status s = StrayMessage(static_cast<int>(q), bytes); !s.ok()) {
        if (Number(slots[2 * q]).load(std::memory_order_acquire) == k) continue;
        return s;
      }
    }
    return absl::OkStatus();
  };
  auto expired = [&](absl::Duration blocked) {
    size_t q = 0;
    while (q < n && seen_[q] == k) ++q;
    return absl::DeadlineExceededError(absl::StrCat(
        "rank ", rank_, ": ", CollectiveName(call_.collective), " (operation ", call_.sequence, ") waited ",
        absl::FormatDuration(blocked), " for rank ", q, " to post its ", bytes,
        "-byte block in the shm mailbox (HCCL_EXEC_TIMEOUT); is rank ", q, " stuck, or did it call something else?"));
  };
  // One pass first: the last rank to post finds every block there and needs no wait at all.
  bool moved = false, done = false;
  absl::Status s = step(&moved, &done);
  if (s.ok() && !done) s = WaitLoop(step, check, expired, /*wait_first=*/!moved);
  if (!s.ok()) {
    mailbox_->Break(s);
    return Fail(s);
  }
  return absl::OkStatus();
}

}  // namespace hccltune
