// Output shared by `hccl-tune sweep`, `verify` and `report`: the winners table and an entry as JSON.
#pragma once

#include <cstdio>
#include <vector>

#include "db/tuning_store.h"
#include "nlohmann/json.hpp"

namespace hccltune::cli {

// coll dtype bytes winner busbw time, runner-up and margin, margin over the built-in default.
void PrintEntriesTable(const std::vector<db::TunedEntry>& entries, std::FILE* out);
nlohmann::json EntryJson(const db::TunedEntry& e);

}  // namespace hccltune::cli
