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
#include "runtime/algorithms/registry.h"
#include "runtime/common/types.h"

#ifndef HCCL_TUNE_ALGORITHMS_MD
#error "HCCL_TUNE_ALGORITHMS_MD must name docs/ALGORITHMS.md"
#endif

namespace hccltune {
namespace {

// (collective, algorithm) -> (steps, bytes)
using Costs = std::map<std::pair<std::string, std::string>, std::pair<std::string, std::string>>;

// The rows of the catalogue: under a heading "## COLLECTIVE", every table row whose first three cells are
// `name`, `steps` and `bytes` in backquotes.
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
    if (cells.size() < 5) continue;
    std::vector<std::string> code;
    for (size_t i = 1; i <= 3; ++i) {
      absl::string_view cell = absl::StripAsciiWhitespace(cells[i]);
      if (cell.size() < 2 || cell.front() != '`' || cell.back() != '`') break;
      code.emplace_back(cell.substr(1, cell.size() - 2));
    }
    if (code.size() == 3) out[{collective, code[0]}] = {code[1], code[2]};
  }
  return out;
}

Costs RegistryCosts() {
  Costs out;
  for (Collective c : AllCollectives()) {
    for (const std::string& name : registry::AlgorithmsFor(c)) {
      const registry::AlgorithmCost* cost = registry::Cost(c, name);
      std::pair<std::string, std::string> v;
      if (cost != nullptr) v = {std::string(cost->steps), std::string(cost->bytes)};
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
      problems.push_back(absl::StrCat(what, ": the registry's cost is `", cost.first, "` / `", cost.second,
                                      "`, docs/ALGORITHMS.md says `", it->second.first, "` / `", it->second.second,
                                      "`"));
    }
  }
  for (const auto& [key, cost] : catalogue) {
    if (registry.count(key) == 0) {
      problems.push_back(absl::StrCat(key.first, " ", key.second, ": in docs/ALGORITHMS.md, not in the registry"));
    }
  }
  return problems;
}

// A recursive-descent evaluator for the grammar registry.h states. Sets `error` on anything it cannot read.
class Formula {
 public:
  Formula(absl::string_view text, std::map<char, double> vars) : s_(text), vars_(std::move(vars)) {}
  double Eval(std::string* error) {
    const double v = Sum();
    if (error_.empty() && pos_ != s_.size()) error_ = absl::StrCat("unexpected '", s_.substr(pos_), "'");
    *error = error_;
    return v;
  }

 private:
  double Sum() {
    double v = Product();
    while (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) {
      const char op = s_[pos_++];
      const double r = Product();
      v = op == '+' ? v + r : v - r;
    }
    return v;
  }
  double Product() {
    double v = Factor();
    while (pos_ < s_.size() && (s_[pos_] == '*' || s_[pos_] == '/')) {
      const char op = s_[pos_++];
      const double r = Factor();
      v = op == '*' ? v * r : v / r;
    }
    return v;
  }
  double Factor() {
    if (pos_ >= s_.size()) return Fail("expression ends early");
    const char ch = s_[pos_];
    if (ch == '-') {
      ++pos_;
      return -Factor();
    }
    if (ch == '(') {
      ++pos_;
      const double v = Sum();
      return Expect(')') ? v : 0;
    }
    if (absl::ascii_isdigit(ch)) {
      double v = 0;
      while (pos_ < s_.size() && absl::ascii_isdigit(s_[pos_])) v = v * 10 + (s_[pos_++] - '0');
      return v;
    }
    size_t end = pos_;
    while (end < s_.size() && absl::ascii_isalnum(s_[end])) ++end;
    const std::string word(s_.substr(pos_, end - pos_));
    pos_ = end;
    if (word.size() == 1 && vars_.count(word[0])) return vars_[word[0]];
    if (word.empty() || !Expect('(')) return Fail(absl::StrCat("unknown name '", word, "'"));
    std::vector<double> args = {Sum()};
    while (pos_ < s_.size() && s_[pos_] == ',') {
      ++pos_;
      args.push_back(Sum());
    }
    if (!Expect(')')) return 0;
    return Call(word, args);
  }
  double Call(const std::string& f, const std::vector<double>& a) {
    const auto pow2 = [](double x) { return x < 1 ? 0.0 : std::exp2(std::floor(std::log2(x))); };
    if (a.size() == 1 && f == "log2") return std::log2(a[0]);
    if (a.size() == 1 && f == "ceil") return std::ceil(a[0] - 1e-9);
    if (a.size() == 1 && f == "floor") return std::floor(a[0] + 1e-9);
    if (a.size() == 1 && f == "pow2") return pow2(a[0]);
    if (a.size() == 1 && f == "fold") return pow2(a[0]) == a[0] ? 0 : 1;
    if (a.size() == 2 && f == "min") return std::min(a[0], a[1]);
    if (a.size() == 2 && f == "max") return std::max(a[0], a[1]);
    return Fail(absl::StrCat("unknown function ", f, " of ", a.size(), " arguments"));
  }
  bool Expect(char ch) {
    if (pos_ < s_.size() && s_[pos_] == ch) {
      ++pos_;
      return true;
    }
    Fail(absl::StrCat("expected '", std::string(1, ch), "' at ", pos_));
    return false;
  }
  double Fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return 0;
  }

  absl::string_view s_;
  std::map<char, double> vars_;
  size_t pos_ = 0;
  std::string error_;
};

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
  with_new[{"allreduce", "new_algorithm"}] = {"1", "n"};
  std::vector<std::string> p = Compare(with_new, catalogue);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("allreduce new_algorithm: registered, but docs/ALGORITHMS.md has no row"), std::string::npos);

  Costs stale = catalogue;
  stale[{"broadcast", "retired"}] = {"1", "n"};
  p = Compare(registry, stale);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("broadcast retired: in docs/ALGORITHMS.md, not in the registry"), std::string::npos);

  Costs changed = catalogue;
  changed[{"allreduce", "ring"}].second = "n";
  p = Compare(registry, changed);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("allreduce ring: the registry's cost is"), std::string::npos);
}

TEST(AlgorithmCatalogue, ParsesOnlyCostRowsUnderACollectiveHeading) {
  const Costs c = ParseCatalogue(
      "# Algorithms\n## allreduce\n| algorithm | steps | bytes |\n|---|---|---|\n"
      "| `ring` | `2*(p-1)` | `2*(p-1)*n/p` | any p |\n| prose | `x` | `y` |\n## broadcast\n"
      "| `linear` | `min(1,p-1)` | `(p-1)*n` | |\n");
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c.at({"allreduce", "ring"}), std::make_pair(std::string("2*(p-1)"), std::string("2*(p-1)*n/p")));
  EXPECT_EQ(c.at({"broadcast", "linear"}).second, "(p-1)*n");
}

TEST(AlgorithmCost, FormulasEvaluateToWhatTheModelSays) {
  const std::map<char, double> v = {{'p', 6}, {'n', 1024}, {'l', 3}, {'m', 2}, {'c', 256}};
  const auto eval = [&](absl::string_view f) {
    std::string error;
    const double r = Formula(f, v).Eval(&error);
    EXPECT_EQ(error, "") << f;
    return r;
  };
  EXPECT_DOUBLE_EQ(eval("2*(p-1)*n/p"), 2 * 5 * 1024 / 6.0);
  EXPECT_DOUBLE_EQ(eval("floor(log2(p))+2*fold(p)"), 2 + 2);
  EXPECT_DOUBLE_EQ(eval("ceil(log2(p))"), 3);
  EXPECT_DOUBLE_EQ(eval("pow2(p)"), 4);
  EXPECT_DOUBLE_EQ(eval("max(0,p-2+ceil(n/c))"), 8);
  EXPECT_DOUBLE_EQ(eval("-min(1,p-1)"), -1);
  std::string error;
  Formula("2*q", v).Eval(&error);
  EXPECT_NE(error, "");
  Formula("log2(p", v).Eval(&error);
  EXPECT_NE(error, "");
  Formula("p)", v).Eval(&error);
  EXPECT_NE(error, "");
}

TEST(AlgorithmCost, EveryRegistryFormulaIsFiniteAndNotNegative) {
  for (const auto& [key, cost] : RegistryCosts()) {
    const std::string what = absl::StrCat(key.first, " ", key.second);
    ASSERT_FALSE(cost.first.empty() || cost.second.empty()) << what << ": no cost in the registry";
    for (int p : {1, 2, 3, 4, 5, 7, 8, 9, 16, 64}) {
      for (double n : {0.0, 1024.0, 1048576.0}) {
        const int m = p % 2 == 0 ? 2 : 1;  // two nodes where the ranks split evenly
        const std::map<char, double> vars = {{'p', p}, {'n', n}, {'l', p / m}, {'m', m}, {'c', 1048576}};
        for (const std::string& f : {cost.first, cost.second}) {
          std::string error;
          const double r = Formula(f, vars).Eval(&error);
          EXPECT_EQ(error, "") << what << ": `" << f << "`";
          EXPECT_TRUE(std::isfinite(r) && r >= 0) << what << ": `" << f << "` = " << r << " at p=" << p << " n=" << n;
        }
      }
      // One rank sends nothing.
      if (p == 1) {
        std::string error;
        const std::map<char, double> one = {{'p', 1}, {'n', 4096}, {'l', 1}, {'m', 1}, {'c', 1048576}};
        EXPECT_EQ(Formula(cost.second, one).Eval(&error), 0) << what << ": bytes at p=1";
      }
    }
  }
}

}  // namespace
}  // namespace hccltune
