// What every store and the table file refuse by size: entries per table, text fields, the topology JSON, a
// table file's bytes and tables; each refusal names the limit and stores nothing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "db/memory_store.h"
#include "db/store_util.h"
#include "db/table_json.h"
#include "tests/unit/db/test_util.h"

namespace hccltune::db {
namespace {

using testing::MakeEntry;
using testing::MakeTopology;

TEST(StoreBounds, EntriesAndTextFieldsOverTheirLimits) {
  std::vector<TunedEntry> many;
  for (size_t i = 0; i <= kMaxTableEntries; ++i) {
    many.push_back(MakeEntry(Collective::kAllreduce, 8, i * 16, i * 16 + 16, "ring"));
  }
  auto n = NormalizeEntries(many);
  EXPECT_TRUE(absl::StrContains(n.status().message(), "table of 100001 entries exceeds the limit of 100000"))
      << n.status();
  TunedEntry e = MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "ring");
  e.library_version = std::string(kMaxTextBytes + 1, 'v');
  n = NormalizeEntries({e});
  EXPECT_TRUE(absl::StrContains(n.status().message(), "entry library_version of 4097 bytes is over the limit"))
      << n.status();
  e = MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "ring");
  e.runner_up = std::string(kMaxTextBytes + 1, 'r');
  n = NormalizeEntries({e});
  EXPECT_TRUE(absl::StrContains(n.status().message(), "runner-up of 4097 bytes is over the limit of 4096"))
      << n.status();
  Sweep sweep;
  sweep.id = "s1";
  sweep.message = std::string(kMaxSweepJsonBytes + 1, 'm');
  EXPECT_TRUE(absl::StrContains(ValidateSweep(sweep).message(), "sweep message of 1048577 bytes is over the limit"));
}

std::string FileWith(size_t tables) {
  std::string text = R"({"format":"hccl-tune-tables","format_version":1,"tables":[)";
  for (size_t i = 0; i < tables; ++i) absl::StrAppend(&text, i ? "," : "", "{}");
  return text + "]}";
}

TEST(StoreBounds, TableFilesOverTheirLimitsStoreNothing) {
  InMemoryTuningStore store;
  auto r = ImportIntoStore(store, FileWith(kMaxTableFileTables + 1));
  EXPECT_TRUE(absl::StrContains(r.status().message(), "table file: 4097 tables, over the limit of 4096")) << r.status();
  const Topology topo = MakeTopology(2);
  std::string entries;
  for (size_t i = 0; i <= kMaxTableEntries; ++i) absl::StrAppend(&entries, i ? "," : "", "{}");
  const std::string one =
      absl::StrCat(R"({"format":"hccl-tune-tables","format_version":1,"tables":[{"fingerprint":")", topo.fingerprint,
                   R"(","topology":"","version":1,"created_unix_ms":1,"entries":[)", entries, "]}]}");
  r = ImportIntoStore(store, one);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "tables[0]: 100001 entries, over the limit of 100000"))
      << r.status();
  // Integers out of their field's range or written as floats (found by the table_file fuzzer: converting 1e86 to an
  // int64 was undefined).
  for (const char* version : {"1e86", "1.5", "9223372036854775808"}) {
    const std::string text =
        absl::StrCat(R"({"format":"hccl-tune-tables","format_version":1,"tables":[{"fingerprint":")", topo.fingerprint,
                     R"(","topology":"","version":)", version, R"(,"created_unix_ms":1,"entries":[]}]}")");
    r = ImportIntoStore(store, text.substr(0, text.size() - 1));
    EXPECT_TRUE(absl::StrContains(r.status().message(), "tables[0]: field 'version' is "))
        << version << ": " << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), "expected an integer from")) << r.status();
  }
  auto listed = store.ListTables();
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
}

}  // namespace
}  // namespace hccltune::db
