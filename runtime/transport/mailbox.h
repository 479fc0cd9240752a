// Mailbox: one block per rank of a group, in memory every member maps (shm, one node), read in place.
//
// An exchange (StreamEndpoint::Exchange) is the whole of a small collective's communication: every rank writes
// its block into its own slot and publishes the exchange number, then reads every other rank's block straight
// out of that rank's slot. Compared with n-1 messages through n-1 rings per rank, each rank writes one slot
// instead of n-1 frames and reads each block where it lies (no copy into a receive buffer, no ring head/tail
// lines, no per-message operation state).
//
// Slot reuse: each rank has two slots and exchange k uses slot k % 2. A rank starts exchange k+1 only after it
// has seen every block of exchange k (and read what it needed from them), so when a rank writes exchange k+2
// into the slot of exchange k, every rank has started k+1 — that is, has finished reading k. The exchange
// numbers stay the same on every rank because every rank of the group takes part in every exchange, in the
// same order (the calls of a communicator are the same on every rank).
//
// Thread-safety: one thread at a time (the communicator's progress thread), as the endpoints that use it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace hccltune {

class Mailbox {
 public:
  virtual ~Mailbox() = default;
  // Bytes of one slot (what an exchange writes: the endpoint's header and the block).
  virtual size_t SlotBytes() const = 0;
  // Rank `rank`'s slot for exchange `exchange` (one of its two, by parity): this rank's own is writable, the
  // others are read-only in practice. 64-byte aligned; the same address for every exchange of the same parity
  // for the mailbox's lifetime (callers may keep it). REQUIRES: `rank` is a member of the group.
  virtual uint8_t* Slot(int rank, uint64_t exchange) = 0;
  // Whether bytes wait in any ring from another member into this rank — a message nobody received, which an
  // exchange (reading no ring) reports as a mismatch. One pass over the rings' counters, no per-pair call.
  virtual bool InboundPending() const = 0;
  // Rings every other member's doorbell: one asleep on it wakes up to read this rank's slot (Pair::Notify for
  // each member's pair, in one pass).
  virtual void NotifyMembers() = 0;
  // The next exchange number (1, 2, ...), shared by every endpoint that uses this mailbox.
  uint64_t NextExchange() { return ++exchanges_; }
  // After an exchange failed the ranks may disagree on the numbers: every later exchange fails the same way.
  const absl::Status& broken() const { return broken_; }
  void Break(const absl::Status& why) {
    if (broken_.ok()) broken_ = why;
  }

 private:
  uint64_t exchanges_ = 0;
  absl::Status broken_;
};

}  // namespace hccltune
