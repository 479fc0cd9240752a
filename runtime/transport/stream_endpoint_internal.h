// StreamEndpoint internals shared by its two source files (stream_endpoint.cc: posting, sending, waiting;
// stream_endpoint_recv.cc: the receive paths). Not part of any interface.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/transport/stream_endpoint.h"

namespace hccltune {

struct StreamEndpoint::Header {
  uint32_t magic;
  uint32_t sequence;
  uint64_t bytes;
  uint64_t count;
  int32_t root;
  uint8_t collective, dtype, op, flags;
};
static_assert(sizeof(StreamEndpoint::Header) == 32);

namespace stream_internal {

constexpr uint32_t kHeaderMagic = 0x4854554e;  // "HTUN"
// Header flag: the payload is not in the stream; a SingleCopyDescriptor follows the header instead and the
// receiver reads the payload from the sender's memory (SingleCopyLink::ReadPeerMemory), then acknowledges.
constexpr uint8_t kFlagSingleCopy = 1;
// Header flag: the message is to be reduced and returned in place (Endpoint::IsendReturn).
constexpr uint8_t kFlagReturn = 2;
// Bytes one single-copy read moves at most for a receive-and-reduce, so it combines L2-sized pieces it just
// read. A plain receive reads the whole message with one process_vm_readv (the kernel pins and copies page by
// page either way; pieces only add system calls).
constexpr size_t kSingleCopyPiece = 256u << 10;
// Single-copy messages from this size are shared between reader and writer (SingleCopyLink::RequestPeerWrite).
constexpr size_t kSharedCopyMinBytes = 64u << 10;
// Oversubscribed, shared messages below this size give the writer a third instead of half (stream_endpoint_recv.cc).
constexpr size_t kSharedThirdBelowBytes = 512u << 10;
// Every message is padded to a multiple of kStreamAlign so that headers and payloads start aligned in the
// byte stream (the shm ring is page aligned and its size a multiple of the page size): reductions read
// elements straight out of the ring, and a float must not be read from an odd address.
constexpr size_t kStreamAlign = 16;
constexpr size_t PadFor(size_t bytes) { return (kStreamAlign - bytes % kStreamAlign) % kStreamAlign; }
// Messages up to this size travel as one frame (header + payload + padding) in one ring write and one read:
// one head update for the reader to see instead of two or three. 1 KiB frames (was 256): 512 B allreduce
// 0.74-0.75 against 0.77-0.78 us at 2 ranks, 4.3-4.5 against 4.6-4.8 at 4; 4 KiB frames measured no better.
constexpr size_t kSmallPayload = 992;

}  // namespace stream_internal

// Follows a kFlagSingleCopy header: where the payload is in the sender's address space. 16 bytes, so the
// stream stays 16-byte aligned.
struct SingleCopyDescriptor {
  uint64_t address;
  uint64_t bytes;
};
static_assert(sizeof(SingleCopyDescriptor) == 16);

struct StreamEndpoint::Op {
  int peer = 0;
  bool send = false;
  bool done = false;
  int lane = 0;
  uint8_t* data = nullptr;
  size_t bytes = 0;
  size_t header_done = 0;
  size_t payload_done = 0;  // for receive-and-reduce: bytes combined into `data`
  size_t pad_done = 0;      // padding after the payload (keeps every header and payload 16-byte aligned)
  Header header{};
  // Receive-and-reduce only.
  const uint8_t* local = nullptr;
  const Combiner* combiner = nullptr;
  uint8_t carry[16] = {};  // a partial element read but not yet combined (staged path)
  size_t carried = 0;
  // Single copy: the descriptor (sent or received) and, for a send, which acknowledgement completes it.
  SingleCopyDescriptor desc{};
  size_t desc_done = 0;
  uint64_t ticket = 0;
  // Receive-and-forward: a send's feeding receive and a receive's forward send (id + 1; 0 = none).
  uint64_t gate = 0;
  uint64_t forward = 0;
  // In-place return (`returns`). Send: where the returned bytes go, whether the frame is all written, and how
  // many of its bytes (header and padding included) came back. Receive: reduce and return.
  bool returns = false;
  uint8_t* result = nullptr;
  bool written = false;
  size_t back_done = 0;
  // Shared single copy (receiver): the front part the sender was asked to write, and that message's ticket.
  bool shared_asked = false;
  size_t front = 0;
  uint64_t front_ticket = 0;
};

}  // namespace hccltune
