// `hccl-tune links`: measured link type, interface, bandwidth and latency for every rank pair
// (links/link_inspector.h). Spawns local ranks, or joins a launched job with --launched.
#include <cstdio>
#include <iostream>
#include <memory>

#include "absl/strings/str_format.h"
#include "links/link_inspector.h"
#include "runtime/common/sizes.h"
#include "tuner/bench/rank_report.h"
#include "tuner/bench/spawn.h"
#include "tuner/cli/commands.h"

namespace hccltune::cli {
namespace {

struct LinksArgs {
  int ranks = 2, iters = 3;
  std::string bytes = "4M";
  bool json = false, launched = false;
};

int RunLaunched(const LinksArgs& a) {
  auto env = Environment::Load();
  auto bytes = ParseBytes(a.bytes);
  for (const absl::Status& s : {env.status(), bytes.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "hccl-tune links: %s\n", std::string(s.message()).c_str());
      return bench::ReportRankFailure(s, 2);
    }
  }
  bench::NameRankProcess(env->rank);
  auto comm = Communicator::FromEnvironment(*env);
  if (!comm.ok()) {
    std::fprintf(stderr, "hccl-tune links: %s\n", std::string(comm.status().message()).c_str());
    return bench::ReportRankFailure(comm.status(), 1);
  }
  LinkInspectorOptions opt;
  opt.bytes = *bytes;
  opt.iters = a.iters;
  auto li = LinkInspector::Measure(**comm, *env, opt);
  if (!li.ok()) {
    std::fprintf(stderr, "hccl-tune links: rank %d: %s\n", (*comm)->rank(), std::string(li.status().message()).c_str());
    return bench::ReportRankFailure(li.status(), 1);
  }
  if ((*comm)->rank() == 0) {
    if (a.json) {
      nlohmann::json j = li->ToJson();
      j["ranks"] = (*comm)->size();
      j["nodes"] = (*comm)->num_nodes();
      j["bytes"] = *bytes;
      std::cout << j.dump(2) << std::endl;
    } else {
      std::printf("# hccl-tune links: %d ranks on %d node(s), %s per bandwidth message\n", (*comm)->size(),
                  (*comm)->num_nodes(), a.bytes.c_str());
      std::printf("%4s %4s %-5s %-18s %-10s %-16s %12s %12s %s\n", "src", "dst", "link", "network", "interface", "peer",
                  "bw_gbit/s", "latency_us", "default");
      for (const LinkInfo& l : li->links()) {
        std::printf("%4d %4d %-5s %-18s %-10s %-16s %12.3f %12.1f %s\n", l.src, l.dst, l.type.c_str(),
                    l.network.empty() ? "-" : l.network.c_str(),
                    l.src_interface.empty() ? "-" : l.src_interface.c_str(),
                    l.dst_address.empty() ? "-" : l.dst_address.c_str(), l.bandwidth_gbps, l.latency_us,
                    l.is_default ? "yes" : "");
      }
    }
    std::fflush(stdout);
  }
  (void)(*comm)->Barrier();
  return 0;
}

}  // namespace

void RegisterLinks(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<LinksArgs>();
  auto* cmd = app.add_subcommand("links", "Measure link type, interface, bandwidth and latency for every rank pair");
  cmd->add_option("--ranks", a->ranks, "Local ranks to spawn")->capture_default_str();
  cmd->add_option("--bytes", a->bytes, "Bandwidth message size (K/M/G suffixes)")->capture_default_str();
  cmd->add_option("--iters", a->iters, "Bandwidth iterations per link")->capture_default_str();
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->add_flag("--launched", a->launched, "Join a job started by torchrun/srun/mpirun (or deploy/cluster/launch.sh)");
  cmd->callback([a, exit_code] {
    if (a->launched) {
      *exit_code = RunLaunched(*a);
      return;
    }
    if (a->ranks < 2 || a->ranks > 256 || a->iters < 1) {
      std::fprintf(stderr, "hccl-tune links: --ranks must be 2-256 and --iters >= 1\n");
      *exit_code = 2;
      return;
    }
    bench::SpawnOptions so;
    so.ranks = a->ranks;
    so.args = {"links", "--launched", "--bytes", a->bytes, "--iters", std::to_string(a->iters)};
    if (a->json) so.args.push_back("--json");
    absl::Status s = bench::SpawnLocalRanks(so);
    if (!s.ok()) {
      std::fprintf(stderr, "hccl-tune links: %s\n", std::string(s.message()).c_str());
      *exit_code = 1;
      return;
    }
    *exit_code = 0;
  });
}

}  // namespace hccltune::cli
