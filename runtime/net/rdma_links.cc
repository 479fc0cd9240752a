#include "runtime/net/rdma_links.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace hccltune {
namespace {

bool Reaches(const std::vector<InterLink>& links, const std::string& link, const std::string& network) {
  return std::any_of(links.begin(), links.end(),
                     [&](const InterLink& l) { return l.link == link && l.network == network; });
}

std::string NodeHas(const RdmaPeer& p, const std::string& link) {
  if (p.ports == 0) return "no RDMA device";
  std::string nets;
  for (const InterLink& l : LinksOfLayer(p.links, link)) absl::StrAppend(&nets, nets.empty() ? "" : ", ", l.network);
  return absl::StrCat(p.ports, " RDMA port(s); usable ", RdmaLinkLayerName(link),
                      " networks: ", nets.empty() ? "none" : nets);
}

}  // namespace

std::string RdmaLinkLayerName(const std::string& link) { return link == "ib" ? "InfiniBand" : "RoCE"; }

std::vector<InterLink> LinksOfLayer(const std::vector<InterLink>& links, const std::string& link) {
  std::vector<InterLink> out;
  for (const InterLink& l : links) {
    if (link.empty() || l.link == link) out.push_back(l);
  }
  return out;
}

std::optional<InterLink> PreferredRdmaLink(const std::vector<InterLink>& mine, const std::vector<InterLink>& theirs,
                                           const std::string& link) {
  std::optional<InterLink> best;
  auto key = [](const InterLink& l) { return std::make_tuple(-l.gbps, l.link != "ib", l.network); };
  for (const InterLink& m : mine) {
    if (!link.empty() && m.link != link) continue;
    for (const InterLink& t : theirs) {
      if (m.link != t.link || m.network != t.network) continue;
      const InterLink shared{m.link, m.network, std::min(m.gbps, t.gbps)};
      if (!best || key(shared) < key(*best)) best = shared;
    }
  }
  return best;
}

absl::Status CheckRdmaLink(const std::vector<RdmaPeer>& peers, const std::string& link, const std::string& network) {
  const std::string name = network.empty() ? link : absl::StrCat(link, "@", network);
  for (size_t r = 0; r < peers.size(); ++r) {
    const RdmaPeer& p = peers[r];
    if (!p.present) {
      return absl::InvalidArgumentError(absl::StrCat("link=", name, ": rank ", r, " runs a build without RDMA links"));
    }
    const bool ok = network.empty() ? !LinksOfLayer(p.links, link).empty() : Reaches(p.links, link, network);
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("link=", name, ": rank ", r, " has no active ", RdmaLinkLayerName(link), " port",
                       network.empty() ? "" : absl::StrCat(" in ", network), " (its node: ", NodeHas(p, link), ")"));
    }
  }
  if (!network.empty()) return absl::OkStatus();
  // Plain roce / ib: every two ranks need a network of the link layer in common. Ranks of one node publish the
  // same list, so each distinct list is checked once against every other.
  std::set<std::vector<std::pair<std::string, std::string>>> seen;
  std::vector<size_t> firsts;
  for (size_t r = 0; r < peers.size(); ++r) {
    std::vector<std::pair<std::string, std::string>> k;
    for (const InterLink& l : LinksOfLayer(peers[r].links, link)) k.emplace_back(l.link, l.network);
    if (seen.insert(k).second) firsts.push_back(r);
  }
  for (size_t a = 0; a < firsts.size(); ++a) {
    for (size_t b = a + 1; b < firsts.size(); ++b) {
      if (!PreferredRdmaLink(peers[firsts[a]].links, peers[firsts[b]].links, link)) {
        return absl::InvalidArgumentError(absl::StrCat("link=", name, ": ranks ", firsts[a], " and ", firsts[b],
                                                       " have no ", RdmaLinkLayerName(link), " network in common"));
      }
    }
  }
  return absl::OkStatus();
}

std::vector<std::pair<std::string, std::string>> UcxRdmaSettings(const RdmaChoice& choice, const RdmaEnv& env) {
  std::vector<std::pair<std::string, std::string>> out = {{"NET_DEVICES", choice.net_device}, {"TLS", "ib"}};
  const int gid = env.gid_index.value_or(choice.gid_index);
  if (gid >= 0) out.emplace_back("IB_GID_INDEX", absl::StrCat(gid));
  if (env.tc) out.emplace_back("IB_TRAFFIC_CLASS", absl::StrCat(*env.tc));
  if (env.sl) out.emplace_back("IB_SL", absl::StrCat(*env.sl));
  return out;
}

}  // namespace hccltune
