// `hccl-tune get`: the tuned configuration for one call.
#include <iostream>
#include <memory>

#include "absl/strings/str_format.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/store_access.h"

namespace hccltune::cli {

void RegisterGet(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("get", "Look up the tuned configuration for one call");
  struct Args {
    StoreFlags store;
    std::string coll, dtype, bytes, topology;
    int world = 0;
    int64_t version = 0;
  };
  auto a = std::make_shared<Args>();
  AddStoreFlags(cmd, &a->store);
  cmd->add_option("--coll", a->coll, "Collective, e.g. allreduce")->required();
  cmd->add_option("--dtype", a->dtype, "Data type, e.g. fp32")->required();
  cmd->add_option("--bytes", a->bytes, "Size in bytes (suffixes K, M, G)")->required();
  cmd->add_option("--world", a->world, "World size")->required();
  cmd->add_option("--topology", a->topology, "Topology fingerprint")->required();
  cmd->add_option("--version", a->version, "Table version (default latest)");
  cmd->callback([a, exit_code] {
    auto coll = ParseCollective(a->coll);
    auto dtype = ParseDataType(a->dtype);
    auto bytes = ParseBytes(a->bytes);
    for (const absl::Status& s : {coll.status(), dtype.status(), bytes.status()}) {
      if (!s.ok()) {
        *exit_code = ReportError(absl::InvalidArgumentError(s.message()));
        return;
      }
    }
    auto opened = OpenStore(a->store);
    if (!opened.ok()) {
      *exit_code = ReportError(opened.status());
      return;
    }
    auto e = opened->store->Lookup(a->topology, *coll, *dtype, a->world, *bytes, a->version);
    if (!e.ok()) {
      *exit_code = ReportError(e.status());
      return;
    }
    if (!e->has_value()) {
      *exit_code = ReportError(absl::NotFoundError(
          absl::StrFormat("no tuned entry for %s %s world %d at %s bytes in topology %s", CollectiveName(*coll),
                          DataTypeName(*dtype), a->world, FormatBytes(*bytes), a->topology)));
      return;
    }
    const db::TunedEntry& x = **e;
    std::cout << x.configuration << "\n";
    std::cerr << absl::StrFormat("range %s  time %.2f us  busbw %.2f GB/s  margin %.1f%%  runner-up %s\n",
                                 FormatByteRange(x.key.range), x.time_us, x.busbw_gbps, 100 * x.margin,
                                 x.runner_up.empty() ? "-" : x.runner_up);
    *exit_code = 0;
  });
}

}  // namespace hccltune::cli
