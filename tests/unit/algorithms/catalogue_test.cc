// docs/ALGORITHMS.md shows every algorithm of the registry with the cost written beside its registry entry
// (registry::Cost): a registered algorithm without a catalogue row fails, so does a row the registry no longer
// has, and so does a row whose formulas differ from the registry's. Every formula must also evaluate (the
// grammar of registry.h) to a finite, non-negative number over a range of rank counts and sizes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "model/formula.h"
#include "runtime/algorithms/registry.h"
#include "runtime/common/types.h"

#ifndef HCCL_TUNE_ALGORITHMS_MD
#error "HCCL_TUNE_ALGORITHMS_MD must name docs/ALGORITHMS.md"
#endif

namespace hccltune {
namespace {

// One algorithm's cost as text: steps, bytes, messages (formulas), across nodes (its class's name).
struct CostText {
  std::string steps, bytes, messages, across;
  friend bool operator==(const CostText&, const CostText&) = default;
};
// (collective, algorithm) -> its cost
using Costs = std::map<std::pair<std::string, std::string>, CostText>;

// The rows of the catalogue: under a heading "## COLLECTIVE", every table row whose first four cells are
// `name`, `steps`, `bytes` and `messages` in backquotes; the fifth cell is the across-nodes class.
Costs ParseCatalogue(const std::string& text) {
  Costs out;
  std::string collective;
  std::istringstream in(text);
  for (std::string text_line; std::getline(in, text_line);) {
    absl::string_view line = text_line;
    if (absl::ConsumePrefix(&line, "## ")) {
      collective = std::string(absl::StripAsciiWhitespace(line));
      continue;
    }
    if (!absl::StartsWith(line, "|")) continue;
    std::vector<std::string> cells = absl::StrSplit(line, '|');
    if (cells.size() < 7) continue;
    std::vector<std::string> code;
    for (size_t i = 1; i <= 4; ++i) {
      absl::string_view cell = absl::StripAsciiWhitespace(cells[i]);
      if (cell.size() < 2 || cell.front() != '`' || cell.back() != '`') break;
      code.emplace_back(cell.substr(1, cell.size() - 2));
    }
    if (code.size() == 4) {
      out[{collective, code[0]}] = {code[1], code[2], code[3], std::string(absl::StripAsciiWhitespace(cells[5]))};
    }
  }
  return out;
}

Costs RegistryCosts() {
  Costs out;
  for (Collective c : AllCollectives()) {
    for (const std::string& name : registry::AlgorithmsFor(c)) {
      const registry::AlgorithmCost* cost = registry::Cost(c, name);
      CostText v;
      if (cost != nullptr) {
        v = {std::string(cost->steps), std::string(cost->bytes), std::string(cost->Messages()),
             std::string(registry::CrossingName(cost->across))};
      }
      out[{std::string(CollectiveName(c)), name}] = v;
    }
  }
  return out;
}

// What differs between the registry and the catalogue, one line each (empty: they agree).
std::vector<std::string> Compare(const Costs& registry, const Costs& catalogue) {
  std::vector<std::string> problems;
  for (const auto& [key, cost] : registry) {
    const std::string what = absl::StrCat(key.first, " ", key.second);
    auto it = catalogue.find(key);
    if (it == catalogue.end()) {
      problems.push_back(absl::StrCat(what, ": registered, but docs/ALGORITHMS.md has no row for it"));
    } else if (it->second != cost) {
      const auto show = [](const CostText& t) {
        return absl::StrCat("`", t.steps, "` / `", t.bytes, "` / `", t.messages, "` / ", t.across);
      };
      problems.push_back(
          absl::StrCat(what, ": the registry's cost is ", show(cost), ", docs/ALGORITHMS.md says ", show(it->second)));
    }
  }
  for (const auto& [key, cost] : catalogue) {
    if (registry.count(key) == 0) {
      problems.push_back(absl::StrCat(key.first, " ", key.second, ": in docs/ALGORITHMS.md, not in the registry"));
    }
  }
  return problems;
}

std::string ReadCatalogue() {
  std::ifstream f(HCCL_TUNE_ALGORITHMS_MD);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(AlgorithmCatalogue, EveryRegisteredAlgorithmHasItsRegistryCostInTheCatalogue) {
  const std::string text = ReadCatalogue();
  ASSERT_FALSE(text.empty()) << "cannot read " << HCCL_TUNE_ALGORITHMS_MD;
  const Costs registry = RegistryCosts();
  ASSERT_GE(registry.size(), 30u);
  const Costs catalogue = ParseCatalogue(text);
  for (const std::string& p : Compare(registry, catalogue)) ADD_FAILURE() << p;
}

TEST(AlgorithmCatalogue, ANewAlgorithmAStaleRowAndAChangedCostAreEachReported) {
  const Costs registry = RegistryCosts();
  Costs catalogue = ParseCatalogue(ReadCatalogue());
  ASSERT_TRUE(Compare(registry, catalogue).empty());

  Costs with_new = registry;
  with_new[{"allreduce", "new_algorithm"}] = {"1", "n", "1", "every rank"};
  std::vector<std::string> p = Compare(with_new, catalogue);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("allreduce new_algorithm: registered, but docs/ALGORITHMS.md has no row"), std::string::npos);

  Costs stale = catalogue;
  stale[{"broadcast", "retired"}] = {"1", "n", "1", "every rank"};
  p = Compare(registry, stale);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("broadcast retired: in docs/ALGORITHMS.md, not in the registry"), std::string::npos);

  Costs changed = catalogue;
  changed[{"allreduce", "ring"}].bytes = "n";
  p = Compare(registry, changed);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("allreduce ring: the registry's cost is"), std::string::npos);

  Costs reclassed = catalogue;
  reclassed[{"allgather", "ring"}].across = "every rank";
  p = Compare(registry, reclassed);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("allgather ring: the registry's cost is `p-1` / `(p-1)*n/p` / `p-1` / one per node"),
            std::string::npos);
}

TEST(AlgorithmCatalogue, ParsesOnlyCostRowsUnderACollectiveHeading) {
  const Costs c = ParseCatalogue(
      "# Algorithms\n## allreduce\n| algorithm | steps | bytes | messages | across nodes | valid |\n|---|---|---|\n"
      "| `ring` | `2*(p-1)` | `2*(p-1)*n/p` | `2*(p-1)` | one per node | any p |\n| prose | `x` | `y` | `z` | a | b |\n"
      "## broadcast\n| `linear` | `min(1,p-1)` | `(p-1)*n` | `p-1` | every rank | |\n");
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c.at({"allreduce", "ring"}), (CostText{"2*(p-1)", "2*(p-1)*n/p", "2*(p-1)", "one per node"}));
  EXPECT_EQ(c.at({"broadcast", "linear"}).bytes, "(p-1)*n");
  EXPECT_EQ(c.at({"broadcast", "linear"}).messages, "p-1");
}

TEST(AlgorithmCost, EveryRegistryFormulaIsFiniteAndNotNegative) {
  for (const auto& [key, cost] : RegistryCosts()) {
    const std::string what = absl::StrCat(key.first, " ", key.second);
    ASSERT_FALSE(cost.steps.empty() || cost.bytes.empty()) << what << ": no cost in the registry";
    std::vector<model::Formula> formulas;
    for (const std::string& f : {cost.steps, cost.bytes, cost.messages}) {
      auto parsed = model::Formula::Parse(f);
      ASSERT_TRUE(parsed.ok()) << what << ": " << parsed.status();
      formulas.push_back(*parsed);
    }
    for (int p : {1, 2, 3, 4, 5, 7, 8, 9, 16, 64}) {
      for (double n : {0.0, 1024.0, 1048576.0}) {
        const int m = p % 2 == 0 ? 2 : 1;  // two nodes where the ranks split evenly
        const model::FormulaVars vars{static_cast<double>(p), n, static_cast<double>(p / m), static_cast<double>(m),
                                      1048576};
        for (const model::Formula& f : formulas) {
          const double r = f.Eval(vars);
          EXPECT_TRUE(std::isfinite(r) && r >= 0)
              << what << ": `" << f.text() << "` = " << r << " at p=" << p << " n=" << n;
        }
      }
    }
    // One rank sends nothing.
    EXPECT_EQ(formulas[1].Eval(model::FormulaVars{1, 4096, 1, 1, 1048576}), 0) << what << ": bytes at p=1";
    EXPECT_EQ(formulas[2].Eval(model::FormulaVars{1, 4096, 1, 1, 1048576}), 0) << what << ": messages at p=1";
  }
}

}  // namespace
}  // namespace hccltune
