#include "links/rdma_facts.h"

#include "absl/strings/str_cat.h"

namespace hccltune {

RdmaFacts ReadRdmaFacts(VerbsApi& api, const std::vector<InterfaceAddress>& interfaces, const HcaList& hca,
                        const std::string& device_ip) {
  RdmaFacts f;
  f.hca = hca;
  f.device_ip = device_ip;
  auto ports = ListRdmaPorts(api, interfaces);
  if (ports.ok()) {
    f.ports = *std::move(ports);
  } else {
    f.error = std::string(ports.status().message());
  }
  return f;
}

std::vector<std::string> RdmaFactsLines(const RdmaFacts& facts) {
  if (!facts.error.empty()) return {absl::StrCat("RDMA ports not read: ", facts.error)};
  std::vector<std::string> lines = DescribeRdmaPorts(facts.ports);
  for (size_t k = 0; k < facts.ports.size(); ++k) {
    if (!facts.hca.Allows(facts.ports[k].device, facts.ports[k].port)) {
      absl::StrAppend(&lines[k], " (left out by HCCL_TUNE_IB_HCA=", facts.hca.ToString(), ")");
    }
  }
  if (!facts.ports.empty() && !facts.device_ip.empty()) {
    auto port = PortForAddress(facts.ports, facts.device_ip);
    lines.push_back(port.ok() ? absl::StrCat("rank table device_ip ", facts.device_ip, " is on ", *port)
                              : absl::StrCat("rank table mismatch: ", port.status().message()));
  }
  return lines;
}

nlohmann::json RdmaFactsJson(const RdmaFacts& facts) {
  nlohmann::json ports = nlohmann::json::array();
  for (const RdmaPort& p : facts.ports) {
    nlohmann::json nets = nlohmann::json::array();
    for (const RdmaAddress& a : p.addresses) {
      nets.push_back({{"subnet", a.subnet}, {"address", a.address}, {"netdev", a.netdev}, {"gid_index", a.gid_index}});
    }
    ports.push_back({{"device", p.device},
                     {"port", p.port},
                     {"state", p.state},
                     {"link", p.link},
                     {"lanes", p.lanes},
                     {"lane_gbps", p.lane_gbps},
                     {"gbps", p.gbps},
                     {"mtu", p.mtu},
                     {"numa_node", p.numa_node},
                     {"allowed", facts.hca.Allows(p.device, p.port)},
                     {"networks", nets}});
  }
  nlohmann::json j = {{"ports", ports}, {"summary", RdmaFactsLines(facts)}};
  if (!facts.ports.empty() && !facts.device_ip.empty()) {
    j["device_ip"] = facts.device_ip;
    auto port = PortForAddress(facts.ports, facts.device_ip);
    if (port.ok()) {
      j["device_ip_port"] = *port;
    } else {
      j["device_ip_error"] = std::string(port.status().message());
    }
  }
  return j;
}

}  // namespace hccltune
