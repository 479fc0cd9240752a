#include "tuner/cli/sweep_daemon.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "rpc/channel.h"
#include "runtime/common/json_field.h"
#include "tuner/cli/sweep_common.h"

namespace hccltune::cli {
namespace {

std::atomic<bool> g_interrupted{false};
void OnInterrupt(int) { g_interrupted.store(true); }

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

grpc::ClientContext* WithDeadline(grpc::ClientContext* ctx, int seconds) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return ctx;
}

// The result of a DONE sweep, printed like a local sweep's: the JSON line as is, or the summary and the winners
// (read back from the daemon's table, which shows they are stored there).
void PrintResult(rpc::RemoteTuningStore& remote, const std::string& where, const v1::SweepProgress& p, bool json) {
  if (json) {
    std::printf("%s\n", p.result_json().c_str());
    std::fflush(stdout);
    return;
  }
  auto r = nlohmann::json::parse(p.result_json(), nullptr, false);
  if (r.is_discarded()) {
    std::printf("# sweep %s done (its result line does not parse)\n", p.sweep_id().c_str());
    return;
  }
  std::printf("# sweep %s (run by hccl-tuned): %.1f s, %llu candidate measurements, %llu iterations\n",
              p.sweep_id().c_str(), JsonOr(r, "seconds", 0.0),
              static_cast<unsigned long long>(JsonOr(r, "candidates", uint64_t{0})),
              static_cast<unsigned long long>(JsonOr(r, "iterations", uint64_t{0})));
  std::printf("# pruning: %llu candidates stopped early; saved about %.1f s of measuring\n",
              static_cast<unsigned long long>(JsonOr(r, "pruned", uint64_t{0})), JsonOr(r, "pruning_saved_s", 0.0));
  const std::string fp = JsonOr(r, "topology", "");
  std::printf("# winners stored in %s, table version %lld, topology %s\n", where.c_str(),
              static_cast<long long>(JsonOr(r, "table_version", int64_t{0})), fp.c_str());
  auto table = remote.GetTable(fp, JsonOr(r, "table_version", int64_t{0}));
  if (!table.ok()) {
    std::printf("# (cannot read the table back: %s)\n", std::string(table.status().message()).c_str());
    return;
  }
  std::vector<db::TunedEntry> mine;
  for (const db::TunedEntry& e : table->entries) {
    if (e.sweep_id == p.sweep_id()) mine.push_back(e);
  }
  PrintEntriesTable(mine, stdout);
  std::fflush(stdout);
}

}  // namespace

void AddDaemonSweepFlags(CLI::App* cmd, DaemonSweepFlags* flags) {
  auto* via = cmd->add_flag("--via-daemon", flags->via,
                            "Have hccl-tuned run the sweep on its node and show its progress here (Ctrl-C detaches)");
  flags->watch_opt = cmd->add_option("--watch", flags->watch,
                                     "Follow a sweep hccl-tuned runs (default: the running one, else the last)")
                         ->expected(0, 1);
  flags->cancel_opt =
      cmd->add_option("--cancel", flags->cancel, "Stop a sweep hccl-tuned runs (default: the running one)")
          ->expected(0, 1);
  cmd->add_flag("--cancel-on-interrupt", flags->cancel_on_interrupt,
                "With --via-daemon/--watch: Ctrl-C cancels the daemon's sweep instead of detaching");
  via->excludes(flags->watch_opt)->excludes(flags->cancel_opt);
  flags->watch_opt->excludes(flags->cancel_opt);
}

int RunViaDaemon(const DaemonSweepFlags& flags, const v1::StartSweepRequest& req, const StoreFlags& store, bool json,
                 bool plain) {
  auto opened = OpenStore(store);
  if (!opened.ok()) return ReportError(opened.status());
  rpc::RemoteTuningStore& remote = *opened->remote;
  auto& stub = remote.stub();

  if (flags.cancel_opt->count() > 0) {
    grpc::ClientContext ctx;
    v1::CancelSweepRequest creq;
    creq.set_sweep_id(flags.cancel);
    v1::CancelSweepResponse cresp;
    if (absl::Status s = FromGrpc(stub.CancelSweep(WithDeadline(&ctx, 10), creq, &cresp)); !s.ok()) {
      return ReportError(s);
    }
    std::fprintf(stderr, "hccl-tune sweep: cancelling sweep %s in hccl-tuned\n", cresp.sweep_id().c_str());
    return 0;
  }

  std::string id = flags.watch;
  if (flags.via) {
    grpc::ClientContext ctx;
    v1::StartSweepResponse sresp;
    if (absl::Status s = FromGrpc(stub.StartSweep(WithDeadline(&ctx, 10), req, &sresp)); !s.ok()) {
      return ReportError(s);
    }
    id = sresp.sweep_id();
    if (json) {
      std::printf("%s\n", nlohmann::json{{"event", "started"}, {"sweep_id", id}}.dump().c_str());
      std::fflush(stdout);
    } else {
      std::fprintf(stderr, "hccl-tune sweep: hccl-tuned (%s) runs sweep %s; Ctrl-C %s\n", opened->where.c_str(),
                   id.c_str(), flags.cancel_on_interrupt ? "cancels it" : "detaches, the sweep continues");
    }
  }

  struct sigaction sa {
  }, old_int{}, old_term{};
  sa.sa_handler = OnInterrupt;
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);
  // The watch has no deadline (a sweep takes hours); keepalive pings end it when the daemon's host goes silent.
  auto watch_stub = v1::Tuner::NewStub(rpc::MakeKeepaliveChannel(remote.target()));
  grpc::ClientContext ctx;
  v1::WatchSweepRequest wreq;
  wreq.set_sweep_id(id);
  auto reader = watch_stub->WatchSweep(&ctx, wreq);
  // Ctrl-C: detach (end the watch) or ask the daemon to cancel and keep watching until it has stopped.
  std::atomic<bool> finished{false};
  std::atomic<bool> detached{false};
  std::thread interrupt_watch([&] {
    bool cancel_sent = false;
    while (!finished.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (!g_interrupted.load() || cancel_sent) continue;
      if (!flags.cancel_on_interrupt) {
        detached.store(true);
        ctx.TryCancel();
        return;
      }
      cancel_sent = true;
      grpc::ClientContext cctx;
      v1::CancelSweepRequest creq;
      creq.set_sweep_id(id);
      v1::CancelSweepResponse cresp;
      grpc::Status s = stub.CancelSweep(WithDeadline(&cctx, 10), creq, &cresp);
      std::fprintf(stderr, "\nhccl-tune sweep: %s\n",
                   s.ok() ? "cancelling the sweep in hccl-tuned; waiting for it to stop"
                          : absl::StrCat("cannot cancel: ", s.error_message()).c_str());
    }
  });
  ProgressPrinter printer(json, plain);
  v1::SweepProgress p, last;
  bool final_seen = false;
  while (reader->Read(&p)) {
    last = p;
    if (id.empty()) id = p.sweep_id();
    if (p.total() > 0 && (p.state() == v1::SweepProgress::RUNNING || p.state() == v1::SweepProgress::STARTING)) {
      printer.Show(p.done(), p.total(), p.point(), p.configuration(), p.eta_s());
    }
    if (p.state() == v1::SweepProgress::DONE || p.state() == v1::SweepProgress::FAILED ||
        p.state() == v1::SweepProgress::CANCELLED) {
      final_seen = true;
      break;
    }
  }
  if (final_seen) ctx.TryCancel();
  grpc::Status end = reader->Finish();
  finished.store(true);
  interrupt_watch.join();
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);

  if (detached.load() && !final_seen) {
    std::fprintf(stderr,
                 "\nhccl-tune sweep: detached; sweep %s continues in hccl-tuned. Follow it with: hccl-tune sweep "
                 "--watch %s; stop it with: hccl-tune sweep --cancel %s\n",
                 id.c_str(), id.c_str(), id.c_str());
    return 130;
  }
  if (!final_seen) {
    absl::Status s = FromGrpc(end);
    if (s.code() == absl::StatusCode::kNotFound) return ReportError(s);  // names the id and what the daemon keeps
    const std::string resume =
        absl::StrCat("if it stopped, the sweep was cancelled: resume it with --via-daemon --resume ", id);
    const std::string hint =
        s.code() == absl::StatusCode::kUnavailable
            ? absl::StrCat(" (hccl-tuned at ", remote.target(),
                           " is unreachable or stopped answering; a silent connection is given up after ",
                           absl::FormatDuration(rpc::kKeepaliveTime + rpc::kKeepaliveTimeout), ". ", resume,
                           "; if it still runs, follow it again with --watch ", id, ")")
            : absl::StrCat(" (", resume, ")");
    return ReportError(absl::Status(
        s.ok() ? absl::StatusCode::kUnavailable : s.code(),
        absl::StrCat("lost the daemon's sweep ", id, " before it ended", s.ok() ? "" : ": ", s.message(), hint)));
  }
  switch (last.state()) {
    case v1::SweepProgress::DONE: PrintResult(remote, opened->where, last, json); return 0;
    case v1::SweepProgress::CANCELLED:
      if (json) {
        std::printf("%s\n",
                    nlohmann::json{{"event", "cancelled"}, {"sweep_id", last.sweep_id()}, {"message", last.message()}}
                        .dump()
                        .c_str());
      }
      std::fprintf(stderr, "\nhccl-tune sweep: sweep %s %s\n", last.sweep_id().c_str(), last.message().c_str());
      return 130;
    default:
      if (json) {
        std::printf("%s\n",
                    nlohmann::json{{"event", "failed"}, {"sweep_id", last.sweep_id()}, {"message", last.message()}}
                        .dump()
                        .c_str());
      }
      std::fprintf(stderr, "\nhccl-tune sweep: sweep %s failed in hccl-tuned: %s\n", last.sweep_id().c_str(),
                   last.message().c_str());
      return 1;
  }
}

}  // namespace hccltune::cli
