// `hccl-tune export FILE` / `hccl-tune import FILE`: tuned tables as JSON (db/table_json.h); export -> import ->
// export is byte-identical. FILE "-" is stdout / stdin. Export replaces FILE only once the whole file is written.
#include <fcntl.h>
#include <libgen.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "db/table_json.h"
#include "runtime/common/bounded_read.h"
#include "runtime/common/peer_configuration.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/store_access.h"
#include "tuner/export/hccl_env.h"
#include "tuner/export/openmpi_rules.h"

namespace hccltune::cli {
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

struct ExportArgs {
  std::string format = "json", topology;
  int world = 0;
};

// The text `export` writes in `format`.
absl::StatusOr<std::string> ExportText(db::TuningStore& store, const ExportArgs& a) {
  if (a.format == "json") return db::ExportStore(store);
  if (a.format == "hccl-env") {
    auto e = exporter::ExportHcclEnv(store, a.topology, a.world);
    if (!e.ok()) return e.status();
    return e->text;
  }
  if (a.format == "openmpi-rules") {
    auto t = exporter::PickTable(store, a.topology, kOpenMpi);
    if (!t.ok()) return t.status();
    return exporter::OpenMpiRules(*t);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--format ", a.format, " is unknown; accepted: json, hccl-env, openmpi-rules"));
}

}  // namespace

void RegisterExport(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand(
      "export", "Write the tuned tables: every table as JSON (default), or one table where a runtime reads it");
  auto flags = std::make_shared<StoreFlags>();
  auto file = std::make_shared<std::string>();
  auto a = std::make_shared<ExportArgs>();
  cmd->add_option("FILE", *file, "Output file, - for stdout")->required();
  cmd->add_option("--format", a->format,
                  "json: every table (import reads it back); hccl-env: HCCL_ALGO for one table of this runtime; "
                  "openmpi-rules: Open MPI's coll/tuned dynamic rules file for one table of runtime openmpi")
      ->capture_default_str();
  cmd->add_option("--topology", a->topology,
                  "Per-table formats: the table's fingerprint (default: the store's only table of that runtime)");
  cmd->add_option("--world", a->world,
                  "hccl-env: the world size (default: the table's only one); openmpi-rules covers every world size");
  AddStoreFlags(cmd, flags.get());
  cmd->callback([flags, file, a, exit_code] {
    if (a->format == "json" && (!a->topology.empty() || a->world != 0)) {
      *exit_code = ReportError(absl::InvalidArgumentError(
          "--topology and --world select one table for the per-table formats; --format json writes every table"));
      return;
    }
    auto opened = OpenStore(*flags);
    if (!opened.ok()) {
      *exit_code = ReportError(opened.status());
      return;
    }
    auto text = ExportText(*opened->store, *a);
    if (!text.ok()) {
      *exit_code = ReportError(text.status());
      return;
    }
    if (*file == "-") {
      errno = 0;
      std::cout << *text << std::flush;
      if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
        *exit_code = ReportError(WriteError("", "stdout", errno != 0 ? errno : EIO));
        return;
      }
    } else if (absl::Status s = WriteFileAtomically(*file, *text); !s.ok()) {
      *exit_code = ReportError(s);
      return;
    }
    *exit_code = 0;
  });
}

void RegisterImport(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("import", "Store the tables of a JSON file written by export");
  auto flags = std::make_shared<StoreFlags>();
  auto file = std::make_shared<std::string>();
  cmd->add_option("FILE", *file, "Input file, - for stdin")->required();
  AddStoreFlags(cmd, flags.get());
  cmd->callback([flags, file, exit_code] {
    auto text = *file == "-" ? ReadStreamAtMost(std::cin, db::kMaxTableFileBytes, "the table file on stdin")
                             : ReadFileAtMost(*file, db::kMaxTableFileBytes, "the table file");
    if (!text.ok()) {
      *exit_code = ReportError(text.status());
      return;
    }
    auto opened = OpenStore(*flags);
    if (!opened.ok()) {
      *exit_code = ReportError(opened.status());
      return;
    }
    std::vector<std::string> edited;
    auto changed = db::ImportIntoStore(*opened->store, *text, &edited);
    if (!changed.ok()) {
      *exit_code = ReportError(changed.status());
      return;
    }
    for (const std::string& t : edited) {
      std::cerr << "hccl-tune import: warning: " << t
                << ": the entries differ from the content_hash written at export (edited or damaged since); "
                   "imported as they are\n";
    }
    std::cerr << "imported: " << *changed << " table(s) changed\n";
    *exit_code = 0;
  });
}

}  // namespace hccltune::cli
