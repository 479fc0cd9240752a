// `hccl-tune algorithms`: the algorithm catalogue with each algorithm's tunable parameters.
#include <cstdio>
#include <iostream>
#include <memory>

#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "runtime/common/configuration.h"
#include "tuner/cli/commands.h"

namespace hccltune::cli {

void RegisterAlgorithms(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("algorithms", "List algorithms and their tunable parameters");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([json, exit_code] {
    nlohmann::json out = nlohmann::json::array();
    for (const AlgorithmSpec& spec : AlgorithmCatalogue()) {
      auto def = Configuration::Default(spec.name);
      std::vector<std::string> params;
      for (ParamKind p : spec.params) params.emplace_back(ParamName(p));
      if (*json) {
        out.push_back({{"algorithm", std::string(spec.name)},
                       {"parameters", params},
                       {"default", def.ok() ? def->ToString() : ""},
                       {"summary", std::string(spec.summary)}});
      } else {
        std::printf("%-22s %-60s %s\n", std::string(spec.name).c_str(), def.ok() ? def->ToString().c_str() : "",
                    std::string(spec.summary).c_str());
      }
    }
    if (*json) std::cout << out.dump(2) << "\n";
    *exit_code = 0;
  });
}

}  // namespace hccltune::cli
