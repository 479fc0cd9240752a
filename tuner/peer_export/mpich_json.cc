#include "tuner/peer_export/mpich_json.h"

#include <sys/stat.h>

#include <climits>
#include <map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/common/bounded_read.h"
#include "runtime/common/fingerprint.h"
#include "runtime/common/peer_configuration.h"
#include "tuner/peer_export/peer_rules.h"

namespace hccltune::exporter {
namespace {

using Json = nlohmann::ordered_json;

struct MpichColl {
  Collective collective;
  const char* name;      // MPICH's collective name in the JSON ("collective=...")
  const char* function;  // its name in the MPIR function names
  const char* size_key;  // the message-size operator MPICH defines for it
  const char* direct;    // ch4: the composition that goes straight to the MPIR level ("": keep the built-in rules)
};

const std::vector<MpichColl>& Colls() {
  static const auto* colls = new std::vector<MpichColl>{
      {Collective::kAllreduce, "allreduce", "Allreduce", "avg_msg_size", "MPIDI_Allreduce_intra_composition_beta"},
      {Collective::kAllgather, "allgather", "Allgather", "total_msg_size", ""},
      {Collective::kBroadcast, "bcast", "Bcast", "avg_msg_size", "MPIDI_Bcast_intra_composition_gamma"},
      {Collective::kReducescatter, "reduce_scatter_block", "Reduce_scatter_block", "total_msg_size", ""},
  };
  return *colls;
}

const MpichColl* Find(Collective c) {
  for (const MpichColl& m : Colls()) {
    if (m.collective == c) return &m;
  }
  return nullptr;
}

// The built-in intra-communicator subtree of `coll` in `tree` (null when the tree has none).
Json BuiltinIntra(const Json& tree, const std::string& coll) {
  auto c = tree.find(absl::StrCat("collective=", coll));
  if (c == tree.end() || !c->is_object()) return Json();
  auto intra = c->find("comm_type=intra");
  return intra == c->end() ? Json() : *intra;
}

// One tree level: `key<limit>` per rule but the last, which holds for everything else (`key=any`).
Json Level(const std::string& key, const std::vector<std::pair<uint64_t, Json>>& rules) {
  Json level = Json::object();
  for (size_t i = 0; i < rules.size(); ++i) {
    const bool last = i + 1 == rules.size() || rules[i].first > static_cast<uint64_t>(INT_MAX);
    level[last ? absl::StrCat(key, "=any") : absl::StrCat(key, "<", rules[i].first)] = rules[i].second;
    if (last) break;
  }
  return level;
}

struct Built {
  Json mpir, ch4;  // the intra-communicator subtrees of one collective
};

// Both levels' leaves for one entry.
absl::StatusOr<std::pair<Json, Json>> Leaves(const MpichColl& m, const db::TunedEntry& e, const Json& mpir_auto,
                                             const Json& ch4_auto) {
  auto p = PeerConfiguration::Parse(e.configuration);
  if (!p.ok()) return p.status();
  if (p->runtime != kMpich) {
    return absl::InvalidArgumentError(absl::StrCat("entry configuration ", e.configuration, " is not MPICH's"));
  }
  if (p->IsDefault() || KeepsOwnChoice(e)) return std::make_pair(mpir_auto, ch4_auto);
  const std::string fn = p->algorithm == "nb" ? absl::StrCat("MPIR_", m.function, "_allcomm_nb")
                                              : absl::StrCat("MPIR_", m.function, "_intra_", p->algorithm);
  Json mpir = {{absl::StrCat("algorithm=", fn), Json::object()}};
  Json ch4 = *m.direct ? Json{{absl::StrCat("composition=", m.direct), Json::object()}} : ch4_auto;
  return std::make_pair(mpir, ch4);
}

// The table's rules for one collective: world sizes, then message sizes.
absl::StatusOr<Built> Build(const MpichColl& m, const std::map<int, std::vector<const db::TunedEntry*>>& worlds,
                            const Json& mpir_builtin, const Json& ch4_builtin) {
  const Json mpir_auto = BuiltinIntra(mpir_builtin, m.name), ch4_auto = BuiltinIntra(ch4_builtin, m.name);
  if (mpir_auto.is_null()) {
    return absl::InvalidArgumentError(absl::StrCat("MPICH's built-in selection has no ", m.name, " rules"));
  }
  std::vector<std::pair<uint64_t, Json>> mpir_worlds, ch4_worlds;
  // Communicators smaller than every measured size (MPICH's own sub-communicators among them) keep its rules.
  if (const int smallest = worlds.begin()->first; smallest > 1) {
    mpir_worlds.emplace_back(smallest, mpir_auto);
    ch4_worlds.emplace_back(smallest, ch4_auto);
  }
  for (auto it = worlds.begin(); it != worlds.end(); ++it) {
    std::vector<std::pair<uint64_t, Json>> mpir_sizes, ch4_sizes;
    // Sizes below the first measured one keep MPICH's rules, as Open MPI's keep its fixed rules.
    if (const uint64_t first = it->second.front()->key.range.min; first > 0) {
      mpir_sizes.emplace_back(first, mpir_auto);
      ch4_sizes.emplace_back(first, ch4_auto);
    }
    for (const db::TunedEntry* e : it->second) {
      auto leaves = Leaves(m, *e, mpir_auto, ch4_auto);
      if (!leaves.ok()) return leaves.status();
      mpir_sizes.emplace_back(e->key.range.max, leaves->first);
      ch4_sizes.emplace_back(e->key.range.max, leaves->second);
    }
    auto next = std::next(it);
    const uint64_t below = next == worlds.end() ? UINT64_MAX : static_cast<uint64_t>(next->first);
    mpir_worlds.emplace_back(below, Level(m.size_key, mpir_sizes));
    ch4_worlds.emplace_back(below, Level(m.size_key, ch4_sizes));
  }
  // Allgather and reduce_scatter_block reach the MPIR level through the built-in device rules: kept.
  const bool device = *m.direct && !ch4_auto.is_null();
  return Built{Level("comm_size", mpir_worlds), device ? Level("comm_size", ch4_worlds) : Json()};
}

absl::StatusOr<Json> ParseTree(const std::string& text, const char* what) {
  Json tree = Json::parse(text, nullptr, false);
  if (tree.is_discarded() || !tree.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("MPICH's built-in ", what, " selection is not a JSON object"));
  }
  return tree;
}

}  // namespace

std::string DefaultMpichLibrary() {
  for (const char* p : {"/usr/lib/x86_64-linux-gnu/libmpich.so.12", "/usr/lib/aarch64-linux-gnu/libmpich.so.12",
                        "/usr/lib64/mpich/lib/libmpich.so.12", "/usr/lib64/libmpich.so.12",
                        "/usr/local/lib/libmpich.so.12", "/usr/lib/libmpich.so.12"}) {
    struct stat st {};
    if (::stat(p, &st) == 0) return p;
  }
  return "";
}

absl::StatusOr<MpichBuiltin> ReadMpichBuiltin(const std::string& library) {
  auto bytes = ReadFileAtMost(library, size_t{1} << 30, "the MPICH library");
  if (!bytes.ok()) return bytes.status();
  // The trees are NUL-terminated JSON strings in the library's read-only data.
  MpichBuiltin b;
  for (size_t at = bytes->find("{\"collective="); at != std::string::npos; at = bytes->find("{\"collective=", at + 1)) {
    const size_t end = bytes->find('\0', at);
    if (end == std::string::npos) break;
    const absl::string_view text(bytes->data() + at, end - at);
    if (b.mpir.empty() && absl::StrContains(text, "\"algorithm=MPIR_Allreduce_intra_")) b.mpir = std::string(text);
    if (b.ch4.empty() && absl::StrContains(text, "\"composition=MPIDI_Allreduce_")) b.ch4 = std::string(text);
  }
  if (b.mpir.empty() || b.ch4.empty()) {
    return absl::NotFoundError(absl::StrCat(library, " holds no built-in MPICH collective selection (",
                                            b.mpir.empty() ? "MPIR" : "ch4", " level); pass --mpich-lib with ",
                                            "the libmpich.so of MPICH 4.0 that the jobs run"));
  }
  return b;
}

absl::StatusOr<MpichJsonFiles> MpichJson(const db::Table& table, const MpichBuiltin& builtin) {
  auto d = ParseTopologyJson(table.topology.json);
  if (!d.ok()) return d.status();
  if (!absl::StartsWith(d->runtime, "mpich-4.")) {
    return absl::FailedPreconditionError(absl::StrCat("table ", table.topology.fingerprint, " was measured with ",
                                                      d->runtime, "; MPICH JSON comes from a table of mpich-4.x ",
                                                      "(hccl-tune sweep --runtime mpich)"));
  }
  auto mpir = ParseTree(builtin.mpir, "MPIR");
  if (!mpir.ok()) return mpir.status();
  auto ch4 = ParseTree(builtin.ch4, "ch4");
  if (!ch4.ok()) return ch4.status();
  std::map<const MpichColl*, std::map<int, std::vector<const db::TunedEntry*>>> by;
  for (const db::TunedEntry& e : table.entries) {
    const MpichColl* m = Find(e.key.collective);
    if (m == nullptr || e.key.dtype != DataType::kFloat32) {
      return absl::InvalidArgumentError(absl::StrCat("entry ", CollectiveName(e.key.collective), "/",
                                                     DataTypeName(e.key.dtype), ": MPICH JSON covers fp32 ",
                                                     "allreduce, allgather, broadcast and reducescatter"));
    }
    by[m][e.key.world_size].push_back(&e);
  }
  Json mpir_out = *mpir, ch4_out = *ch4;
  for (const auto& [m, worlds] : by) {
    auto built = Build(*m, worlds, *mpir, *ch4);
    if (!built.ok()) return built.status();
    mpir_out[absl::StrCat("collective=", m->name)]["comm_type=intra"] = built->mpir;
    if (!built->ch4.is_null()) ch4_out[absl::StrCat("collective=", m->name)]["comm_type=intra"] = built->ch4;
  }
  return MpichJsonFiles{mpir_out.dump(1) + "\n", ch4_out.dump(1) + "\n"};
}

}  // namespace hccltune::exporter
