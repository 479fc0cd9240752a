// `hccl-tune bench`: spawn N local ranks (or join a launched job) and time one collective over a size range.
#include <cstdio>
#include <iostream>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/common/sizes.h"
#include "runtime/tuning_client/tuning_client.h"
#include "tuner/bench/bench.h"
#include "tuner/bench/rank_report.h"
#include "tuner/bench/spawn.h"
#include "tuner/cli/commands.h"

namespace hccltune::cli {
namespace {

// "rank R: MESSAGE", without a second prefix when the runtime's message already names this rank first.
std::string WithRank(int rank, absl::string_view message) {
  const std::string prefix = absl::StrCat("rank ", rank, ": ");
  return absl::StartsWith(message, prefix) ? std::string(message) : absl::StrCat(prefix, message);
}

struct BenchArgs {
  std::string coll = "allreduce", dtype = "fp32", op = "sum", min_bytes = "8", max_bytes = "64M", algo = "auto", link;
  int ranks = 2, iters = 0, warmup = 0, root = 0;
  bool check = false, json = false, launched = false, symmetric = false;
};

int RunLaunched(const BenchArgs& a) {
  auto env = Environment::Load();
  if (!env.ok()) {
    std::fprintf(stderr, "hccl-tune bench: %s\n", std::string(env.status().message()).c_str());
    return bench::ReportRankFailure(env.status(), 2);
  }
  bench::NameRankProcess(env->rank);
  bench::BenchOptions o;
  auto coll = ParseCollective(a.coll);
  auto dtype = ParseDataType(a.dtype);
  auto op = ParseReduceOp(a.op);
  auto lo = ParseBytes(a.min_bytes);
  auto hi = ParseBytes(a.max_bytes);
  for (const absl::Status& s : {coll.status(), dtype.status(), op.status(), lo.status(), hi.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "hccl-tune bench: %s\n", std::string(s.message()).c_str());
      return bench::ReportRankFailure(s, 2);
    }
  }
  o.collective = *coll;
  o.dtype = *dtype;
  o.op = *op;
  o.min_bytes = *lo;
  o.max_bytes = *hi;
  o.algo = a.algo;
  o.link = a.link;
  o.iters = a.iters;
  o.warmup = a.warmup;
  o.check = a.check;
  o.symmetric = a.symmetric;
  o.root = a.root;
  // `auto` follows the node daemon's tuned table, and sampled timings are reported to it.
  InstallDaemonTuning();
  auto comm = Communicator::FromEnvironment(*env);
  if (!comm.ok()) {
    std::fprintf(stderr, "hccl-tune bench: %s\n", WithRank(env->rank.value_or(-1), comm.status().message()).c_str());
    return bench::ReportRankFailure(comm.status(), 1);
  }
  auto rows = bench::RunBench(**comm, o);
  if (!rows.ok()) {
    std::fprintf(stderr, "hccl-tune bench: %s\n", WithRank((*comm)->rank(), rows.status().message()).c_str());
    return bench::ReportRankFailure(rows.status(), 1);
  }
  int bad = 0;
  for (const auto& r : *rows) {
    if (!r.error.empty()) {
      const std::string what =
          absl::StrCat("rank ", (*comm)->rank(), ": check failed: ", r.error, " [", r.algo, ", ", r.bytes, " bytes]");
      std::fprintf(stderr, "hccl-tune bench: %s\n", what.c_str());
      (void)bench::ReportRankFailure(absl::DataLossError(what), 3);
      ++bad;
    }
  }
  if ((*comm)->rank() == 0) {
    if (a.json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& r : *rows) {
        out.push_back({{"coll", r.collective},
                       {"ranks", r.ranks},
                       {"bytes", r.bytes},
                       {"algo", r.algo},
                       {"time_us", r.time_us},
                       {"algbw", r.algbw},
                       {"busbw", r.busbw},
                       {"checked", r.checked},
                       {"check_ok", r.error.empty()}});
      }
      std::cout << out.dump(2) << std::endl;
    } else {
      std::printf("# hccl-tune bench: %s %s %s, %d ranks, topology %s\n", a.coll.c_str(), a.dtype.c_str(), a.op.c_str(),
                  (*comm)->size(), (*comm)->fingerprint().c_str());
      std::printf("%s\n", bench::FormatHeader().c_str());
      for (const auto& r : *rows) std::printf("%s\n", bench::FormatRow(r).c_str());
      std::fflush(stdout);
    }
  }
  // Make sure every rank is done before rank 0 (which serves nothing here) exits.
  (void)(*comm)->Barrier();
  return bad == 0 ? 0 : 3;
}

}  // namespace

void RegisterBench(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Time a collective over a size range (nccl-tests style)");
  cmd->add_option("--coll", a->coll, "Collective (allreduce, allgather, ...)")->capture_default_str();
  cmd->add_option("--ranks", a->ranks, "Local ranks to spawn")->capture_default_str();
  cmd->add_option("--dtype", a->dtype, "Data type")->capture_default_str();
  cmd->add_option("--op", a->op, "Reduction operator")->capture_default_str();
  cmd->add_option("--min-bytes", a->min_bytes, "Smallest size (bytes, K/M/G suffixes)")->capture_default_str();
  cmd->add_option("--max-bytes", a->max_bytes, "Largest size")->capture_default_str();
  cmd->add_option("--algo", a->algo, "Configuration string, auto, or all")->capture_default_str();
  cmd->add_option("--link", a->link, "Link for every configuration: shm, tcp, tcp@SUBNET");
  cmd->add_option("--iters", a->iters, "Timed iterations per size (0 = adaptive)");
  cmd->add_option("--warmup", a->warmup, "Warm-up iterations (0 = adaptive)");
  cmd->add_option("--root", a->root, "Root rank for rooted collectives")->capture_default_str();
  cmd->add_flag("--check", a->check, "Verify every rank's output against an independent reference");
  cmd->add_flag("--json", a->json, "Print JSON rows");
  cmd->add_flag("--symmetric", a->symmetric,
                "Buffers from symmetric memory (AllocSymmetric / hccltune_mem_alloc; one node): allreduce runs "
                "`symmetric` under auto");
  cmd->add_flag("--launched", a->launched, "Join a job started by torchrun/srun/mpirun instead of spawning ranks");
  cmd->callback([a, exit_code, cmd] {
    if (a->launched) {
      *exit_code = RunLaunched(*a);
      return;
    }
    if (a->ranks < 1 || a->ranks > 256) {
      std::fprintf(stderr, "hccl-tune bench: --ranks must be between 1 and 256, got %d\n", a->ranks);
      *exit_code = 2;
      return;
    }
    // Validate names before starting processes.
    for (const absl::Status& s :
         {ParseCollective(a->coll).status(), ParseDataType(a->dtype).status(), ParseReduceOp(a->op).status(),
          ParseBytes(a->min_bytes).status(), ParseBytes(a->max_bytes).status()}) {
      if (!s.ok()) {
        std::fprintf(stderr, "hccl-tune bench: %s\n", std::string(s.message()).c_str());
        *exit_code = 2;
        return;
      }
    }
    bench::SpawnOptions so;
    so.ranks = a->ranks;
    so.args = {"bench",       "--launched",
               "--coll",      a->coll,
               "--dtype",     a->dtype,
               "--op",        a->op,
               "--min-bytes", a->min_bytes,
               "--max-bytes", a->max_bytes,
               "--algo",      a->algo,
               "--iters",     std::to_string(a->iters),
               "--warmup",    std::to_string(a->warmup),
               "--root",      std::to_string(a->root)};
    if (!a->link.empty()) so.args.insert(so.args.end(), {"--link", a->link});
    if (a->check) so.args.push_back("--check");
    if (a->symmetric) so.args.push_back("--symmetric");
    if (a->json) so.args.push_back("--json");
    absl::Status s = bench::SpawnLocalRanks(so);
    if (!s.ok()) {
      std::fprintf(stderr, "hccl-tune bench: %s\n", std::string(s.message()).c_str());
      *exit_code = 1;
      return;
    }
    *exit_code = 0;
    (void)cmd;
  });
}

}  // namespace hccltune::cli
