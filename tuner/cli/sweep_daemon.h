// `hccl-tune sweep --via-daemon | --watch [ID] | --cancel [ID]`: sweeps run by hccl-tuned (StartSweep /
// WatchSweep / CancelSweep). The progress relayed from the daemon is printed like a local sweep's (bar, lines or
// --json), and so is the result. Ctrl-C detaches (the sweep continues in the daemon; exit 130) unless
// --cancel-on-interrupt, which cancels the sweep, waits for it to stop and exits 130.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "hccltune/v1/tuner.pb.h"
#include "tuner/cli/store_access.h"

namespace hccltune::cli {

namespace v1 = ::hccltune::v1;

struct DaemonSweepFlags {
  bool via = false;
  bool cancel_on_interrupt = false;
  std::string watch, cancel;
  CLI::Option* watch_opt = nullptr;
  CLI::Option* cancel_opt = nullptr;
  bool active() const { return via || watch_opt->count() > 0 || cancel_opt->count() > 0; }
};

void AddDaemonSweepFlags(CLI::App* cmd, DaemonSweepFlags* flags);

// Starts `req` (with --via-daemon), or watches / cancels a daemon-run sweep. Returns the exit code.
int RunViaDaemon(const DaemonSweepFlags& flags, const v1::StartSweepRequest& req, const StoreFlags& store, bool json,
                 bool plain);

}  // namespace hccltune::cli
