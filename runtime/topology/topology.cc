#include "runtime/topology/topology.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

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

std::vector<InterLink> InterNodeRdmaLinks(const std::vector<std::vector<InterLink>>& per_node) {
  if (per_node.size() < 2) return {};
  // (link, subnet) -> node -> that node's fastest port on it
  std::map<std::pair<std::string, std::string>, std::map<size_t, double>> seen;
  for (size_t n = 0; n < per_node.size(); ++n) {
    for (const InterLink& p : per_node[n]) {
      double& best = seen[{p.link, p.network}][n];
      best = std::max(best, p.gbps);
    }
  }
  std::vector<InterLink> out;
  for (const auto& [key, nodes] : seen) {
    if (nodes.size() != per_node.size()) continue;
    double slowest = nodes.begin()->second;
    for (const auto& [node, gbps] : nodes) slowest = std::min(slowest, gbps);
    out.push_back(InterLink{key.first, key.second, slowest});
  }
  return out;  // std::map order: sorted by link, then subnet
}

std::string TopologyJson(const TopologyFacts& facts) {
  TopologyDescription d;
  d.ranks_per_node = facts.ranks_per_node;
  d.intra = facts.intra_links;
  for (const std::string& n : facts.inter_networks) d.inter.push_back(InterLink{"tcp", n, 0});
  d.inter.insert(d.inter.end(), facts.rdma_links.begin(), facts.rdma_links.end());
  d.release = facts.release;
  d.runtime = facts.runtime;
  return CanonicalTopologyJson(d);
}

}  // namespace hccltune
