// FlightRecorder::LinksJson: a dump's "interfaces", "links_used" and "rank_table" (docs/TROUBLESHOOTING.md, The
// flight recorder). links_used groups this rank's pairs by link kind and local interface: the bytes it sent
// there (all, and to peers on other nodes), the peers, their nodes and addresses. Each interface's speed is the
// kernel's (/sys/class/net/IF/speed, Mbit/s; null when the driver does not say).
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "runtime/api/flight_recorder.h"
#include "runtime/net/interfaces.h"

namespace hccltune {
namespace {

nlohmann::json SpeedMbps(const std::string& ifname) {
  if (ifname.empty() || ifname.find('/') != std::string::npos) return nullptr;
  std::ifstream in("/sys/class/net/" + ifname + "/speed");
  long mbps = -1;
  if (!(in >> mbps) || mbps <= 0) return nullptr;
  return mbps;
}

// The interface a link leaves through: its local address's, else (ucx: "ucx tcp/slow0") the device UCX named,
// else the interface in the configuration's network.
const InterfaceAddress* InterfaceOf(const LinkUsage::Link& l, const std::vector<InterfaceAddress>& ifs) {
  for (const InterfaceAddress& a : ifs) {
    if (!l.local_address.empty() && a.address == l.local_address) return &a;
  }
  for (const InterfaceAddress& a : ifs) {
    if (l.local_address.empty() && l.describe.find("/" + a.name) != std::string::npos) return &a;
  }
  for (const InterfaceAddress& a : ifs) {
    if (l.local_address.empty() && !l.network.empty() && a.Subnet() == l.network) return &a;
  }
  return nullptr;
}

struct Group {
  std::string address, subnet;
  uint64_t bytes = 0, cross_node_bytes = 0;
  std::set<int> peers, nodes;
  std::set<std::string> peer_addresses;
};

}  // namespace

std::string FlightRecorder::LinksJson() const {
  const std::vector<InterfaceAddress> ifs = ListInterfaces();
  nlohmann::json interfaces = nlohmann::json::array();
  for (const InterfaceAddress& a : ifs) {
    interfaces.push_back(
        {{"name", a.name}, {"address", a.address}, {"subnet", a.Subnet()}, {"speed_mbps", SpeedMbps(a.name)}});
  }
  std::map<std::pair<std::string, std::string>, Group> groups;  // (kind, interface)
  for (const LinkUsage::Link& l : links_.Snapshot()) {
    const InterfaceAddress* a = l.kind == "shm" ? nullptr : InterfaceOf(l, ifs);
    Group& g = groups[{l.kind, a != nullptr ? a->name : ""}];
    if (a != nullptr) g.address = a->address, g.subnet = a->Subnet();
    if (a == nullptr && g.subnet.empty()) g.subnet = l.network;
    g.bytes += l.bytes_sent;
    if (l.cross_node) g.cross_node_bytes += l.bytes_sent;
    g.peers.insert(l.peer);
    if (l.peer_node >= 0) g.nodes.insert(l.peer_node);
    if (!l.peer_address.empty()) g.peer_addresses.insert(l.peer_address);
  }
  nlohmann::json used = nlohmann::json::array();
  for (const auto& [key, g] : groups) {
    used.push_back({{"kind", key.first},
                    {"interface", key.second},
                    {"address", g.address},
                    {"subnet", g.subnet},
                    {"speed_mbps", SpeedMbps(key.second)},
                    {"bytes_sent", g.bytes},
                    {"cross_node_bytes", g.cross_node_bytes},
                    {"peers", g.peers},
                    {"peer_nodes", g.nodes},
                    {"peer_addresses", g.peer_addresses}});
  }
  nlohmann::json table = nullptr;
  if (!device_ip_.empty()) table = {{"device_ip", device_ip_}, {"host_nic_ip", host_nic_ip_}};
  return ",\"interfaces\":" + interfaces.dump() + ",\"links_used\":" + used.dump() +
         ",\"links_dropped\":" + std::to_string(links_.dropped()) + ",\"rank_table\":" + table.dump();
}

}  // namespace hccltune
