// A cost formula of the registry (runtime/algorithms/registry.h, AlgorithmCost): an expression over
//   p  ranks, n  the call's bytes, l  ranks per node, m  nodes, c  the configuration's chunk bytes,
// with integers, + - * / (real division), parentheses and log2, ceil, floor, min, max, pow2 (the largest power of
// two <= x) and fold (1 when x is not a power of two, else 0). Parsed once, evaluated many times.
//
// Thread-safety: a parsed formula is immutable; Eval may run concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hccltune::model {

// The values of a formula's variables.
struct FormulaVars {
  double p = 1;
  double n = 0;
  double l = 1;
  double m = 1;
  double c = 512 * 1024;
};

class Formula {
 public:
  // An error names the text and what it could not read ("formula '2*q': unknown name 'q' at 2").
  static absl::StatusOr<Formula> Parse(absl::string_view text);
  double Eval(const FormulaVars& v) const;
  const std::string& text() const { return text_; }

 private:
  enum class Op : uint8_t { kNum, kVar, kNeg, kAdd, kSub, kMul, kDiv, kLog2, kCeil, kFloor, kPow2, kFold, kMin, kMax };
  struct Node {
    Op op;
    double value = 0;  // kNum: the number; kVar: the variable's index (p n l m c)
    int a = -1;        // operands: node indices
    int b = -1;
  };
  class Parser;
  double EvalNode(int i, const FormulaVars& v) const;

  std::string text_;
  std::vector<Node> nodes_;
  int root_ = -1;
};

}  // namespace hccltune::model
