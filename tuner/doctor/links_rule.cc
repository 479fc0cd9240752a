// (c) links: the networks the ranks' cross-node bytes went over against the fastest network between the nodes,
// and the rank table's device_ip/host_nic_ip against the interfaces actually used.
//
// Algorithm. The candidate networks are the subnets every rank's node has an interface in (the dumps'
// "interfaces", loopback left out). Each gets a rate: the fastest measured by `hccl-tune links` for the dumps'
// topology (the store's link table, when a store is given and holds one: bandwidth_gbps per network), else the
// kernel's interface speed the dumps recorded (the slowest over ranks; veth and tc-shaped links report no useful
// speed, so measure). Per network N that carried cross-node bytes (links_used, tcp/ucx/roce/ib), when the fastest
// candidate F is known to be at least 1.5x N's rate, a warning: bytes per rank, rates and their source, and the
// fix (HCCL_SOCKET_IFNAME, link=...@F, a sweep). Its cost: the rank with the most bytes on N, times the time per
// byte N costs more than F. With a rank table, a rank whose cross-node bytes left through an address other than
// its device_ip (and host_nic_ip) gets a warning naming both.
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tuner/doctor/rules.h"

namespace hccltune::doctor {
namespace {

constexpr double kSlower = 1.5;  // a network this many times slower than the fastest is flagged

struct Rate {
  double gbps = 0;
  std::string source;  // "measured by hccl-tune links", "interface speed"
};

// Subnets every rank's node has an interface in (loopback left out), with the interface name on the lowest rank.
std::map<std::string, std::string> SharedNetworks(const Comm& comm) {
  std::map<std::string, std::string> shared;
  for (const NetInterface& i : comm.front().interfaces) {
    if (!absl::StartsWith(i.address, "127.")) shared[i.subnet] = i.name;
  }
  for (const RankDump& d : comm) {
    std::erase_if(shared, [&](const auto& s) {
      return std::none_of(d.interfaces.begin(), d.interfaces.end(),
                          [&](const NetInterface& i) { return i.subnet == s.first; });
    });
  }
  return shared;
}

std::map<std::string, Rate> MeasuredRates(const Comm& comm, const DoctorOptions& options) {
  std::map<std::string, Rate> rates;
  if (options.store == nullptr || comm.front().fingerprint.empty()) return rates;
  auto stored = options.store->GetLinks(comm.front().fingerprint);
  if (!stored.ok()) return rates;
  const nlohmann::json j = nlohmann::json::parse(stored->links_json, nullptr, false);
  if (!j.is_object() || !j.contains("links") || !j["links"].is_array()) return rates;
  const std::string source = absl::StrCat("measured by hccl-tune links, stored in ", options.store_name);
  for (const nlohmann::json& l : j["links"]) {
    const std::string net = l.value("network", "");
    const double gbps = l.value("bandwidth_gbps", 0.0);
    if (!net.empty() && gbps > rates[net].gbps) rates[net] = {gbps, source};
  }
  return rates;
}

// Rates of the shared networks: measured where the store has them, else the interfaces' speed (slowest rank).
std::map<std::string, Rate> Rates(const Comm& comm, const DoctorOptions& options,
                                  const std::map<std::string, std::string>& shared) {
  std::map<std::string, Rate> measured = MeasuredRates(comm, options), rates;
  for (const auto& [net, name] : shared) {
    if (measured.count(net) != 0) {
      rates[net] = measured[net];
      continue;
    }
    double mbps = -1;
    for (const RankDump& d : comm) {
      for (const NetInterface& i : d.interfaces) {
        if (i.subnet == net) mbps = mbps < 0 ? i.speed_mbps : std::min(mbps, i.speed_mbps);
      }
    }
    if (mbps > 0) rates[net] = {mbps / 1000, "interface speed (/sys/class/net)"};
  }
  return rates;
}

std::string MiB(uint64_t bytes) { return absl::StrCat(Fixed(static_cast<double>(bytes) / (1 << 20), 1), " MiB"); }

std::string Gbps(const Rate& r) { return absl::StrCat(Fixed(r.gbps, 2), " Gbit/s (", r.source, ")"); }

std::optional<Finding> SlowNetwork(const Comm& comm, const std::string& net, const Rate& slow, const std::string& fast,
                                   const Rate& best, const std::string& fast_if) {
  Finding f;
  f.severity = Severity::kWarn;
  f.kind = "links";
  uint64_t total = 0, most = 0;
  for (const RankDump& d : comm) {
    for (const LinkUse& l : d.links) {
      if (l.subnet != net || l.kind == "shm" || l.cross_node_bytes == 0) continue;
      total += l.cross_node_bytes;
      most = std::max(most, l.cross_node_bytes);
      f.evidence.push_back(absl::StrCat("rank ", d.rank, " sent ", MiB(l.cross_node_bytes), " to node",
                                        l.peer_nodes.size() == 1 ? " " : "s ", absl::StrJoin(l.peer_nodes, ", "),
                                        " over ", l.kind, " on ", l.interface, " (", l.address, ", ", net, ")"));
    }
  }
  if (total == 0) return std::nullopt;
  f.cost = static_cast<double>(most) * 8 * (1 / (slow.gbps * 1e9) - 1 / (best.gbps * 1e9));
  f.title = absl::StrCat("cross-node traffic (", MiB(total), ") went over ", net, " at ", Fixed(slow.gbps, 2),
                         " Gbit/s while ", fast, " (", fast_if, ") between the same nodes runs at ",
                         Fixed(best.gbps, 2), " Gbit/s, ", Fixed(best.gbps / slow.gbps, 1), "x faster; about ",
                         Duration(f.cost), " lost per rank");
  f.evidence.push_back(absl::StrCat(net, ": ", Gbps(slow), "; ", fast, ": ", Gbps(best)));
  f.fix =
      absl::StrCat("HCCL_SOCKET_IFNAME=", fast_if, " on every rank, or name the network in the configuration (",
                   "HCCL_TUNE_ALGO=\"allreduce:0-=ring(link=tcp@", fast,
                   ")\"), or run a multi-node sweep (hccl-tune sweep --launched) so the table's winners name ", fast);
  return f;
}

std::optional<Finding> RankTableMismatch(const Comm& comm) {
  Finding f;
  f.severity = Severity::kWarn;
  f.kind = "links";
  std::vector<int> ranks;
  std::string fix_if;
  for (const RankDump& d : comm) {
    if (d.device_ip.empty()) continue;
    for (const LinkUse& l : d.links) {
      if (l.kind == "shm" || l.cross_node_bytes == 0 || l.address.empty()) continue;
      if (l.address == d.device_ip || l.address == d.host_nic_ip) continue;
      ranks.push_back(d.rank);
      for (const NetInterface& i : d.interfaces) {
        if (i.address == d.device_ip) fix_if = i.name;
      }
      f.evidence.push_back(absl::StrCat("rank ", d.rank, ": rank table device_ip ", d.device_ip,
                                        d.host_nic_ip.empty() ? "" : absl::StrCat(", host_nic_ip ", d.host_nic_ip),
                                        "; its cross-node bytes (", MiB(l.cross_node_bytes), ") left through ",
                                        l.interface, " (", l.address, ", ", l.subnet, ")"));
    }
  }
  if (ranks.empty()) return std::nullopt;
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  f.title = absl::StrCat(RankList(ranks), " sent cross-node traffic from an interface that is not the rank table's ",
                         "device_ip");
  f.fix = absl::StrCat("HCCL_SOCKET_IFNAME=", fix_if.empty() ? "<the device_ip's interface>" : fix_if,
                       " on every rank (or link=tcp@<device_ip's subnet> in HCCL_TUNE_ALGO), or correct device_ip in ",
                       "RANK_TABLE_FILE");
  return f;
}

}  // namespace

std::vector<Finding> DiagnoseLinks(const Comm& comm, const DoctorOptions& options) {
  std::vector<Finding> out;
  const std::map<std::string, std::string> shared = SharedNetworks(comm);
  const std::map<std::string, Rate> rates = Rates(comm, options, shared);
  auto best = std::max_element(rates.begin(), rates.end(),
                               [](const auto& a, const auto& b) { return a.second.gbps < b.second.gbps; });
  std::set<std::string> used;
  for (const RankDump& d : comm) {
    for (const LinkUse& l : d.links) {
      if (l.kind != "shm" && l.cross_node_bytes > 0) used.insert(l.subnet);
    }
  }
  for (const std::string& net : used) {
    auto r = rates.find(net);
    if (r == rates.end() || best == rates.end() || best->second.gbps < kSlower * r->second.gbps) continue;
    if (auto f = SlowNetwork(comm, net, r->second, best->first, best->second, shared.at(best->first))) {
      out.push_back(*std::move(f));
    }
  }
  if (auto f = RankTableMismatch(comm)) out.push_back(*std::move(f));
  return out;
}

}  // namespace hccltune::doctor
