// Non-temporal ("streaming") stores for outputs nobody reads back soon.
//
// A plain store first reads the destination line into the cache (read for ownership) and later writes it
// back: a copy of S bytes moves 3S through memory. A non-temporal store writes whole lines straight to memory:
// 2S. On this project's reference machine a 64 MiB copy runs at 12 GB/s this way against 7 GB/s with memcpy
// on one core (18 vs 13 on two; BM_Memcpy and BM_CopyStreaming in tests/perf/kernels_bench.cc). The price: the data is
// not in the cache afterwards, so these are only for large outputs (the communicator decides per call,
// HCCL_TUNE_NT_STORES).
//
// CopyStreaming ends with a store fence: once it returns, the bytes are visible to other processes like ordinary
// stores (a flag or ring index published after it cannot overtake them). ReduceStreaming (kernels.h) is the
// reduction counterpart.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>

namespace hccltune {

// memcpy with non-temporal stores for the 64-byte lines of `dst` (the unaligned head and tail are copied
// plainly), then a store fence. `dst` and `src` must not overlap.
void CopyStreaming(void* dst, const void* src, size_t bytes);

// The same without the fence, for a caller that writes several pieces and fences once (StreamFence) before
// anyone else may look at them.
void CopyStreamingNoFence(void* dst, const void* src, size_t bytes);
void StreamFence();

// The bytes of one call that are written with non-temporal stores: its output buffer when the call is large
// enough (the communicator decides, HCCL_TUNE_NT_STORES), empty otherwise. Scratch and ring memory is never in
// it, so a write streams only when its destination is the user's output.
struct StreamRegion {
  const char* begin = nullptr;
  size_t bytes = 0;
  bool Contains(const void* p, size_t n) const {
    const char* c = static_cast<const char*>(p);
    return begin != nullptr && bytes != 0 && c >= begin && n <= bytes && static_cast<size_t>(c - begin) <= bytes - n;
  }
};

}  // namespace hccltune
