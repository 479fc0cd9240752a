#include "runtime/topology/topology.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace hccltune {

std::string LocalNodeId(const Environment& env) {
  if (!env.node_id.empty()) return env.node_id;
  std::string boot;
  {
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::getline(f, boot);
  }
  char buf[256] = {};
  const ssize_t n = ::readlink("/proc/self/ns/net", buf, sizeof(buf) - 1);
  const std::string netns = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("net:[?]");
  return absl::StrCat(absl::StripAsciiWhitespace(boot), "/", netns);
}

std::vector<std::string> InterNodeNetworks(const std::vector<std::vector<NodeAddress>>& per_node) {
  if (per_node.size() < 2) return {};
  // subnet -> address -> the nodes that have it
  std::map<std::string, std::map<std::string, std::set<size_t>>> seen;
  for (size_t n = 0; n < per_node.size(); ++n) {
    for (const NodeAddress& a : per_node[n]) seen[a.subnet][a.address].insert(n);
  }
  std::vector<std::string> out;
  for (const auto& [subnet, addresses] : seen) {
    std::set<size_t> nodes;
    bool shared = false;
    for (const auto& [address, holders] : addresses) {
      shared = shared || holders.size() > 1;
      nodes.insert(holders.begin(), holders.end());
    }
    if (!shared && nodes.size() == per_node.size()) out.push_back(subnet);
  }
  return out;  // std::map order: sorted
}

std::string TopologyJson(const TopologyFacts& facts) {
  // nlohmann::json's default object type is a std::map: keys come out sorted; dump() has no spaces.
  nlohmann::json j;
  j["format"] = 1;
  j["nodes"] = facts.ranks_per_node.size();
  std::vector<int> rpn = facts.ranks_per_node;
  std::sort(rpn.begin(), rpn.end());
  j["ranks_per_node"] = rpn;
  std::vector<std::string> intra = facts.intra_links;
  std::sort(intra.begin(), intra.end());
  j["intra"] = intra;
  std::vector<std::string> nets = facts.inter_networks;
  std::sort(nets.begin(), nets.end());
  j["inter"] = nlohmann::json::array();
  for (const auto& n : nets) j["inter"].push_back({{"link", "tcp"}, {"network", n}});
  j["release"] = facts.release;
  return j.dump();
}

std::string Sha256Hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 15]);
  }
  return out;
}

std::string Fingerprint(const std::string& json) { return Sha256Hex(json).substr(0, 16); }

}  // namespace hccltune
