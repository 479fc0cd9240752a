// Reading a whole file or stream into memory with a bound on its size, so a file of unexpected size (a device,
// a runaway log, a wrong path) is refused with an error naming the limit instead of filling memory.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <istream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hccltune {

// The file's bytes. NotFound (missing), PermissionDenied, FailedPrecondition (a directory, an I/O error) name the
// path and the cause; InvalidArgument "WHAT PATH is over the limit of N bytes" when it holds more than `limit`.
absl::StatusOr<std::string> ReadFileAtMost(const std::string& path, size_t limit, absl::string_view what);
// The stream's bytes up to its end; InvalidArgument "WHAT is over the limit of N bytes" beyond `limit`.
absl::StatusOr<std::string> ReadStreamAtMost(std::istream& in, size_t limit, absl::string_view what);

}  // namespace hccltune
