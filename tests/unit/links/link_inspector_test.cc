// The link inspector over real communicators (one thread per rank, real shm and TCP): the measured table, the
// link each pair used for its last collective (Communicator::LinksUsed), and a table read back from JSON.
#include "links/link_inspector.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/unit/runtime/rank_fixture.h"

namespace hccltune {
namespace {

using testing::Contains;
using testing::RunRanks;
using testing::TestEnv;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

LinkInspectorOptions Quick() {
  LinkInspectorOptions o;
  o.bytes = 256 << 10;
  o.iters = 2;
  o.latency_iters = 5;
  return o;
}

// Every rank checks its own copy of the table: one shm link per pair, measured now, positive figures.
absl::Status CheckOneNodeTable(const LinkInspector& li, int n, int64_t t0) {
  if (li.ranks() != n) return absl::InternalError(absl::StrCat("ranks ", li.ranks()));
  if (li.links().size() != static_cast<size_t>(n * (n - 1) / 2)) {
    return absl::InternalError(absl::StrCat(li.links().size(), " links for ", n, " ranks"));
  }
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      auto l = li.get_link(b, a);
      if (!l.ok()) return l.status();
      auto best = li.best_link(a, b);
      if (!best.ok()) return best.status();
      if (l->src != std::min(a, b) || l->dst != std::max(a, b) || l->type != "shm" || !l->is_default ||
          !l->network.empty() || !l->src_interface.empty() || l->source != "measured" || best->type != "shm") {
        return absl::InternalError(absl::StrCat(a, "-", b, ": ", l->ToJson().dump()));
      }
      if (!(l->bandwidth_gbps > 0) || !(l->latency_us > 0) || l->measured_unix_ms < t0 ||
          l->measured_unix_ms > NowMs()) {
        return absl::InternalError(absl::StrCat(a, "-", b, " figures: ", l->ToJson().dump()));
      }
    }
  }
  return absl::OkStatus();
}

TEST(LinkInspector, MeasuresShmForEveryPairOnOneNode) {
  for (int n : {2, 3}) {
    const int64_t t0 = NowMs();
    auto st = RunRanks(n, [&](int, Communicator& comm) -> absl::Status {
      auto li = LinkInspector::Measure(comm, TestEnv(), Quick());
      if (!li.ok()) return li.status();
      return CheckOneNodeTable(*li, n, t0);
    });
    for (int r = 0; r < n; ++r)
      EXPECT_TRUE(st[static_cast<size_t>(r)].ok()) << n << " ranks, rank " << r << ": " << st[static_cast<size_t>(r)];
  }
}

TEST(LinkInspector, BadPairsAndOptionsAreRefused) {
  auto st = RunRanks(2, [&](int, Communicator& comm) -> absl::Status {
    LinkInspectorOptions bad;
    bad.iters = 0;
    auto refused = LinkInspector::Measure(comm, TestEnv(), bad);
    if (refused.ok() || !Contains(refused.status(), "iterations >= 1")) {
      return absl::InternalError(absl::StrCat("iters 0: ", refused.status().ToString()));
    }
    auto li = LinkInspector::Measure(comm, TestEnv(), Quick());
    if (!li.ok()) return li.status();
    for (auto [a, b, what] : {std::tuple{0, 2, "rank 2 is not in this group of 2 ranks"},
                              std::tuple{-1, 0, "rank -1 is not in this group"}, std::tuple{1, 1, "to itself"}}) {
      auto l = li->get_link(a, b);
      if (l.ok() || l.status().code() != absl::StatusCode::kInvalidArgument || !Contains(l.status(), what)) {
        return absl::InternalError(absl::StrCat(a, "-", b, ": ", l.status().ToString()));
      }
    }
    return absl::OkStatus();
  });
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

// The link a pair used for its last collective: shm under auto, tcp over loopback when the call forces link=tcp;
// measuring afterwards leaves it as it was; point-to-point does not count; a rank asks about its own pairs only.
TEST(LinkInspector, UsedLinkFollowsTheLastCollective) {
  const int n = 3;
  auto st = RunRanks(n, [&](int me, Communicator& comm) -> absl::Status {
    std::vector<float> v(1024, 1.0f);
    if (absl::Status s = comm.Allreduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum); !s.ok()) {
      return s;
    }
    for (int peer = 0; peer < n; ++peer) {
      if (peer == me) continue;
      auto u = LinkInspector::UsedBetween(comm, peer, me);
      if (!u.ok()) return u.status();
      if (u->src != me || u->dst != peer || u->type != "shm" || !u->network.empty() || u->lanes != 1) {
        return absl::InternalError(absl::StrCat("auto: ", u->ToJson().dump()));
      }
    }
    CallOptions tcp;
    tcp.config = "ring(link=tcp)";
    if (absl::Status s = comm.Allreduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum, tcp);
        !s.ok()) {
      return s;
    }
    const int next = (me + 1) % n;
    auto u = LinkInspector::UsedBetween(comm, me, next);
    if (!u.ok()) return u.status();
    if (u->type != "tcp" || u->address != "127.0.0.1" || u->peer_address != "127.0.0.1" || u->interface != "lo" ||
        u->network != "127.0.0.0/8") {
      return absl::InternalError(absl::StrCat("link=tcp: ", u->ToJson().dump()));
    }
    const uint32_t op = u->operation;
    auto li = LinkInspector::Measure(comm, TestEnv(), Quick());
    if (!li.ok()) return li.status();
    int token = me;
    if (me == 0) {
      if (absl::Status s = comm.Send(&token, 1, DataType::kInt32, 1); !s.ok()) return s;
    } else if (me == 1) {
      if (absl::Status s = comm.Recv(&token, 1, DataType::kInt32, 0); !s.ok()) return s;
    }
    auto after = LinkInspector::UsedBetween(comm, next, me);
    if (!after.ok()) return after.status();
    if (after->type != "tcp" || after->operation != op) {
      return absl::InternalError(
          absl::StrCat("after measuring and a send: ", after->ToJson().dump(), " (was ", op, ")"));
    }
    if (LinkInspector::Used(comm).size() != static_cast<size_t>(n - 1)) {
      return absl::InternalError(absl::StrCat(LinkInspector::Used(comm).size(), " used links"));
    }
    auto other = LinkInspector::UsedBetween(comm, (me + 1) % n, (me + 2) % n);
    if (other.ok() || !Contains(other.status(), "knows the links of its own pairs")) {
      return absl::InternalError(absl::StrCat("a pair without this rank: ", other.status().ToString()));
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < n; ++r)
    EXPECT_TRUE(st[static_cast<size_t>(r)].ok()) << "rank " << r << ": " << st[static_cast<size_t>(r)];
}

TEST(LinkInspector, TableRoundTripsThroughJsonAndRefusesDamage) {
  nlohmann::json link = {{"src", 0},
                         {"dst", 2},
                         {"type", "tcp"},
                         {"network", "10.77.1.0/24"},
                         {"interface", "fast0"},
                         {"peer_interface", "fast0"},
                         {"address", "10.77.1.1"},
                         {"peer_address", "10.77.1.2"},
                         {"default", true},
                         {"bandwidth_gbps", 1.9},
                         {"latency_us", 40.5},
                         {"source", "measured"},
                         {"measured_unix_ms", 1700000000000}};
  nlohmann::json slow = link;
  slow["network"] = "10.77.2.0/24", slow["default"] = false, slow["bandwidth_gbps"] = 0.19;
  const nlohmann::json table = {{"ranks", 4}, {"links", {slow, link}}};
  auto li = LinkInspector::FromJson(table);
  ASSERT_TRUE(li.ok()) << li.status();
  EXPECT_EQ(li->ToJson(), (nlohmann::json{{"ranks", 4}, {"links", {link, slow}}}));  // sorted by network
  auto best = li->best_link(2, 0);
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_EQ(best->network, "10.77.1.0/24");
  EXPECT_EQ(best->dst_interface, "fast0");
  EXPECT_EQ(li->get_link(1, 3).status().code(), absl::StatusCode::kNotFound);

  nlohmann::json damaged = table;
  damaged["links"][0].erase("latency_us");
  EXPECT_TRUE(Contains(LinkInspector::FromJson(damaged).status(), "without a number 'latency_us'"));
  damaged = table;
  damaged["links"][1]["dst"] = 9;
  EXPECT_TRUE(Contains(LinkInspector::FromJson(damaged).status(), "between ranks 0 and 9 in a table of 4 ranks"));
  EXPECT_EQ(LinkInspector::FromJson(nlohmann::json::array()).status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace hccltune
