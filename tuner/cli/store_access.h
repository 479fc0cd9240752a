// How CLI verbs reach tuned tables: through the daemon (`--daemon TARGET`, default per CONVENTIONS discovery)
// or directly on a database file (`--db PATH`, no daemon). Both give a db::TuningStore.
#pragma once

#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "db/tuning_store.h"
#include "rpc/remote_store.h"

namespace hccltune::cli {

struct StoreFlags {
  std::string daemon;
  std::string db;
};

// Adds --daemon and --db (mutually exclusive) to `cmd`.
void AddStoreFlags(CLI::App* cmd, StoreFlags* flags);

struct OpenedStore {
  std::unique_ptr<db::TuningStore> store;
  rpc::RemoteTuningStore* remote = nullptr;  // set when talking to a daemon
  std::string where;                         // "daemon unix:/..." or "database /path"
};

absl::StatusOr<OpenedStore> OpenStore(const StoreFlags& flags);

// Where a stored entry came from, as `show` and `get` print it: "measured", or "predicted:N" (model version N).
std::string EntrySource(const db::TunedEntry& e);

// Prints "hccl-tune: <message>" to stderr; returns the exit code for the status (1, or 2 for bad input).
int ReportError(const absl::Status& status);

}  // namespace hccltune::cli
