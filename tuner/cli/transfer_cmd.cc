// `hccl-tune export FILE` / `hccl-tune import FILE`: tuned tables as JSON (db/table_json.h); export -> import ->
// export is byte-identical. FILE "-" is stdout / stdin.
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "db/table_json.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/store_access.h"

namespace hccltune::cli {

void RegisterExport(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("export", "Write every tuned table (latest versions) to a JSON file");
  auto flags = std::make_shared<StoreFlags>();
  auto file = std::make_shared<std::string>();
  cmd->add_option("FILE", *file, "Output file, - for stdout")->required();
  AddStoreFlags(cmd, flags.get());
  cmd->callback([flags, file, exit_code] {
    auto opened = OpenStore(*flags);
    if (!opened.ok()) {
      *exit_code = ReportError(opened.status());
      return;
    }
    auto text = db::ExportStore(*opened->store);
    if (!text.ok()) {
      *exit_code = ReportError(text.status());
      return;
    }
    if (*file == "-") {
      std::cout << *text;
    } else {
      std::ofstream out(*file, std::ios::binary | std::ios::trunc);
      out << *text;
      if (!out.good()) {
        *exit_code = ReportError(absl::UnavailableError(absl::StrCat("cannot write ", *file)));
        return;
      }
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
    std::stringstream ss;
    if (*file == "-") {
      ss << std::cin.rdbuf();
    } else {
      std::ifstream in(*file, std::ios::binary);
      if (!in) {
        *exit_code = ReportError(absl::NotFoundError(absl::StrCat("cannot read ", *file)));
        return;
      }
      ss << in.rdbuf();
    }
    auto opened = OpenStore(*flags);
    if (!opened.ok()) {
      *exit_code = ReportError(opened.status());
      return;
    }
    auto changed = db::ImportIntoStore(*opened->store, ss.str());
    if (!changed.ok()) {
      *exit_code = ReportError(changed.status());
      return;
    }
    std::cerr << "imported: " << *changed << " table(s) changed\n";
    *exit_code = 0;
  });
}

}  // namespace hccltune::cli
