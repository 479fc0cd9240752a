#include "tuner/peer_export/peer_files.h"

#include <fcntl.h>
#include <libgen.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "runtime/common/fingerprint.h"
#include "runtime/common/peer_configuration.h"
#include "tuner/peer_export/openmpi_rules.h"

namespace hccltune::exporter {
namespace {

absl::Status WriteError(const std::string& what, const std::string& file, int err) {
  return absl::UnavailableError(absl::StrCat("cannot write ", file, ": ", what, std::strerror(err)));
}

// Writes all of `text` to `fd`, then fsync (EINVAL: the file cannot be synced, a device or a pipe) and close.
absl::Status WriteAndClose(int fd, absl::string_view text, const std::string& file) {
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      return WriteError("", file, err);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
    const int err = errno;
    ::close(fd);
    return WriteError("fsync: ", file, err);
  }
  if (::close(fd) != 0) return WriteError("close: ", file, errno);
  return absl::OkStatus();
}

}  // namespace

// `file` gets `text` whole or not at all: a regular file (or a new one) is written to a temporary file beside it,
// synced and renamed over it, so a failed export leaves the old content; a device or pipe (/dev/stdout, a FIFO)
// is written in place. A symbolic link is followed (its target is replaced, the link stays).
absl::Status WriteFileAtomically(const std::string& file, absl::string_view text) {
  std::string target = file;
  struct stat st {};
  if (::stat(file.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat("cannot write ", file, ": a directory"));
    if (!S_ISREG(st.st_mode)) {
      const int fd = ::open(file.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
      if (fd < 0) return WriteError("", file, errno);
      return WriteAndClose(fd, text, file);
    }
    char* real = ::realpath(file.c_str(), nullptr);
    if (real != nullptr) {
      target = real;
      std::free(real);
    }
  }
  std::string dir_buf = target;
  const std::string dir = ::dirname(dir_buf.data());
  // Created with 0666 less the umask, as a new file would be; a replaced file's mode is kept.
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    tmp = absl::StrCat(target, ".tmp-", ::getpid(), "-", attempt);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return WriteError(absl::StrCat("creating a temporary file in ", dir, ": "), file, errno);
  if (S_ISREG(st.st_mode)) (void)::fchmod(fd, st.st_mode & 07777);
  if (absl::Status s = WriteAndClose(fd, text, file); !s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return WriteError("rename: ", file, err);
  }
  // The rename itself reaches the disk with the directory.
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

std::vector<std::string> PeerFilePaths(const std::string& dir, absl::string_view fp) {
  const std::string base = absl::StrCat(dir, "/", fp);
  return {base + ".openmpi-rules", base + ".mpich.json", base + ".mpich.json.ch4"};
}

std::vector<std::string> RuntimeFilePaths(absl::string_view runtime, const std::string& dir, absl::string_view fp) {
  std::vector<std::string> paths = PeerFilePaths(dir, fp);
  if (runtime == kOpenMpi) return {paths[0]};
  if (runtime == kMpich) return {paths[1], paths[2]};
  return {};
}

absl::StatusOr<std::vector<PeerFile>> PeerFiles(const db::Table& table, const std::string& dir,
                                                const MpichBuiltin* mpich) {
  auto d = ParseTopologyJson(table.topology.json);
  if (!d.ok()) return d.status();
  const std::string runtime = PeerRuntimeName(d->runtime);
  const std::vector<std::string> paths = PeerFilePaths(dir, table.topology.fingerprint);
  if (runtime == kOpenMpi) {
    auto rules = OpenMpiRules(table);
    if (!rules.ok()) return rules.status();
    return std::vector<PeerFile>{{paths[0], *rules}};
  }
  if (runtime == kMpich) {
    if (mpich == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("table ", table.topology.fingerprint, " is MPICH's: its ",
                                                        "files need MPICH's built-in selection (libmpich.so)"));
    }
    auto files = MpichJson(table, *mpich);
    if (!files.ok()) return files.status();
    return std::vector<PeerFile>{{paths[1], files->mpir}, {paths[2], files->ch4}};
  }
  return absl::FailedPreconditionError(
      absl::StrCat("table ", table.topology.fingerprint, " is of runtime ", d->runtime, ": no peer runtime reads it"));
}

absl::StatusOr<std::vector<std::string>> PeerEnvLines(absl::string_view runtime, const std::string& dir,
                                                      absl::string_view fp) {
  const std::vector<std::string> paths = PeerFilePaths(dir, fp);
  auto line = [](absl::string_view name, absl::string_view value) {
    return absl::StrCat("export ", name, "='", absl::StrReplaceAll(value, {{"'", "'\\''"}}), "'");
  };
  if (runtime == kOpenMpi) {
    return std::vector<std::string>{line("OMPI_MCA_coll_tuned_use_dynamic_rules", "1"),
                                    line("OMPI_MCA_coll_tuned_dynamic_rules_filename", paths[0])};
  }
  if (runtime == kMpich) {
    return std::vector<std::string>{line("MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE", paths[1]),
                                    line("MPIR_CVAR_CH4_COLL_SELECTION_TUNING_JSON_FILE", paths[2])};
  }
  return absl::InvalidArgumentError(absl::StrCat("--runtime ", runtime, " is unknown; accepted: openmpi, mpich"));
}

}  // namespace hccltune::exporter
