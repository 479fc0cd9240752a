// libFuzzer target of one parser of tests/fuzz/parser_fuzz.h, chosen at build time (HCCL_TUNE_FUZZ_FUNCTION);
// -DHCCL_TUNE_FUZZ=ON with clang builds one binary per parser: build/tests/<name>_fuzzer tests/fuzz/corpus/<name>
// (FuzzPolicyParsers: policy_parsers_fuzzer over tests/fuzz/corpus/policies).
#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/parser_fuzz.h"
#include "tests/fuzz/policy_parsers_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::Status s = hccltune::fuzz::HCCL_TUNE_FUZZ_FUNCTION(data, size);
  if (!s.ok()) {
    std::fprintf(stderr, "contract broken: %s\n", s.ToString().c_str());
    std::abort();
  }
  return 0;
}
