// Byte sizes and half-open byte ranges as docs/CONVENTIONS.md writes them: binary suffixes K, M, G
// (1K = 1024), ranges "[min, max)" written "0-64K", an open upper end "64K-".
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hccltune {

// Which suffixes a size may carry. kConventions: K, M and G, the ones docs/CONVENTIONS.md defines — what people write
// in the override grammars (HCCL_TUNE_ALGO, rule tables). kAny also reads T (2^40), which FormatBytes prints
// for multiples of 2^40, so that what this program wrote (table exports, sweep state) reads back.
enum class SizeSuffixes : uint8_t { kAny, kConventions };

// Parses "4096", "64K", "1M", "2G" (case-insensitive suffix, optional trailing "B"/"iB"; "T" too with kAny).
// Whitespace around the size is ignored; inside it ("1 K") it is an error.
absl::StatusOr<uint64_t> ParseBytes(absl::string_view text, SizeSuffixes suffixes = SizeSuffixes::kAny);
// Prints with the largest binary suffix that divides the value exactly: 1048576 -> "1M", 1536 -> "1536".
std::string FormatBytes(uint64_t bytes);

inline constexpr uint64_t kUnbounded = std::numeric_limits<uint64_t>::max();

// Half-open byte range [min, max); max == kUnbounded means open-ended.
struct ByteRange {
  uint64_t min = 0;
  uint64_t max = kUnbounded;

  bool Contains(uint64_t bytes) const { return bytes >= min && bytes < max; }
  friend bool operator==(const ByteRange& a, const ByteRange& b) { return a.min == b.min && a.max == b.max; }
};

// "0-64K", "64K-", "1M-4M". Empty or inverted ranges are errors.
absl::StatusOr<ByteRange> ParseByteRange(absl::string_view text, SizeSuffixes suffixes = SizeSuffixes::kAny);
std::string FormatByteRange(const ByteRange& range);

}  // namespace hccltune
