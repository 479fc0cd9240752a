// The fuzz entry point for the policy parsers (policies/rules.h): ParseTuneAlgo, ParseRuleTable, ParseHcclAlgo.
// The first input byte picks the parser (byte % 3: 0 HCCL_TUNE_ALGO, 1 rule table, 2 HCCL_ALGO); the rest is
// the text. Besides "no crash, no sanitizer report", it checks the contract: every error names its position
// (HCCL_TUNE_ALGO/HCCL_ALGO: "VAR='TEXT' at N: ..." with N inside the text; rule table: "SOURCE line N: ..."),
// and every accepted configuration prints to a canonical form that parses back to itself.
// Returns a non-OK status describing a broken contract. Used by the libFuzzer target (policy_parsers_fuzzer,
// built with -DHCCL_TUNE_FUZZ=ON and clang) and by the plain ctest policy_parsers_fuzz_test.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace hccltune::fuzz {

absl::Status FuzzPolicyParsers(const uint8_t* data, size_t size);

}  // namespace hccltune::fuzz
