#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "policies/rules.h"
#include "runtime/algorithms/registry.h"
#include "runtime/selector/selector.h"

namespace hccltune {
namespace {

using policies::ParseHcclAlgo;
using policies::ParseRuleTable;
using policies::ParseTuneAlgo;

bool Has(const absl::Status& s, absl::string_view what) { return s.message().find(what) != absl::string_view::npos; }

TEST(TuneAlgo, ConventionsExample) {
  auto set = ParseTuneAlgo("allreduce:0-64K=one_shot,64K-=ring(chunk=1M,channels=2)/allgather:0-=ring");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->Find(Collective::kAllreduce, 4, 100)->ToString(), "one_shot(channels=1,link=auto)");
  EXPECT_EQ(set->Find(Collective::kAllreduce, 4, 65536)->ToString(), "ring(chunk=1M,channels=2,link=auto)");
  EXPECT_EQ(set->Find(Collective::kAllgather, 4, 1)->algorithm, "ring");
  EXPECT_EQ(set->Find(Collective::kBroadcast, 4, 1), nullptr);
  EXPECT_TRUE(ParseTuneAlgo("")->empty());
  // Nested configurations with commas inside parentheses.
  auto h = ParseTuneAlgo("allreduce:1M-=hierarchical(intra=ring(link=shm),inter=halving_doubling(link=tcp))");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->Find(Collective::kAllreduce, 4, 1 << 20)->inter->algorithm, "halving_doubling");
}

TEST(TuneAlgo, ErrorsPointAtThePosition) {
  struct Case {
    const char* text;
    const char* needle;
  } cases[] = {
      {"allreduce", "at 0: expected COLLECTIVE:"},
      {"allreduz:0-=ring", "unknown collective 'allreduz'"},
      {"allreduce:0-64K", "expected RANGE=CONFIGURATION"},
      {"allreduce:64K-0=ring", "empty or inverted"},
      {"allreduce:0-=rnig", "unknown algorithm 'rnig'"},
      {"allreduce:0-=ring/allreduce:0-=ring", "given twice"},
      {"allreduce:0-=ring(chunk=0)", "chunk must be a positive"},
  };
  for (const auto& c : cases) {
    auto r = ParseTuneAlgo(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_TRUE(Has(r.status(), c.needle)) << c.text << " -> " << r.status();
    EXPECT_TRUE(Has(r.status(), "HCCL_TUNE_ALGO=")) << r.status();
  }
}

TEST(TuneAlgo, RefusesAmbiguousInput) {
  struct Case {
    const char* text;
    const char* needle;
  } cases[] = {
      // First match wins: the second rule would never run for 64K and up.
      {"allreduce:0-=ring,64K-=one_shot", "allreduce range 64K- overlaps 0- given before it"},
      {"allreduce:0-1M=ring,64K-2M=one_shot", "range 64K-2M overlaps 0-1M"},
      {"allgather:1M-=ring,0-4M=direct", "range 0-4M overlaps 1M-"},
      // docs/CONVENTIONS.md defines K, M and G only, and a size is one word.
      {"allreduce:0-1T=ring", "the suffixes are K, M and G"},
      {"allreduce:1 K-=ring", "no spaces inside a size"},
      {"allreduce:0-6 4K=ring", "no spaces inside a size"},
  };
  for (const auto& c : cases) {
    auto r = ParseTuneAlgo(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_TRUE(Has(r.status(), c.needle)) << c.text << " -> " << r.status();
    EXPECT_TRUE(Has(r.status(), "HCCL_TUNE_ALGO=")) << r.status();
  }
  // Adjacent half-open ranges, in any order, and ranges of different collectives do not overlap.
  EXPECT_TRUE(ParseTuneAlgo("allreduce:64K-=ring,0-64K=one_shot/allgather:0-=ring").ok());
  // Spaces around the parts stay allowed.
  EXPECT_TRUE(ParseTuneAlgo(" allreduce : 0 - 64K = one_shot , 64K- = ring ").ok());
  // Rule tables follow the same size syntax.
  EXPECT_FALSE(ParseRuleTable("allreduce 1- 0-1T ring\n", "t").ok());
  EXPECT_TRUE(ParseRuleTable("allreduce 1- 0-1024G ring\n", "t").ok());
}

TEST(HcclAlgo, GlobalAndPerCollective) {
  auto g = ParseHcclAlgo("level0:NA;level1:H-D_R");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FALSE(g->For(Collective::kAllreduce)->level0.has_value());
  EXPECT_EQ(*g->For(Collective::kAllgather)->level1, "halving_doubling");
  auto p = ParseHcclAlgo("allreduce=level0:ring;level1:pipeline/allgather=level0:NA;level1:ring");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p->For(Collective::kAllreduce)->level0, "ring");
  EXPECT_EQ(*p->For(Collective::kAllreduce)->level1, "hierarchical");
  EXPECT_EQ(p->For(Collective::kBroadcast), nullptr);
  auto refused = ParseHcclAlgo("level0:NHR;level1:NB");
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(Has(refused.status(), "'NHR' is not implemented")) << refused.status();
  EXPECT_TRUE(Has(refused.status(), "accepted: ring, H-D_R, pipeline, NA")) << refused.status();
  EXPECT_FALSE(ParseHcclAlgo("level7:ring").ok());
  EXPECT_FALSE(ParseHcclAlgo("allreduz=level0:ring").ok());
}

TEST(HcclAlgo, RefusesDuplicates) {
  // HCCL_TUNE_ALGO refuses a collective given twice; HCCL_ALGO kept the last one silently.
  struct Case {
    const char* text;
    const char* needle;
  } cases[] = {
      {"allreduce=level1:ring/allreduce=level1:H-D_R", "allreduce is given twice"},
      {"level0:NA;level1:ring;level1:H-D_R", "level1 is given twice"},
      {"level0:ring;level0:NA", "level0 is given twice"},
      {"allgather=level0:NA;level0:ring", "level0 is given twice"},
      {"level0:NA;level2:NA;level2:ring", "level2 is given twice"},
  };
  for (const auto& c : cases) {
    auto r = ParseHcclAlgo(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_TRUE(Has(r.status(), c.needle)) << c.text << " -> " << r.status();
    EXPECT_TRUE(Has(r.status(), "HCCL_ALGO=")) << r.status();
  }
  EXPECT_TRUE(ParseHcclAlgo("allreduce=level1:ring/allgather=level1:ring").ok());
}

TEST(Defaults, EveryLineParsesAndNamesARegisteredAlgorithm) {
  const auto& d = policies::BuiltinDefaults();
  for (Collective c : AllCollectives()) {
    if (c == Collective::kSendRecv) continue;
    ASSERT_FALSE(d.RulesFor(c).empty()) << CollectiveName(c) << " has no default";
    for (const auto& r : d.RulesFor(c)) {
      EXPECT_NE(registry::Find(c, r.config.algorithm), nullptr)
          << CollectiveName(c) << " default '" << r.config.ToString() << "' is not a registered algorithm";
    }
    // Every world size, node count and size has a default.
    for (int world : {1, 2, 8, 9, 64, 65, 1000}) {
      for (int nodes : {1, 2, 4}) {
        if (nodes > world) continue;
        for (uint64_t bytes : {uint64_t{0}, uint64_t{4096}, uint64_t{1} << 20, uint64_t{1} << 34}) {
          EXPECT_NE(d.Find(c, world, bytes, nodes), nullptr)
              << CollectiveName(c) << " " << world << " ranks on " << nodes << " nodes, " << bytes;
        }
      }
    }
  }
  auto bad = ParseRuleTable("allreduce 2-8 0-64K ring\nallreduce x 0- ring\n", "test table");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Has(bad.status(), "test table line 2")) << bad.status();
}

TEST(RuleTable, ANodeCountRangeNarrowsARule) {
  auto set = ParseRuleTable(
      "allgather 2-8 nodes=2- 64K- ring(chunk=1M)\n"
      "allgather 2-8 nodes=1 0- direct\n"
      "allgather 1- 0- bruck\n",
      "t");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->Find(Collective::kAllgather, 8, 1 << 20, 2)->algorithm, "ring");
  EXPECT_EQ(set->Find(Collective::kAllgather, 8, 1 << 20, 4)->algorithm, "ring");
  EXPECT_EQ(set->Find(Collective::kAllgather, 8, 1 << 20, 1)->algorithm, "direct");
  EXPECT_EQ(set->Find(Collective::kAllgather, 8, 1 << 20)->algorithm, "direct");  // one node unless told
  EXPECT_EQ(set->Find(Collective::kAllgather, 8, 1024, 2)->algorithm, "bruck");   // below the nodes= row's range
  EXPECT_EQ(set->Find(Collective::kAllgather, 16, 1 << 20, 2)->algorithm, "bruck");
  for (const char* bad : {"allgather 2-8 nodes=0 0- ring\n", "allgather 2-8 nodes=x 0- ring\n",
                          "allgather 2-8 nodes=3-2 0- ring\n", "allgather 2-8 nodes=2- ring\n"}) {
    auto r = ParseRuleTable(bad, "t");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(Has(r.status(), "t line 1")) << r.status();
  }
  EXPECT_TRUE(Has(ParseRuleTable("allgather 2-8 nodes=x 0- ring\n", "t").status(), "nodes=")) << "names the field";
}

GroupTopology OneNode(int n) {
  GroupTopology t;
  t.node_of.assign(static_cast<size_t>(n), 0);
  return t;
}

GroupTopology OnNodes(const std::vector<int>& node_of) {
  GroupTopology t;
  t.node_of = node_of;
  t.num_nodes = node_of.empty() ? 1 : *std::max_element(node_of.begin(), node_of.end()) + 1;
  return t;
}

// What the defaults choose is valid on the group's topology (a row the registry refuses there, such as a
// hierarchical one where every node has one rank, is passed over for the next), and the choice is the first
// row for the group's world and node count that is.
TEST(Selector, DefaultsAreValidOnEveryTopologyAndNodeRowsApplyAcrossNodes) {
  const std::vector<GroupTopology> topologies = {OneNode(4),
                                                 OnNodes({0, 0, 1, 1}),
                                                 OnNodes({0, 1, 2, 3}),
                                                 OnNodes({0, 0, 1}),
                                                 OnNodes({0, 1}),
                                                 OneNode(8),
                                                 OnNodes({0, 0, 0, 0, 1, 1, 1, 1}),
                                                 OnNodes({0, 0, 1, 1, 2, 2, 3, 3})};
  const uint64_t sizes[] = {0, 1024, 64 << 10, 1 << 20, 4 << 20, 64 << 20};
  for (const GroupTopology& topo : topologies) {
    const int world = static_cast<int>(topo.node_of.size());
    auto s = Selector::Create(Environment{}, world, topo);
    ASSERT_TRUE(s.ok()) << s.status();
    for (Collective c : AllCollectives()) {
      if (c == Collective::kSendRecv) continue;
      for (uint64_t bytes : sizes) {
        const auto choice = s->Choose(c, DataType::kFloat32, bytes);
        ASSERT_NE(choice.config, nullptr);
        EXPECT_TRUE(registry::IsValid(c, choice.config->algorithm, world, topo).ok())
            << CollectiveName(c) << " " << world << " ranks on " << topo.num_nodes << " nodes, " << bytes
            << " B: " << choice.config->ToString();
        EXPECT_TRUE(registry::CheckForm(c, *choice.config, topo).ok()) << choice.config->ToString();
        const Configuration* row = policies::BuiltinDefaults().Find(c, world, bytes, topo.num_nodes);
        if (row != nullptr && registry::IsValid(c, row->algorithm, world, topo).ok() &&
            registry::CheckForm(c, *row, topo).ok()) {
          EXPECT_EQ(choice.config->ToString(), row->ToString()) << CollectiveName(c) << " " << bytes;
        }
      }
    }
  }
}

TEST(Selector, PrecedenceOverrideThenHcclAlgoThenTableThenDefaults) {
  Environment env;
  env.tune_algo = "allreduce:0-1K=one_shot";
  env.hccl_algo = "level0:ring";
  auto s = Selector::Create(env, 4, OneNode(4));
  ASSERT_TRUE(s.ok()) << s.status();
  auto table = std::make_shared<TunedTable>();
  table->version = 3;
  table->entries.push_back(
      {Collective::kAllreduce, DataType::kFloat32, 4, {0, 1 << 20}, *Configuration::Parse("halving_doubling")});
  table->entries.push_back(
      {Collective::kBarrier, DataType::kUint8, 4, {0, kUnbounded}, *Configuration::Parse("dissemination(link=tcp)")});
  table->entries.push_back({Collective::kBarrier,
                            DataType::kUint8,
                            8,
                            {0, kUnbounded},
                            *Configuration::Parse("dissemination(link=shm)")});  // other world size
  s->SetTable(table);
  auto c = s->Choose(Collective::kAllreduce, DataType::kFloat32, 100);
  EXPECT_EQ(c.source, ChoiceSource::kTuneAlgo);
  EXPECT_EQ(c.config->algorithm, "one_shot");
  c = s->Choose(Collective::kAllreduce, DataType::kFloat32, 4096);
  EXPECT_EQ(c.source, ChoiceSource::kHcclAlgo);  // HCCL_ALGO level0:ring applies to every collective with ring
  EXPECT_EQ(c.config->algorithm, "ring");
  c = s->Choose(Collective::kBarrier, DataType::kUint8, 0);
  EXPECT_EQ(c.source, ChoiceSource::kTable);
  EXPECT_EQ(c.config->ToString(), "dissemination(link=tcp)");
  c = s->Choose(Collective::kScatter, DataType::kFloat32, 64);
  EXPECT_EQ(c.source, ChoiceSource::kDefault);

  Environment plain;
  auto t = Selector::Create(plain, 4, OneNode(4));
  t->SetTable(table);
  c = t->Choose(Collective::kAllreduce, DataType::kFloat32, 1000);
  EXPECT_EQ(c.source, ChoiceSource::kTable);
  EXPECT_EQ(c.config->algorithm, "halving_doubling");
  c = t->Choose(Collective::kAllreduce, DataType::kFloat32, 1 << 20);  // past the entry's range
  EXPECT_EQ(c.source, ChoiceSource::kDefault);
  c = t->Choose(Collective::kAllreduce, DataType::kFloat16, 1000);  // other dtype
  EXPECT_EQ(c.source, ChoiceSource::kDefault);
  EXPECT_EQ(t->table_version(), 3);
}

TEST(Selector, HcclAlgoLevel1OnSeveralNodesIsHierarchical) {
  Environment env;
  env.hccl_algo = "level0:ring;level1:H-D_R";
  GroupTopology two;
  two.node_of = {0, 0, 1, 1};
  two.num_nodes = 2;
  auto s = Selector::Create(env, 4, two);
  ASSERT_TRUE(s.ok()) << s.status();
  auto c = s->Choose(Collective::kAllreduce, DataType::kFloat32, 1 << 20);
  EXPECT_EQ(c.config->ToString(),
            "hierarchical(intra=ring(chunk=512K,channels=1,link=auto),inter=halving_doubling(channels=1,link=auto))");
  // reducescatter has a hierarchical form: level1 is its inter step.
  EXPECT_EQ(s->Choose(Collective::kReducescatter, DataType::kFloat32, 1 << 20).config->ToString(),
            "hierarchical(intra=ring(chunk=512K,channels=1,link=auto),inter=halving_doubling(channels=1,link=auto))");
  // alltoall has neither halving_doubling nor a hierarchical form: stays automatic.
  EXPECT_EQ(s->Choose(Collective::kAlltoall, DataType::kFloat32, 1 << 20).source, ChoiceSource::kDefault);
}

GroupTopology TwoNodesOfTwo() {
  GroupTopology two;
  two.node_of = {0, 0, 1, 1};
  two.num_nodes = 2;
  return two;
}

// A table for 4 ranks whose allreduce entry (fp32, every size) is hierarchical with non-default steps, and whose
// fp16 entry is flat.
std::shared_ptr<TunedTable> HierarchicalTable() {
  auto table = std::make_shared<TunedTable>();
  table->version = 1;
  table->entries.push_back(
      {Collective::kAllreduce,
       DataType::kFloat32,
       4,
       {0, kUnbounded},
       *Configuration::Parse("hierarchical(intra=ring(chunk=1M,link=shm),inter=recursive_doubling(link=tcp))")});
  table->entries.push_back(
      {Collective::kAllreduce, DataType::kFloat16, 4, {0, kUnbounded}, *Configuration::Parse("ring(chunk=2M)")});
  return table;
}

constexpr absl::string_view kDefaultRing = "ring(chunk=512K,channels=1,link=auto)";

TEST(Selector, HcclAlgoLevel0OnSeveralNodesStaysInsideTheNodes) {
  // level0 is the step inside a node: on several nodes it is hierarchical's intra step, never a flat ring
  // across the nodes; the inter step is chosen as usual (the table's when it is hierarchical).
  Environment env;
  env.hccl_algo = "level0:ring;level1:NA";
  auto s = Selector::Create(env, 4, TwoNodesOfTwo());
  ASSERT_TRUE(s.ok()) << s.status();
  auto c = s->Choose(Collective::kAllreduce, DataType::kFloat32, 1 << 20);
  EXPECT_EQ(c.source, ChoiceSource::kHcclAlgo);
  EXPECT_EQ(c.config->ToString(), absl::StrCat("hierarchical(intra=", kDefaultRing, ",inter=", kDefaultRing, ")"));
  // allgather has a hierarchical form too: level0 is its intra step.
  c = s->Choose(Collective::kAllgather, DataType::kFloat32, 1 << 20);
  EXPECT_EQ(c.source, ChoiceSource::kHcclAlgo);
  EXPECT_EQ(c.config->ToString(), absl::StrCat("hierarchical(intra=", kDefaultRing, ",inter=", kDefaultRing, ")"));
  // alltoall has none: level0 cannot be applied inside the nodes only, so it stays automatic.
  EXPECT_EQ(s->Choose(Collective::kAlltoall, DataType::kFloat32, 1 << 20).source, ChoiceSource::kDefault);
  s->SetTable(HierarchicalTable());
  c = s->Choose(Collective::kAllreduce, DataType::kFloat32, 1 << 20);
  EXPECT_EQ(c.source, ChoiceSource::kHcclAlgo);
  EXPECT_EQ(c.config->ToString(),
            absl::StrCat("hierarchical(intra=", kDefaultRing, ",inter=recursive_doubling(channels=1,link=tcp))"));
  // The table's flat choice has no inter step to take: hierarchical's default one.
  EXPECT_EQ(s->Choose(Collective::kAllreduce, DataType::kFloat16, 1 << 20).config->ToString(),
            absl::StrCat("hierarchical(intra=", kDefaultRing, ",inter=", kDefaultRing, ")"));
  // On one node level0 is the whole collective.
  auto one = Selector::Create(env, 4, OneNode(4));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->Choose(Collective::kAllreduce, DataType::kFloat32, 1 << 20).config->ToString(), kDefaultRing);
  // One rank per node: nothing is inside a node, so level0 alone leaves it automatic.
  GroupTopology spread;
  spread.node_of = {0, 1, 2, 3};
  spread.num_nodes = 4;
  auto four = Selector::Create(env, 4, spread);
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(four->Choose(Collective::kAllreduce, DataType::kFloat32, 1 << 20).source, ChoiceSource::kDefault);
}

TEST(Selector, HcclAlgoLevel1LeavesTheIntraStepToTheUsualChoice) {
  // level0:NA: intra is "chosen as usual" (docs/CONVENTIONS.md) — the table's step where the table chooses
  // hierarchical, not always a pinned ring.
  Environment env;
  env.hccl_algo = "level0:NA;level1:H-D_R";
  auto s = Selector::Create(env, 4, TwoNodesOfTwo());
  ASSERT_TRUE(s.ok()) << s.status();
  const std::string hd = "inter=halving_doubling(channels=1,link=auto))";
  EXPECT_EQ(s->Choose(Collective::kAllreduce, DataType::kFloat32, 1 << 20).config->ToString(),
            absl::StrCat("hierarchical(intra=", kDefaultRing, ",", hd));
  s->SetTable(HierarchicalTable());
  auto c = s->Choose(Collective::kAllreduce, DataType::kFloat32, 1 << 20);
  EXPECT_EQ(c.source, ChoiceSource::kHcclAlgo);
  EXPECT_EQ(c.config->ToString(), absl::StrCat("hierarchical(intra=ring(chunk=1M,channels=1,link=shm),", hd));
  EXPECT_EQ(s->Choose(Collective::kAllreduce, DataType::kFloat16, 1 << 20).config->ToString(),
            absl::StrCat("hierarchical(intra=", kDefaultRing, ",", hd));
  // Both levels given: the table's steps do not matter.
  env.hccl_algo = "level0:H-D_R;level1:ring";
  auto both = Selector::Create(env, 4, TwoNodesOfTwo());
  ASSERT_TRUE(both.ok()) << both.status();
  both->SetTable(HierarchicalTable());
  EXPECT_EQ(both->Choose(Collective::kAllreduce, DataType::kFloat32, 1 << 20).config->ToString(),
            absl::StrCat("hierarchical(intra=halving_doubling(channels=1,link=auto),inter=", kDefaultRing, ")"));
  // A new table (or none) replaces what the old one's steps gave.
  both->SetTable(nullptr);
  s->SetTable(nullptr);
  EXPECT_EQ(s->Choose(Collective::kAllreduce, DataType::kFloat32, 1 << 20).config->ToString(),
            absl::StrCat("hierarchical(intra=", kDefaultRing, ",", hd));
}

TEST(Selector, HcclAlgoChoicesPrintAndParseBack) {
  // pipeline at level0 would nest hierarchical in hierarchical, which Configuration::Parse refuses: refused.
  auto bad = ParseHcclAlgo("level0:pipeline;level1:NA");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Has(bad.status(), "level0 accepts ring, H-D_R, NA")) << bad.status();
  EXPECT_TRUE(Has(bad.status(), "HCCL_ALGO=")) << bad.status();
  EXPECT_FALSE(ParseHcclAlgo("allreduce=level0:pipeline").ok());
  Environment env;
  env.hccl_algo = "level0:pipeline";
  EXPECT_FALSE(Selector::Create(env, 4, TwoNodesOfTwo()).ok());
  for (const char* text : {"level0:ring", "level0:H-D_R;level1:NA", "level1:pipeline", "level0:ring;level1:pipeline",
                           "level0:NA;level1:ring", "level0:ring;level1:H-D_R"}) {
    env.hccl_algo = text;
    for (const GroupTopology& topo : {OneNode(4), TwoNodesOfTwo()}) {
      auto s = Selector::Create(env, 4, topo);
      ASSERT_TRUE(s.ok()) << text << ": " << s.status();
      s->SetTable(HierarchicalTable());
      for (Collective c : AllCollectives()) {
        if (c == Collective::kSendRecv) continue;
        for (DataType t : {DataType::kFloat32, DataType::kFloat16}) {
          const std::string printed = s->Choose(c, t, 1 << 20).config->ToString();
          auto back = Configuration::Parse(printed);
          ASSERT_TRUE(back.ok()) << text << ": " << printed << ": " << back.status();
          EXPECT_EQ(back->ToString(), printed) << text;
        }
      }
    }
  }
  // level1:pipeline is hierarchical with its default steps, level0 inside the nodes when given.
  env.hccl_algo = "level0:H-D_R;level1:pipeline";
  auto s = Selector::Create(env, 4, TwoNodesOfTwo());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->Choose(Collective::kAllreduce, DataType::kFloat32, 1 << 20).config->ToString(),
            absl::StrCat("hierarchical(intra=halving_doubling(channels=1,link=auto),inter=", kDefaultRing, ")"));
}

TEST(Selector, OverridesThatCannotRunHereAreErrors) {
  // symmetric needs symmetric memory, which exists only on one node: refused at init on several nodes,
  // naming the variable and the rule (every call would fail otherwise).
  Environment env;
  env.tune_algo = "allreduce:0-64K=symmetric,64K-=ring";
  auto s = Selector::Create(env, 4, TwoNodesOfTwo());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(s.status(), "HCCL_TUNE_ALGO: allreduce:0-64K=symmetric(link=auto) cannot run here")) << s.status();
  EXPECT_TRUE(Has(s.status(), "on 2 nodes")) << s.status();
  // On one node it depends on each call's buffers: accepted (a call on other buffers names HCCL_TUNE_ALGO).
  EXPECT_TRUE(Selector::Create(env, 4, OneNode(4)).ok());
  // Never as a hierarchical step.
  env.tune_algo = "allreduce:0-=hierarchical(intra=symmetric)";
  s = Selector::Create(env, 4, TwoNodesOfTwo());
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Has(s.status(), "hierarchical step")) << s.status();
  // Pointless but correct (hierarchical on one node degenerates to its intra steps): accepted, as one
  // HCCL_TUNE_ALGO also reaches a job's one-node sub-communicators.
  env.tune_algo = "allreduce:1M-=hierarchical";
  EXPECT_TRUE(Selector::Create(env, 4, OneNode(4)).ok());
  EXPECT_TRUE(Selector::Create(env, 4, TwoNodesOfTwo()).ok());
}

// The measured row of hierarchical(form=leader) reducescatter applies on its node count only: 4 x 2 at 64 KiB;
// 2 x 4 (no row), one node of 8 and the neighbouring sizes keep the usual rows.
TEST(Selector, LeaderFormRowsApplyOnTheirNodeCounts) {
  const std::string leader =
      absl::StrCat("hierarchical(intra=", kDefaultRing, ",inter=", kDefaultRing, ",form=leader)");
  auto four = Selector::Create(Environment{}, 8, OnNodes({0, 0, 1, 1, 2, 2, 3, 3}));
  auto two = Selector::Create(Environment{}, 8, OnNodes({0, 0, 0, 0, 1, 1, 1, 1}));
  auto one = Selector::Create(Environment{}, 8, OneNode(8));
  ASSERT_TRUE(four.ok() && two.ok() && one.ok());
  const auto rs = [](Selector& s, uint64_t b) {
    return s.Choose(Collective::kReducescatter, DataType::kFloat32, b).config->ToString();
  };
  EXPECT_EQ(rs(*four, 64 << 10), leader);
  EXPECT_NE(rs(*four, 128 << 10), leader);
  EXPECT_NE(rs(*four, 256 << 10), leader);
  EXPECT_NE(rs(*two, 256 << 10), leader);
  EXPECT_NE(rs(*two, 64 << 10), leader);
  EXPECT_NE(rs(*two, 512 << 10), leader);
  EXPECT_NE(rs(*one, 256 << 10), leader);
  EXPECT_NE(rs(*one, 64 << 10), leader);
}

// The allgather and broadcast rows across nodes (8 ranks): on 2 and 4 nodes the rows' choices at their sizes, the
// usual rows between and below them, and none of them on one node or at another world size. Uneven 5 + 3 nodes
// run hierarchical(form=auto) too (the leader form there).
TEST(Selector, AllgatherRowsApplyOnTheirNodeCounts) {
  auto four = Selector::Create(Environment{}, 8, OnNodes({0, 0, 1, 1, 2, 2, 3, 3}));
  auto two = Selector::Create(Environment{}, 8, OnNodes({0, 0, 0, 0, 1, 1, 1, 1}));
  auto uneven = Selector::Create(Environment{}, 8, OnNodes({0, 0, 0, 0, 0, 1, 1, 1}));
  auto one = Selector::Create(Environment{}, 8, OneNode(8));
  auto six = Selector::Create(Environment{}, 6, OnNodes({0, 0, 0, 1, 1, 1}));
  ASSERT_TRUE(four.ok() && two.ok() && uneven.ok() && one.ok() && six.ok());
  const auto ag = [](Selector& s, uint64_t b) {
    const Configuration* c = s.Choose(Collective::kAllgather, DataType::kFloat32, b).config;
    return c->algorithm == "hierarchical" ? absl::StrCat("hierarchical/", HierFormName(c->form)) : c->ToString();
  };
  const std::string ring = "ring(chunk=1M,channels=1,link=auto)";
  EXPECT_EQ(ag(*two, 64 << 10), "direct(channels=1,link=auto)");
  EXPECT_EQ(ag(*two, 256 << 10), "hierarchical/leader");
  EXPECT_EQ(ag(*two, 512 << 10), "direct(channels=1,link=auto)");
  EXPECT_EQ(ag(*two, 1 << 20), "hierarchical/auto");
  EXPECT_EQ(ag(*two, 4 << 20), "hierarchical/auto");
  EXPECT_EQ(ag(*two, 16 << 20), ring);
  EXPECT_EQ(ag(*uneven, 2 << 20), "hierarchical/auto");
  EXPECT_EQ(ag(*four, 256 << 10), "direct(channels=1,link=auto)");
  EXPECT_EQ(ag(*four, 512 << 10), "hierarchical/leader");
  EXPECT_EQ(ag(*four, 1 << 20), "hierarchical/leader");
  EXPECT_EQ(ag(*four, 4 << 20), ring);
  EXPECT_EQ(ag(*four, 64 << 20), ring);
  // Broadcast on 2 nodes: binomial_tree at 256 KiB-4 MiB instead of linear; one node keeps linear.
  const auto bc = [](Selector& s, uint64_t b) {
    return s.Choose(Collective::kBroadcast, DataType::kFloat32, b).config->algorithm;
  };
  EXPECT_EQ(bc(*two, 64 << 10), "linear");
  EXPECT_EQ(bc(*two, 256 << 10), "binomial_tree");
  EXPECT_EQ(bc(*two, 2 << 20), "binomial_tree");
  EXPECT_EQ(bc(*one, 256 << 10), "linear");
  EXPECT_EQ(bc(*four, 256 << 10), "linear");
  // On 4 nodes: binomial_tree at 1-4 MiB, chain from 4 MiB; one node keeps binomial_tree there.
  EXPECT_EQ(bc(*four, 1 << 20), "binomial_tree");
  EXPECT_EQ(bc(*four, 4 << 20), "chain");
  EXPECT_EQ(bc(*four, 64 << 20), "chain");
  EXPECT_EQ(bc(*one, 64 << 20), "binomial_tree");
  EXPECT_EQ(bc(*two, 64 << 20), "binomial_tree");
  for (uint64_t b : {256u << 10, 1u << 20, 64u << 20}) {
    EXPECT_EQ(ag(*one, b), "direct(channels=1,link=auto)") << b;
    EXPECT_EQ(ag(*six, b), "direct(channels=1,link=auto)") << b;
  }
}

// The allreduce rows for 8 ranks on 2 nodes: one_shot at 8 B, double_binary_tree from 1 KiB to 128 KiB, hierarchical
// from there (uneven 5 + 3 nodes too); one node, 4 nodes and another world size keep the usual rows.
TEST(Selector, AllreduceRowsApplyOnTwoNodesOfEightRanks) {
  auto two = Selector::Create(Environment{}, 8, OnNodes({0, 0, 0, 0, 1, 1, 1, 1}));
  auto uneven = Selector::Create(Environment{}, 8, OnNodes({0, 0, 0, 0, 0, 1, 1, 1}));
  auto four = Selector::Create(Environment{}, 8, OnNodes({0, 0, 1, 1, 2, 2, 3, 3}));
  auto one = Selector::Create(Environment{}, 8, OneNode(8));
  auto six = Selector::Create(Environment{}, 6, OnNodes({0, 0, 0, 1, 1, 1}));
  ASSERT_TRUE(two.ok() && uneven.ok() && four.ok() && one.ok() && six.ok());
  const auto ar = [](Selector& s, uint64_t b) {
    return s.Choose(Collective::kAllreduce, DataType::kFloat32, b).config->algorithm;
  };
  EXPECT_EQ(ar(*two, 8), "one_shot");
  EXPECT_EQ(ar(*two, 1 << 10), "double_binary_tree");
  EXPECT_EQ(ar(*two, 64 << 10), "double_binary_tree");
  EXPECT_EQ(ar(*two, (128 << 10) - 4), "double_binary_tree");
  EXPECT_EQ(ar(*two, 128 << 10), "hierarchical");
  EXPECT_EQ(ar(*two, 64 << 20), "hierarchical");
  EXPECT_EQ(ar(*uneven, 1 << 20), "hierarchical");
  for (Selector* s : {&*four, &*one, &*six}) {
    EXPECT_EQ(ar(*s, 4 << 10), "one_shot");
    EXPECT_NE(ar(*s, 64 << 10), "double_binary_tree");
    EXPECT_NE(ar(*s, 1 << 20), "hierarchical");
  }
}

// HCCL_TUNE_ALGO chooses hierarchical's form where it runs; form=parallel on uneven nodes, and a form for a
// collective with one, are refused at init naming the rule and the form.
TEST(Selector, HierarchicalFormOverrides) {
  Environment env;
  env.tune_algo =
      "allgather:0-1M=hierarchical(form=leader),1M-=hierarchical(form=parallel)/"
      "reducescatter:0-=hierarchical(inter=direct,form=leader)";
  auto s = Selector::Create(env, 8, OnNodes({0, 0, 0, 0, 1, 1, 1, 1}));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->Choose(Collective::kAllgather, DataType::kFloat32, 64 << 10).config->ToString(),
            absl::StrCat("hierarchical(intra=", kDefaultRing, ",inter=", kDefaultRing, ",form=leader)"));
  EXPECT_EQ(s->Choose(Collective::kAllgather, DataType::kFloat32, 4 << 20).config->form, HierForm::kParallel);
  EXPECT_EQ(s->Choose(Collective::kReducescatter, DataType::kFloat32, 1 << 20).config->form, HierForm::kLeader);
  // Uneven nodes keep the leader form: parallel is refused, leader and auto run.
  auto uneven = Selector::Create(env, 3, OnNodes({0, 0, 1}));
  ASSERT_FALSE(uneven.ok());
  EXPECT_TRUE(Has(uneven.status(), "HCCL_TUNE_ALGO: allgather:1M-=hierarchical(")) << uneven.status();
  EXPECT_TRUE(Has(uneven.status(), "form=parallel")) << uneven.status();
  EXPECT_TRUE(Has(uneven.status(), "ranks per node here: 2, 1")) << uneven.status();
  env.tune_algo = "allgather:0-=hierarchical(form=leader)";
  EXPECT_TRUE(Selector::Create(env, 3, OnNodes({0, 0, 1})).ok());
  // One node: every node has as many ranks, parallel runs (degenerate, only logged as pointless).
  env.tune_algo = "allgather:0-=hierarchical(form=parallel)";
  EXPECT_TRUE(Selector::Create(env, 4, OneNode(4)).ok());
  env.tune_algo = "broadcast:0-=hierarchical(form=leader)";
  auto one_form = Selector::Create(env, 4, TwoNodesOfTwo());
  ASSERT_FALSE(one_form.ok());
  EXPECT_TRUE(Has(one_form.status(), "broadcast's hierarchical has one form")) << one_form.status();
}

TEST(Selector, OverridesNamingMissingAlgorithmsAreErrors) {
  Environment env;
  env.tune_algo = "allgather:0-=halving_doubling";
  auto s = Selector::Create(env, 4, OneNode(4));
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Has(s.status(), "HCCL_TUNE_ALGO: allgather has no algorithm 'halving_doubling'")) << s.status();
  env.tune_algo = "";
  env.hccl_algo = "allgather=level0:H-D_R";
  s = Selector::Create(env, 4, OneNode(4));
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Has(s.status(), "HCCL_ALGO: allgather has no algorithm")) << s.status();
}

TEST(TunedTable, SerializeRoundTrip) {
  TunedTable t;
  t.version = 7;
  t.content_hash = "abc123";
  t.entries.push_back({Collective::kAllreduce,
                       DataType::kBfloat16,
                       2,
                       {1024, kUnbounded},
                       *Configuration::Parse("hierarchical(intra=ring(link=shm),inter=ring(link=tcp@10.0.0.0/8))")});
  auto back = TunedTable::Deserialize(t.Serialize());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->Serialize(), t.Serialize());
  EXPECT_EQ(back->entries[0].bytes.max, kUnbounded);
  EXPECT_FALSE(TunedTable::Deserialize("garbage").ok());
}

// An entry the cost model predicted keeps its model version through the ranks' copy of the table, and the choice
// it makes is reported as `predicted`, not `table`.
TEST(TunedTable, APredictedEntryIsChosenAsPredicted) {
  TunedTable t;
  t.version = 2;
  t.entries.push_back(
      {Collective::kAllreduce, DataType::kFloat32, 4, {0, 4096}, *Configuration::Parse("recursive_doubling")});
  t.entries.push_back(
      {Collective::kAllreduce, DataType::kFloat32, 4, {4096, kUnbounded}, *Configuration::Parse("ring")});
  t.entries[1].model_version = 5;
  auto back = TunedTable::Deserialize(t.Serialize());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->entries[0].model_version, 0);
  EXPECT_EQ(back->entries[1].model_version, 5);
  EXPECT_FALSE(TunedTable::Deserialize("hccltune-table 1\n2\npredicted 3\n").ok());  // no entry before it
  Environment plain;
  auto s = Selector::Create(plain, 4, OneNode(4));
  ASSERT_TRUE(s.ok()) << s.status();
  s->SetTable(std::make_shared<TunedTable>(*back));
  auto c = s->Choose(Collective::kAllreduce, DataType::kFloat32, 64);
  EXPECT_EQ(c.source, ChoiceSource::kTable);
  c = s->Choose(Collective::kAllreduce, DataType::kFloat32, 1 << 20);
  EXPECT_EQ(c.source, ChoiceSource::kPredicted);
  EXPECT_EQ(c.config->algorithm, "ring");
  EXPECT_EQ(ChoiceSourceName(c.source), "predicted");
  EXPECT_EQ(s->ChooseForCall(Collective::kAllreduce, DataType::kFloat32, 1 << 20).source, ChoiceSource::kPredicted);
}

}  // namespace
}  // namespace hccltune
