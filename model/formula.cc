// Recursive descent over the grammar formula.h states: sum := product (('+'|'-') product)*,
// product := factor (('*'|'/') factor)*, factor := '-' factor | '(' sum ')' | integer | variable | name '(' args ')'.
#include "model/formula.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

namespace hccltune::model {

class Formula::Parser {
 public:
  Parser(absl::string_view s, std::vector<Node>* nodes) : s_(s), nodes_(nodes) {}

  absl::StatusOr<int> Whole() {
    const int root = Sum();
    if (error_.empty() && pos_ != s_.size()) Fail(absl::StrCat("unexpected '", s_.substr(pos_), "'"));
    if (!error_.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("formula '", s_, "': ", error_, " at ", error_pos_));
    }
    return root;
  }

 private:
  int Add(Op op, double value, int a = -1, int b = -1) {
    nodes_->push_back(Node{op, value, a, b});
    return static_cast<int>(nodes_->size()) - 1;
  }
  int Sum() {
    int v = Product();
    while (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) {
      const Op op = s_[pos_++] == '+' ? Op::kAdd : Op::kSub;
      v = Add(op, 0, v, Product());
    }
    return v;
  }
  int Product() {
    int v = Factor();
    while (pos_ < s_.size() && (s_[pos_] == '*' || s_[pos_] == '/')) {
      const Op op = s_[pos_++] == '*' ? Op::kMul : Op::kDiv;
      v = Add(op, 0, v, Factor());
    }
    return v;
  }
  int Factor() {
    if (pos_ >= s_.size()) return Fail("the expression ends early");
    const char ch = s_[pos_];
    if (ch == '-') {
      ++pos_;
      return Add(Op::kNeg, 0, Factor());
    }
    if (ch == '(') {
      ++pos_;
      const int v = Sum();
      Expect(')');
      return v;
    }
    if (absl::ascii_isdigit(ch)) {
      double v = 0;
      while (pos_ < s_.size() && absl::ascii_isdigit(s_[pos_])) v = v * 10 + (s_[pos_++] - '0');
      return Add(Op::kNum, v);
    }
    const size_t start = pos_;
    while (pos_ < s_.size() && absl::ascii_isalnum(s_[pos_])) ++pos_;
    const absl::string_view word = s_.substr(start, pos_ - start);
    static constexpr absl::string_view kVars = "pnlmc";
    if (word.size() == 1 && kVars.find(word[0]) != absl::string_view::npos) {
      return Add(Op::kVar, static_cast<double>(kVars.find(word[0])));
    }
    if (word.empty() || pos_ >= s_.size() || s_[pos_] != '(') {
      pos_ = start;
      return Fail(absl::StrCat("unknown name '", word, "'"));
    }
    return Call(word);
  }
  int Call(absl::string_view f) {
    static const std::pair<absl::string_view, Op> kOne[] = {
        {"log2", Op::kLog2}, {"ceil", Op::kCeil}, {"floor", Op::kFloor}, {"pow2", Op::kPow2}, {"fold", Op::kFold}};
    static const std::pair<absl::string_view, Op> kTwo[] = {{"min", Op::kMin}, {"max", Op::kMax}};
    ++pos_;  // '('
    const int a = Sum();
    int b = -1;
    if (pos_ < s_.size() && s_[pos_] == ',') {
      ++pos_;
      b = Sum();
    }
    Expect(')');
    for (const auto& [name, op] : b < 0 ? absl::MakeConstSpan(kOne) : absl::MakeConstSpan(kTwo)) {
      if (name == f) return Add(op, 0, a, b);
    }
    return Fail(absl::StrCat("unknown function ", f, " of ", b < 0 ? 1 : 2, " arguments"));
  }
  void Expect(char ch) {
    if (pos_ < s_.size() && s_[pos_] == ch) {
      ++pos_;
      return;
    }
    Fail(absl::StrCat("expected '", std::string(1, ch), "'"));
  }
  int Fail(std::string why) {
    if (error_.empty()) {
      error_ = std::move(why);
      error_pos_ = pos_;
    }
    return Add(Op::kNum, 0);
  }

  absl::string_view s_;
  std::vector<Node>* nodes_;
  size_t pos_ = 0;
  std::string error_;
  size_t error_pos_ = 0;
};

absl::StatusOr<Formula> Formula::Parse(absl::string_view text) {
  Formula f;
  f.text_ = std::string(text);
  Parser parser(f.text_, &f.nodes_);
  auto root = parser.Whole();
  if (!root.ok()) return root.status();
  f.root_ = *root;
  return f;
}

double Formula::Eval(const FormulaVars& v) const { return root_ < 0 ? 0 : EvalNode(root_, v); }

double Formula::EvalNode(int i, const FormulaVars& v) const {
  const Node& node = nodes_[static_cast<size_t>(i)];
  const auto arg = [&](int k) { return EvalNode(k, v); };
  const auto pow2 = [](double x) { return x < 1 ? 0.0 : std::exp2(std::floor(std::log2(x) + 1e-12)); };
  switch (node.op) {
    case Op::kNum: return node.value;
    case Op::kVar: {
      const double vars[] = {v.p, v.n, v.l, v.m, v.c};
      return vars[static_cast<size_t>(node.value)];
    }
    case Op::kNeg: return -arg(node.a);
    case Op::kAdd: return arg(node.a) + arg(node.b);
    case Op::kSub: return arg(node.a) - arg(node.b);
    case Op::kMul: return arg(node.a) * arg(node.b);
    case Op::kDiv: return arg(node.a) / arg(node.b);
    case Op::kLog2: return std::log2(arg(node.a));
    case Op::kCeil: return std::ceil(arg(node.a) - 1e-9);
    case Op::kFloor: return std::floor(arg(node.a) + 1e-9);
    case Op::kPow2: return pow2(arg(node.a));
    case Op::kFold: {
      const double x = arg(node.a);
      return pow2(x) == x ? 0 : 1;
    }
    case Op::kMin: return std::min(arg(node.a), arg(node.b));
    case Op::kMax: return std::max(arg(node.a), arg(node.b));
  }
  return 0;
}

}  // namespace hccltune::model
