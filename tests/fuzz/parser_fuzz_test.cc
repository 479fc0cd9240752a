// The fuzz entry points of tests/fuzz/parser_fuzz.h with the normal compiler, so every build exercises them: each
// target's seed corpus (tests/fuzz/corpus/<target>), then inputs mutated from it with a fixed-seed generator (bytes
// flipped, tokens of the format inserted, ranges deleted or duplicated, seeds spliced). No input may crash or
// break a contract. The libFuzzer targets (-DHCCL_TUNE_FUZZ=ON) search much further; docs/RELIABILITY.md.
#include "tests/fuzz/parser_fuzz.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace hccltune::fuzz {
namespace {

struct Target {
  const char* name;
  FuzzFunction function;
  int mutations;
  std::vector<std::string> tokens;
};

std::vector<std::string> Seeds(const std::string& name) {
  std::vector<std::string> out;
  for (const auto& f : std::filesystem::directory_iterator(std::string(HCCL_TUNE_FUZZ_CORPORA) + "/" + name)) {
    std::ifstream in(f.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    out.push_back(ss.str());
  }
  return out;
}

std::string Mutate(std::string in, const std::vector<std::string>& seeds, const std::vector<std::string>& tokens,
                   std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  const int edits = 1 + static_cast<int>(pick(4));
  for (int e = 0; e < edits; ++e) {
    switch (pick(5)) {
      case 0:
        if (!in.empty()) in[pick(in.size())] = static_cast<char>(rng());
        break;
      case 1:
        if (!tokens.empty()) in.insert(pick(in.size() + 1), tokens[pick(tokens.size())]);
        break;
      case 2:
        if (!in.empty()) {
          const size_t at = pick(in.size());
          in.erase(at, pick(in.size() - at + 1));
        }
        break;
      case 3:
        if (!in.empty()) {
          const size_t at = pick(in.size());
          in.insert(pick(in.size() + 1), in.substr(at, pick(64)));
        }
        break;
      default: {
        const std::string& other = seeds[pick(seeds.size())];
        in = in.substr(0, pick(in.size() + 1)) + other.substr(pick(other.size() + 1));
      }
    }
  }
  return in;
}

class ParserFuzz : public ::testing::TestWithParam<Target> {};

TEST_P(ParserFuzz, SeedsAndMutationsKeepTheContract) {
  const Target& t = GetParam();
  const std::vector<std::string> seeds = Seeds(t.name);
  ASSERT_GE(seeds.size(), 3u) << "tests/fuzz/corpus/" << t.name;
  auto run = [&](const std::string& input) {
    return t.function(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  };
  for (const std::string& s : seeds) {
    absl::Status st = run(s);
    ASSERT_TRUE(st.ok()) << st << " for a seed of " << s.size() << " bytes";
  }
  std::mt19937_64 rng(20261202);
  for (int i = 0; i < t.mutations; ++i) {
    const std::string input = Mutate(seeds[rng() % seeds.size()], seeds, t.tokens, rng);
    absl::Status st = run(input);
    ASSERT_TRUE(st.ok()) << st << " for mutation " << i << " (" << input.size() << " bytes)";
  }
}

const std::string kU32Max("\xff\xff\xff\xff", 4);

INSTANTIATE_TEST_SUITE_P(
    Parsers, ParserFuzz,
    ::testing::Values(
        Target{"store_protocol",
               FuzzStoreProtocol,
               5000,
               {std::string("\x01", 1), std::string("\x03", 1), kU32Max, std::string("\x00\x10\x00\x00", 4), "-1",
                "9223372036854775807"}},
        Target{"wire", FuzzWire, 5000, {kU32Max, std::string("NUTH"), std::string("PCTH"), std::string(16, '\0')}},
        Target{"rank_table",
               FuzzRankTable,
               3000,
               {"\"rank_id\"", "\"device_id\"", "\"server_id\"", "\"65536\"", "\"-1\"", "[", "]", "{", "}", ",",
                "\"10.0.0.1\"", "\"1048576\"", "\"99999999999\""}},
        Target{"table_file",
               FuzzTableFile,
               1500,
               {"\"entries\"", "\"version\"", "9007199254740993", "-1", "1e400", "\"0-\"", "\"1G-\"", "[", "]", "{",
                "}", ",", "\"ring(chunk=1M)\"", "null"}},
        Target{"daemon_config",
               FuzzDaemonConfig,
               3000,
               {"=", "\n", "#", "max_versions", "online_window", "mini_sweep", "on", "off", "1e9", "-5",
                "99999999999999999999", "socket", "db"}},
        Target{"handlers", FuzzHandlers, 1500, {std::string("\x0a", 1), std::string("\x12", 1), kU32Max}}),
    [](const ::testing::TestParamInfo<Target>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace hccltune::fuzz
