// Message patterns: each algorithm's own count of messages (EndpointStats), so no algorithm secretly runs
// another; plus registry behaviour.
#include <gtest/gtest.h>

#include <vector>

#include "policies/rules.h"
#include "runtime/algorithms/registry.h"
#include "runtime/selector/selector.h"
#include "thread_endpoint.h"

namespace hccltune::testing {
namespace {

// Runs `config` for `coll` on n ranks with `count` fp32 elements (per rank block) and returns stats per rank.
std::vector<RankResult> RunPattern(Collective coll, const char* config, int n, size_t count, int root = 0) {
  auto cfg = Configuration::Parse(config);
  EXPECT_TRUE(cfg.ok()) << cfg.status();
  const size_t total = count * static_cast<size_t>(n);
  std::vector<std::vector<float>> send(static_cast<size_t>(n), std::vector<float>(total, 1.0f));
  std::vector<std::vector<float>> recv(static_cast<size_t>(n), std::vector<float>(total, 0.0f));
  auto res = RunGroup(n, SingleNode(n), [&](int r, AlgorithmContext& ctx) {
    CollectiveArgs a;
    a.collective = coll;
    a.send = send[static_cast<size_t>(r)].data();
    a.recv = recv[static_cast<size_t>(r)].data();
    a.count = count;
    a.root = root;
    return registry::Run(a, *cfg, ctx);
  });
  for (auto& r : res) EXPECT_TRUE(r.status.ok()) << r.status;
  return res;
}

uint64_t TotalSends(const std::vector<RankResult>& res) {
  uint64_t s = 0;
  for (const auto& r : res) s += r.stats.sends;
  return s;
}

TEST(PatternTest, AllreduceRingSends2nMinus1TimesChunks) {
  // 400 elements on 4 ranks: blocks of 100 floats = 400 bytes; chunk 100 bytes -> 4 chunks per block.
  for (const auto& r : RunPattern(Collective::kAllreduce, "ring(chunk=100)", 4, 400))
    EXPECT_EQ(r.stats.sends, 2u * 3 * 4);
  for (const auto& r : RunPattern(Collective::kAllreduce, "ring(chunk=1M)", 5, 1000)) EXPECT_EQ(r.stats.sends, 2u * 4);
}

TEST(PatternTest, AllreduceDoubleRingUsesTwoRings) {
  for (const auto& r : RunPattern(Collective::kAllreduce, "double_ring(chunk=1M)", 4, 800))
    EXPECT_EQ(r.stats.sends, 2u * 2 * 3);
}

TEST(PatternTest, AllreduceLogarithmic) {
  for (const auto& r : RunPattern(Collective::kAllreduce, "recursive_doubling", 8, 64)) EXPECT_EQ(r.stats.sends, 3u);
  for (const auto& r : RunPattern(Collective::kAllreduce, "halving_doubling", 8, 64)) EXPECT_EQ(r.stats.sends, 6u);
  // Binomial tree: n-1 messages up, n-1 down; rank 0 sends log2(n) in the broadcast.
  auto tree = RunPattern(Collective::kAllreduce, "binomial_tree", 8, 64);
  EXPECT_EQ(TotalSends(tree), 14u);
  EXPECT_EQ(tree[0].stats.sends, 3u);
  // Non-power of two (5 = 4 + 1): rank 0 folds into rank 1 and gets the result back.
  auto rd5 = RunPattern(Collective::kAllreduce, "recursive_doubling", 5, 64);
  EXPECT_EQ(rd5[0].stats.sends, 1u);
  EXPECT_EQ(rd5[1].stats.sends, 3u);
  EXPECT_EQ(rd5[4].stats.sends, 2u);
}

// Double binary tree: per tree, every rank but the root sends each chunk up once and every rank sends it to each
// child once; a rank is interior (two children) in at most one tree. 8 ranks, 64 floats, chunk 64 bytes: each
// half (32 floats) is 2 chunks.
TEST(PatternTest, AllreduceDoubleBinaryTreeUsesTwoTrees) {
  auto res = RunPattern(Collective::kAllreduce, "double_binary_tree(chunk=64)", 8, 64);
  // Each tree: 7 edges, every edge carries each chunk up once and down once: 2 trees x 2 x 7 x 2 chunks.
  EXPECT_EQ(TotalSends(res), 2u * 2 * 7 * 2);
  for (size_t r = 0; r < res.size(); ++r) {
    // At most 2 + 1 sends per chunk in the tree where it is interior, 1 in the other: never more than 4 per chunk.
    EXPECT_LE(res[r].stats.sends, 4u * 2) << "rank " << r;
    EXPECT_GE(res[r].stats.sends, 2u * 2) << "rank " << r;
    EXPECT_EQ(res[r].stats.bytes_sent, res[r].stats.sends * 64) << "rank " << r;
  }
}

TEST(PatternTest, AllreduceOneShotSendsNMinus1) {
  for (const auto& r : RunPattern(Collective::kAllreduce, "one_shot", 7, 10)) {
    EXPECT_EQ(r.stats.sends, 6u);
    EXPECT_EQ(r.stats.bytes_sent, 6u * 40);
  }
}

TEST(PatternTest, Allgather) {
  for (const auto& r : RunPattern(Collective::kAllgather, "ring", 5, 10)) EXPECT_EQ(r.stats.sends, 4u);
  for (const auto& r : RunPattern(Collective::kAllgather, "recursive_doubling", 8, 10)) EXPECT_EQ(r.stats.sends, 3u);
  for (const auto& r : RunPattern(Collective::kAllgather, "bruck", 5, 10)) EXPECT_EQ(r.stats.sends, 3u);
  for (const auto& r : RunPattern(Collective::kAllgather, "direct", 5, 10)) EXPECT_EQ(r.stats.sends, 4u);
}

TEST(PatternTest, Reducescatter) {
  for (const auto& r : RunPattern(Collective::kReducescatter, "ring", 4, 10)) EXPECT_EQ(r.stats.sends, 3u);
  for (const auto& r : RunPattern(Collective::kReducescatter, "halving_doubling", 8, 10)) EXPECT_EQ(r.stats.sends, 3u);
  for (const auto& r : RunPattern(Collective::kReducescatter, "direct", 6, 10)) EXPECT_EQ(r.stats.sends, 5u);
}

TEST(PatternTest, BroadcastAndReduce) {
  auto tree = RunPattern(Collective::kBroadcast, "binomial_tree", 7, 10, 2);
  EXPECT_EQ(TotalSends(tree), 6u);
  EXPECT_EQ(tree[2].stats.sends, 3u);
  auto chain = RunPattern(Collective::kBroadcast, "chain(chunk=8)", 4, 10, 0);  // 40 bytes / 8 -> 5 chunks
  EXPECT_EQ(chain[0].stats.sends, 5u);
  EXPECT_EQ(chain[3].stats.sends, 0u);
  EXPECT_EQ(TotalSends(chain), 15u);
  auto sag = RunPattern(Collective::kBroadcast, "scatter_allgather", 4, 40, 0);
  EXPECT_EQ(sag[0].stats.sends, 3u + 3u);
  EXPECT_EQ(sag[1].stats.sends, 3u);
  EXPECT_EQ(TotalSends(RunPattern(Collective::kReduce, "binomial_tree", 6, 10, 1)), 5u);
  auto rsg = RunPattern(Collective::kReduce, "reducescatter_gather", 5, 20, 0);
  EXPECT_EQ(rsg[0].stats.sends, 4u);
  EXPECT_EQ(rsg[3].stats.sends, 5u);
}

TEST(PatternTest, AlltoallBarrierGatherScatter) {
  for (const auto& r : RunPattern(Collective::kAlltoall, "pairwise", 5, 3)) EXPECT_EQ(r.stats.sends, 4u);
  for (const auto& r : RunPattern(Collective::kAlltoall, "bruck", 5, 3)) EXPECT_EQ(r.stats.sends, 3u);
  for (const auto& r : RunPattern(Collective::kAlltoall, "direct", 5, 3)) {  // every block once, all at once
    EXPECT_EQ(r.stats.sends, 4u);
    EXPECT_EQ(r.stats.recvs, 4u);
  }
  for (const auto& r : RunPattern(Collective::kBarrier, "dissemination", 5, 0)) {
    EXPECT_EQ(r.stats.sends, 3u);
    EXPECT_EQ(r.stats.bytes_sent, 0u);
  }
  auto gt = RunPattern(Collective::kGather, "binomial_tree", 8, 3, 0);
  EXPECT_EQ(gt[0].stats.recvs, 3u);
  EXPECT_EQ(gt[5].stats.sends, 1u);
  EXPECT_EQ(RunPattern(Collective::kGather, "linear", 8, 3, 0)[0].stats.recvs, 7u);
  auto st = RunPattern(Collective::kScatter, "binomial_tree", 8, 3, 0);
  EXPECT_EQ(st[0].stats.sends, 3u);
  EXPECT_EQ(st[6].stats.recvs, 1u);
  EXPECT_EQ(RunPattern(Collective::kScatter, "linear", 8, 3, 0)[0].stats.sends, 7u);
}

TEST(PatternTest, HierarchicalComposesThreeSubCollectives) {
  auto cfg = Configuration::Parse("hierarchical");
  ASSERT_TRUE(cfg.ok());
  std::vector<std::vector<float>> buf(4, std::vector<float>(8, 1.0f));
  auto res = RunGroup(4, Nodes({0, 0, 1, 1}), [&](int r, AlgorithmContext& ctx) {
    CollectiveArgs a;
    a.send = a.recv = buf[static_cast<size_t>(r)].data();
    a.count = 8;
    return registry::Run(a, *cfg, ctx);
  });
  for (const auto& r : res) {
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.sub_collectives, 3);
  }
  for (const auto& b : buf) EXPECT_EQ(b, std::vector<float>(8, 4.0f));
}

// The form decides the path on even nodes: form=parallel two sub-collectives on every rank, form=leader three on
// each node's leader (intra, inter among the leaders, intra) and two elsewhere; the outputs match.
TEST(PatternTest, HierarchicalFormChoosesThePathOnEvenNodes) {
  for (Collective c : {Collective::kAllgather, Collective::kReducescatter}) {
    std::vector<std::vector<float>> outputs;
    for (const char* text : {"hierarchical(form=parallel)", "hierarchical(form=leader)"}) {
      auto cfg = Configuration::Parse(text);
      ASSERT_TRUE(cfg.ok()) << cfg.status();
      std::vector<std::vector<float>> send(4, std::vector<float>(12)), recv(4, std::vector<float>(12, -1));
      for (size_t r = 0; r < 4; ++r) {
        for (size_t i = 0; i < 12; ++i) send[r][i] = static_cast<float>(r * 100 + i);
      }
      auto res = RunGroup(4, Nodes({0, 0, 1, 1}), [&](int r, AlgorithmContext& ctx) {
        CollectiveArgs a;
        a.collective = c;
        a.send = send[static_cast<size_t>(r)].data();
        a.recv = recv[static_cast<size_t>(r)].data();
        a.count = 3;
        return registry::Run(a, *cfg, ctx);
      });
      const bool leader = cfg->form == HierForm::kLeader;
      for (size_t r = 0; r < 4; ++r) {
        ASSERT_TRUE(res[r].status.ok()) << res[r].status;
        EXPECT_EQ(res[r].sub_collectives, leader && r % 2 == 0 ? 3 : 2) << text << " rank " << r;
        outputs.push_back(recv[r]);
      }
    }
    for (size_t r = 0; r < 4; ++r) EXPECT_EQ(outputs[r], outputs[r + 4]) << CollectiveName(c) << " rank " << r;
  }
}

// Hierarchical allgather / reducescatter / broadcast: two sub-collectives on even nodes (the per-local-index
// form), three or four through the leaders on uneven ones; every rank's output checked.
TEST(PatternTest, HierarchicalAllgatherReducescatterBroadcastAreSubCollectives) {
  auto cfg = Configuration::Parse("hierarchical");
  ASSERT_TRUE(cfg.ok());
  for (const std::vector<int>& nodes : {std::vector<int>{0, 0, 1, 1}, std::vector<int>{0, 0, 1}}) {
    const size_t n = nodes.size();
    const bool even = n == 4;
    for (Collective c : {Collective::kAllgather, Collective::kReducescatter, Collective::kBroadcast}) {
      std::vector<std::vector<float>> send(n, std::vector<float>(3 * n)), recv(n, std::vector<float>(3 * n, -1));
      for (size_t r = 0; r < n; ++r) {
        for (size_t i = 0; i < 3 * n; ++i) send[r][i] = static_cast<float>(r * 100 + i);
      }
      auto res = RunGroup(static_cast<int>(n), Nodes(nodes), [&](int r, AlgorithmContext& ctx) {
        CollectiveArgs a;
        a.collective = c;
        a.send = send[static_cast<size_t>(r)].data();
        a.recv = recv[static_cast<size_t>(r)].data();
        a.count = 3;
        a.root = 1;
        return registry::Run(a, *cfg, ctx);
      });
      for (size_t r = 0; r < n; ++r) {
        ASSERT_TRUE(res[r].status.ok()) << res[r].status;
        if (c == Collective::kBroadcast) {
          // A leader (the root on its node, the lowest rank elsewhere) runs the inter step; a node of several
          // ranks the intra step.
          const std::vector<int> want = even ? std::vector<int>{1, 2, 2, 1} : std::vector<int>{1, 2, 1};
          EXPECT_EQ(res[r].sub_collectives, want[r]) << "broadcast rank " << r << " of " << n;
        } else {
          EXPECT_EQ(res[r].sub_collectives, even ? 2 : (r == 0 || r == 2 ? 3 : 2))
              << CollectiveName(c) << " rank " << r << " of " << n;
        }
        for (size_t i = 0; i < 3; ++i) {
          float want = 0;
          if (c == Collective::kBroadcast) want = static_cast<float>(100 + i);
          if (c == Collective::kReducescatter) {
            for (size_t q = 0; q < n; ++q) want += static_cast<float>(q * 100 + r * 3 + i);
          }
          if (c != Collective::kAllgather) {
            EXPECT_EQ(recv[r][i], want) << CollectiveName(c) << " rank " << r;
          }
        }
        if (c == Collective::kAllgather) {
          for (size_t i = 0; i < 3 * n; ++i) EXPECT_EQ(recv[r][i], static_cast<float>((i / 3) * 100 + i % 3));
        }
      }
    }
  }
}

TEST(RegistryTest, ListsAndValidity) {
  EXPECT_EQ(registry::AlgorithmsFor(Collective::kAllreduce),
            (std::vector<std::string>{"ring", "double_ring", "halving_doubling", "recursive_doubling", "binomial_tree",
                                      "double_binary_tree", "one_shot", "hierarchical", "symmetric"}));
  EXPECT_TRUE(registry::AlgorithmsFor(Collective::kSendRecv).empty());
  // `symmetric` is never a candidate (the communicator picks it for symmetric buffers itself).
  EXPECT_EQ(registry::IsValid(Collective::kAllreduce, "symmetric", 2, Nodes({0, 0})).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(registry::Find(Collective::kAllgather, "one_shot"), nullptr);
  EXPECT_NE(registry::Find(Collective::kBarrier, "dissemination"), nullptr);
  // Hierarchical: 4 nodes x 1 rank is pointless; one node too.
  const absl::Status s = registry::IsValid(Collective::kAllreduce, "hierarchical", 4, Nodes({0, 1, 2, 3}));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("at least 2 ranks"), absl::string_view::npos) << s;
  EXPECT_FALSE(registry::IsValid(Collective::kAllreduce, "hierarchical", 4, SingleNode(4)).ok());
  EXPECT_TRUE(registry::IsValid(Collective::kAllreduce, "hierarchical", 3, Nodes({0, 0, 1})).ok());
  const absl::Status unknown = registry::IsValid(Collective::kAllgather, "nope", 4, SingleNode(4));
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unknown.message().find("bruck"), absl::string_view::npos);
  EXPECT_EQ(registry::ListValid(Collective::kAllreduce, 4, SingleNode(4)).size(), 7u);
  for (Collective c : {Collective::kAllgather, Collective::kReducescatter, Collective::kBroadcast}) {
    EXPECT_TRUE(registry::IsValid(c, "hierarchical", 3, Nodes({0, 0, 1})).ok()) << CollectiveName(c);
    EXPECT_FALSE(registry::IsValid(c, "hierarchical", 4, SingleNode(4)).ok()) << CollectiveName(c);
  }
}

TEST(RegistryTest, CandidatesAndDefaults) {
  const std::vector<LinkSpec> links = {LinkSpec{LinkKind::kShm, ""}, LinkSpec{LinkKind::kTcp, ""}};
  EXPECT_EQ(registry::Candidates(Collective::kAllreduce, "ring", links).size(), 4u * 3 * 2);
  EXPECT_EQ(registry::Candidates(Collective::kBarrier, "dissemination", links).size(), 2u);
  EXPECT_EQ(registry::Candidates(Collective::kAllreduce, "hierarchical", links).size(), 3u * 2);
  // Between nodes the sweep's links are the networks: every inter step tries each, the intra step stays on
  // link=auto (shared memory inside a node), never on a network.
  const std::vector<LinkSpec> nets = {LinkSpec{LinkKind::kTcp, "10.77.1.0/24"},
                                      LinkSpec{LinkKind::kTcp, "10.77.2.0/24"}};
  const std::vector<Configuration> hier = registry::Candidates(Collective::kAllreduce, "hierarchical", nets);
  ASSERT_EQ(hier.size(), 3u * 2);
  for (size_t i = 0; i < hier.size(); ++i) {
    ASSERT_TRUE(hier[i].intra != nullptr && hier[i].inter != nullptr) << hier[i].ToString();
    EXPECT_EQ(hier[i].intra->link.kind, LinkKind::kAuto) << hier[i].ToString();
    EXPECT_EQ(hier[i].inter->link.network, nets[i % 2].network) << hier[i].ToString();
  }
  for (const Configuration& c : registry::Candidates(Collective::kAllreduce, "ring", nets)) {
    EXPECT_EQ(c.link.kind, LinkKind::kTcp) << c.ToString();
  }
}

// Hierarchical allgather and reducescatter offer both forms to the sweep; CheckForm refuses form=parallel on uneven
// nodes and any form but auto for the collectives with one form, naming it.
TEST(RegistryTest, HierarchicalFormsAreCandidatesWhereTheyRun) {
  const std::vector<LinkSpec> nets = {LinkSpec{LinkKind::kTcp, "10.77.1.0/24"}};
  for (Collective c : {Collective::kAllgather, Collective::kReducescatter}) {
    const std::vector<Configuration> hier = registry::Candidates(c, "hierarchical", nets);
    ASSERT_EQ(hier.size(), 3u * 2) << CollectiveName(c);
    for (size_t i = 0; i < hier.size(); ++i) {
      EXPECT_EQ(hier[i].form, i % 2 == 0 ? HierForm::kParallel : HierForm::kLeader) << hier[i].ToString();
      EXPECT_TRUE(registry::CheckForm(c, hier[i], Nodes({0, 0, 1, 1})).ok()) << hier[i].ToString();
    }
    const absl::Status uneven = registry::CheckForm(c, hier[0], Nodes({0, 0, 1}));
    EXPECT_EQ(uneven.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(uneven.message().find("form=parallel"), absl::string_view::npos) << uneven;
    EXPECT_NE(uneven.message().find("ranks per node here: 2, 1"), absl::string_view::npos) << uneven;
    EXPECT_TRUE(registry::CheckForm(c, hier[1], Nodes({0, 0, 1})).ok());
  }
  for (Collective c : {Collective::kAllreduce, Collective::kBroadcast}) {
    for (const Configuration& h : registry::Candidates(c, "hierarchical", nets)) {
      EXPECT_EQ(h.form, HierForm::kAuto) << h.ToString();
    }
    const absl::Status one =
        registry::CheckForm(c, *Configuration::Parse("hierarchical(form=leader)"), Nodes({0, 0, 1, 1}));
    EXPECT_NE(one.message().find("form=leader"), absl::string_view::npos) << one;
    EXPECT_NE(one.message().find("accepted: form=auto"), absl::string_view::npos) << one;
  }
}

// A hierarchical step the configuration names no algorithm for is the selector's choice: the built-in defaults
// (policies/) for that collective, size and group, valid on one level — never hierarchical again.
TEST(RegistryTest, StepsComeFromTheSelector) {
  for (Collective c : AllCollectives()) {
    if (c == Collective::kSendRecv) continue;
    for (int group : {1, 2, 3, 4, 8, 16}) {
      for (uint64_t bytes : {uint64_t{0}, uint64_t{1024}, uint64_t{1} << 20, uint64_t{64} << 20}) {
        const Configuration d = Selector::ChooseStep(c, bytes, group);
        EXPECT_TRUE(registry::IsValid(c, d.algorithm, group, SingleNode(group)).ok())
            << CollectiveName(c) << " " << group << " ranks " << bytes << " B: " << d.ToString();
        const Configuration* policy = policies::BuiltinDefaults().Find(c, group, bytes);
        ASSERT_NE(policy, nullptr) << CollectiveName(c);
        EXPECT_EQ(d.ToString(), policy->ToString()) << CollectiveName(c) << " " << group << " ranks " << bytes;
      }
    }
  }
  // reduce and broadcast have no `ring`: hierarchical(intra=ring) on uneven nodes takes theirs from the selector.
  EXPECT_EQ(registry::Find(Collective::kReduce, "ring"), nullptr);
  EXPECT_EQ(Selector::ChooseStep(Collective::kReduce, 1 << 20, 2).ToString(),
            policies::BuiltinDefaults().Find(Collective::kReduce, 2, 1 << 20)->ToString());
}

// Validity is data in the registry: an algorithm of steps needs several levels, symmetric needs its buffers.
TEST(RegistryTest, ValidityFollowsWhatAnAlgorithmNeeds) {
  EXPECT_TRUE(registry::IsValid(Collective::kAllreduce, "hierarchical", 4, Nodes({0, 0, 1, 1})).ok());
  const absl::Status one_node = registry::IsValid(Collective::kAllreduce, "hierarchical", 4, SingleNode(4));
  EXPECT_EQ(one_node.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(one_node.message().find("at least 2 nodes"), std::string::npos) << one_node;
  const absl::Status singles = registry::IsValid(Collective::kAllreduce, "hierarchical", 2, Nodes({0, 1}));
  EXPECT_NE(singles.message().find("a node with at least 2 ranks"), std::string::npos) << singles;
  for (Collective c :
       {Collective::kAllreduce, Collective::kAllgather, Collective::kReducescatter, Collective::kBroadcast}) {
    const absl::Status s = registry::IsValid(c, "symmetric", 2, SingleNode(2));
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << CollectiveName(c);
    EXPECT_NE(s.message().find("AllocSymmetric"), std::string::npos) << s;
  }
  EXPECT_EQ(registry::IsValid(Collective::kAllreduce, "warp", 2, SingleNode(2)).code(), absl::StatusCode::kNotFound);
}

TEST(RegistryTest, RunRejectsBadCalls) {
  auto cfg = Configuration::Parse("ring");
  ASSERT_TRUE(cfg.ok());
  auto res = RunGroup(2, SingleNode(2), [&](int, AlgorithmContext& ctx) {
    CollectiveArgs a;
    a.dtype = DataType::kFloat32;
    a.op = ReduceOp::kBxor;
    return registry::Run(a, *cfg, ctx);
  });
  EXPECT_EQ(res[0].status.code(), absl::StatusCode::kInvalidArgument);
}

TEST(ThreadEndpointTest, SizeMismatchNamesRanksAndSizes) {
  auto res = RunGroup(2, SingleNode(2), [&](int r, AlgorithmContext& ctx) {
    Endpoint* ep = *ctx.GetEndpoint(LinkSpec{});
    char buf[16] = {};
    if (r == 0) return ep->Send(1, buf, 8);
    return ep->Recv(0, buf, 16);
  });
  EXPECT_FALSE(res[1].status.ok());
  EXPECT_NE(res[1].status.message().find("rank 0 sent 8 bytes, rank 1 posted a receive of 16"), absl::string_view::npos)
      << res[1].status;
}

TEST(ThreadEndpointTest, MissingMessageTimesOut) {
  auto res = RunGroup(
      2, SingleNode(2),
      [&](int r, AlgorithmContext& ctx) {
        Endpoint* ep = *ctx.GetEndpoint(LinkSpec{});
        char c = 0;
        if (r == 1) return ep->Recv(0, &c, 1);
        return absl::OkStatus();
      },
      std::chrono::milliseconds(100));
  EXPECT_EQ(res[1].status.code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace hccltune::testing
