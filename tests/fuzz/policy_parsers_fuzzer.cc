// libFuzzer target (clang, -DHCCL_TUNE_FUZZ=ON): build/tests/policy_parsers_fuzzer tests/fuzz/corpus/policies
#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/policy_parsers_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::Status s = hccltune::fuzz::FuzzPolicyParsers(data, size);
  if (!s.ok()) {
    std::fprintf(stderr, "contract broken: %s\n", s.ToString().c_str());
    std::abort();
  }
  return 0;
}
