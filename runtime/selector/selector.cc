#include "runtime/selector/selector.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/algorithms/registry.h"
#include "runtime/common/logging.h"

namespace hccltune {

absl::string_view ChoiceSourceName(ChoiceSource s) {
  switch (s) {
    case ChoiceSource::kCall: return "call";
    case ChoiceSource::kTuneAlgo: return "HCCL_TUNE_ALGO";
    case ChoiceSource::kHcclAlgo: return "HCCL_ALGO";
    case ChoiceSource::kTable: return "table";
    case ChoiceSource::kDefault: return "default";
    case ChoiceSource::kExplore: return "explore";
    case ChoiceSource::kPredicted: return "predicted";
  }
  return "default";
}

std::string TunedTable::Serialize() const {
  std::string out = absl::StrCat("hccltune-table 1\n", version, "\n", content_hash, "\n");
  for (const TunedEntry& e : entries) {
    absl::StrAppend(&out, CollectiveName(e.collective), " ", DataTypeName(e.dtype), " ", e.world_size, " ", e.bytes.min,
                    " ", e.bytes.max, " ", e.config.ToString(), "\n");
    if (e.model_version != 0) absl::StrAppend(&out, "predicted ", e.model_version, "\n");
    if (e.explore) {
      absl::StrAppend(&out, "explore ", e.explore_every, " ", e.explore_calls, " ", e.explore->ToString(), "\n");
    }
  }
  return out;
}

absl::StatusOr<TunedTable> TunedTable::Deserialize(absl::string_view text) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  if (lines.size() < 2 || lines[0] != "hccltune-table 1") return absl::DataLossError("tuned table: bad header");
  TunedTable t;
  if (!absl::SimpleAtoi(lines[1], &t.version)) return absl::DataLossError("tuned table: bad version");
  size_t first = 2;
  if (lines.size() > 2 && lines[2].find(' ') == absl::string_view::npos) {
    t.content_hash = std::string(lines[2]);
    first = 3;
  }
  for (size_t i = first; i < lines.size(); ++i) {
    if (absl::StartsWith(lines[i], "predicted ")) {
      if (t.entries.empty() || t.entries.back().model_version != 0 ||
          !absl::SimpleAtoi(lines[i].substr(10), &t.entries.back().model_version) ||
          t.entries.back().model_version <= 0) {
        return absl::DataLossError(absl::StrCat("tuned table: bad model version '", lines[i], "'"));
      }
      continue;
    }
    if (absl::StartsWith(lines[i], "explore ")) {
      std::vector<absl::string_view> f = absl::StrSplit(lines[i], absl::MaxSplits(' ', 3));
      auto cfg = f.size() == 4 ? Configuration::Parse(f[3]) : absl::InvalidArgumentError("fields");
      if (t.entries.empty() || t.entries.back().explore || !cfg.ok() ||
          !absl::SimpleAtoi(f[1], &t.entries.back().explore_every) ||
          !absl::SimpleAtoi(f[2], &t.entries.back().explore_calls)) {
        return absl::DataLossError(absl::StrCat("tuned table: bad plan '", lines[i], "'"));
      }
      t.entries.back().explore = *std::move(cfg);
      continue;
    }
    std::vector<absl::string_view> f = absl::StrSplit(lines[i], absl::MaxSplits(' ', 5));
    TunedEntry e;
    auto c = f.size() == 6 ? ParseCollective(f[0]) : absl::InvalidArgumentError("fields");
    auto d = f.size() == 6 ? ParseDataType(f[1]) : absl::InvalidArgumentError("fields");
    auto cfg = f.size() == 6 ? Configuration::Parse(f[5]) : absl::InvalidArgumentError("fields");
    if (!c.ok() || !d.ok() || !cfg.ok() || !absl::SimpleAtoi(f[2], &e.world_size) ||
        !absl::SimpleAtoi(f[3], &e.bytes.min) || !absl::SimpleAtoi(f[4], &e.bytes.max)) {
      return absl::DataLossError(absl::StrCat("tuned table: bad entry '", lines[i], "'"));
    }
    e.collective = *c;
    e.dtype = *d;
    e.config = *std::move(cfg);
    t.entries.push_back(std::move(e));
  }
  return t;
}

namespace {

// The default configuration of the first algorithm valid for (c, world_size, topo) in registry order: what runs
// where the built-in defaults have no rule (they end every collective with a catch-all, so only a defect of
// policies/ gets here). A collective without algorithms of its own (point-to-point) gets a configuration that
// only carries its link: the catalogue's default step (ring).
Configuration FirstValid(Collective c, int world_size, const GroupTopology& topo) {
  for (const std::string& name : registry::ListValid(c, world_size, topo)) {
    if (absl::StatusOr<Configuration> d = Configuration::Default(name); d.ok()) return *std::move(d);
  }
  absl::StatusOr<Configuration> step = Configuration::Default("ring");
  return step.ok() ? *std::move(step) : Configuration{};
}

// Whether an HCCL_TUNE_ALGO configuration can run on this communicator. registry::IsValid refuses more: it also
// calls pointless configurations "not valid" (hierarchical on one node), and those run correctly — and one
// HCCL_TUNE_ALGO reaches every communicator of a job, its one-node sub-communicators too — so they are only
// logged. `symmetric` needs the call's buffers in symmetric memory, which exists only on one node
// (AllocSymmetric): refused on several nodes, and as a hierarchical step (whose buffers are the algorithm's);
// on one node it depends on each call's buffers, and a call on others fails with an error naming the source of
// the choice (CommImpl::ExecuteLocked). A function of the variable and the topology: the same on every rank.
absl::Status CheckOverride(Collective c, const policies::Rule& r, int world_size, const GroupTopology& topo) {
  const Configuration& cfg = r.config;
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("HCCL_TUNE_ALGO: ", CollectiveName(c), ":", FormatByteRange(r.bytes),
                                                   "=", cfg.ToString(), " cannot run here: ", why));
  };
  if (cfg.algorithm == "symmetric" && topo.num_nodes > 1) {
    return bad(
        absl::StrCat("symmetric needs buffers in symmetric memory, which exists only on one node; this "
                     "communicator's ",
                     world_size, " ranks are on ", topo.num_nodes, " nodes"));
  }
  if (absl::Status f = registry::CheckForm(c, cfg, topo); !f.ok()) return bad(f.message());
  for (const auto& step : {cfg.intra, cfg.inter}) {
    if (step != nullptr && step->algorithm == "symmetric") {
      return bad("a hierarchical step runs on the algorithm's own buffers, never in symmetric memory");
    }
  }
  if (cfg.algorithm != "symmetric") {
    if (absl::Status v = registry::IsValid(c, cfg.algorithm, world_size, topo); !v.ok()) {
      Log(LogLevel::kInfo, "HCCL_TUNE_ALGO: ", CollectiveName(c), ":", FormatByteRange(r.bytes), "=", cfg.ToString(),
          " runs, but is pointless here: ", v.message());
    }
  }
  return absl::OkStatus();
}

std::shared_ptr<const Configuration> Step(absl::string_view name) {
  return std::make_shared<const Configuration>(*Configuration::Default(name));
}

}  // namespace

absl::StatusOr<Selector> Selector::Create(const Environment& env, int world_size, const GroupTopology& topo) {
  Selector s;
  s.world_ = world_size;
  s.topo_ = topo;
  auto overrides = policies::ParseTuneAlgo(env.tune_algo);
  if (!overrides.ok()) return overrides.status();
  for (Collective c : AllCollectives()) {
    for (const policies::Rule& r : overrides->RulesFor(c)) {
      if (registry::Find(c, r.config.algorithm) == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("HCCL_TUNE_ALGO: ", CollectiveName(c), " has no algorithm '", r.config.algorithm,
                         "'; accepted: ", absl::StrJoin(registry::AlgorithmsFor(c), ", ")));
      }
      if (absl::Status st = CheckOverride(c, r, world_size, topo); !st.ok()) return st;
    }
  }
  s.overrides_ = *std::move(overrides);
  auto hccl = policies::ParseHcclAlgo(env.hccl_algo);
  if (!hccl.ok()) return hccl.status();
  const bool several = topo.num_nodes > 1;
  for (Collective c : AllCollectives()) {
    const policies::HcclLevels* lv = hccl->For(c);
    if (lv == nullptr || (!lv->level0 && !lv->level1)) continue;
    const size_t ci = static_cast<size_t>(c);
    if (several && registry::IsValid(c, "hierarchical", world_size, topo).ok()) {
      // level0 inside the nodes, level1 between them (see the header). ParseHcclAlgo refuses pipeline at level0.
      Configuration h = *Configuration::Default("hierarchical");
      if (lv->level0) h.intra = Step(*lv->level0);
      if (lv->level1 && *lv->level1 != "hierarchical") h.inter = Step(*lv->level1);
      if (!lv->level0 && *lv->level1 != "hierarchical") s.hccl_usual_[ci] = UsualStep::kIntra;
      if (!lv->level1) s.hccl_usual_[ci] = UsualStep::kInter;
      s.hccl_algo_[ci] = std::move(h);
      continue;
    }
    const std::optional<std::string>& name = several ? lv->level1 : lv->level0;
    if (!name) {
      if (several && hccl->per[ci]) {
        Log(LogLevel::kInfo, "HCCL_ALGO: ", CollectiveName(c), " has no hierarchical form on these ", topo.num_nodes,
            " nodes and level0 applies only inside a node: ", CollectiveName(c), " stays automatic");
      }
      continue;
    }
    // An HCCL name the collective does not implement leaves it automatic (HCCL_ALGO is global).
    if (registry::Find(c, *name) != nullptr) {
      s.hccl_algo_[ci] = *Configuration::Default(*name);
    } else if (hccl->per[ci]) {
      return absl::InvalidArgumentError(absl::StrCat("HCCL_ALGO: ", CollectiveName(c), " has no algorithm '", *name,
                                                     "'; accepted: ", absl::StrJoin(registry::AlgorithmsFor(c), ", ")));
    }
  }
  for (Collective c : AllCollectives()) {
    s.fallback_[static_cast<size_t>(c)] = FirstValid(c, world_size, topo);
    // The built-in rules that can apply to this group: its world and node count, valid on its topology (a
    // hierarchical row for several nodes is skipped where every node has one rank).
    for (const policies::Rule& r : policies::BuiltinDefaults().RulesFor(c)) {
      if (r.Applies(world_size, topo.num_nodes) && registry::IsValid(c, r.config.algorithm, world_size, topo).ok() &&
          registry::CheckForm(c, r.config, topo).ok()) {
        s.defaults_.Add(r);
      }
    }
  }
  return s;
}

Configuration Selector::ChooseStep(Collective c, uint64_t bytes, int group_size, int nodes) {
  GroupTopology level;  // one level (one node, or one rank per node): never a hierarchical configuration again
  const int n = std::max(group_size, 1);
  const bool across = nodes > 1;
  for (int i = 0; i < n; ++i) level.node_of.push_back(across ? i : 0);
  level.num_nodes = across ? n : 1;
  for (const policies::Rule& r : policies::BuiltinDefaults().RulesFor(c)) {
    if (r.Applies(group_size, level.num_nodes) && r.bytes.Contains(bytes) &&
        registry::IsValid(c, r.config.algorithm, group_size, level).ok()) {
      return r.config;
    }
  }
  return FirstValid(c, group_size, level);
}

void Selector::SetTable(std::shared_ptr<const TunedTable> table, bool explore) {
  ++generation_;
  for (auto& row : slots_) {
    for (auto& v : row) v.clear();
  }
  hccl_merged_.clear();
  table_ = std::move(table);
  if (!table_) return;
  for (const TunedEntry& e : table_->entries) {
    if (e.world_size != world_) continue;
    if (registry::Find(e.collective, e.config.algorithm) == nullptr) {
      Log(LogLevel::kWarn, "tuned table v", table_->version, ": ", CollectiveName(e.collective), " has no algorithm '",
          e.config.algorithm, "'; entry ignored");
      continue;
    }
    if (absl::Status f = registry::CheckForm(e.collective, e.config, topo_); !f.ok()) {
      Log(LogLevel::kWarn, "tuned table v", table_->version, ": ", CollectiveName(e.collective), " ", f.message(),
          "; entry ignored");
      continue;
    }
    const Configuration* plan = nullptr;
    if (explore && e.explore && e.explore_every >= 2 && e.explore_calls > 0) {
      if (registry::Find(e.collective, e.explore->algorithm) != nullptr) {
        plan = &*e.explore;
      } else {
        Log(LogLevel::kWarn, "tuned table v", table_->version, ": ", CollectiveName(e.collective),
            " has no algorithm '", e.explore->algorithm, "'; exploration plan ignored");
      }
    }
    Slot slot{e.bytes.min, e.bytes.max, &e.config, plan, e.explore_every, e.explore_calls};
    slot.predicted = e.model_version > 0;
    // HCCL_ALGO pinned one step of a hierarchical configuration: the other is this entry's, the usual choice.
    const UsualStep usual = hccl_usual_[static_cast<size_t>(e.collective)];
    if (usual != UsualStep::kNone && e.config.algorithm == "hierarchical") {
      const auto& step = usual == UsualStep::kIntra ? e.config.intra : e.config.inter;
      if (step != nullptr) {
        auto merged = std::make_shared<Configuration>(*hccl_algo_[static_cast<size_t>(e.collective)]);
        (usual == UsualStep::kIntra ? merged->intra : merged->inter) = step;
        merged->form = e.config.form;  // the table's form, like its step
        slot.hccl = merged.get();
        hccl_merged_.push_back(std::move(merged));
      }
    }
    slots_[static_cast<size_t>(e.collective)][static_cast<size_t>(e.dtype)].push_back(slot);
  }
  for (auto& row : slots_) {
    for (auto& v : row) std::sort(v.begin(), v.end(), [](const Slot& a, const Slot& b) { return a.min < b.min; });
  }
}

const std::string& Selector::table_hash() const {
  static const std::string kNone;
  return table_ ? table_->content_hash : kNone;
}

const Selector::Slot* Selector::FindSlot(Collective c, DataType dtype, uint64_t bytes) const {
  const std::vector<Slot>& slots = slots_[static_cast<size_t>(c)][static_cast<size_t>(dtype)];
  if (slots.empty()) return nullptr;
  // Last slot whose min <= bytes.
  auto it = std::upper_bound(slots.begin(), slots.end(), bytes, [](uint64_t b, const Slot& s) { return b < s.min; });
  if (it == slots.begin()) return nullptr;
  --it;
  return bytes < it->max ? &*it : nullptr;
}

Selector::Choice Selector::ChooseForCall(Collective c, DataType dtype, uint64_t bytes) const {
  Choice choice = Choose(c, dtype, bytes);
  if (choice.source != ChoiceSource::kTable && choice.source != ChoiceSource::kPredicted) return choice;
  const Slot* slot = FindSlot(c, dtype, bytes);
  if (slot == nullptr || slot->explore == nullptr) return choice;
  const uint64_t k = ++slot->calls;
  if (k % slot->every == 0 && slot->explored < slot->budget) {
    ++slot->explored;
    return {slot->explore, ChoiceSource::kExplore};
  }
  return choice;
}

bool Selector::Repeats(Collective c, DataType dtype, uint64_t bytes, const Choice& choice) const {
  if (choice.source == ChoiceSource::kExplore) return false;
  if (choice.source != ChoiceSource::kTable && choice.source != ChoiceSource::kPredicted) return true;
  const Slot* slot = FindSlot(c, dtype, bytes);
  return slot == nullptr || slot->explore == nullptr;
}

Selector::Choice Selector::Choose(Collective c, DataType dtype, uint64_t bytes) const {
  const size_t ci = static_cast<size_t>(c);
  if (overrides_.Covers(c)) {
    if (const Configuration* cfg = overrides_.Find(c, world_, bytes)) return {cfg, ChoiceSource::kTuneAlgo};
  }
  if (hccl_algo_[ci]) {
    if (hccl_usual_[ci] != UsualStep::kNone) {
      const Slot* slot = FindSlot(c, dtype, bytes);
      if (slot != nullptr && slot->hccl != nullptr) return {slot->hccl, ChoiceSource::kHcclAlgo};
    }
    return {&*hccl_algo_[ci], ChoiceSource::kHcclAlgo};
  }
  if (const Slot* slot = FindSlot(c, dtype, bytes)) {
    return {slot->config, slot->predicted ? ChoiceSource::kPredicted : ChoiceSource::kTable};
  }
  if (const Configuration* cfg = defaults_.Find(c, world_, bytes, topo_.num_nodes)) {
    return {cfg, ChoiceSource::kDefault};
  }
  return {&fallback_[ci], ChoiceSource::kDefault};
}

}  // namespace hccltune
