#include "policies/rules.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace hccltune::policies {
namespace {

absl::Status ErrorAt(absl::string_view source, absl::string_view text, size_t pos, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, "='", text, "' at ", pos, ": ", what));
}

// Finds the end of a configuration starting at `pos` (balanced parentheses), stopping at `stop` characters
// at depth 0.
size_t ConfigEnd(absl::string_view text, size_t pos, absl::string_view stops) {
  int depth = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && stops.find(c) != absl::string_view::npos) return i;
  }
  return text.size();
}

absl::StatusOr<std::pair<int, int>> ParseWorldRange(absl::string_view t) {
  const size_t dash = t.find('-');
  int lo = 0, hi = 1 << 30;
  if (dash == absl::string_view::npos) {
    if (!absl::SimpleAtoi(t, &lo) || lo < 1) return absl::InvalidArgumentError("bad world size");
    return std::make_pair(lo, lo);
  }
  if (!absl::SimpleAtoi(t.substr(0, dash), &lo) || lo < 1) return absl::InvalidArgumentError("bad world range");
  if (dash + 1 < t.size() && (!absl::SimpleAtoi(t.substr(dash + 1), &hi) || hi < lo)) {
    return absl::InvalidArgumentError("bad world range");
  }
  return std::make_pair(lo, hi);
}

// HCCL names -> ours. NA = no preference.
absl::StatusOr<std::optional<std::string>> MapHcclName(absl::string_view name) {
  if (name == "NA") return std::optional<std::string>();
  if (name == "ring") return std::optional<std::string>("ring");
  if (name == "H-D_R") return std::optional<std::string>("halving_doubling");
  if (name == "pipeline") return std::optional<std::string>("hierarchical");
  if (name == "NHR" || name == "NHR_V1" || name == "NB" || name == "AHC") {
    return absl::InvalidArgumentError(absl::StrCat("algorithm '", name,
                                                   "' is not implemented by hccl-tune; accepted: ring, H-D_R, "
                                                   "pipeline, NA"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown algorithm '", name, "'; accepted: ring, H-D_R, pipeline, NA"));
}

absl::StatusOr<HcclLevels> ParseLevels(absl::string_view text) {
  HcclLevels out;
  std::array<bool, 4> seen{};
  for (absl::string_view part : absl::StrSplit(text, ';', absl::SkipWhitespace())) {
    part = absl::StripAsciiWhitespace(part);
    const size_t colon = part.find(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("'", part, "': expected level0:NAME or level1:NAME"));
    }
    const absl::string_view level = absl::StripAsciiWhitespace(part.substr(0, colon));
    const absl::string_view hccl_name = absl::StripAsciiWhitespace(part.substr(colon + 1));
    auto name = MapHcclName(hccl_name);
    if (!name.ok()) return name.status();
    int index = -1;
    if (level == "level0") {
      index = 0;
    } else if (level == "level1") {
      index = 1;
    } else if (level == "level2") {
      index = 2;
    } else if (level == "level3") {
      index = 3;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown level '", level, "'; accepted: level0, level1"));
    }
    // A level given twice is ambiguous (HCCL_TUNE_ALGO refuses a collective given twice the same way).
    if (seen[static_cast<size_t>(index)]) return absl::InvalidArgumentError(absl::StrCat(level, " is given twice"));
    seen[static_cast<size_t>(index)] = true;
    if (index == 0 && hccl_name == "pipeline") {
      // pipeline is HCCL's level1 (between nodes) algorithm; as level0 it would nest hierarchical in
      // hierarchical, which no configuration can be.
      return absl::InvalidArgumentError("'pipeline' runs between nodes (level1) only; level0 accepts ring, H-D_R, NA");
    }
    if (index == 0) out.level0 = *name;
    if (index == 1) out.level1 = *name;
    // level2 and level3: HCCL accepts them; one and two levels are all we have.
  }
  return out;
}

}  // namespace

const Configuration* RuleSet::Find(Collective c, int world, uint64_t bytes, int nodes) const {
  for (const Rule& r : rules_[static_cast<size_t>(c)]) {
    if (r.Applies(world, nodes) && r.bytes.Contains(bytes)) return &r.config;
  }
  return nullptr;
}

bool RuleSet::empty() const {
  for (const auto& v : rules_) {
    if (!v.empty()) return false;
  }
  return true;
}

absl::StatusOr<RuleSet> ParseTuneAlgo(absl::string_view text) {
  constexpr absl::string_view kSource = "HCCL_TUNE_ALGO";
  RuleSet set;
  size_t pos = 0;
  auto skip = [&] {
    while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
  };
  skip();
  if (pos == text.size()) return set;
  std::array<bool, kNumCollectives> seen{};
  while (pos < text.size()) {
    skip();
    const size_t colon = text.find(':', pos);
    if (colon == absl::string_view::npos) {
      return ErrorAt(kSource, text, pos, "expected COLLECTIVE: (e.g. allreduce:0-64K=one_shot)");
    }
    auto coll = ParseCollective(absl::StripAsciiWhitespace(text.substr(pos, colon - pos)));
    if (!coll.ok()) return ErrorAt(kSource, text, pos, coll.status().message());
    if (seen[static_cast<size_t>(*coll)]) {
      return ErrorAt(kSource, text, pos, absl::StrCat(CollectiveName(*coll), " is given twice"));
    }
    seen[static_cast<size_t>(*coll)] = true;
    pos = colon + 1;
    while (true) {
      skip();
      const size_t eq = text.find('=', pos);
      const size_t slash = text.find('/', pos);
      if (eq == absl::string_view::npos || (slash != absl::string_view::npos && slash < eq)) {
        return ErrorAt(kSource, text, pos, "expected RANGE=CONFIGURATION (e.g. 0-64K=one_shot)");
      }
      auto range = ParseByteRange(text.substr(pos, eq - pos), SizeSuffixes::kConventions);
      if (!range.ok()) return ErrorAt(kSource, text, pos, range.status().message());
      // First match wins, so an overlap would leave part of a later range unreachable: refused.
      for (const Rule& before : set.RulesFor(*coll)) {
        if (range->min < before.bytes.max && before.bytes.min < range->max) {
          return ErrorAt(kSource, text, pos,
                         absl::StrCat(CollectiveName(*coll), " range ", FormatByteRange(*range), " overlaps ",
                                      FormatByteRange(before.bytes), " given before it; give each size one rule"));
        }
      }
      pos = eq + 1;
      const size_t end = ConfigEnd(text, pos, ",/");
      auto config = Configuration::Parse(text.substr(pos, end - pos));
      if (!config.ok()) return ErrorAt(kSource, text, pos, config.status().message());
      set.Add(Rule{*coll, 1, 1 << 30, 1, 1 << 30, *range, *config});
      pos = end;
      if (pos < text.size() && text[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < text.size() && text[pos] == '/') ++pos;
      break;
    }
  }
  return set;
}

absl::StatusOr<RuleSet> ParseRuleTable(absl::string_view text, absl::string_view source) {
  RuleSet set;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    const size_t hash = line.find('#');
    if (hash != absl::string_view::npos) line = line.substr(0, hash);
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    auto bad = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat(source, " line ", line_no, ": ", what, " in '", line, "'"));
    };
    if (f.size() < 4) return bad("expected COLLECTIVE WORLD [nodes=N] BYTES CONFIGURATION");
    auto coll = ParseCollective(f[0]);
    if (!coll.ok()) return bad(coll.status().message());
    auto world = ParseWorldRange(f[1]);
    if (!world.ok()) return bad("bad world-size range (e.g. 2-8, 65-)");
    size_t next = 2;
    std::pair<int, int> nodes{1, 1 << 30};
    if (absl::ConsumePrefix(&f[2], "nodes=")) {
      auto n = ParseWorldRange(f[2]);
      if (!n.ok()) return bad("bad node-count range after nodes= (e.g. 2-, 1)");
      nodes = *n;
      if (f.size() < 5) return bad("expected COLLECTIVE WORLD [nodes=N] BYTES CONFIGURATION");
      ++next;
    }
    auto range = ParseByteRange(f[next], SizeSuffixes::kConventions);
    if (!range.ok()) return bad(range.status().message());
    // The configuration may contain spaces: everything after the byte range.
    const size_t cfg_at = static_cast<size_t>(f[next + 1].data() - line.data());
    auto config = Configuration::Parse(line.substr(cfg_at));
    if (!config.ok()) return bad(config.status().message());
    set.Add(Rule{*coll, world->first, world->second, nodes.first, nodes.second, *range, *config});
  }
  return set;
}

bool HcclAlgo::empty() const {
  if (all) return false;
  for (const auto& p : per) {
    if (p) return false;
  }
  return true;
}

const HcclLevels* HcclAlgo::For(Collective c) const {
  if (per[static_cast<size_t>(c)]) return &*per[static_cast<size_t>(c)];
  return all ? &*all : nullptr;
}

absl::StatusOr<HcclAlgo> ParseHcclAlgo(absl::string_view text) {
  HcclAlgo out;
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return out;
  // Errors name the position of the part that failed (its offset in the trimmed text).
  auto wrap = [&](const absl::Status& s, absl::string_view part) {
    const size_t pos = part.empty() ? 0 : static_cast<size_t>(part.data() - text.data());
    return absl::InvalidArgumentError(absl::StrCat("HCCL_ALGO='", text, "' at ", pos, ": ", s.message()));
  };
  if (text.find('=') == absl::string_view::npos) {
    auto levels = ParseLevels(text);
    if (!levels.ok()) return wrap(levels.status(), text);
    out.all = *levels;
    return out;
  }
  for (absl::string_view part : absl::StrSplit(text, '/', absl::SkipWhitespace())) {
    const size_t eq = part.find('=');
    if (eq == absl::string_view::npos) {
      return wrap(absl::InvalidArgumentError(absl::StrCat("'", part, "': expected COLLECTIVE=level0:...;level1:...")),
                  part);
    }
    auto coll = ParseCollective(absl::StripAsciiWhitespace(part.substr(0, eq)));
    if (!coll.ok()) return wrap(coll.status(), part);
    if (out.per[static_cast<size_t>(*coll)]) {
      return wrap(absl::InvalidArgumentError(absl::StrCat(CollectiveName(*coll), " is given twice")), part);
    }
    auto levels = ParseLevels(part.substr(eq + 1));
    if (!levels.ok()) return wrap(levels.status(), part.substr(eq + 1));
    out.per[static_cast<size_t>(*coll)] = *levels;
  }
  return out;
}

}  // namespace hccltune::policies
