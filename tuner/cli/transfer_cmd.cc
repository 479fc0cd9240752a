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
#include "tuner/peer_export/mpich_json.h"
#include "tuner/peer_export/openmpi_rules.h"
#include "tuner/peer_export/peer_files.h"

namespace hccltune::cli {
namespace {

absl::Status WriteError(const std::string& what, const std::string& file, int err) {
  return absl::UnavailableError(absl::StrCat("cannot write ", file, ": ", what, std::strerror(err)));
}

struct ExportArgs {
  std::string format = "json", topology, mpich_lib;
  int world = 0;
};

// `--format mpich-json`: FILE (the MPIR level) and FILE.ch4 (the device level), each replaced whole.
absl::Status ExportMpichJson(db::TuningStore& store, const ExportArgs& a, const std::string& file) {
  if (file == "-") {
    return absl::InvalidArgumentError("--format mpich-json writes two files, FILE and FILE.ch4: give a path");
  }
  auto t = exporter::PickTable(store, a.topology, kMpich);
  if (!t.ok()) return t.status();
  const std::string lib = a.mpich_lib.empty() ? exporter::DefaultMpichLibrary() : a.mpich_lib;
  if (lib.empty()) {
    return absl::NotFoundError("no libmpich.so.12 in the usual places: pass --mpich-lib PATH (MPICH 4.0)");
  }
  auto builtin = exporter::ReadMpichBuiltin(lib);
  if (!builtin.ok()) return builtin.status();
  auto files = exporter::MpichJson(*t, *builtin);
  if (!files.ok()) return files.status();
  if (absl::Status s = exporter::WriteFileAtomically(file, files->mpir); !s.ok()) return s;
  return exporter::WriteFileAtomically(file + ".ch4", files->ch4);
}

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
      absl::StrCat("--format ", a.format, " is unknown; accepted: json, hccl-env, openmpi-rules, mpich-json"));
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
                  "openmpi-rules: Open MPI's coll/tuned dynamic rules file for one table of runtime openmpi; "
                  "mpich-json: MPICH's selection files FILE (MPIR level) and FILE.ch4 (ch4 level) for one table of "
                  "runtime mpich")
      ->capture_default_str();
  cmd->add_option("--topology", a->topology,
                  "Per-table formats: the table's fingerprint (default: the store's only table of that runtime)");
  cmd->add_option("--world", a->world,
                  "hccl-env: the world size (default: the table's only one); openmpi-rules covers every world size");
  cmd->add_option("--mpich-lib", a->mpich_lib,
                  "mpich-json: the libmpich.so whose built-in selection the files extend (default: the system's)");
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
    if (a->format == "mpich-json") {
      absl::Status s = ExportMpichJson(*opened->store, *a, *file);
      *exit_code = s.ok() ? 0 : ReportError(s);
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
    } else if (absl::Status s = exporter::WriteFileAtomically(*file, *text); !s.ok()) {
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
