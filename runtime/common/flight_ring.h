// The flight recorder's ring: a communicator's last N collective calls as fixed-size records, written on every
// call (docs/TROUBLESHOOTING.md, The flight recorder). The communicator fills it (runtime/api/flight_recorder.h
// dumps it); this header holds only the storage and its concurrency protocol.
//
// Thread-safety contract: exactly one writer per ring (the thread running the communicator's calls, which
// holds its call lock) calls Begin and End; any number of readers call Snapshot and written() at any time,
// concurrently with the writer, from any thread (a dump thread, a signal's dump). No locks and no allocation
// on the writer's side. Each slot is a seqlock: the writer makes its version odd, stores the fields, and
// makes it even again (release); a reader copies the fields between two reads of the version and keeps the
// copy only when both are the same even number — so a snapshot never holds a torn record. A slot the writer
// keeps rewriting while a reader tries is retried a few times and then left out (counted in `torn`). Every
// field is an atomic, stored with release and loaded with acquire (plain moves on x86; no fences), so the protocol
// is data-race free as C++ and ThreadSanitizer define it. The ring's memory is allocated once, by the constructor.
//
// Algorithm (a bounded ring overwriting the oldest): record k (k = 0, 1, 2, ... in call order) lives in slot
// k mod N; `next_` is the number of records begun. A snapshot reads the slots of records
// max(0, next - N) .. next - 1, oldest first, and keeps those whose stored id is the one expected (a slot
// overwritten meanwhile by a newer record is left out, it belongs to the next snapshot).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/common/types.h"

namespace hccltune {

// Where a call's configuration came from, as docs/CONVENTIONS.md names them ("Where a choice came from"); the
// values are the selector's ChoiceSource (runtime/selector/selector.h), which this layer cannot name.
using FlightSource = uint8_t;

enum class FlightState : uint8_t { kStarted = 0, kCompleted = 1, kFailed = 2 };
const char* FlightStateName(FlightState s);  // "started", "completed", "failed"

// One call as a reader sees it.
struct FlightRecord {
  uint64_t id = 0;  // records begun before this one on the ring (torch's record_id)
  uint32_t op = 0;  // the communicator's operation number (collective_seq_id)
  Collective collective = Collective::kAllreduce;
  DataType dtype = DataType::kFloat32;
  FlightSource source = 0;
  FlightState state = FlightState::kStarted;
  uint32_t config_id = 0;  // InternConfiguration's id of the configuration (0: none, e.g. a refused call)
  uint64_t bytes = 0;      // the call's size (docs/CONVENTIONS.md, Sizes)
  int64_t start_ns = 0;    // steady clock (CLOCK_MONOTONIC) at the start, 0 when the call was not timed
  int64_t end_ns = 0;      // steady clock at the end, 0 when not timed or not ended
  int64_t blocked_ns = 0;  // CLOCK_MONOTONIC_COARSE when the call was first seen blocked (0: it never was)
};

class FlightRing {
 public:
  // `capacity` records (at least 1).
  explicit FlightRing(uint32_t capacity);
  FlightRing(const FlightRing&) = delete;
  FlightRing& operator=(const FlightRing&) = delete;

  uint32_t capacity() const { return capacity_; }
  // Records begun so far (readers: acquire).
  uint64_t written() const { return next_.load(std::memory_order_acquire); }

  // Writer: a new record in state started; returns its slot for End and MarkBlocked. Reads no clock.
  uint32_t Begin(uint32_t op, Collective c, DataType dtype, uint64_t bytes, uint32_t config_id, FlightSource source) {
    const uint64_t id = next_.load(std::memory_order_relaxed);
    const uint32_t slot = pos_;
    pos_ = pos_ + 1 == capacity_ ? 0 : pos_ + 1;
    Slot& s = slots_[slot];
    const uint64_t v = Open(s);
    s.id.store(id, std::memory_order_release);
    s.head.store(Head(op, c, dtype, source, FlightState::kStarted), std::memory_order_release);
    s.config_id.store(config_id, std::memory_order_release);
    s.bytes.store(bytes, std::memory_order_release);
    s.start_ns.store(0, std::memory_order_release);
    s.end_ns.store(0, std::memory_order_release);
    s.blocked_ns.store(0, std::memory_order_release);
    s.version.store(v + 2, std::memory_order_release);
    next_.store(id + 1, std::memory_order_release);
    return slot;
  }
  // Writer: the record in `slot` ended in `state` (an untimed call: its times stay 0).
  void End(uint32_t slot, FlightState state) {
    Slot& s = slots_[slot];
    const uint64_t v = Open(s);
    SetState(s, state);
    s.version.store(v + 2, std::memory_order_release);
  }
  // Writer: as End, for a timed call: `start_ns` and `end_ns` are the steady clock's readings around it.
  void End(uint32_t slot, FlightState state, int64_t start_ns, int64_t end_ns) {
    Slot& s = slots_[slot];
    const uint64_t v = Open(s);
    SetState(s, state);
    s.start_ns.store(start_ns, std::memory_order_release);
    s.end_ns.store(end_ns, std::memory_order_release);
    s.version.store(v + 2, std::memory_order_release);
  }
  // Writer: the call of `slot` is blocked at `ns` (CoarseNowNs); only the first mark of a record counts.
  void MarkBlocked(uint32_t slot, int64_t ns) {
    Slot& s = slots_[slot];
    if (s.blocked_ns.load(std::memory_order_relaxed) != 0) return;
    const uint64_t v = Open(s);
    s.blocked_ns.store(ns, std::memory_order_release);
    s.version.store(v + 2, std::memory_order_release);
  }

  // Writer: the size recorded by Begin in `slot` (the writer's own store).
  uint64_t BytesAt(uint32_t slot) const { return slots_[slot].bytes.load(std::memory_order_relaxed); }

  // Reader: the records still in the ring, oldest first; *torn (when given) counts those left out because the
  // writer kept rewriting their slot.
  std::vector<FlightRecord> Snapshot(uint32_t* torn = nullptr) const;

 private:
  // op | collective << 32 | dtype << 40 | source << 48 | state << 56.
  static uint64_t Head(uint32_t op, Collective c, DataType dtype, FlightSource source, FlightState state) {
    return uint64_t{op} | uint64_t{static_cast<uint8_t>(c)} << 32 | uint64_t{static_cast<uint8_t>(dtype)} << 40 |
           uint64_t{source} << 48 | uint64_t{static_cast<uint8_t>(state)} << 56;
  }
  struct alignas(64) Slot {
    std::atomic<uint64_t> version{0};  // odd while the writer stores
    std::atomic<uint64_t> id{0};
    std::atomic<uint64_t> head{0};
    std::atomic<uint32_t> config_id{0};
    std::atomic<uint64_t> bytes{0};
    std::atomic<int64_t> start_ns{0};
    std::atomic<int64_t> end_ns{0};
    std::atomic<int64_t> blocked_ns{0};
  };
  // The writer's side of the seqlock: makes the version odd; returns the version it found, which the writer sets
  // to + 2 (release) after its field stores. Each field store is a release, so a reader whose acquire load of a
  // field sees it also sees the odd version (no fence: ThreadSanitizer does not model fences; on x86 release
  // stores and acquire loads are plain moves).
  static uint64_t Open(Slot& s) {
    const uint64_t v = s.version.load(std::memory_order_relaxed);
    s.version.store(v + 1, std::memory_order_relaxed);
    return v;
  }
  static void SetState(Slot& s, FlightState state) {
    const uint64_t head = s.head.load(std::memory_order_relaxed);  // the writer's own store
    s.head.store((head & ~(uint64_t{0xff} << 56)) | uint64_t{static_cast<uint8_t>(state)} << 56,
                 std::memory_order_release);
  }
  // Reads `slot` into *out; false when torn or not the record `id`.
  bool Read(const Slot& slot, uint64_t id, FlightRecord* out) const;

  uint32_t capacity_;
  uint32_t pos_ = 0;  // writer only: the slot of the next record
  std::unique_ptr<Slot[]> slots_;
  std::atomic<uint64_t> next_{0};
};

// CLOCK_MONOTONIC_COARSE in nanoseconds (the kernel's tick, a few ms resolution; a quarter of the steady clock's
// cost; the same epoch as std::chrono::steady_clock on Linux).
int64_t CoarseNowNs();
// std::chrono::steady_clock in nanoseconds since its epoch.
int64_t SteadyNs(std::chrono::steady_clock::time_point t);

}  // namespace hccltune
