#include "runtime/algorithms/symmetric_call.h"

namespace hccltune::algo {
namespace {

constexpr uint64_t kHeaderMagic = 0x314c4c41434d5953ull;  // "SYMCALL1"
constexpr uint64_t kNone = ~uint64_t{0};                  // not in symmetric memory
constexpr uint64_t kUnused = ~uint64_t{0} - 1;            // the collective does not use this buffer here

struct Header {
  uint64_t magic;
  uint64_t send_id, send_offset;
  uint64_t recv_id, recv_offset;
  uint64_t count;
  int64_t root;
};

// Where this rank's buffer is: (allocation, offset), kNone or kUnused.
void Locate(const AlgorithmContext& ctx, const void* p, size_t bytes, uint64_t* id, uint64_t* offset) {
  *offset = 0;
  SymmetricBuffer b;
  if (p == nullptr || bytes == 0) {
    *id = kUnused;
  } else if (ctx.FindSymmetric(p, bytes, &b)) {
    *id = b.id;
    *offset = b.offset;
  } else {
    *id = kNone;
  }
}

}  // namespace

size_t SymmetricCall::ScratchBytes(int n) {
  // Headers, the two pointer arrays, the exit flags; rounded up to a cache line so what the caller keeps after
  // them stays aligned.
  const size_t bytes = static_cast<size_t>(n) * (sizeof(Header) + sizeof(const char*) + sizeof(char*) + 1);
  return CeilDiv(bytes, size_t{64}) * 64;
}

absl::StatusOr<SymmetricCall> SymmetricCall::Enter(const Group& g, const AlgorithmContext& ctx,
                                                   const CollectiveArgs& args, const void* send, size_t send_bytes,
                                                   const void* recv, size_t recv_bytes, void* scratch) {
  const size_t n = static_cast<size_t>(g.size);
  auto* headers = static_cast<Header*>(scratch);
  Header& mine = headers[g.rank];
  mine.magic = kHeaderMagic;
  Locate(ctx, send, send_bytes, &mine.send_id, &mine.send_offset);
  Locate(ctx, recv, recv_bytes, &mine.recv_id, &mine.recv_offset);
  mine.count = args.count;
  mine.root = args.root;
  for (int q = 0; q < g.size; ++q) {
    if (q != g.rank) g.ep->Irecv(q, &headers[q], sizeof(Header));
  }
  for (int q = 0; q < g.size; ++q) {
    if (q != g.rank) g.ep->Isend(q, &mine, sizeof(Header));
  }
  HT_RETURN_IF_ERROR(g.ep->WaitAll());
  const absl::string_view what = CollectiveName(args.collective);
  for (int q = 0; q < g.size; ++q) {
    const Header& h = headers[q];
    if (h.magic != kHeaderMagic) {
      return AgreedVerdict(
          absl::InvalidArgumentError(absl::StrCat("symmetric ", what, ": rank ", q,
                                                  " is not running the symmetric algorithm (every rank must "
                                                  "pass buffers from symmetric memory)")));
    }
    if (h.send_id == kNone || h.recv_id == kNone) {
      return AgreedVerdict(absl::InvalidArgumentError(absl::StrCat(
          "symmetric ", what, ": rank ", q, "'s ", h.send_id == kNone ? "send" : "recv",
          " buffer is not inside memory from Communicator::AllocSymmetric (hccltune_mem_alloc); every rank must "
          "pass symmetric buffers")));
    }
    if (h.count != mine.count || h.root != mine.root) {
      return AgreedVerdict(absl::InvalidArgumentError(absl::StrCat("symmetric ", what, ": rank ", g.rank, " has count ",
                                                                   mine.count, " and root ", mine.root, ", rank ", q,
                                                                   " count ", h.count, " and root ", h.root)));
    }
  }
  SymmetricCall call;
  call.g_ = &g;
  call.send_ = reinterpret_cast<const char**>(headers + n);
  call.recv_ = reinterpret_cast<char**>(reinterpret_cast<char*>(call.send_ + n));
  call.done_ = reinterpret_cast<char*>(call.recv_ + n);
  call.what_ = what;
  absl::Status missing;
  for (int q = 0; q < g.size; ++q) {
    const Header& h = headers[q];
    auto at = [&](uint64_t id, uint64_t offset) -> char* {
      if (id == kUnused) return nullptr;
      const std::vector<char*>* bases = ctx.SymmetricBases(id);
      if (bases == nullptr || bases->size() != n) {
        missing = AgreedVerdict(absl::InvalidArgumentError(absl::StrCat("symmetric ", what, ": rank ", q,
                                                                        "'s buffer is in symmetric allocation ", id,
                                                                        ", which rank ", g.rank, " has freed")));
        return nullptr;
      }
      return (*bases)[static_cast<size_t>(q)] + offset;
    };
    call.send_[q] = at(h.send_id, h.send_offset);
    call.recv_[q] = at(h.recv_id, h.recv_offset);
  }
  if (!missing.ok()) {
    // Only this rank knows (it freed what a peer still uses): finish the exit round, telling the others that
    // its part was not done, so nobody waits for it and nobody returns success with its part missing.
    (void)call.Leave(false);
    return missing;
  }
  return call;
}

absl::Status SymmetricCall::Leave(bool done) const {
  done_[g_->rank] = done ? 1 : 0;
  for (int q = 0; q < g_->size; ++q) {
    if (q != g_->rank) g_->ep->Irecv(q, &done_[q], 1);
  }
  for (int q = 0; q < g_->size; ++q) {
    if (q != g_->rank) g_->ep->Isend(q, &done_[g_->rank], 1);
  }
  HT_RETURN_IF_ERROR(g_->ep->WaitAll());
  for (int q = 0; q < g_->size; ++q) {
    if (done && done_[q] != 1) {
      // Every rank finished both rounds: the communicator stays usable (InvalidArgument does not break it).
      return AgreedVerdict(absl::InvalidArgumentError(
          absl::StrCat("symmetric ", what_, ": rank ", q,
                       " could not do its part (a buffer of this call is in a symmetric allocation it has freed); "
                       "the outputs of this call are incomplete")));
    }
  }
  return absl::OkStatus();
}

// The slice [begin, end) of `count` elements rank r of n owns in a symmetric reduction: whole cache lines, so no
// two ranks write one line.
void SymmetricSlice(size_t count, size_t dsize, int n, int r, size_t* begin, size_t* end) {
  const size_t line = std::max<size_t>(1, 64 / dsize);
  const size_t units = CeilDiv(count, line);
  *begin = std::min(count, BlockStart(units, n, r) * line);
  *end = std::min(count, *begin + BlockCount(units, n, r) * line);
}

// out[k][0..count) = in[0] op in[1] op ... op in[n-1] for every k < m: fused where ReduceFanout can, else
// through `tile` (kSymmetricTileBytes) with avg finished there: fp32/fp64 divided once, fp16/bf16 by AverageN
// (each input scaled by 1/n, summed in fp32, rounded once; internal.h).
void SymmetricReduce(const CollectiveArgs& args, const void* const* in, int n, void* const* out, int m, size_t count,
                     char* tile) {
  const bool streaming = args.stream.bytes > 0;
  if (count == 0 || ReduceFanout(args.dtype, args.op, in, n, out, m, count, streaming)) return;
  const size_t dsize = DataTypeSize(args.dtype);
  const size_t tile_elems = kSymmetricTileBytes / dsize;
  for (size_t i = 0; i < count; i += tile_elems) {
    const size_t t = std::min(tile_elems, count - i);
    auto input = [&](int k) { return static_cast<const char*>(in[k]) + i * dsize; };
    if (ScalesInputs(args)) {
      AverageN(args.dtype, in, n, i, tile, t);
    } else {
      Reduce(args.dtype, args.op, tile, input(0), input(1), t);
      for (int k = 2; k < n; ++k) Reduce(args.dtype, args.op, tile, tile, input(k), t);
      MaybeFinalizeAvg(args, tile, t, n);
    }
    for (int k = 0; k < m; ++k) {
      char* dst = static_cast<char*>(out[k]) + i * dsize;
      if (streaming) {
        CopyStreaming(dst, tile, t * dsize);
      } else {
        std::memcpy(dst, tile, t * dsize);
      }
    }
  }
}

}  // namespace hccltune::algo
