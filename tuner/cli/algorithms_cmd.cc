// `hccl-tune algorithms [--coll C] [--ranks N] [--nodes M] [--json]`: the runtime's registry — per collective,
// each algorithm, its tunable parameters with their defaults, and whether it applies to N ranks on M nodes
// (with the reason when it does not); in text, then this node's RDMA ports (links/rdma_facts.h). --json adds each
// algorithm's cost formulas (registry.h, AlgorithmCost).
#include <cstdio>
#include <iostream>
#include <memory>

#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "runtime/algorithms/registry.h"
#include "runtime/common/configuration.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/local_rdma.h"

namespace hccltune::cli {
namespace {

struct AlgorithmsArgs {
  std::string coll;
  int ranks = 8;
  int nodes = 1;
  bool json = false;
};

}  // namespace

void RegisterAlgorithms(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<AlgorithmsArgs>();
  auto* cmd = app.add_subcommand("algorithms", "List the algorithms of each collective and where they apply");
  cmd->add_option("--coll", a->coll, "Only this collective");
  cmd->add_option("--ranks", a->ranks, "World size to check validity for")->capture_default_str();
  cmd->add_option("--nodes", a->nodes, "Nodes the ranks are spread over (evenly)")->capture_default_str();
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->callback([a, exit_code] {
    std::vector<Collective> colls;
    if (!a->coll.empty()) {
      auto c = ParseCollective(a->coll);
      if (!c.ok()) {
        std::fprintf(stderr, "hccl-tune algorithms: %s\n", std::string(c.status().message()).c_str());
        *exit_code = 2;
        return;
      }
      colls.push_back(*c);
    } else {
      for (Collective c : AllCollectives()) colls.push_back(c);
    }
    if (a->ranks < 1 || a->nodes < 1 || a->nodes > a->ranks) {
      std::fprintf(stderr, "hccl-tune algorithms: need 1 <= --nodes <= --ranks (got %d nodes, %d ranks)\n", a->nodes,
                   a->ranks);
      *exit_code = 2;
      return;
    }
    GroupTopology topo;
    topo.num_nodes = a->nodes;
    for (int r = 0; r < a->ranks; ++r) topo.node_of.push_back(r * a->nodes / a->ranks);
    nlohmann::json out = nlohmann::json::array();
    for (Collective c : colls) {
      for (const std::string& name : registry::AlgorithmsFor(c)) {
        const AlgorithmSpec* spec = FindAlgorithmSpec(name);
        auto def = Configuration::Default(name);
        std::vector<std::string> params;
        if (spec != nullptr) {
          for (ParamKind p : spec->params) params.emplace_back(ParamName(p));
        }
        const absl::Status valid = registry::IsValid(c, name, a->ranks, topo);
        const registry::AlgorithmCost* cost = registry::Cost(c, name);
        nlohmann::json cost_json;
        if (cost != nullptr) {
          cost_json = {{"steps", std::string(cost->steps)},
                       {"bytes", std::string(cost->bytes)},
                       {"messages", std::string(cost->Messages())},
                       {"across", std::string(registry::CrossingName(cost->across))}};
        }
        if (a->json) {
          out.push_back({{"collective", std::string(CollectiveName(c))},
                         {"cost", cost_json},
                         {"algorithm", name},
                         {"parameters", params},
                         {"default", def.ok() ? def->ToString() : ""},
                         {"valid", valid.ok()},
                         {"reason", std::string(valid.message())},
                         {"summary", spec != nullptr ? std::string(spec->summary) : ""}});
        } else {
          std::printf("%-13s %-20s %-5s %s%s\n", std::string(CollectiveName(c)).c_str(), name.c_str(),
                      valid.ok() ? "yes" : "no", def.ok() ? def->ToString().c_str() : "",
                      valid.ok() ? "" : ("  (" + std::string(valid.message()) + ")").c_str());
        }
      }
    }
    if (a->json) {
      std::cout << out.dump(2) << "\n";
    } else {
      // What link=roce / ib and auto's RDMA preference have on this node (the JSON stays the list above).
      auto env = Environment::Load();
      if (!env.ok()) {
        std::printf("# RDMA: not read: %s\n", std::string(env.status().message()).c_str());
      } else {
        for (const std::string& line : RdmaFactsLines(LocalRdmaFacts(*env))) std::printf("# RDMA: %s\n", line.c_str());
      }
    }
    *exit_code = 0;
  });
}

}  // namespace hccltune::cli
