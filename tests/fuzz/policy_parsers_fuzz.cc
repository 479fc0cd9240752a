#include "tests/fuzz/policy_parsers_fuzz.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "policies/rules.h"

namespace hccltune::fuzz {
namespace {

// "VAR='TEXT' at N: ..." with 0 <= N <= |TEXT|.
absl::Status CheckPositioned(absl::string_view var, absl::string_view text, const absl::Status& s) {
  const std::string prefix = absl::StrCat(var, "='", text, "' at ");
  absl::string_view msg = s.message();
  if (!absl::StartsWith(msg, prefix)) {
    return absl::InternalError(absl::StrCat(var, " error without a position: ", msg));
  }
  msg.remove_prefix(prefix.size());
  const size_t colon = msg.find(':');
  size_t pos = 0;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(msg.substr(0, colon), &pos) || pos > text.size()) {
    return absl::InternalError(absl::StrCat(var, " error with a bad position: ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status CheckRoundTrip(const policies::RuleSet& set) {
  for (Collective c : AllCollectives()) {
    for (const policies::Rule& r : set.RulesFor(c)) {
      const std::string text = r.config.ToString();
      auto back = Configuration::Parse(text);
      if (!back.ok())
        return absl::InternalError(absl::StrCat("canonical '", text, "' does not parse: ", back.status().message()));
      if (back->ToString() != text) {
        return absl::InternalError(absl::StrCat("canonical '", text, "' parses to '", back->ToString(), "'"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FuzzPolicyParsers(const uint8_t* data, size_t size) {
  if (size == 0) return absl::OkStatus();
  const absl::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0: {
      auto set = policies::ParseTuneAlgo(text);
      return set.ok() ? CheckRoundTrip(*set) : CheckPositioned("HCCL_TUNE_ALGO", text, set.status());
    }
    case 1: {
      auto set = policies::ParseRuleTable(text, "fuzz");
      if (set.ok()) return CheckRoundTrip(*set);
      if (!absl::StartsWith(set.status().message(), "fuzz line ")) {
        return absl::InternalError(absl::StrCat("rule table error without a line: ", set.status().message()));
      }
      return absl::OkStatus();
    }
    default: {
      auto algo = policies::ParseHcclAlgo(text);
      return algo.ok() ? absl::OkStatus()
                       : CheckPositioned("HCCL_ALGO", absl::StripAsciiWhitespace(text), algo.status());
    }
  }
}

}  // namespace hccltune::fuzz
