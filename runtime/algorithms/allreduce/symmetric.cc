// Symmetric allreduce: for buffers in symmetric memory (Communicator::AllocSymmetric), where every rank has
// every other rank's input and output mapped. No data message at all:
//   1. every rank sends each peer a 48-byte header (which allocation and offsets its send and recv buffers are
//      at, and the count) and receives theirs: this is both the check that all ranks passed the same places of
//      the same allocations (a mismatch is an InvalidArgument on every rank, naming the ranks) and the
//      guarantee that every rank has entered the call (its input is ready, its output may be written);
//   2. the count is cut into n cache-line-aligned slices; rank r reduces slice r of all n inputs, in rank order
//      0, 1, ..., n-1, and writes the result into slice r of all n outputs — in one fused pass where a kernel
//      exists (ReduceFanout: fp32 sum/prod/min/max), else through a tile in L1 (avg divides the tile once) —
//      with non-temporal stores for a call in the communicator's stream region;
//   3. every rank sends each peer an empty message and waits for theirs: nobody returns (and reuses its input,
//      or reads its output) before every rank has finished reading and writing.
// Each value is computed once and copied to every rank, so results are bit-identical. In place is safe: slice
// r of every buffer is read and written only by rank r, each tile read in full before it is written.
//
// Per rank the memory traffic is what the bound counts (its slice of n inputs read once, n outputs written
// once) — against the ring's extra copy of every byte through a shared ring — and both of step 2's streams run
// on every core at once. Cost: two message rounds of n-1 tiny messages, so small calls stay with the other
// algorithms (the communicator picks this one for `auto` from SymmetricFromBytes, runtime/api/communicator.h).
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {
namespace {

struct SymmetricHeader {
  uint64_t magic;
  uint64_t send_id, send_offset;
  uint64_t recv_id, recv_offset;
  uint64_t count;
  bool operator==(const SymmetricHeader&) const = default;
};
constexpr uint64_t kHeaderMagic = 0x4c4c41524d4d5953ull;  // "SYMMRALL"
constexpr size_t kTileBytes = 32u << 10;                  // fits L1 with room for the streams
constexpr uint64_t kNone = ~uint64_t{0};                  // "not in symmetric memory"

}  // namespace

absl::Status AllreduceSymmetric(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  // A buffer outside symmetric memory is still announced (as allocation kNone), so every rank learns of it
  // from the headers and fails at once, instead of its peers waiting for a rank that returned.
  SymmetricBuffer in, out;
  const bool send_ok = bytes == 0 || ctx.FindSymmetric(args.send, bytes, &in);
  const bool recv_ok = bytes == 0 || ctx.FindSymmetric(args.recv, bytes, &out);
  if (!send_ok) in.id = kNone;
  if (!recv_ok) out.id = kNone;
  if (g.size == 1 || bytes == 0) {
    CopyBytes(args.recv, args.send, bytes);
    return absl::OkStatus();
  }
  const size_t n = static_cast<size_t>(g.size);
  char* scratch = static_cast<char*>(ctx.Scratch(kTileBytes + n * (sizeof(SymmetricHeader) + 2 * sizeof(void*))));
  char* tile = scratch;
  auto* headers = reinterpret_cast<SymmetricHeader*>(scratch + kTileBytes);
  auto* inputs = reinterpret_cast<const void**>(headers + n);
  auto* outputs = reinterpret_cast<void**>(headers + n) + n;
  SymmetricHeader& mine = headers[g.rank];
  mine = SymmetricHeader{kHeaderMagic, in.id, in.offset, out.id, out.offset, args.count};
  for (int q = 0; q < g.size; ++q) {
    if (q != g.rank) g.ep->Irecv(q, &headers[q], sizeof(SymmetricHeader));
  }
  for (int q = 0; q < g.size; ++q) {
    if (q != g.rank) g.ep->Isend(q, &mine, sizeof(SymmetricHeader));
  }
  HT_RETURN_IF_ERROR(g.ep->WaitAll());
  for (int q = 0; q < g.size; ++q) {
    const SymmetricHeader& h = headers[q];
    if (h.magic == kHeaderMagic && (h.send_id == kNone || h.recv_id == kNone)) {
      return absl::InvalidArgumentError(
          absl::StrCat("symmetric allreduce: rank ", q, "'s ", h.send_id == kNone ? "send" : "recv",
                       " buffer is not inside memory from Communicator::AllocSymmetric (hccltune_mem_alloc); every "
                       "rank must pass symmetric buffers"));
    }
  }
  for (int q = 0; q < g.size; ++q) {
    const SymmetricHeader& h = headers[q];
    if (h == mine) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "symmetric allreduce: ranks must pass the same offsets of the same symmetric allocations; rank ", g.rank,
        " has send at ", mine.send_offset, " of allocation ", mine.send_id, ", recv at ", mine.recv_offset,
        " of allocation ", mine.recv_id, ", count ", mine.count, "; rank ", q, " has send at ", h.send_offset,
        " of allocation ", h.send_id, ", recv at ", h.recv_offset, " of allocation ", h.recv_id, ", count ", h.count,
        h.magic == kHeaderMagic ? "" : " (not a symmetric header)"));
  }

  // This rank's slice, in whole cache lines (so no two ranks write one line).
  const size_t line = std::max<size_t>(1, 64 / g.dsize);
  const size_t units = CeilDiv(args.count, line);
  const size_t begin = std::min(args.count, BlockStart(units, g.size, g.rank) * line);
  const size_t end = std::min(args.count, begin + BlockCount(units, g.size, g.rank) * line);
  const bool streaming = args.stream.bytes > 0;
  const size_t off = begin * g.dsize;
  for (int k = 0; k < g.size; ++k) {
    inputs[k] = in.at(k) + off;
    outputs[k] = out.at((g.rank + k) % g.size) + off;  // own output first
  }
  if (end > begin && !ReduceFanout(args.dtype, args.op, inputs, g.size, outputs, g.size, end - begin, streaming)) {
    // No fused kernel for this type/op: reduce a tile in L1, then copy it to every output.
    const size_t tile_elems = kTileBytes / g.dsize;
    for (size_t i = 0; i < end - begin; i += tile_elems) {
      const size_t t = std::min(tile_elems, end - begin - i);
      const size_t at = i * g.dsize;
      auto input = [&](int k) { return static_cast<const char*>(inputs[k]) + at; };
      Reduce(args.dtype, args.op, tile, input(0), input(1), t);
      for (int k = 2; k < g.size; ++k) Reduce(args.dtype, args.op, tile, tile, input(k), t);
      MaybeFinalizeAvg(args, tile, t, g.size);
      for (int k = 0; k < g.size; ++k) {
        char* dst = static_cast<char*>(outputs[k]) + at;
        if (streaming) {
          CopyStreaming(dst, tile, t * g.dsize);
        } else {
          std::memcpy(dst, tile, t * g.dsize);
        }
      }
    }
  }

  for (int q = 0; q < g.size; ++q) {
    if (q != g.rank) g.ep->Irecv(q, tile, 0);
  }
  for (int q = 0; q < g.size; ++q) {
    if (q != g.rank) g.ep->Isend(q, tile, 0);
  }
  return g.ep->WaitAll();
}

}  // namespace hccltune::algo
