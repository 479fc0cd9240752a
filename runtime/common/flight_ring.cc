#include "runtime/common/flight_ring.h"

#include <time.h>

#include <algorithm>

namespace hccltune {

const char* FlightStateName(FlightState s) {
  switch (s) {
    case FlightState::kStarted: return "started";
    case FlightState::kCompleted: return "completed";
    case FlightState::kFailed: return "failed";
  }
  return "unknown";
}

FlightRing::FlightRing(uint32_t capacity)
    : capacity_(std::max<uint32_t>(capacity, 1)), slots_(new Slot[std::max<uint32_t>(capacity, 1)]) {}

bool FlightRing::Read(const Slot& slot, uint64_t id, FlightRecord* out) const {
  const uint64_t v1 = slot.version.load(std::memory_order_acquire);
  if (v1 % 2 != 0) return false;
  out->id = slot.id.load(std::memory_order_acquire);
  const uint64_t head = slot.head.load(std::memory_order_acquire);
  out->config_id = slot.config_id.load(std::memory_order_acquire);
  out->bytes = slot.bytes.load(std::memory_order_acquire);
  out->start_ns = slot.start_ns.load(std::memory_order_acquire);
  out->end_ns = slot.end_ns.load(std::memory_order_acquire);
  out->blocked_ns = slot.blocked_ns.load(std::memory_order_acquire);
  if (slot.version.load(std::memory_order_relaxed) != v1 || out->id != id) return false;
  out->op = static_cast<uint32_t>(head);
  out->collective = static_cast<Collective>((head >> 32) & 0xff);
  out->dtype = static_cast<DataType>((head >> 40) & 0xff);
  out->source = static_cast<FlightSource>((head >> 48) & 0xff);
  out->state = static_cast<FlightState>((head >> 56) & 0xff);
  return true;
}

std::vector<FlightRecord> FlightRing::Snapshot(uint32_t* torn) const {
  const uint64_t next = written();
  const uint64_t first = next > capacity_ ? next - capacity_ : 0;
  std::vector<FlightRecord> out;
  out.reserve(static_cast<size_t>(next - first));
  uint32_t lost = 0;
  for (uint64_t id = first; id < next; ++id) {
    const Slot& slot = slots_[static_cast<size_t>(id % capacity_)];
    FlightRecord r;
    bool ok = false;
    for (int attempt = 0; attempt < 64 && !ok; ++attempt) {
      ok = Read(slot, id, &r);
      // A slot already holding a newer record: this one is gone, retrying cannot bring it back.
      if (!ok && slot.version.load(std::memory_order_acquire) % 2 == 0 &&
          slot.id.load(std::memory_order_relaxed) > id) {
        break;
      }
    }
    if (ok) {
      out.push_back(r);
    } else {
      ++lost;
    }
  }
  if (torn != nullptr) *torn = lost;
  return out;
}

int64_t CoarseNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t SteadyNs(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace hccltune
