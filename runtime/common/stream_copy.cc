#include "runtime/common/stream_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace hccltune {
namespace {

constexpr size_t kLine = 64;

#if defined(__x86_64__)
// Lines of 64 bytes from `src` (any alignment) to a 64-byte aligned `dst`, no fence.
void StreamLinesSse2(char* dst, const char* src, size_t lines) {
  for (size_t i = 0; i < lines; ++i, dst += kLine, src += kLine) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 48), d);
  }
}

__attribute__((target("avx"))) void StreamLinesAvx(char* dst, const char* src, size_t lines) {
  for (size_t i = 0; i < lines; ++i, dst += kLine, src += kLine) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 32));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + 32), b);
  }
}

using StreamLinesFn = void (*)(char*, const char*, size_t);
StreamLinesFn SelectStreamLines() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx") ? StreamLinesAvx : StreamLinesSse2;
}
#endif

}  // namespace

void CopyStreamingNoFence(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const size_t head = std::min(bytes, (kLine - reinterpret_cast<uintptr_t>(d) % kLine) % kLine);
  std::memcpy(d, s, head);
  d += head, s += head, bytes -= head;
  static const StreamLinesFn lines = SelectStreamLines();
  lines(d, s, bytes / kLine);
  const size_t body = bytes / kLine * kLine;
  std::memcpy(d + body, s + body, bytes - body);
#else
  std::memcpy(dst, src, bytes);
#endif
}

void StreamFence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

void CopyStreaming(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  CopyStreamingNoFence(dst, src, bytes);
  StreamFence();
}

}  // namespace hccltune
