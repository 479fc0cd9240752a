// StreamEndpoint, the receive side: headers, plain / single-copy / reduced payloads, receive-and-forward.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/common/stream_copy.h"
#include "runtime/transport/stream_endpoint_internal.h"

namespace hccltune {

using namespace stream_internal;  // NOLINT(build/namespaces): this class's own constants

StreamEndpoint::Op* StreamEndpoint::FusableForward(const Op& op) {
  if (op.forward == 0) return nullptr;
  Op* fwd = Find(op.forward - 1);
  if (fwd == nullptr || fwd->done || fwd->header_done < sizeof(Header) || fwd->payload_done != op.payload_done) {
    return nullptr;
  }
  const Queue& q = QueueFor(fwd->peer, true, fwd->lane);
  return !q.ops.empty() && q.ops.front() == op.forward - 1 ? fwd : nullptr;
}

absl::StatusOr<bool> StreamEndpoint::FuseForward(Op& fwd, const void* src, size_t bytes) {
  Pair& pair = *pairs_[static_cast<size_t>(fwd.peer)];
  size_t written = 0;
  while (written < bytes) {
    auto n = pair.TryWrite(fwd.lane, static_cast<const uint8_t*>(src) + written, bytes - written);
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    written += *n;
  }
  fwd.payload_done += written;
  stats_.forwarded_from_cache += written;
  if (written > 0) pair.Notify();
  return written == bytes;
}

absl::Status StreamEndpoint::StorePlain(Op& op, const void* in, size_t bytes) {
  uint8_t* dst = op.data + op.payload_done;
  if (stream_.Contains(op.data, op.bytes)) {
    CopyStreaming(dst, in, bytes);
  } else {
    std::memcpy(dst, in, bytes);
  }
  Op* fwd = FusableForward(op);
  op.payload_done += bytes;
  if (fwd != nullptr) {
    auto full = FuseForward(*fwd, in, bytes);
    if (!full.ok()) return full.status();
  }
  return absl::OkStatus();
}

// Reads the padding after a received payload; true once it is consumed.
absl::StatusOr<bool> StreamEndpoint::SkipPad(Op& op, Pair& pair, bool* moved) {
  uint8_t sink[kStreamAlign];
  while (op.pad_done < PadFor(op.bytes)) {
    auto n = pair.TryRead(op.lane, sink, PadFor(op.bytes) - op.pad_done);
    if (!n.ok()) return n.status();
    if (*n == 0) return false;
    op.pad_done += *n;
    *moved = true;
  }
  return true;
}

// Compares a received header with this rank's call; the strings are built only for an error.
absl::Status StreamEndpoint::CheckHeader(const Header& h, int peer, uint64_t bytes) const {
  const auto them = [&] { return absl::StrCat("rank ", peer); };
  const auto me = [&] { return absl::StrCat("rank ", rank_); };
  if (h.magic != kHeaderMagic) {
    return absl::DataLossError(absl::StrCat(me(), " received a corrupt message header from ", them()));
  }
  // The fields name table entries: each is checked against its table before anything prints it.
  const auto corrupt = [&](absl::string_view field, unsigned value, unsigned limit) {
    return absl::DataLossError(absl::StrCat(me(), " received a corrupt message header from ", them(), ": ", field, " ",
                                            value, " (valid: below ", limit, ")"));
  };
  if (h.collective >= kNumCollectives) return corrupt("collective", h.collective, kNumCollectives);
  if (h.dtype >= kNumDataTypes) return corrupt("dtype", h.dtype, kNumDataTypes);
  if (h.op >= kNumReduceOps) return corrupt("reduce op", h.op, kNumReduceOps);
  if (h.flags & ~(kFlagSingleCopy | kFlagReturn)) return corrupt("flags", h.flags, kFlagReturn * 2);
  const auto coll = static_cast<Collective>(h.collective);
  if (h.sequence != call_.sequence) {
    auto describe = [](Collective c, int32_t root) {
      const bool rooted = c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kGather ||
                          c == Collective::kScatter;
      return rooted ? absl::StrCat(CollectiveName(c), ", root ", root) : std::string(CollectiveName(c));
    };
    return absl::FailedPreconditionError(
        absl::StrCat(them(), " is at operation ", h.sequence, " (", describe(coll, h.root), "), ", me(),
                     " at operation ", call_.sequence, " (", describe(call_.collective, call_.root),
                     "): the ranks issued different sequences of calls or disagreed on a root"));
  }
  if (coll != call_.collective) {
    return absl::FailedPreconditionError(absl::StrCat(them(), " called ", CollectiveName(coll), ", ", me(), " called ",
                                                      CollectiveName(call_.collective), " (operation ", call_.sequence,
                                                      ")"));
  }
  if (h.count != call_.count) {
    return absl::FailedPreconditionError(absl::StrCat(them(), " called ", CollectiveName(coll), " with ", h.count,
                                                      " elements, ", me(), " with ", call_.count));
  }
  if (h.dtype != static_cast<uint8_t>(call_.dtype)) {
    return absl::FailedPreconditionError(absl::StrCat(them(), " called ", CollectiveName(coll), " with dtype ",
                                                      DataTypeName(static_cast<DataType>(h.dtype)), ", ", me(),
                                                      " with ", DataTypeName(call_.dtype)));
  }
  if (IsReducing(coll) && h.op != static_cast<uint8_t>(call_.op)) {
    return absl::FailedPreconditionError(absl::StrCat(them(), " called ", CollectiveName(coll), " with op ",
                                                      ReduceOpName(static_cast<ReduceOp>(h.op)), ", ", me(), " with ",
                                                      ReduceOpName(call_.op)));
  }
  if (h.root != call_.root) {
    return absl::FailedPreconditionError(absl::StrCat(them(), " called ", CollectiveName(coll), " with root ", h.root,
                                                      ", ", me(), " with root ", call_.root));
  }
  if (h.bytes != bytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        them(), " sent a ", h.bytes, "-byte message where ", me(), " expected ", bytes, " bytes (",
        CollectiveName(coll), ", operation ", call_.sequence, "): the ranks run different configurations"));
  }
  return absl::OkStatus();
}

absl::Status StreamEndpoint::ProgressRecv(Op& op, bool* moved) {
  Pair& pair = *pairs_[static_cast<size_t>(op.peer)];
  RingReads* ring = caps_[static_cast<size_t>(op.peer)].ring;
  if (op.header_done == 0 && op.bytes <= kSmallPayload) {
    // Small message: header, payload and padding in one look at the ring and one release of it (one tail
    // update for the writer to see instead of three).
    const void* in = nullptr;
    size_t avail = 0;
    const size_t frame = sizeof(Header) + op.bytes + PadFor(op.bytes);
    if (ring != nullptr && ring->Peek(op.lane, &in, &avail) && avail >= frame) {
      std::memcpy(&op.header, in, sizeof(Header));
      op.header_done = sizeof(Header);
      *moved = true;
      if (absl::Status s = CheckHeader(op.header, op.peer, op.bytes); !s.ok()) return s;
      if (absl::Status s = CheckReturnFlag(op); !s.ok()) return s;
      if (!(op.header.flags & kFlagSingleCopy)) {
        const uint8_t* payload = static_cast<const uint8_t*>(in) + sizeof(Header);
        if (op.combiner != nullptr) {
          const Combiner& c = *op.combiner;
          if (op.bytes > 0) c.combine(c, op.data, op.local, payload, op.bytes / c.elem_bytes);
          if (op.returns) {
            // In a return period the frame is ours to rewrite until it is consumed (ReturnLink).
            if (op.bytes > 0) std::memcpy(const_cast<uint8_t*>(payload), op.data, op.bytes);
            stats_.returned_in_place += op.bytes;
          }
        } else if (op.bytes > 0) {
          std::memcpy(op.data, payload, op.bytes);
        }
        ring->Consume(op.lane, frame);
        op.payload_done = op.bytes;
        op.pad_done = PadFor(op.bytes);
        op.done = true;
        return absl::OkStatus();
      }
      ring->Consume(op.lane, sizeof(Header));
    }
  }
  while (op.header_done < sizeof(Header)) {
    auto n =
        pair.TryRead(op.lane, reinterpret_cast<uint8_t*>(&op.header) + op.header_done, sizeof(Header) - op.header_done);
    if (!n.ok()) return n.status();
    if (*n == 0) return absl::OkStatus();
    op.header_done += *n;
    *moved = true;
    if (op.header_done == sizeof(Header)) {
      if (absl::Status s = CheckHeader(op.header, op.peer, op.bytes); !s.ok()) return s;
      if (absl::Status s = CheckReturnFlag(op); !s.ok()) return s;
    }
  }
  if (op.header.flags & kFlagSingleCopy) return ProgressSingleCopy(op, pair, moved);
  if (op.combiner != nullptr) return ProgressReduce(op, pair, moved);
  if (op.payload_done < op.bytes && (op.forward != 0 || stream_.Contains(op.data, op.bytes))) {
    // In place from the ring where the pair has RingReads: into a large call's output with non-temporal stores, and
    // forwarded from the ring's (cached) bytes when this receive feeds a send.
    const void* in = nullptr;
    size_t avail = 0;
    while (op.payload_done < op.bytes && ring != nullptr && ring->Peek(op.lane, &in, &avail) && avail > 0) {
      const size_t take = std::min(avail, op.bytes - op.payload_done);
      if (absl::Status s = StorePlain(op, in, take); !s.ok()) return s;
      ring->Consume(op.lane, take);
      *moved = true;
    }
  }
  while (op.payload_done < op.bytes) {
    auto n = pair.TryRead(op.lane, op.data + op.payload_done, op.bytes - op.payload_done);
    if (!n.ok()) return n.status();
    if (*n == 0) return absl::OkStatus();
    op.payload_done += *n;
    *moved = true;
  }
  auto padded = SkipPad(op, pair, moved);
  if (!padded.ok()) return padded.status();
  op.done = *padded;
  return absl::OkStatus();
}

// A single-copy message: read the descriptor from the stream, then the payload straight from the sender's
// memory (into op.data, or in L2-sized pieces through stage_ for receive-and-reduce), then acknowledge.
absl::Status StreamEndpoint::ProgressSingleCopy(Op& op, Pair& pair, bool* moved) {
  while (op.desc_done < sizeof(op.desc)) {
    auto n = pair.TryRead(op.lane, reinterpret_cast<uint8_t*>(&op.desc) + op.desc_done, sizeof(op.desc) - op.desc_done);
    if (!n.ok()) return n.status();
    if (*n == 0) return absl::OkStatus();
    op.desc_done += *n;
    *moved = true;
    if (op.desc_done == sizeof(op.desc) && op.desc.bytes != op.bytes) {
      return absl::DataLossError(absl::StrCat("rank ", rank_, " received a single-copy descriptor of ", op.desc.bytes,
                                              " bytes from rank ", op.peer, " for a ", op.bytes, "-byte message"));
    }
  }
  // A link without single-copy reads (TCP) never carries such a message: the frame is corrupt or not ours.
  SingleCopyLink* single = caps_[static_cast<size_t>(op.peer)].single_copy;
  if (single == nullptr) {
    return absl::DataLossError(absl::StrCat("rank ", rank_, " received a single-copy message header from rank ",
                                            op.peer, " over ", pair.Describe(), ", which has no single-copy reads"));
  }
  if (op.combiner == nullptr && !op.shared_asked) {
    op.shared_asked = true;
    // Oversubscribed, the "idle" sender shares a CPU with another rank: from 128 KiB only (4 ranks on 2 cores, a
    // 64 KiB linear broadcast took 12.8 us shared against 10.6 unshared; 128 KiB 16-18 against 21).
    const size_t min_bytes = oversubscribed_ ? 2 * kSharedCopyMinBytes : kSharedCopyMinBytes;
    // Only a sender that is not itself busy with a message from this rank (an exchange, as in a 2-rank
    // allgather) is idle enough to help: there, sharing cost 10-15% at 128-512 KiB. Nor one bound to this
    // rank's CPU: the two never copy at once (4 ranks on 2 cores, linear broadcast of 256 KiB / 512 KiB / 1 MiB:
    // 36-37 / 61-68 / 121-137 us sharing only across CPUs, against 40-42 / 85-89 / 163-170 sharing with every
    // receiver, three runs; 128 KiB within noise).
    const bool same_cpu = single->SharesCpuWithPeer();
    if (op.bytes >= min_bytes && single->PeerCanWriteMemory() && !SendingTo(op.peer) && !same_cpu) {
      // Shared: the sender, waiting for our acknowledgement anyway, writes the front half into op.data while we
      // read the back half (SingleCopyLink::RequestPeerWrite); the front is page aligned.
      // Oversubscribed, below 512 KiB the sender writes a third, not half: with 4 ranks bound round-robin to 2
      // CPUs a broadcast root shares its CPU with a receiver that reads the whole message, so the root's CPU
      // carried the most copying (linear broadcast of 128 / 256 KiB, 9 alternating runs: 24.3 / 43.4 us with a
      // third, 28.9 / 45.7 with half, 23.7 / 46.3 with a quarter; from 512 KiB a third was 24-38% slower).
      const size_t parts = oversubscribed_ && op.bytes < kSharedThirdBelowBytes ? 3 : 2;
      op.front = op.bytes / parts / 4096 * 4096;
      op.front_ticket = single->NextReadTicket();
      single->RequestPeerWrite(op.front_ticket, op.data, op.front);
      op.payload_done = op.front;
    }
  }
  const auto read = [&](uint64_t from, void* to, size_t n) { return single->ReadPeerMemory(from, to, n); };
  while (op.payload_done < op.bytes) {
    const size_t n =
        op.combiner == nullptr ? op.bytes - op.payload_done : std::min(op.bytes - op.payload_done, kSingleCopyPiece);
    const uint64_t from = op.desc.address + op.payload_done;
    if (op.combiner == nullptr) {
      if (absl::Status s = read(from, op.data + op.payload_done, n); !s.ok()) return s;
    } else {
      // kSingleCopyPiece is a multiple of every element size, so pieces hold whole elements.
      if (stage_.size() < kSingleCopyPiece) stage_.resize(kSingleCopyPiece);
      if (absl::Status s = read(from, stage_.data(), n); !s.ok()) return s;
      const Combiner& c = *op.combiner;
      c.combine(c, op.data + op.payload_done, op.local + op.payload_done, stage_.data(), n / c.elem_bytes);
    }
    op.payload_done += n;
    *moved = true;
  }
  if (op.front > 0) {
    auto front = single->CompletePeerWrite(op.front_ticket, op.desc.address, op.data, op.front);
    if (!front.ok()) return front.status();
    if (!*front) return absl::OkStatus();  // the sender is still writing the front part
    op.front = 0;
    *moved = true;
  }
  single->AckPeerRead();
  ++stats_.single_copy_recvs;
  *moved = true;
  op.done = true;
  return absl::OkStatus();
}

// Combines `bytes` (whole elements) from `in` into op.data at payload_done. With a fusable forward send, tile by
// tile: each L1-sized result tile is written to the output (non-temporal stores in the stream region) and
// straight into the forward send's ring, so the reduced bytes are never read back from memory.
absl::Status StreamEndpoint::CombineForward(Op& op, const void* in, size_t bytes) {
  const Combiner& c = *op.combiner;
  const auto* src = static_cast<const uint8_t*>(in);
  constexpr size_t kTile = 16u << 10;  // a multiple of every element size
  Op* fwd = FusableForward(op);
  const bool streamed = c.stream.Contains(op.data, op.bytes);
  size_t done = 0;
  if (fwd != nullptr && streamed && tile_.size() < kTile) tile_.resize(kTile);
  while (fwd != nullptr && done < bytes) {
    const size_t n = std::min(kTile, bytes - done);
    const size_t at = op.payload_done;
    // Streamed outputs leave the cache, so the tile is computed in L1 first; otherwise straight into the output,
    // which is then still in L1 for the forward.
    uint8_t* result = streamed ? tile_.data() : op.data + at;
    c.combine(c, result, op.local + at, src + done, n / c.elem_bytes);
    if (streamed) CopyStreamingNoFence(op.data + at, result, n);
    op.payload_done += n;
    done += n;
    auto full = FuseForward(*fwd, result, n);
    if (!full.ok()) return full.status();
    if (!*full) fwd = nullptr;
  }
  if (streamed) StreamFence();
  if (done < bytes) {
    c.combine(c, op.data + op.payload_done, op.local + op.payload_done, src + done, (bytes - done) / c.elem_bytes);
    op.payload_done += bytes - done;
  }
  return absl::OkStatus();
}

absl::Status StreamEndpoint::CheckReturnFlag(const Op& op) const {
  if (((op.header.flags & kFlagReturn) != 0) == op.returns) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "rank ", op.peer, " sent a ", op.returns ? "plain message" : "message to reduce and return in place",
      " where rank ", rank_, " expected ", op.returns ? "one to reduce and return in place" : "a plain one", " (",
      CollectiveName(call_.collective), ", operation ", call_.sequence, "): the ranks run different configurations"));
}

void StreamEndpoint::CombineReturn(Op& op, uint8_t* in, size_t bytes) {
  const Combiner& c = *op.combiner;
  constexpr size_t kTile = 16u << 10;  // a multiple of every element size
  const bool streamed = c.stream.Contains(op.data, op.bytes);
  if (streamed && tile_.size() < kTile) tile_.resize(kTile);
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(kTile, bytes - done);
    const size_t at = op.payload_done;
    // As CombineForward: streamed outputs leave the cache, so the tile is computed in L1 first.
    uint8_t* result = streamed ? tile_.data() : op.data + at;
    c.combine(c, result, op.local + at, in + done, n / c.elem_bytes);
    if (streamed) CopyStreamingNoFence(op.data + at, result, n);
    std::memcpy(in + done, result, n);
    op.payload_done += n;
    done += n;
  }
  if (streamed) StreamFence();
  stats_.returned_in_place += bytes;
}

// Sends awaiting their results, oldest first: the returned bytes of each frame (header, payload, padding) come
// back in the order it was written; only the payload is copied out (non-temporal stores in the stream region).
void StreamEndpoint::CheckReturns(bool* moved) {
  for (size_t peer = 0; peer < returns_.size(); ++peer) {
    std::deque<uint64_t>& waiting = returns_[peer];
    while (!waiting.empty()) {
      Op& op = ops_[waiting.front() - base_id_];
      ReturnLink& link = *caps_[peer].returns;  // a return send's pair has it (EnterReturns)
      const size_t frame = sizeof(Header) + op.bytes + PadFor(op.bytes);
      const void* data = nullptr;
      size_t avail = 0;
      while (op.back_done < frame && link.PeekReturned(&data, &avail) && avail > 0) {
        const size_t take = std::min(avail, frame - op.back_done);
        const size_t lo = std::max(op.back_done, sizeof(Header));
        const size_t hi = std::min(op.back_done + take, sizeof(Header) + op.bytes);
        if (hi > lo) {
          const uint8_t* src = static_cast<const uint8_t*>(data) + (lo - op.back_done);
          uint8_t* dst = op.result + (lo - sizeof(Header));
          if (stream_.Contains(op.result, op.bytes)) {
            CopyStreaming(dst, src, hi - lo);
          } else {
            std::memcpy(dst, src, hi - lo);
          }
        }
        link.TakeReturned(take);
        op.back_done += take;
        *moved = true;
      }
      if (op.back_done < frame || !op.written) break;  // the rest of this peer's results come after it
      op.done = true;
      --pending_;
      --returns_pending_;
      waiting.pop_front();
    }
  }
}

// Combines the payload into op.data in pieces as it arrives, so the sender keeps streaming into the space each
// piece frees. In place from the ring when the pair has RingReads; otherwise (TCP, or an element split by the ring's
// wrap) through stage_, carrying a partial element over to the next read.
absl::Status StreamEndpoint::ProgressReduce(Op& op, Pair& pair, bool* moved) {
  const Combiner& c = *op.combiner;
  RingReads* ring = caps_[static_cast<size_t>(op.peer)].ring;
  const size_t es = c.elem_bytes;
  constexpr size_t kPiece = 256u << 10;  // fits L2 beside the operands; frees ring space early
  while (op.payload_done < op.bytes) {
    const size_t want = std::min(op.bytes - op.payload_done, kPiece);
    if (op.carried == 0) {
      const void* in = nullptr;
      size_t avail = 0;
      if (ring != nullptr && ring->Peek(op.lane, &in, &avail)) {
        const size_t take = std::min(avail, want) / es * es;
        if (take > 0 && op.returns) {
          // In a return period the bytes are ours to rewrite until consumed (ReturnLink).
          CombineReturn(op, const_cast<uint8_t*>(static_cast<const uint8_t*>(in)), take);
          ring->Consume(op.lane, take);
          *moved = true;
          continue;
        }
        if (take > 0) {
          if (absl::Status s = CombineForward(op, in, take); !s.ok()) return s;
          ring->Consume(op.lane, take);
          *moved = true;
          continue;
        }
        // A returned message cannot be staged (its bytes must go back in place); payloads start 16-byte aligned
        // and the ring's size is a multiple of 16, so an element never straddles the wrap: the rest of one
        // partly written is still to come.
        if (avail == 0 || op.returns) return absl::OkStatus();
        // Fewer than one element before the wrap: stage it below.
      }
    }
    if (stage_.empty()) stage_.resize(kPiece);
    std::memcpy(stage_.data(), op.carry, op.carried);
    const size_t room = std::min(want, stage_.size()) - op.carried;
    auto n = pair.TryRead(op.lane, stage_.data() + op.carried, room);
    if (!n.ok()) return n.status();
    if (*n == 0) return absl::OkStatus();
    *moved = true;
    const size_t have = op.carried + *n;
    const size_t whole = have / es * es;
    if (whole > 0) c.combine(c, op.data + op.payload_done, op.local + op.payload_done, stage_.data(), whole / es);
    op.payload_done += whole;
    op.carried = have - whole;
    std::memcpy(op.carry, stage_.data() + whole, op.carried);
  }
  auto padded = SkipPad(op, pair, moved);
  if (!padded.ok()) return padded.status();
  op.done = *padded;
  return absl::OkStatus();
}

}  // namespace hccltune
