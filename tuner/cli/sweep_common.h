// Output shared by `hccl-tune sweep`, `verify` and `report`: the winners table and an entry as JSON.
#pragma once

#include <cstdio>
#include <vector>

#include "absl/status/statusor.h"
#include "db/tuning_store.h"
#include "nlohmann/json.hpp"
#include "runtime/common/config.h"

namespace hccltune::cli {

// coll dtype bytes winner busbw time, runner-up and margin, margin over the built-in default.
void PrintEntriesTable(const std::vector<db::TunedEntry>& entries, std::FILE* out);
nlohmann::json EntryJson(const db::TunedEntry& e);

// Where a sweep through the daemon keeps its samples and progress when --journal is not given:
// $XDG_STATE_HOME/hccl-tune/sweeps.db, else ~/.local/state/hccl-tune/sweeps.db, else /tmp/hccl-tune-UID/sweeps.db
// (directories created).
absl::StatusOr<std::string> DefaultJournal(const Environment& env);
// `journal` when given (--journal), else DefaultJournal of the process environment.
absl::StatusOr<std::string> ResolveJournal(const std::string& journal);

}  // namespace hccltune::cli
