// Peer exporters (tuner/export/): the trees of `--format mpich-json` against small built-in trees, Open MPI
// rules' fan-in/out and the ranges left to the library's own choice, and the env lines naming the files.
#include "tuner/peer_export/peer_files.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/common/fingerprint.h"
#include "tuner/peer_export/mpich_json.h"
#include "tuner/peer_export/openmpi_rules.h"

namespace hccltune::exporter {
namespace {

using Json = nlohmann::ordered_json;

db::Table PeerTable(const std::string& runtime) {
  TopologyDescription d;
  d.ranks_per_node = {4};
  d.intra = {"shm"};
  d.release = "1.0";
  d.runtime = runtime;
  const TopologyKeys k = KeysOf(d);
  db::Table t;
  t.topology = db::Topology{k.fingerprint, k.json, k.topology_class};
  return t;
}

db::TunedEntry Entry(Collective c, int world, uint64_t min, uint64_t max, const std::string& cfg,
                     double default_margin = 0.5) {
  db::TunedEntry e;
  e.key.collective = c;
  e.key.world_size = world;
  e.key.range = ByteRange{min, max};
  e.configuration = cfg;
  e.default_margin = default_margin;
  return e;
}

// Built-in trees of the shape MPICH 4.0 compiles in, small.
MpichBuiltin Builtin() {
  return MpichBuiltin{
      R"({"collective=allreduce":{"comm_type=intra":{"algorithm=MPIR_Allreduce_intra_recursive_doubling":{}},)"
      R"("comm_type=inter":{"algorithm=MPIR_Allreduce_inter_reduce_exchange_bcast":{}}},)"
      R"("collective=barrier":{"comm_type=intra":{"algorithm=MPIR_Barrier_intra_dissemination":{}}}})",
      R"({"collective=allreduce":{"comm_type=intra":{"composition=MPIDI_Allreduce_intra_composition_gamma":{}}},)"
      R"("collective=barrier":{"comm_type=intra":{"composition=MPIDI_Barrier_intra_composition_beta":{}}}})"};
}

TEST(MpichJson, RulesPerWorldAndSizeOverTheBuiltinTrees) {
  db::Table t = PeerTable("mpich-4.0");
  t.entries = {Entry(Collective::kAllreduce, 2, 16, kUnbounded, "mpich:reduce_scatter_allgather"),
               Entry(Collective::kAllreduce, 4, 0, 8192, "mpich:nb"),
               Entry(Collective::kAllreduce, 4, 8192, 65536, "mpich:auto"),
               Entry(Collective::kAllreduce, 4, 65536, kUnbounded, "mpich:smp", 0.01)};
  auto f = MpichJson(t, Builtin());
  ASSERT_TRUE(f.ok()) << f.status();
  const Json mpir = Json::parse(f->mpir), ch4 = Json::parse(f->ch4);
  const Json builtin_mpir = Json::parse(Builtin().mpir), builtin_ch4 = Json::parse(Builtin().ch4);
  // Other collectives and the inter-communicator rules stay MPICH's.
  EXPECT_EQ(mpir["collective=barrier"], builtin_mpir["collective=barrier"]);
  EXPECT_EQ(mpir["collective=allreduce"]["comm_type=inter"], builtin_mpir["collective=allreduce"]["comm_type=inter"]);
  EXPECT_EQ(ch4["collective=barrier"], builtin_ch4["collective=barrier"]);
  const Json& intra = mpir["collective=allreduce"]["comm_type=intra"];
  const Json own = builtin_mpir["collective=allreduce"]["comm_type=intra"];
  EXPECT_EQ(intra["comm_size<2"], own);                     // smaller communicators than measured: MPICH's rules
  EXPECT_EQ(intra["comm_size<4"]["avg_msg_size<16"], own);  // below the first measured size: MPICH's rules
  EXPECT_EQ(intra["comm_size<4"]["avg_msg_size=any"],
            Json({{"algorithm=MPIR_Allreduce_intra_reduce_scatter_allgather", Json::object()}}));
  const Json& four = intra["comm_size=any"];
  EXPECT_EQ(four["avg_msg_size<8192"], Json({{"algorithm=MPIR_Allreduce_allcomm_nb", Json::object()}}));
  EXPECT_EQ(four["avg_msg_size<65536"], own);  // mpich:auto
  EXPECT_EQ(four["avg_msg_size=any"], own);    // won by 1%: left to MPICH
  // Keys in order: MPICH tries them in turn.
  std::vector<std::string> keys;
  for (auto it = four.begin(); it != four.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"avg_msg_size<8192", "avg_msg_size<65536", "avg_msg_size=any"}));
  // The device level: the MPIR level where an algorithm is named, MPICH's own device rules elsewhere.
  const Json& dev = ch4["collective=allreduce"]["comm_type=intra"]["comm_size=any"];
  EXPECT_EQ(dev["avg_msg_size<8192"], Json({{"composition=MPIDI_Allreduce_intra_composition_beta", Json::object()}}));
  EXPECT_EQ(dev["avg_msg_size<65536"], builtin_ch4["collective=allreduce"]["comm_type=intra"]);
}

TEST(MpichJson, ErrorsNameTheProblem) {
  db::Table t = PeerTable("openmpi-4.1");
  EXPECT_EQ(MpichJson(t, Builtin()).status().code(), absl::StatusCode::kFailedPrecondition);
  t = PeerTable("mpich-4.0");
  t.entries = {Entry(Collective::kBroadcast, 4, 0, kUnbounded, "mpich:binomial")};
  auto f = MpichJson(t, Builtin());  // the built-in tree has no bcast
  EXPECT_NE(f.status().message().find("no bcast rules"), std::string::npos) << f.status();
  t.entries = {Entry(Collective::kAllreduce, 4, 0, kUnbounded, "openmpi:ring")};
  f = MpichJson(t, Builtin());
  EXPECT_NE(f.status().message().find("is not MPICH's"), std::string::npos) << f.status();
  EXPECT_FALSE(MpichJson(PeerTable("mpich-4.0"), MpichBuiltin{"{", "{}"}).ok());
}

TEST(OpenMpiRules, ChainCarriesItsFanOutAndSmallWinsKeepTheFixedRules) {
  db::Table t = PeerTable("openmpi-4.1");
  t.entries = {Entry(Collective::kBroadcast, 4, 0, 4096, "openmpi:chain(segment=8K)"),
               Entry(Collective::kBroadcast, 4, 4096, 65536, "openmpi:binomial(segment=0)", 0.02),
               Entry(Collective::kBroadcast, 4, 65536, kUnbounded, "openmpi:pipeline(segment=32K)")};
  auto rules = OpenMpiRules(t);
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_NE(rules->find("\n4\n3\n0 2 4 8192\n4096 0 0 0\n65536 3 0 32768\n"), std::string::npos) << *rules;
}

TEST(PeerFiles, PathsAndEnvLines) {
  auto lines = PeerEnvLines("openmpi", "/s/exports", "0123456789abcdef");
  ASSERT_TRUE(lines.ok());
  EXPECT_EQ(*lines,
            (std::vector<std::string>{
                "export OMPI_MCA_coll_tuned_use_dynamic_rules='1'",
                "export OMPI_MCA_coll_tuned_dynamic_rules_filename='/s/exports/0123456789abcdef.openmpi-rules'"}));
  lines = PeerEnvLines("mpich", "/it's", "0123456789abcdef");
  ASSERT_TRUE(lines.ok());
  EXPECT_EQ(lines->at(1),
            "export MPIR_CVAR_CH4_COLL_SELECTION_TUNING_JSON_FILE='/it'\\''s/0123456789abcdef.mpich.json.ch4'");
  EXPECT_FALSE(PeerEnvLines("nccl", "/s", "0123456789abcdef").ok());
  db::Table t = PeerTable("mpich-4.0");
  t.entries = {Entry(Collective::kAllreduce, 4, 0, kUnbounded, "mpich:auto")};
  EXPECT_EQ(PeerFiles(t, "/s", nullptr).status().code(), absl::StatusCode::kFailedPrecondition);
  const MpichBuiltin b = Builtin();
  auto files = PeerFiles(t, "/s", &b);
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ(files->at(1).path, absl::StrCat("/s/", t.topology.fingerprint, ".mpich.json.ch4"));
}

}  // namespace
}  // namespace hccltune::exporter
