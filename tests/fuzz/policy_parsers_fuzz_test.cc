// The fuzz entry point of tests/fuzz/policy_parsers_fuzz.h with the normal compiler, so CI always exercises it:
// every seed of tests/fuzz/corpus/policies, then 5,000 inputs mutated from them with a fixed-seed generator
// (byte flips, grammar tokens inserted, ranges deleted, seeds spliced). No input may crash or break the
// contract; both accepted and refused inputs must occur (the mutations reach both sides of the parsers).
#include "tests/fuzz/policy_parsers_fuzz.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "policies/rules.h"

namespace hccltune::fuzz {
namespace {

std::vector<std::string> Seeds() {
  std::vector<std::string> out;
  for (const auto& f : std::filesystem::directory_iterator(HCCL_TUNE_FUZZ_CORPUS)) {
    std::ifstream in(f.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    out.push_back(ss.str());
  }
  return out;
}

absl::Status FuzzOne(const std::string& input) {
  return FuzzPolicyParsers(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

TEST(PolicyParsersFuzz, SeedCorpus) {
  auto seeds = Seeds();
  ASSERT_GE(seeds.size(), 10u);
  for (const std::string& s : seeds) {
    // Every seed through every parser.
    for (char sel : {'0', '1', '2'}) {
      std::string in = s;
      if (!in.empty()) in[0] = sel;
      absl::Status st = FuzzOne(in);
      EXPECT_TRUE(st.ok()) << st << " for input '" << in << "'";
    }
  }
}

TEST(PolicyParsersFuzz, MutatedInputs) {
  const std::vector<std::string> tokens = {"allreduce",
                                           "allgather",
                                           "broadcast",
                                           ":",
                                           "=",
                                           "-",
                                           ",",
                                           "/",
                                           "(",
                                           ")",
                                           "K",
                                           "M",
                                           "G",
                                           "64K",
                                           "0-",
                                           "ring",
                                           "one_shot",
                                           "chunk=",
                                           "channels=",
                                           "link=",
                                           "tcp@10.0.0.0/8",
                                           "shm",
                                           "hierarchical(intra=",
                                           "inter=",
                                           "level0:",
                                           "level1:",
                                           ";",
                                           "NA",
                                           "H-D_R",
                                           "NHR",
                                           "pipeline",
                                           "\n",
                                           "#",
                                           " ",
                                           "2-8",
                                           "65-",
                                           "99999999999999999999",
                                           "\xff"};
  auto seeds = Seeds();
  ASSERT_FALSE(seeds.empty());
  std::mt19937_64 rng(20261129);
  auto pick = [&](size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng() % n); };
  int accepted = 0, refused = 0;
  for (int i = 0; i < 5000; ++i) {
    std::string in = seeds[pick(seeds.size())];
    const int edits = 1 + static_cast<int>(pick(4));
    for (int e = 0; e < edits; ++e) {
      switch (pick(4)) {
        case 0:
          if (!in.empty()) in[pick(in.size())] = static_cast<char>(rng());
          break;
        case 1: in.insert(pick(in.size() + 1), tokens[pick(tokens.size())]); break;
        case 2:
          if (in.size() > 1) {
            const size_t at = 1 + pick(in.size() - 1);
            in.erase(at, pick(in.size() - at + 1));
          }
          break;
        default: {
          const std::string& other = seeds[pick(seeds.size())];
          in += other.substr(pick(other.size()));
        }
      }
    }
    absl::Status st = FuzzOne(in);
    ASSERT_TRUE(st.ok()) << st << " for input '" << in << "'";
    const std::string text = in.size() > 1 ? in.substr(1) : "";
    (policies::ParseTuneAlgo(text).ok() ? accepted : refused) += 1;
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace hccltune::fuzz
