#include "tuner/cli/sweep_common.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "runtime/common/sizes.h"
#include "runtime/common/types.h"

namespace hccltune::cli {

void PrintEntriesTable(const std::vector<db::TunedEntry>& entries, std::FILE* out) {
  std::fprintf(out, "%s\n",
               absl::StrFormat("%-13s %-5s %-11s %-52s %10s %8s %8s %8s", "coll", "dtype", "bytes", "winner", "time_us",
                               "busbw", "vs_2nd", "vs_dflt")
                   .c_str());
  for (const db::TunedEntry& e : entries) {
    std::fprintf(
        out, "%s\n",
        absl::StrFormat("%-13s %-5s %-11s %-52s %10.2f %8.3f %7.1f%% %7.1f%%", CollectiveName(e.key.collective),
                        DataTypeName(e.key.dtype), FormatByteRange(e.key.range), e.configuration, e.time_us,
                        e.busbw_gbps, 100 * e.margin, 100 * e.default_margin)
            .c_str());
    if (!e.runner_up.empty()) std::fprintf(out, "%-31s runner-up: %s\n", "", e.runner_up.c_str());
  }
}

nlohmann::json EntryJson(const db::TunedEntry& e) {
  return nlohmann::json{{"collective", std::string(CollectiveName(e.key.collective))},
                        {"dtype", std::string(DataTypeName(e.key.dtype))},
                        {"world_size", e.key.world_size},
                        {"bytes", FormatByteRange(e.key.range)},
                        {"configuration", e.configuration},
                        {"time_us", e.time_us},
                        {"busbw_gbps", e.busbw_gbps},
                        {"runner_up", e.runner_up},
                        {"margin", e.margin},
                        {"default_margin", e.default_margin}};
}

absl::StatusOr<std::string> ResolveJournal(const std::string& journal) {
  if (!journal.empty()) return journal;
  auto env = Environment::Load();
  if (!env.ok()) return env.status();
  return DefaultJournal(*env);
}

absl::StatusOr<std::string> DefaultJournal(const Environment& env) {
  std::string dir;
  if (!env.xdg_state_home.empty())
    dir = env.xdg_state_home + "/hccl-tune";
  else if (!env.home.empty())
    dir = env.home + "/.local/state/hccl-tune";
  else
    dir = absl::StrCat("/tmp/hccl-tune-", ::getuid());
  std::string partial;
  for (absl::string_view part : absl::StrSplit(dir, '/', absl::SkipEmpty())) {
    partial = absl::StrCat(partial, "/", part);
    ::mkdir(partial.c_str(), 0700);
  }
  return dir + "/sweeps.db";
}

}  // namespace hccltune::cli
