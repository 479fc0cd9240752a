// `hccl-tune links`: measured link type, interface, bandwidth and latency for every rank pair
// (links/link_inspector.h). Spawns local ranks, or joins a launched job with --launched. What it measures is
// stored in each node's tuning store (the first rank of every node writes to its own daemon, or to --db), where
// the link inspector of a training job reads it back; --stored prints that stored table instead of measuring.
#include <cstdio>
#include <iostream>
#include <memory>

#include "absl/strings/str_format.h"
#include "links/link_inspector.h"
#include "runtime/common/sizes.h"
#include "tuner/bench/rank_report.h"
#include "tuner/bench/spawn.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/local_rdma.h"
#include "tuner/cli/store_access.h"

namespace hccltune::cli {
namespace {

struct LinksArgs {
  int ranks = 2, iters = 3;
  std::string bytes = "4M";
  bool json = false, launched = false, stored = false, no_store = false;
  StoreFlags store;
};

// `rdma`: the RDMA ports of rank 0's node (links/rdma_facts.h).
void PrintTable(const LinkInspector& li, const Communicator& comm, const LinksArgs& a, uint64_t bytes,
                const RdmaFacts& rdma) {
  if (a.json) {
    nlohmann::json j = li.ToJson();
    j["ranks"] = comm.size();
    j["nodes"] = comm.num_nodes();
    j["bytes"] = bytes;
    j["fingerprint"] = comm.fingerprint();
    j["rdma"] = RdmaFactsJson(rdma);
    std::cout << j.dump(2) << std::endl;
    return;
  }
  if (a.stored) {
    std::printf("# hccl-tune links: stored table of topology %s (%d ranks on %d node(s))\n", comm.fingerprint().c_str(),
                comm.size(), comm.num_nodes());
  } else {
    std::printf("# hccl-tune links: %d ranks on %d node(s), %s per bandwidth message\n", comm.size(), comm.num_nodes(),
                a.bytes.c_str());
  }
  std::printf("%4s %4s %-5s %-18s %-10s %-16s %12s %12s %-8s %s\n", "src", "dst", "link", "network", "interface",
              "peer", "bw_gbit/s", "latency_us", "source", "default");
  for (const LinkInfo& l : li.links()) {
    std::printf("%4d %4d %-5s %-18s %-10s %-16s %12.3f %12.1f %-8s %s\n", l.src, l.dst, l.type.c_str(),
                l.network.empty() ? "-" : l.network.c_str(), l.src_interface.empty() ? "-" : l.src_interface.c_str(),
                l.dst_address.empty() ? "-" : l.dst_address.c_str(), l.bandwidth_gbps, l.latency_us, l.source.c_str(),
                l.is_default ? "yes" : "");
  }
  for (const std::string& line : RdmaFactsLines(rdma)) std::printf("# RDMA (rank 0's node): %s\n", line.c_str());
  std::fflush(stdout);
}

// The first rank of each node stores the table in its node's store. Without --daemon/--db a missing daemon is a
// note, not a failure (the measurement stands); a store named on the command line must take it.
absl::Status StoreTable(const LinkInspector& li, const Communicator& comm, const LinksArgs& a) {
  if (a.no_store || comm.local_rank() != 0) return absl::OkStatus();
  const bool named = !a.store.daemon.empty() || !a.store.db.empty();
  auto opened = OpenStore(a.store);
  absl::Status s = opened.status();
  if (s.ok()) {
    s = opened->store->PutLinks(db::StoredLinks{comm.fingerprint(), li.ToJson().dump(), li.measured_unix_ms(), 0});
  }
  if (s.ok()) {
    std::fprintf(stderr, "hccl-tune links: rank %d: stored in %s for topology %s\n", comm.rank(), opened->where.c_str(),
                 comm.fingerprint().c_str());
    return s;
  }
  if (named) return s;
  std::fprintf(stderr, "hccl-tune links: rank %d: not stored (%s); --no-store skips storing\n", comm.rank(),
               std::string(s.message()).c_str());
  return absl::OkStatus();
}

// This rank's node store's table for the job's topology (no communication).
absl::StatusOr<LinkInspector> ReadStored(const Communicator& comm, const LinksArgs& a) {
  auto opened = OpenStore(a.store);
  if (!opened.ok()) return opened.status();
  auto got = opened->store->GetLinks(comm.fingerprint());
  if (!got.ok()) return got.status();
  nlohmann::json j = nlohmann::json::parse(got->links_json, nullptr, /*allow_exceptions=*/false);
  return LinkInspector::FromStored(j, comm.size());
}

// Prints the error (with this rank's number when rank >= 0) and tells the spawner.
int Fail(const absl::Status& s, int rank) {
  const std::string who = rank >= 0 ? absl::StrFormat("rank %d: ", rank) : "";
  std::fprintf(stderr, "hccl-tune links: %s%s\n", who.c_str(), std::string(s.message()).c_str());
  return bench::ReportRankFailure(s, s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1);
}

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
  if (!comm.ok()) return Fail(comm.status(), -1);
  Communicator& c = **comm;
  const RdmaFacts rdma = LocalRdmaFacts(*env);
  // Every rank says when the rank table's device_ip is on none of its node's RDMA ports.
  if (const nlohmann::json j = RdmaFactsJson(rdma); j.contains("device_ip_error")) {
    std::fprintf(stderr, "hccl-tune links: rank %d: rank table mismatch: %s\n", c.rank(),
                 j["device_ip_error"].get<std::string>().c_str());
  }
  if (a.stored) {
    // Rank 0 prints its node's table; the others only wait (the barrier ends the job together).
    if (c.rank() == 0) {
      auto li = ReadStored(c, a);
      if (!li.ok()) return Fail(li.status(), 0);
      PrintTable(*li, c, a, 0, rdma);
    }
    (void)c.Barrier();
    return 0;
  }
  LinkInspectorOptions opt;
  opt.bytes = *bytes;
  opt.iters = a.iters;
  auto li = LinkInspector::Measure(c, *env, opt);
  if (!li.ok()) return Fail(li.status(), c.rank());
  if (c.rank() == 0) PrintTable(*li, c, a, *bytes, rdma);
  absl::Status stored = StoreTable(*li, c, a);
  (void)c.Barrier();
  return stored.ok() ? 0 : Fail(stored, c.rank());
}

std::vector<std::string> RankArgs(const LinksArgs& a) {
  std::vector<std::string> args = {"links", "--launched", "--bytes", a.bytes, "--iters", std::to_string(a.iters)};
  if (a.json) args.push_back("--json");
  if (a.stored) args.push_back("--stored");
  if (a.no_store) args.push_back("--no-store");
  if (!a.store.daemon.empty()) args.insert(args.end(), {"--daemon", a.store.daemon});
  if (!a.store.db.empty()) args.insert(args.end(), {"--db", a.store.db});
  return args;
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
  auto* stored = cmd->add_flag("--stored", a->stored, "Print the table stored for this topology instead of measuring");
  cmd->add_flag("--no-store", a->no_store, "Do not store the measured table")->excludes(stored);
  AddStoreFlags(cmd, &a->store);
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
    so.args = RankArgs(*a);
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
