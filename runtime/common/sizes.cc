#include "runtime/common/sizes.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace hccltune {

absl::StatusOr<uint64_t> ParseBytes(absl::string_view text, SizeSuffixes suffixes) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  if (s.empty()) return absl::InvalidArgumentError("empty byte size");
  for (char c : s) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(absl::StrCat("invalid byte size '", text, "': no spaces inside a size"));
    }
  }
  // Optional trailing "B" / "iB".
  if (s.size() > 1 && (s.back() == 'B' || s.back() == 'b')) {
    s.remove_suffix(1);
    if (s.size() > 1 && (s.back() == 'i' || s.back() == 'I')) s.remove_suffix(1);
  }
  int shift = 0;
  if (!s.empty()) {
    switch (std::toupper(static_cast<unsigned char>(s.back()))) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T':
        if (suffixes == SizeSuffixes::kConventions) {
          return absl::InvalidArgumentError(
              absl::StrCat("invalid byte size '", text, "': the suffixes are K, M and G (binary); no T"));
        }
        shift = 40;
        break;
      default: break;
    }
  }
  if (shift != 0) s.remove_suffix(1);
  uint64_t value = 0;
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s.front())) || !absl::SimpleAtoi(s, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid byte size '", text, "': expected a non-negative integer with optional K, M or G"));
  }
  if (shift != 0 && value > (kUnbounded >> shift)) {
    return absl::OutOfRangeError(absl::StrCat("byte size '", text, "' overflows 64 bits"));
  }
  return value << shift;
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes == 0) return "0";
  static constexpr struct {
    int shift;
    char suffix;
  } kUnits[] = {{40, 'T'}, {30, 'G'}, {20, 'M'}, {10, 'K'}};
  for (const auto& u : kUnits) {
    const uint64_t unit = uint64_t{1} << u.shift;
    if (bytes % unit == 0) return absl::StrCat(bytes / unit, std::string(1, u.suffix));
  }
  return absl::StrCat(bytes);
}

absl::StatusOr<ByteRange> ParseByteRange(absl::string_view text, SizeSuffixes suffixes) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  const size_t dash = s.find('-');
  if (dash == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid byte range '", text, "': expected MIN-MAX or MIN- (e.g. 0-64K, 64K-)"));
  }
  ByteRange r;
  auto lo = ParseBytes(s.substr(0, dash), suffixes);
  if (!lo.ok()) return absl::InvalidArgumentError(absl::StrCat("byte range '", text, "': ", lo.status().message()));
  r.min = *lo;
  absl::string_view hi_text = s.substr(dash + 1);
  if (!absl::StripAsciiWhitespace(hi_text).empty()) {
    auto hi = ParseBytes(hi_text, suffixes);
    if (!hi.ok()) return absl::InvalidArgumentError(absl::StrCat("byte range '", text, "': ", hi.status().message()));
    r.max = *hi;
  }
  if (r.max <= r.min) {
    return absl::InvalidArgumentError(absl::StrCat("byte range '", text, "' is empty or inverted"));
  }
  return r;
}

std::string FormatByteRange(const ByteRange& range) {
  if (range.max == kUnbounded) return absl::StrCat(FormatBytes(range.min), "-");
  return absl::StrCat(FormatBytes(range.min), "-", FormatBytes(range.max));
}

}  // namespace hccltune
