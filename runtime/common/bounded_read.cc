#include "runtime/common/bounded_read.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace hccltune {
namespace {

absl::Status OverLimit(absl::string_view what, size_t limit) {
  return absl::InvalidArgumentError(absl::StrCat(what, " is over the limit of ", limit, " bytes"));
}

}  // namespace

absl::StatusOr<std::string> ReadFileAtMost(const std::string& path, size_t limit, absl::string_view what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  auto failed = [&](int err) {
    const std::string msg = absl::StrCat("cannot read ", what, " ", path, ": ", std::strerror(err));
    if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(msg);
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
    return absl::FailedPreconditionError(msg);
  };
  if (fd < 0) return failed(errno);
  std::string text;
  char buf[64 << 10];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
      if (text.size() > limit) {
        ::close(fd);
        return OverLimit(absl::StrCat(what, " ", path), limit);
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {  // EISDIR, EIO: the file is there but cannot be read
      const int err = errno;
      ::close(fd);
      return failed(err);
    }
    break;
  }
  ::close(fd);
  return text;
}

absl::StatusOr<std::string> ReadStreamAtMost(std::istream& in, size_t limit, absl::string_view what) {
  std::string text;
  char buf[64 << 10];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > limit) return OverLimit(what, limit);
  }
  return text;
}

}  // namespace hccltune
