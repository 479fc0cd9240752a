// Every collective x every algorithm x world sizes {1,2,3,4,5,7,8} x counts {0,1,7,13,101} x a dtype/op mix
// covering every supported pair, in place and out of place, against independent references (harness.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "harness.h"
#include "runtime/algorithms/registry.h"

namespace hccltune::testing {
namespace {

const int kWorlds[] = {1, 2, 3, 4, 5, 7, 8};
const size_t kCounts[] = {0, 1, 7, 13, 101};

std::vector<std::pair<DataType, ReduceOp>> SupportedPairs() {
  std::vector<std::pair<DataType, ReduceOp>> out;
  for (DataType t : AllDataTypes()) {
    for (ReduceOp op : AllReduceOps()) {
      if (CheckReduceSupported(op, t).ok()) out.emplace_back(t, op);
    }
  }
  return out;
}

// Nodes of two ranks each (the last one short for odd n): exercises both hierarchical paths.
GroupTopology PairsOfRanks(int n) {
  std::vector<int> node_of;
  for (int r = 0; r < n; ++r) node_of.push_back(r / 2);
  return Nodes(node_of);
}

// A configuration text for the algorithm, with a small chunk so that small counts still run several chunks.
// Hierarchical: steps named for the collective's own steps, and steps it has no such algorithm for (the selector's).
std::string ConfigFor(Collective c, absl::string_view algorithm, bool small_chunk) {
  if (algorithm == "hierarchical") {
    switch (c) {
      case Collective::kAllgather:
        return small_chunk ? "hierarchical(intra=ring(chunk=16),inter=recursive_doubling)"
                           : "hierarchical(intra=direct,inter=ring)";
      case Collective::kReducescatter:
        return small_chunk ? "hierarchical(intra=ring(chunk=16),inter=halving_doubling)"
                           : "hierarchical(intra=direct,inter=ring(chunk=16))";
      case Collective::kBroadcast:
        return small_chunk ? "hierarchical(intra=chain(chunk=16),inter=binomial_tree)"
                           : "hierarchical(intra=linear,inter=scatter_allgather)";
      default:
        return small_chunk ? "hierarchical(intra=ring(chunk=16),inter=halving_doubling)"
                           : "hierarchical(intra=binomial_tree,inter=ring)";
    }
  }
  const std::vector<ParamKind> params = registry::Params(algorithm);
  for (ParamKind p : params) {
    if (p == ParamKind::kChunk && small_chunk) return absl::StrCat(algorithm, "(chunk=24)");
  }
  return std::string(algorithm);
}

// Hierarchical allgather and reducescatter take form=parallel (even nodes only) or leader.
bool HasForms(Collective c) { return c == Collective::kAllgather || c == Collective::kReducescatter; }

// `config` (a hierarchical text with parameters) with case k's form: auto, leader, parallel in turn (leader again
// in parallel's turn on uneven nodes, where parallel is refused).
std::string WithForm(const std::string& config, size_t k, bool even) {
  const char* forms[] = {"", ",form=leader", even ? ",form=parallel" : ",form=leader"};
  return absl::StrCat(config.substr(0, config.size() - 1), forms[k % 3], ")");
}

struct Param {
  Collective collective;
  std::string algorithm;
};

class CollectiveTest : public ::testing::TestWithParam<Param> {};

TEST_P(CollectiveTest, AllWorldsCountsTypes) {
  const Param& p = GetParam();
  const auto pairs = SupportedPairs();
  const bool reducing = IsReducing(p.collective);
  int failures = 0;
  for (int n : kWorlds) {
    // Reducing collectives: every (dtype, op) pair, rotating counts and placement; others: every dtype.
    const size_t variants = reducing ? pairs.size() : 2 * kNumDataTypes;
    for (size_t k = 0; k < variants * 2 && failures < 3; ++k) {
      Case c;
      c.collective = p.collective;
      c.world = n;
      c.count = kCounts[(k + static_cast<size_t>(n)) % 5];
      c.in_place = (k / 5) % 2 == 1;
      const size_t v = k % variants;
      c.dtype = reducing ? pairs[v].first : AllDataTypes()[v % kNumDataTypes];
      c.op = reducing ? pairs[v].second : ReduceOp::kSum;
      c.root = (k % 3 == 0) ? 0 : n - 1;
      c.config = ConfigFor(p.collective, p.algorithm, k % 2 == 0);
      if (p.algorithm == "hierarchical") c.topo = PairsOfRanks(n);
      if (p.algorithm == "hierarchical" && HasForms(p.collective)) c.config = WithForm(c.config, k, n % 2 == 0);
      if (p.collective == Collective::kBarrier && k > 2) break;
      const std::string err = RunCase(c);
      if (!err.empty()) {
        ADD_FAILURE() << c.Describe() << ": " << err;
        ++failures;
      }
    }
  }
}

std::vector<Param> AllAlgorithms() {
  std::vector<Param> out;
  for (Collective c : AllCollectives()) {
    for (const std::string& name : registry::AlgorithmsFor(c)) {
      // `symmetric` needs buffers in symmetric memory, which only a Communicator hands out: symmetric_test.cc.
      if (name != "symmetric") out.push_back({c, name});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Registry, CollectiveTest, ::testing::ValuesIn(AllAlgorithms()),
                         [](const ::testing::TestParamInfo<Param>& p) {
                           return absl::StrCat(CollectiveName(p.param.collective), "_", p.param.algorithm);
                         });

// >= 4 MiB of data for a few dtypes and algorithms.
TEST(CollectiveLargeTest, FourMebibytes) {
  struct L {
    Collective coll;
    const char* config;
    DataType dtype;
    ReduceOp op;
    int world;
  };
  const L cases[] = {
      {Collective::kAllreduce, "ring(chunk=256K)", DataType::kFloat32, ReduceOp::kSum, 4},
      {Collective::kAllreduce, "double_ring(chunk=1M)", DataType::kBfloat16, ReduceOp::kAvg, 3},
      {Collective::kAllreduce, "halving_doubling", DataType::kFloat16, ReduceOp::kSum, 5},
      {Collective::kAllreduce, "double_binary_tree(chunk=64K)", DataType::kFloat32, ReduceOp::kAvg, 7},
      {Collective::kAllgather, "ring(chunk=64K)", DataType::kInt8, ReduceOp::kSum, 4},
      {Collective::kReducescatter, "ring(chunk=64K)", DataType::kInt32, ReduceOp::kSum, 3},
      {Collective::kBroadcast, "chain(chunk=256K)", DataType::kFloat64, ReduceOp::kSum, 4},
  };
  for (const L& l : cases) {
    Case c;
    c.collective = l.coll;
    c.config = l.config;
    c.dtype = l.dtype;
    c.op = l.op;
    c.world = l.world;
    const size_t bytes = 4u << 20;
    const size_t per =
        (l.coll == Collective::kAllgather || l.coll == Collective::kReducescatter) ? static_cast<size_t>(l.world) : 1;
    c.count = bytes / DataTypeSize(l.dtype) / per + 3;
    const std::string err = RunCase(c);
    EXPECT_EQ(err, "") << c.Describe();
  }
}

// Hierarchical allreduce on emulated topologies.
TEST(HierarchicalTest, EmulatedTopologies) {
  const std::vector<std::vector<int>> topologies = {
      {0, 0, 1, 1},           // 2 nodes x 2
      {0, 0, 1, 1, 2, 2},     // 3 nodes x 2
      {0, 0, 1},              // uneven 2 + 1
      {0, 1, 0, 1},           // interleaved ranks
      {0, 0, 0, 1, 1, 2, 2},  // 3 + 2 + 2
  };
  for (const auto& nodes : topologies) {
    for (const char* cfg : {"hierarchical", "hierarchical(intra=ring(chunk=8),inter=recursive_doubling)",
                            "hierarchical(intra=direct,inter=one_shot)"}) {
      for (auto [dtype, op] :
           {std::pair{DataType::kFloat32, ReduceOp::kAvg}, std::pair{DataType::kInt64, ReduceOp::kProd},
            std::pair{DataType::kBfloat16, ReduceOp::kSum}}) {
        Case c;
        c.collective = Collective::kAllreduce;
        c.config = cfg;
        c.world = static_cast<int>(nodes.size());
        c.topo = Nodes(nodes);
        c.count = 29;
        c.dtype = dtype;
        c.op = op;
        const std::string err = RunCase(c);
        EXPECT_EQ(err, "") << c.Describe() << " nodes=" << nodes.size();
      }
    }
  }
}

// Hierarchical allgather, reducescatter and broadcast on emulated topologies: even nodes (the per-local-index
// form), uneven ones (through the leaders), interleaved ranks and nodes whose ranks are not in rank order (the
// ranks with one local index are then not ascending), every root; steps named and left to the selector.
TEST(HierarchicalTest, AllgatherReducescatterBroadcastOnEmulatedTopologies) {
  const std::vector<std::vector<int>> topologies = {
      {0, 0, 1, 1}, {0, 0, 1, 1, 2, 2}, {0, 0, 1}, {0, 1, 0, 1}, {0, 1, 1, 0}, {0, 0, 0, 1, 1, 2, 2}, {0, 0, 0, 0, 1},
  };
  int failures = 0;
  for (const auto& nodes : topologies) {
    const int n = static_cast<int>(nodes.size());
    for (Collective coll : {Collective::kAllgather, Collective::kReducescatter, Collective::kBroadcast}) {
      for (const std::string& cfg : {std::string("hierarchical"), ConfigFor(coll, "hierarchical", true),
                                     ConfigFor(coll, "hierarchical", false)}) {
        for (auto [dtype, op] :
             {std::pair{DataType::kFloat32, ReduceOp::kAvg}, std::pair{DataType::kInt64, ReduceOp::kProd},
              std::pair{DataType::kBfloat16, ReduceOp::kSum}, std::pair{DataType::kFloat16, ReduceOp::kMax}}) {
          for (int root = 0; root < n; root += (coll == Collective::kBroadcast ? 1 : n)) {
            Case c;
            c.collective = coll;
            c.config = cfg;
            c.world = n;
            c.topo = Nodes(nodes);
            c.count = 29;
            c.dtype = dtype;
            c.op = op;
            c.root = root;
            c.in_place = root % 2 == 1 || op == ReduceOp::kProd;
            const std::string err = RunCase(c);
            if (!err.empty() && failures++ < 5)
              ADD_FAILURE() << c.Describe() << " nodes=" << nodes.size() << ": " << err;
          }
        }
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

// Both forms of hierarchical allgather and reducescatter on even nodes (2x2, 2x3, 3x2, 4x2, interleaved, nodes not in
// rank order), every supported dtype/op, counts 0, 1, 7, 13, 101, in and out of place: every rank's output checked.
// form=parallel on uneven nodes is refused naming it.
TEST(HierarchicalTest, BothFormsOnEvenNodes) {
  const std::vector<std::vector<int>> topologies = {
      {0, 0, 1, 1}, {0, 0, 0, 1, 1, 1}, {0, 0, 1, 1, 2, 2}, {0, 0, 1, 1, 2, 2, 3, 3}, {0, 1, 0, 1}, {0, 1, 1, 0},
  };
  const auto pairs = SupportedPairs();
  int failures = 0;
  for (const auto& nodes : topologies) {
    for (Collective coll : {Collective::kAllgather, Collective::kReducescatter}) {
      for (const char* form : {"parallel", "leader"}) {
        for (size_t v = 0; v < pairs.size(); ++v) {
          Case c;
          c.collective = coll;
          c.config = ConfigFor(coll, "hierarchical", v % 2 == 0);
          c.config.insert(c.config.size() - 1, absl::StrCat(",form=", form));
          c.world = static_cast<int>(nodes.size());
          c.topo = Nodes(nodes);
          c.count = kCounts[v % 5];
          c.dtype = pairs[v].first;
          c.op = coll == Collective::kAllgather ? ReduceOp::kSum : pairs[v].second;
          c.in_place = v % 3 == 1;
          const std::string err = RunCase(c);
          if (!err.empty() && failures++ < 5) ADD_FAILURE() << c.Describe() << " nodes=" << nodes.size() << ": " << err;
        }
      }
    }
  }
  EXPECT_EQ(failures, 0);
  for (Collective coll : {Collective::kAllgather, Collective::kReducescatter}) {
    Case c;
    c.collective = coll;
    c.config = "hierarchical(form=parallel)";
    c.world = 3;
    c.topo = Nodes({0, 0, 1});
    c.count = 7;
    EXPECT_NE(RunCase(c).find("form=parallel"), std::string::npos) << CollectiveName(coll);
  }
}

// Every algorithm of every reducing collective (symmetric: symmetric_test.cc), with a small chunk so that rings
// run several chunks per block, on the topology hierarchical needs.
struct Reducing {
  Collective collective;
  std::string algorithm;
};
std::vector<Reducing> ReducingAlgorithms() {
  std::vector<Reducing> out;
  for (Collective c : {Collective::kAllreduce, Collective::kReduce, Collective::kReducescatter}) {
    for (const std::string& name : registry::AlgorithmsFor(c)) {
      if (name != "symmetric") out.push_back({c, name});
    }
  }
  return out;
}
Case NumericsCase(const Reducing& a, int n, DataType dtype, ReduceOp op, bool in_place) {
  Case c;
  c.collective = a.collective;
  c.config = ConfigFor(a.collective, a.algorithm, true);
  if (a.algorithm == "hierarchical") c.topo = PairsOfRanks(n);
  c.world = n;
  c.count = 37;  // vector bodies (8, 16, 32 lanes) and their tails; blocks of different sizes
  c.dtype = dtype;
  c.op = op;
  c.in_place = in_place;
  c.root = n - 1;
  return c;
}

// min / max with a NaN on one rank: every rank's output is a NaN at every position, whichever rank holds it,
// whatever the algorithm's combining order (the ring puts the local value first, one_shot goes in rank order)
// and wherever the element falls in the ring's blocks; likewise a -0 on one rank against +0 elsewhere gives -0
// (min) and +0 (max) everywhere. RunCase checks NaN and the zero's sign exactly, and allreduce results for
// bit-identity across ranks.
TEST(NumericsTest, MinMaxWithANaNOrASignedZeroOnOneRank) {
  int failures = 0;
  for (const Reducing& a : ReducingAlgorithms()) {
    for (int n : {2, 3, 4, 5, 8}) {
      for (DataType dtype : {DataType::kFloat32, DataType::kFloat16, DataType::kBfloat16, DataType::kFloat64}) {
        for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
          for (int holder : {0, n / 2, n - 1}) {
            for (bool nan : {true, false}) {
              Case c = NumericsCase(a, n, dtype, op, holder % 2 == 1);
              c.input = [holder, nan](int r, size_t i) {
                if (r == holder) return nan ? std::nan("") : -0.0;
                return nan ? static_cast<double>(static_cast<int>((static_cast<size_t>(r) * 7 + i * 13) % 17) - 8)
                           : 0.0;
              };
              const std::string err = RunCase(c);
              if (!err.empty() && failures++ < 5) {
                ADD_FAILURE() << c.Describe() << (nan ? " NaN" : " -0") << " on rank " << holder << ": " << err;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

// fp16 / bf16 avg of values near the top of the dtype's range: the sum of two overflows (fp16: 2 x 40000 > 65504;
// bf16: 2 x 2.5e38 > FLT_MAX, even in fp32), the average fits, and every algorithm must produce it — not inf —
// in place and out of place, on every rank (RunCase: within the dtype's rounding of the true average, bit-identical
// across ranks for allreduce). Each input is scaled exactly once: once more or not at all is off by a factor n.
TEST(NumericsTest, HalfAndBfloatAvgOfLargeValuesDoesNotOverflow) {
  int failures = 0;
  for (const Reducing& a : ReducingAlgorithms()) {
    for (int n : {2, 3, 4, 5, 8}) {
      for (DataType dtype : {DataType::kFloat16, DataType::kBfloat16}) {
        for (bool in_place : {false, true}) {
          Case c = NumericsCase(a, n, dtype, ReduceOp::kAvg, in_place);
          if (dtype == DataType::kFloat16) {  // 39936 .. 40064, steps of 32 (fp16's spacing there)
            c.input = [](int r, size_t i) {
              return 40000.0 + 32.0 * static_cast<double>((r * 3 + static_cast<int>(i)) % 5 - 2);
            };
          } else {
            c.input = [](int r, size_t i) {
              return 2.5e38 * (1.0 + static_cast<double>((r + static_cast<int>(i)) % 3) / 64);
            };
          }
          const std::string err = RunCase(c);
          if (!err.empty() && failures++ < 5) ADD_FAILURE() << c.Describe() << ": " << err;
        }
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace hccltune::testing
