// One conformance suite for the TuningStore contract, run against every implementation.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "db/memory_store.h"
#include "db/sqlite_store.h"
#include "db/table_json.h"
#include "runtime/common/configuration.h"
#include "tests/unit/db/test_util.h"

namespace hccltune::db {
namespace {

using testing::MakeEntry;
using testing::MakeTopology;
using testing::TempDir;

struct MemoryFactory {
  static std::unique_ptr<TuningStore> Make(const TempDir&, StoreOptions o) {
    return std::make_unique<InMemoryTuningStore>(o);
  }
};
struct SqliteFactory {
  static std::unique_ptr<TuningStore> Make(const TempDir& dir, StoreOptions o) {
    auto s = OpenSqliteTuningStore(dir.File("tuning.db"), o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
};

template <typename Factory>
class TuningStoreConformance : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions o;
    o.max_versions = 4;
    o.max_sweeps_with_samples = 2;
    store_ = Factory::Make(dir_, o);
    ASSERT_NE(store_, nullptr);
  }
  TempDir dir_;
  std::unique_ptr<TuningStore> store_;
};

using Implementations = ::testing::Types<MemoryFactory, SqliteFactory>;
class Names {
 public:
  template <typename T>
  static std::string GetName(int) {
    return std::is_same_v<T, MemoryFactory> ? "Memory" : "Sqlite";
  }
};
TYPED_TEST_SUITE(TuningStoreConformance, Implementations, Names);

std::vector<TunedEntry> ThreeEntries() {
  return {MakeEntry(Collective::kAllreduce, 8, 64 * 1024, kUnbounded, "ring(chunk=1M)"),
          MakeEntry(Collective::kAllreduce, 8, 0, 64 * 1024, "one_shot"),
          MakeEntry(Collective::kAllgather, 8, 0, kUnbounded, "ring")};
}

TYPED_TEST(TuningStoreConformance, PutGetRoundTripsInCanonicalOrder) {
  Topology topo = MakeTopology(2);
  auto v = this->store_->PutTable(topo, ThreeEntries(), {});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 1);
  auto t = this->store_->GetTable(topo.fingerprint, 0);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->version, 1);
  EXPECT_EQ(t->topology.json, topo.json);
  ASSERT_EQ(t->entries.size(), 3u);
  EXPECT_EQ(t->entries[0].key.range.min, 0u);
  EXPECT_EQ(t->entries[0].configuration, Configuration::Parse("one_shot")->ToString());  // canonical string
  EXPECT_EQ(t->entries[1].key.range.max, kUnbounded);
  EXPECT_EQ(t->entries[2].key.collective, Collective::kAllgather);
  EXPECT_EQ(t->entries[1].runner_up, Configuration::Parse("one_shot")->ToString());
  EXPECT_DOUBLE_EQ(t->entries[1].busbw_gbps, 1.25);
  EXPECT_EQ(t->content_hash, ContentHash(t->entries));
  EXPECT_EQ(t->content_hash.size(), 64u);
}

TYPED_TEST(TuningStoreConformance, IdenticalContentIsNotANewVersion) {
  Topology topo = MakeTopology(2);
  ASSERT_EQ(*this->store_->PutTable(topo, ThreeEntries(), {}), 1);
  EXPECT_EQ(*this->store_->PutTable(topo, ThreeEntries(), {}), 1);
  auto changed = ThreeEntries();
  changed[0].configuration = "halving_doubling";
  EXPECT_EQ(*this->store_->PutTable(Topology{topo.fingerprint, ""}, changed, {}), 2);
  auto list = this->store_->ListTables();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].latest_version, 2);
  EXPECT_EQ((*list)[0].versions, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ((*list)[0].entries, 3u);
}

TYPED_TEST(TuningStoreConformance, ExpectedVersionIsACompareAndSwap) {
  Topology topo = MakeTopology(2);
  PutOptions none_yet;
  none_yet.expected_version = -1;  // only while there is no table
  ASSERT_EQ(*this->store_->PutTable(topo, ThreeEntries(), none_yet), 1);
  auto again = this->store_->PutTable(topo, ThreeEntries(), none_yet);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAborted) << again.status();
  auto changed = ThreeEntries();
  changed[0].configuration = "halving_doubling";
  PutOptions stale;
  stale.expected_version = 7;
  auto refused = this->store_->PutTable(topo, changed, stale);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kAborted) << refused.status();
  EXPECT_NE(refused.status().message().find("version 1"), std::string::npos) << refused.status();
  EXPECT_NE(refused.status().message().find("version 7"), std::string::npos) << refused.status();
  EXPECT_EQ(this->store_->GetTable(topo.fingerprint, 0)->version, 1);  // nothing written
  PutOptions current;
  current.expected_version = 1;
  EXPECT_EQ(*this->store_->PutTable(topo, changed, current), 2);
  EXPECT_EQ(this->store_->PutTable(topo, ThreeEntries(), current).status().code(), absl::StatusCode::kAborted);
}

TYPED_TEST(TuningStoreConformance, LookupFindsTheRangeHoldingBytes) {
  Topology topo = MakeTopology(2);
  ASSERT_TRUE(this->store_->PutTable(topo, ThreeEntries(), {}).ok());
  auto small = this->store_->Lookup(topo.fingerprint, Collective::kAllreduce, DataType::kFloat32, 8, 100, 0);
  ASSERT_TRUE(small.ok());
  ASSERT_TRUE(small->has_value());
  EXPECT_EQ((*small)->configuration, Configuration::Parse("one_shot")->ToString());
  auto edge = this->store_->Lookup(topo.fingerprint, Collective::kAllreduce, DataType::kFloat32, 8, 64 * 1024, 0);
  ASSERT_TRUE(edge.ok() && edge->has_value());
  EXPECT_EQ((*edge)->configuration, Configuration::Parse("ring(chunk=1M)")->ToString());
  auto other_world = this->store_->Lookup(topo.fingerprint, Collective::kAllreduce, DataType::kFloat32, 4, 100, 0);
  ASSERT_TRUE(other_world.ok());
  EXPECT_FALSE(other_world->has_value());
  auto other_dtype = this->store_->Lookup(topo.fingerprint, Collective::kAllreduce, DataType::kFloat16, 8, 100, 0);
  ASSERT_TRUE(other_dtype.ok());
  EXPECT_FALSE(other_dtype->has_value());
  auto unknown = this->store_->Lookup(MakeTopology(9).fingerprint, Collective::kAllreduce, DataType::kFloat32, 8, 1, 0);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
}

TYPED_TEST(TuningStoreConformance, GapsBetweenRangesFindNothing) {
  Topology topo = MakeTopology(3);
  std::vector<TunedEntry> e = {MakeEntry(Collective::kBroadcast, 2, 0, 1024, "binomial_tree"),
                               MakeEntry(Collective::kBroadcast, 2, 4096, 8192, "ring")};
  ASSERT_TRUE(this->store_->PutTable(topo, e, {}).ok());
  auto gap = this->store_->Lookup(topo.fingerprint, Collective::kBroadcast, DataType::kFloat32, 2, 2048, 0);
  ASSERT_TRUE(gap.ok());
  EXPECT_FALSE(gap->has_value());
  auto above = this->store_->Lookup(topo.fingerprint, Collective::kBroadcast, DataType::kFloat32, 2, 8192, 0);
  ASSERT_TRUE(above.ok());
  EXPECT_FALSE(above->has_value());
}

TYPED_TEST(TuningStoreConformance, BadInputIsRefused) {
  Topology topo = MakeTopology(2);
  auto code = [&](std::vector<TunedEntry> e, Topology t) { return this->store_->PutTable(t, e, {}).status().code(); };
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code(ThreeEntries(), Topology{"xyz", topo.json}), kInvalid);
  EXPECT_EQ(code(ThreeEntries(), Topology{topo.fingerprint, ""}), kInvalid);  // first store needs the JSON
  EXPECT_EQ(code(ThreeEntries(), Topology{MakeTopology(5).fingerprint, topo.json}), kInvalid);     // hash mismatch
  EXPECT_EQ(code({MakeEntry(Collective::kAllreduce, 8, 100, 100, "ring")}, topo), kInvalid);       // empty range
  EXPECT_EQ(code({MakeEntry(Collective::kAllreduce, 0, 0, 100, "ring")}, topo), kInvalid);         // world 0
  EXPECT_EQ(code({MakeEntry(Collective::kAllreduce, 8, 0, 1ull << 60, "ring")}, topo), kInvalid);  // absurd
  EXPECT_EQ(code({MakeEntry(Collective::kAllreduce, 8, 0, 100, "warp_drive")}, topo), kInvalid);
  EXPECT_EQ(code({MakeEntry(Collective::kAllreduce, 8, 0, 100, "ring"),
                  MakeEntry(Collective::kAllreduce, 8, 50, 200, "ring")},
                 topo),
            kInvalid);  // overlap
  auto nan = MakeEntry(Collective::kAllreduce, 8, 0, 100, "ring");
  nan.time_us = std::nan("");
  EXPECT_EQ(code({nan}, topo), kInvalid);
  auto list = this->store_->ListTables();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());  // nothing half-written
  EXPECT_EQ(this->store_->GetTable("not-a-fingerprint", 0).status().code(), kInvalid);
}

// The topology class is kept beside each table and lists the tables of one class, whatever their node count.
TYPED_TEST(TuningStoreConformance, TopologyClassIsKeptAndListsItsTables) {
  const Topology two = MakeTopology(2), four = MakeTopology(4), one = MakeTopology(1);
  ASSERT_EQ(two.topology_class, four.topology_class);  // 2 and 4 nodes over TCP: one class
  ASSERT_NE(two.topology_class, one.topology_class);   // one node: no network between nodes
  for (const Topology& t : {two, four, one}) {
    ASSERT_TRUE(this->store_->PutTable(Topology{t.fingerprint, t.json}, ThreeEntries(), {}).ok());
  }
  auto got = this->store_->GetTable(four.fingerprint, 0);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->topology.topology_class, four.topology_class);
  auto all = this->store_->ListTables();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  for (const TableSummary& s : *all) {
    EXPECT_EQ(s.topology.topology_class,
              s.topology.fingerprint == one.fingerprint ? one.topology_class : two.topology_class);
  }
  auto tcp = this->store_->ListTablesOfClass(two.topology_class);
  ASSERT_TRUE(tcp.ok()) << tcp.status();
  ASSERT_EQ(tcp->size(), 2u);
  std::set<std::string> fps{(*tcp)[0].topology.fingerprint, (*tcp)[1].topology.fingerprint};
  EXPECT_EQ(fps, (std::set<std::string>{two.fingerprint, four.fingerprint}));
  EXPECT_EQ((*tcp)[0].latest_version, 1);
  EXPECT_EQ((*tcp)[0].entries, 3u);
  EXPECT_EQ(this->store_->ListTablesOfClass(one.topology_class)->size(), 1u);
  EXPECT_TRUE(this->store_->ListTablesOfClass("0123456789abcdef")->empty());
  EXPECT_EQ(this->store_->ListTablesOfClass("TCP").status().code(), absl::StatusCode::kInvalidArgument);
  // A deleted table leaves its class.
  ASSERT_TRUE(this->store_->DeleteTable(four.fingerprint).ok());
  EXPECT_EQ(this->store_->ListTablesOfClass(two.topology_class)->size(), 1u);
}

// Only canonical JSON of the current format is stored: one topology, one key. Format 1 is named as such (the
// daemon and import translate it before it reaches a store).
TYPED_TEST(TuningStoreConformance, OnlyCanonicalFormat2TopologiesAreStored) {
  auto put = [&](const std::string& json) {
    return this->store_->PutTable(Topology{Sha256Hex(json).substr(0, 16), json}, ThreeEntries(), {}).status();
  };
  auto s = put(R"({"format":1,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[2],"release":"0.1"})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("format 1"), std::string::npos) << s;
  EXPECT_NE(s.message().find("af19111ba64fafe7"), std::string::npos) << s;  // its format-2 fingerprint
  s = put(R"({"format": 2, "inter": [], "intra": ["shm"], "nodes": 1, "ranks_per_node": [2], "release": "0.1",)"
          R"( "runtime": "hccl-tune"})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("canonical"), std::string::npos) << s;
  s = put(R"({"format":2,"inter":[],"intra":["shm"],"nodes":3,"ranks_per_node":[2],"release":"0.1","runtime":"x"})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  s = put(R"({"format":3,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[2],"release":"0.1"})");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("format 3"), std::string::npos) << s;
  EXPECT_TRUE(this->store_->ListTables()->empty());
}

// A file exported before format 2 imports under the format-2 key of each of its topologies.
TYPED_TEST(TuningStoreConformance, ImportStoresFormat1TablesUnderTheirFormat2Key) {
  const std::string json1 = R"({"format":1,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[2],"release":"0.1"})";
  Table t{Topology{"201f47a09e7228b1", json1}, 3, "", 1000, ThreeEntries()};
  auto imported = ImportIntoStore(*this->store_, TablesToJson({t}));
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(*imported, 1);
  EXPECT_EQ(this->store_->GetTable("201f47a09e7228b1", 0).status().code(), absl::StatusCode::kNotFound);
  auto got = this->store_->GetTable("af19111ba64fafe7", 0);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->version, 3);
  EXPECT_EQ(
      got->topology.json,
      R"({"format":2,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[2],"release":"0.1","runtime":"hccl-tune"})");
  EXPECT_EQ(got->topology.topology_class, "0ccf22620ca1e2fc");
}

TYPED_TEST(TuningStoreConformance, OldVersionsAreBoundedAndRollbackRestores) {
  Topology topo = MakeTopology(2);
  for (int i = 0; i < 6; ++i) {
    std::vector<TunedEntry> e = {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "ring", 10 + i)};
    ASSERT_EQ(*this->store_->PutTable(topo, e, {}), i + 1);
  }
  auto list = this->store_->ListTables();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ((*list)[0].versions, (std::vector<int64_t>{3, 4, 5, 6}));  // max_versions = 4
  EXPECT_EQ(this->store_->GetTable(topo.fingerprint, 1).status().code(), absl::StatusCode::kNotFound);
  auto rb = this->store_->Rollback(topo.fingerprint, 0);  // to 5
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_EQ(*rb, 7);
  auto t = this->store_->GetTable(topo.fingerprint, 0);
  ASSERT_TRUE(t.ok());
  EXPECT_DOUBLE_EQ(t->entries[0].time_us, 14);
  EXPECT_EQ(t->content_hash, this->store_->GetTable(topo.fingerprint, 5)->content_hash);
  auto rb3 = this->store_->Rollback(topo.fingerprint, 4);
  ASSERT_TRUE(rb3.ok());
  EXPECT_EQ(*rb3, 8);
  EXPECT_DOUBLE_EQ(this->store_->GetTable(topo.fingerprint, 0)->entries[0].time_us, 13);
  EXPECT_EQ(this->store_->Rollback(topo.fingerprint, 1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(this->store_->Rollback(MakeTopology(7).fingerprint, 0).status().code(), absl::StatusCode::kNotFound);
}

TYPED_TEST(TuningStoreConformance, RollbackWithoutEarlierVersionFails) {
  Topology topo = MakeTopology(2);
  ASSERT_TRUE(this->store_->PutTable(topo, ThreeEntries(), {}).ok());
  EXPECT_EQ(this->store_->Rollback(topo.fingerprint, 0).status().code(), absl::StatusCode::kFailedPrecondition);
}

TYPED_TEST(TuningStoreConformance, DeleteKeepsVersionNumbersGrowing) {
  Topology topo = MakeTopology(2);
  ASSERT_EQ(*this->store_->PutTable(topo, ThreeEntries(), {}), 1);
  auto changed = ThreeEntries();
  changed.pop_back();
  ASSERT_EQ(*this->store_->PutTable(topo, changed, {}), 2);
  auto n = this->store_->DeleteTable(topo.fingerprint);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2u);
  EXPECT_EQ(this->store_->GetTable(topo.fingerprint, 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(this->store_->DeleteTable(topo.fingerprint).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(this->store_->ListTables()->empty());
  EXPECT_EQ(*this->store_->PutTable(topo, ThreeEntries(), {}), 3);
}

TYPED_TEST(TuningStoreConformance, MinVersionAndCreatedTimeAreKept) {
  Topology topo = MakeTopology(2);
  auto v = this->store_->PutTable(topo, ThreeEntries(), PutOptions{42, 1234});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 42);
  auto t = this->store_->GetTable(topo.fingerprint, 0);
  EXPECT_EQ(t->created_unix_ms, 1234);
}

// A version number near int64's end would overflow the next one and freeze the table: versions asked for are
// bounded by 2^53, and a table at that bound still takes new versions.
TYPED_TEST(TuningStoreConformance, HugeVersionNumbersAreRefusedNamingTheValue) {
  Topology topo = MakeTopology(2);
  for (int64_t bad : {std::numeric_limits<int64_t>::max(), kMaxTableVersion + 1, int64_t{-1}}) {
    auto v = this->store_->PutTable(topo, ThreeEntries(), PutOptions{bad, 0});
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << v.status();
    EXPECT_NE(v.status().message().find(absl::StrCat(bad)), absl::string_view::npos) << v.status();
  }
  EXPECT_EQ(this->store_->GetTable(topo.fingerprint, 0).status().code(), absl::StatusCode::kNotFound);
  auto v = this->store_->PutTable(topo, ThreeEntries(), PutOptions{kMaxTableVersion, 0});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, kMaxTableVersion);
  auto fewer = ThreeEntries();
  fewer.pop_back();
  auto next = this->store_->PutTable(topo, fewer, {});
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, kMaxTableVersion + 1);
  auto back = this->store_->Rollback(topo.fingerprint, 0);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, kMaxTableVersion + 2);
  // An import file asking for such a version is refused the same way, and stores nothing.
  Table huge;
  huge.topology = MakeTopology(4);
  huge.version = std::numeric_limits<int64_t>::max();
  huge.entries = ThreeEntries();
  auto imported = ImportIntoStore(*this->store_, TablesToJson({huge}));
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument) << imported.status();
  EXPECT_NE(imported.status().message().find("9223372036854775807"), absl::string_view::npos) << imported.status();
  EXPECT_EQ(this->store_->GetTable(huge.topology.fingerprint, 0).status().code(), absl::StatusCode::kNotFound);
}

TYPED_TEST(TuningStoreConformance, ExportImportExportIsByteIdentical) {
  Topology a = MakeTopology(2), b = MakeTopology(4);
  ASSERT_TRUE(this->store_->PutTable(a, ThreeEntries(), {}).ok());
  ASSERT_TRUE(
      this->store_->PutTable(b, {MakeEntry(Collective::kAlltoall, 32, 0, kUnbounded, "pairwise", 1.0 / 3)}, {}).ok());
  ASSERT_TRUE(this->store_->PutTable(b, {MakeEntry(Collective::kAlltoall, 32, 0, kUnbounded, "bruck", 0.1)}, {}).ok());
  auto first = ExportStore(*this->store_);
  ASSERT_TRUE(first.ok());
  TempDir other_dir;
  auto other = TypeParam::Make(other_dir, StoreOptions{});
  auto changed = ImportIntoStore(*other, *first);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(*changed, 2);
  auto second = ExportStore(*other);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*first, *second);
  EXPECT_EQ(*ImportIntoStore(*other, *first), 0);  // importing again changes nothing
  EXPECT_EQ(ImportIntoStore(*other, "{\"format\": \"something-else\"}").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ImportIntoStore(*other, "not json").status().code(), absl::StatusCode::kInvalidArgument);
  // Fields of the wrong type are errors that name them, not an exception out of the JSON library (which aborted).
  EXPECT_EQ(ImportIntoStore(*other, "{\"format\": 1}").status().code(), absl::StatusCode::kInvalidArgument);
  std::string hash_number = *first;
  const size_t at = hash_number.find("\"content_hash\": \"");
  ASSERT_NE(at, std::string::npos);
  hash_number.replace(at, std::string("\"content_hash\": \"").size(), "\"content_hash\": 5, \"x\": \"");
  auto bad = ImportIntoStore(*other, hash_number);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("content_hash"), absl::string_view::npos) << bad.status();
}

// An exported file whose entries changed after export (a hand edit, damage) no longer matches its content_hash:
// the edit is imported (checked like any entries) and the table is named for a warning; an unedited one is not.
TYPED_TEST(TuningStoreConformance, ImportNamesTablesWhoseEntriesNoLongerMatchTheirContentHash) {
  ASSERT_TRUE(this->store_->PutTable(MakeTopology(2), ThreeEntries(), {}).ok());
  ASSERT_TRUE(
      this->store_->PutTable(MakeTopology(4), {MakeEntry(Collective::kAlltoall, 32, 0, kUnbounded, "bruck", 0.1)}, {})
          .ok());
  auto exported = ExportStore(*this->store_);
  ASSERT_TRUE(exported.ok());
  TempDir other_dir;
  auto other = TypeParam::Make(other_dir, StoreOptions{});
  std::vector<std::string> edited;
  ASSERT_TRUE(ImportIntoStore(*other, *exported, &edited).ok());
  EXPECT_TRUE(edited.empty()) << edited.front();
  std::string changed = *exported;
  const size_t at = changed.find("\"bruck");  // the stored configuration, in canonical form
  ASSERT_NE(at, std::string::npos);
  changed.replace(at, std::string("\"bruck").size(), "\"pairwise");
  auto r = ImportIntoStore(*other, changed, &edited);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, 1);
  ASSERT_EQ(edited.size(), 1u);
  EXPECT_NE(edited[0].find(MakeTopology(4).fingerprint), std::string::npos) << edited[0];
  auto t = other->GetTable(MakeTopology(4).fingerprint, 0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->entries.at(0).configuration.rfind("pairwise", 0), 0u) << t->entries.at(0).configuration;
}

// An import file whose later table is invalid stores nothing: each table is checked as PutTable checks it first.
TYPED_TEST(TuningStoreConformance, ImportWithAnInvalidTableStoresNone) {
  Table good;
  good.topology = MakeTopology(2);
  good.version = 3;
  good.entries = ThreeEntries();
  Table mismatch;  // the topology JSON does not hash to the fingerprint
  mismatch.topology = MakeTopology(4);
  mismatch.topology.json = MakeTopology(8).json;
  mismatch.version = 1;
  mismatch.entries = ThreeEntries();
  Table overlapping;  // two entries of one key overlap
  overlapping.topology = MakeTopology(4);
  overlapping.version = 1;
  overlapping.entries = {MakeEntry(Collective::kAllreduce, 8, 0, 4096, "ring"),
                         MakeEntry(Collective::kAllreduce, 8, 1024, kUnbounded, "one_shot")};
  Table unknown_empty;  // no topology JSON for a topology the store has never seen
  unknown_empty.topology = MakeTopology(16);
  unknown_empty.topology.json.clear();
  unknown_empty.version = 1;
  unknown_empty.entries = ThreeEntries();
  for (const Table& bad : {mismatch, overlapping, unknown_empty}) {
    auto r = ImportIntoStore(*this->store_, TablesToJson({good, bad}));
    ASSERT_FALSE(r.ok()) << bad.topology.fingerprint;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_NE(r.status().message().find("tables[1]"), absl::string_view::npos) << r.status();
    EXPECT_NE(r.status().message().find(bad.topology.fingerprint), absl::string_view::npos) << r.status();
    EXPECT_NE(r.status().message().find("nothing imported"), absl::string_view::npos) << r.status();
    EXPECT_TRUE(this->store_->ListTables()->empty()) << "the valid first table was stored: " << r.status();
  }
  // Once the store has the topology, an empty topology JSON is fine (as PutTable allows).
  ASSERT_TRUE(this->store_->PutTable(MakeTopology(16), ThreeEntries(), {}).ok());
  auto r = ImportIntoStore(*this->store_, TablesToJson({good, unknown_empty}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, 1);  // the second table's content is what the store has already
  EXPECT_EQ(this->store_->GetTable(good.topology.fingerprint, 0)->version, 3);
}

TYPED_TEST(TuningStoreConformance, LiveStatsAggregateCountMeanQuantiles) {
  Topology topo = MakeTopology(2);
  std::vector<LiveSample> batch;
  for (int i = 1; i <= 100; ++i) {
    batch.push_back(LiveSample{Collective::kAllreduce, DataType::kFloat32, 8, 3000, "ring", double(i), 1000 + i});
  }
  ASSERT_TRUE(this->store_->RecordLiveSamples(topo.fingerprint, absl::MakeConstSpan(batch).subspan(0, 50)).ok());
  ASSERT_TRUE(this->store_->RecordLiveSamples(topo.fingerprint, absl::MakeConstSpan(batch).subspan(50)).ok());
  std::vector<LiveSample> other = {
      LiveSample{Collective::kAllreduce, DataType::kFloat32, 8, 5000, "one_shot", 7, 5}};  // other config
  ASSERT_TRUE(this->store_->RecordLiveSamples(topo.fingerprint, other).ok());
  auto stats = this->store_->GetLiveStats(topo.fingerprint);
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->size(), 2u);
  const LiveStats* ring = nullptr;
  for (const LiveStats& s : *stats) {
    if (s.configuration == "ring") ring = &s;
  }
  ASSERT_NE(ring, nullptr);
  EXPECT_EQ(ring->count, 100u);
  EXPECT_DOUBLE_EQ(ring->mean_us, 50.5);
  EXPECT_NEAR(ring->median_us, 50, 50 * 0.05);
  EXPECT_NEAR(ring->p90_us, 90, 90 * 0.05);
  EXPECT_EQ(ring->last_seen_unix_ms, 1100);
  EXPECT_EQ(ring->bucket, (ByteRange{2048, 4096}));
  EXPECT_EQ(this->store_->Info()->live_samples, 101u);
  std::vector<LiveSample> bad = {LiveSample{Collective::kAllreduce, DataType::kFloat32, 8, 1, "ring", -1, 0}};
  EXPECT_EQ(this->store_->RecordLiveSamples(topo.fingerprint, bad).code(), absl::StatusCode::kInvalidArgument);
}

TYPED_TEST(TuningStoreConformance, SweepsAndBoundedRawSamples) {
  for (int i = 0; i < 3; ++i) {
    Sweep s{absl::StrCat("sweep-", i), R"({"ranks":8})", SweepStatus::kRunning, 0.5, 1000 + i, 0, ""};
    ASSERT_TRUE(this->store_->PutSweep(s).ok());
    std::vector<SweepSample> samples = {
        SweepSample{Collective::kAllreduce, DataType::kFloat32, 8, 1024, "ring", 5, 4, 0},
        SweepSample{Collective::kAllreduce, DataType::kFloat32, 8, 1024, "ring", 6, 5, 1}};
    ASSERT_TRUE(this->store_->AddSweepSamples(s.id, samples).ok());
    s.status = SweepStatus::kDone;  // a running sweep's samples are never trimmed (next test)
    s.finished_unix_ms = 1500 + i;
    ASSERT_TRUE(this->store_->PutSweep(s).ok());
  }
  Sweep done{"sweep-2", "{}", SweepStatus::kDone, 1, 1002, 2000, "ok"};
  ASSERT_TRUE(this->store_->PutSweep(done).ok());
  EXPECT_EQ(*this->store_->GetSweep("sweep-2"), done);
  auto list = this->store_->ListSweeps();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].id, "sweep-2");  // newest first
  EXPECT_EQ(this->store_->GetSweepSamples("sweep-2")->size(), 2u);
  EXPECT_EQ(this->store_->GetSweepSamples("sweep-1")->size(), 2u);
  EXPECT_TRUE(this->store_->GetSweepSamples("sweep-0")->empty());  // beyond max_sweeps_with_samples
  EXPECT_EQ(this->store_->GetSweep("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(this->store_->AddSweepSamples("nope", {}).code(), absl::StatusCode::kNotFound);
}

// A resumed sweep keeps its first start time, so newer sweeps can outnumber it: its samples (and those of any
// sweep marked running) must survive the retention that each AddSweepSamples applies, also in the same call.
TYPED_TEST(TuningStoreConformance, RetentionNeverTrimsTheSweepBeingWrittenNorARunningOne) {
  const std::vector<SweepSample> two = {
      SweepSample{Collective::kAllreduce, DataType::kFloat32, 8, 1024, "ring", 5, 4, 0},
      SweepSample{Collective::kAllreduce, DataType::kFloat32, 8, 1024, "ring", 6, 5, 1}};
  Sweep resumed{"sweep-old", R"({"ranks":8})", SweepStatus::kRunning, 0.1, 100, 0, ""};
  Sweep stopped{"sweep-stopped", R"({"ranks":8})", SweepStatus::kCancelled, 0.1, 200, 300, "cancelled"};
  ASSERT_TRUE(this->store_->PutSweep(resumed).ok());
  ASSERT_TRUE(this->store_->PutSweep(stopped).ok());
  ASSERT_TRUE(this->store_->AddSweepSamples(resumed.id, two).ok());
  ASSERT_TRUE(this->store_->AddSweepSamples(stopped.id, two).ok());
  // More newer sweeps than max_sweeps_with_samples (2), each with samples.
  for (int i = 0; i < 3; ++i) {
    Sweep s{absl::StrCat("sweep-new-", i), "{}", SweepStatus::kDone, 1, 1000 + i, 2000 + i, "ok"};
    ASSERT_TRUE(this->store_->PutSweep(s).ok());
    ASSERT_TRUE(this->store_->AddSweepSamples(s.id, two).ok());
  }
  EXPECT_EQ(this->store_->GetSweepSamples("sweep-old")->size(), 2u) << "running: kept";
  EXPECT_TRUE(this->store_->GetSweepSamples("sweep-stopped")->empty()) << "neither running nor newest: trimmed";
  EXPECT_TRUE(this->store_->GetSweepSamples("sweep-new-0")->empty());
  EXPECT_EQ(this->store_->GetSweepSamples("sweep-new-2")->size(), 2u);
  // The running sweep writes more: every sample it wrote is still there.
  ASSERT_TRUE(this->store_->AddSweepSamples(resumed.id, two).ok());
  EXPECT_EQ(this->store_->GetSweepSamples("sweep-old")->size(), 4u);
  // A sweep writing samples keeps them even when it is not marked running and is not among the newest.
  ASSERT_TRUE(this->store_->AddSweepSamples(stopped.id, two).ok());
  EXPECT_EQ(this->store_->GetSweepSamples("sweep-stopped")->size(), 2u);
  // Once the resumed sweep is done, it is trimmed like any other old sweep by the next write.
  resumed.status = SweepStatus::kDone;
  resumed.finished_unix_ms = 5000;
  ASSERT_TRUE(this->store_->PutSweep(resumed).ok());
  ASSERT_TRUE(this->store_->AddSweepSamples("sweep-new-2", two).ok());
  EXPECT_TRUE(this->store_->GetSweepSamples("sweep-old")->empty());
  EXPECT_TRUE(this->store_->GetSweepSamples("sweep-stopped")->empty());
  EXPECT_EQ(this->store_->GetSweepSamples("sweep-new-1")->size(), 2u);
}

TYPED_TEST(TuningStoreConformance, LinksKeepTheNewestMeasurementPerTopology) {
  const std::string fp = MakeTopology(2).fingerprint, other = MakeTopology(3).fingerprint;
  auto none = this->store_->GetLinks(fp);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find(fp), std::string::npos) << none.status();

  StoredLinks first{fp, R"({"ranks":2,"links":[{"src":0,"dst":1,"bandwidth_gbps":9.5}]})", 1000, 0};
  ASSERT_TRUE(this->store_->PutLinks(first).ok());
  auto got = this->store_->GetLinks(fp);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->links_json, first.links_json);
  EXPECT_EQ(got->measured_unix_ms, 1000);
  EXPECT_GT(got->stored_unix_ms, 0);
  EXPECT_EQ(this->store_->GetLinks(other).status().code(), absl::StatusCode::kNotFound);

  StoredLinks second{fp, R"({"ranks":2,"links":[]})", 2000, 0};
  ASSERT_TRUE(this->store_->PutLinks(second).ok());
  got = this->store_->GetLinks(fp);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->links_json, second.links_json);
  EXPECT_EQ(got->measured_unix_ms, 2000);
}

TYPED_TEST(TuningStoreConformance, LinksRefuseBadInputNamingIt) {
  const std::string fp = MakeTopology(2).fingerprint;
  const std::pair<StoredLinks, std::string> bad[] = {
      {{"xyz", R"({"ranks":2,"links":[]})", 1, 0}, "fingerprint"},
      {{fp, "not json", 1, 0}, "not a JSON object"},
      {{fp, R"({"ranks":1,"links":[]})", 1, 0}, "\"ranks\""},
      {{fp, R"({"ranks":2,"links":{}})", 1, 0}, "\"links\""},
      {{fp, R"({"ranks":2,"links":[]})", 0, 0}, "measurement time"},
      {{fp, std::string(kMaxLinksJsonBytes + 1, ' '), 1, 0}, "over the limit"},
  };
  for (const auto& [links, what] : bad) {
    absl::Status s = this->store_->PutLinks(links);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << what;
    EXPECT_NE(s.message().find(what), std::string::npos) << s;
  }
  EXPECT_EQ(this->store_->GetLinks(fp).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(this->store_->GetLinks("nope").status().code(), absl::StatusCode::kInvalidArgument);
}

TYPED_TEST(TuningStoreConformance, ModelsGetTheNextVersionOfTheirClassAndAllAreKept) {
  const std::string cls = "0123456789abcdef", other = "fedcba9876543210";
  auto none = this->store_->GetModel(cls, 0);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find(cls), std::string::npos) << none.status();

  StoredModel first{cls, 99, R"({"name":"a"})", "sweeps s1", 1000, 0};
  auto v1 = this->store_->PutModel(first);
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_EQ(*v1, 1);  // the version given is ignored
  auto v2 = this->store_->PutModel(StoredModel{cls, 0, R"({"name":"b"})", "sweeps s2", 2000, 0});
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ(*v2, 2);
  ASSERT_EQ(*this->store_->PutModel(StoredModel{other, 0, R"({"name":"c"})", "", 3000, 0}), 1);

  auto latest = this->store_->GetModel(cls, 0);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->version, 2);
  EXPECT_EQ(latest->profile_json, R"({"name":"b"})");
  EXPECT_EQ(latest->source, "sweeps s2");
  EXPECT_EQ(latest->fitted_unix_ms, 2000);
  EXPECT_GT(latest->stored_unix_ms, 0);
  auto old = this->store_->GetModel(cls, 1);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->profile_json, R"({"name":"a"})");
  auto missing = this->store_->GetModel(cls, 7);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("version 7"), std::string::npos) << missing.status();

  auto all = this->store_->ListModels();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].topology_class, cls);
  EXPECT_EQ((*all)[0].version, 2);
  EXPECT_EQ((*all)[1].topology_class, other);
}

TYPED_TEST(TuningStoreConformance, ModelsRefuseBadInputNamingIt) {
  const std::string cls = "0123456789abcdef";
  const std::pair<StoredModel, std::string> bad[] = {
      {{"xyz", 0, "{}", "", 1, 0}, "class"},
      {{cls, 0, "[1]", "", 1, 0}, "not a JSON object"},
      {{cls, 0, "{}", "", 0, 0}, "fitting time"},
      {{cls, 0, "{}", std::string(kMaxTextBytes + 1, 'x'), 1, 0}, "model source"},
  };
  for (const auto& [model, what] : bad) {
    auto v = this->store_->PutModel(model);
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << what;
    EXPECT_NE(v.status().message().find(what), std::string::npos) << v.status();
  }
  EXPECT_EQ(this->store_->GetModel(cls, 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(this->store_->GetModel(cls, -1).status().code(), absl::StatusCode::kInvalidArgument);
}

TYPED_TEST(TuningStoreConformance, PredictedEntriesKeepTheirModelVersion) {
  Topology topo = MakeTopology(2);
  auto entries = ThreeEntries();
  entries[0].model_version = 3;  // ring from 64 KiB: second in canonical order
  ASSERT_TRUE(this->store_->PutTable(topo, entries, {}).ok());
  auto t = this->store_->GetTable(topo.fingerprint, 0);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->entries.size(), 3u);
  EXPECT_EQ(t->entries[0].model_version, 0);
  EXPECT_EQ(t->entries[1].model_version, 3);
  auto found = this->store_->Lookup(topo.fingerprint, entries[0].key.collective, entries[0].key.dtype,
                                    entries[0].key.world_size, entries[0].key.range.min, 0);
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->model_version, 3);
  entries[0].model_version = -1;
  EXPECT_EQ(this->store_->PutTable(topo, entries, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TYPED_TEST(TuningStoreConformance, InfoCountsLatestVersions) {
  Topology topo = MakeTopology(2);
  ASSERT_TRUE(this->store_->PutTable(topo, ThreeEntries(), {}).ok());
  auto fewer = ThreeEntries();
  fewer.pop_back();
  ASSERT_TRUE(this->store_->PutTable(topo, fewer, {}).ok());
  auto info = this->store_->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->tables, 1u);
  EXPECT_EQ(info->entries, 2u);
}

TYPED_TEST(TuningStoreConformance, ConcurrentWritersAndReaders) {
  Topology topo = MakeTopology(2);
  ASSERT_TRUE(this->store_->PutTable(topo, ThreeEntries(), {}).ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        if (t % 2 == 0) {
          std::vector<LiveSample> s(10, LiveSample{Collective::kAllreduce, DataType::kFloat32, 8, 64, "ring", 3, 1});
          EXPECT_TRUE(this->store_->RecordLiveSamples(topo.fingerprint, s).ok());
        } else {
          EXPECT_TRUE(this->store_->GetTable(topo.fingerprint, 0).ok());
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(this->store_->Info()->live_samples, 400u);
}

}  // namespace
}  // namespace hccltune::db
