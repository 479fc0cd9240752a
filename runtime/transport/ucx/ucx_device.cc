#include "runtime/transport/ucx/ucx_device.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "nlohmann/json.hpp"
#include "runtime/common/json_field.h"
#include "runtime/common/logging.h"
#include "runtime/net/interfaces.h"
#include "runtime/net/rdma.h"
#include "runtime/net/rdma_links.h"
#include "runtime/transport/ucx/ucx_pair.h"
#include "runtime/transport/ucx/ucx_worker.h"

namespace hccltune::transport {
namespace {

// What a rank published: its pid and its IPv4 addresses (ucx), or its node's RDMA networks (roce, ib).
struct UcxPeer {
  bool present = false;  // it published a block (a build without UCX publishes none)
  int pid = 0;
  std::vector<std::string> subnets;
  RdmaPeer rdma;
};

class UcxDevice final : public Device {
 public:
  // kind: kUcx, or kRoce / kIb over this node's RDMA `ports`.
  UcxDevice(const DeviceContext& ctx, LinkKind kind, std::vector<RdmaPort> ports)
      : ctx_(ctx), kind_(kind), ports_(std::move(ports)) {}
  ~UcxDevice() override;

  LinkKind kind() const override { return kind_; }
  Scope scope() const override { return Scope::kNetwork; }
  std::string Block() const override;
  absl::Status Start(const DeviceLayout& layout, const std::vector<std::string>& blocks) override;
  absl::Status CheckLink(const LinkSpec& link, bool intra_step) const override;
  absl::StatusOr<std::vector<Pair*>> Connect(const std::vector<int>& group, const std::string& network, int lanes,
                                             absl::Duration call_limit) override;
  bool PreferredFor(int peer) const override;
  std::vector<InterLink> RdmaLinks(int rank) const override;

 private:
  bool rdma() const { return kind_ != LinkKind::kUcx; }
  std::string layer() const { return std::string(LinkKindName(kind_)); }  // "ucx", "roce" or "ib"
  std::string LinkName(const std::string& network) const {
    return network.empty() ? layer() : absl::StrCat(layer(), "@", network);
  }
  // The network a pair to `peer` runs on: `network`, or for plain roce / ib the best one both ranks reach.
  absl::StatusOr<std::string> NetworkTo(const std::string& network, int peer) const;
  // The UCP context settings for `network` on this rank.
  absl::StatusOr<UcxWorker::Settings> SettingsFor(const std::string& network) const;
  // One UCP context and worker per network ("" = UCX's own device choice) and its pairs by (peer, lanes).
  struct Net {
    std::unique_ptr<UcxWorker> worker;
    std::map<std::pair<int, int>, std::unique_ptr<UcxPair>> pairs;
    std::map<int, std::string> addresses;  // peers' worker addresses, by rank (fetched once)
    bool peer_errors = true;
  };
  absl::StatusOr<Net*> OpenNet(const std::string& network);
  // This node's netdev in `network` (UCX_NET_DEVICES for ucx@SUBNET).
  absl::StatusOr<std::string> LocalNetdev(const std::string& network) const;
  std::string AddressKey(const std::string& network, int rank) const {
    return absl::StrCat(layer(), "/", absl::StrReplaceAll(network, {{"/", "_"}}), "/", rank);
  }
  absl::StatusOr<UcxPair*> PairTo(Net& net, const std::string& network, int peer, int lanes, absl::Time deadline);
  void LogLinks(const Net& net, const std::string& network, const std::vector<int>& group, int lanes) const;

  DeviceContext ctx_;
  LinkKind kind_;
  std::vector<RdmaPort> ports_;  // this node's (roce, ib)
  DeviceLayout layout_;
  std::vector<UcxPeer> peers_;  // by rank (Start)
  std::map<std::string, Net> nets_;
};

UcxDevice::~UcxDevice() {
  // Every endpoint closed (its requests released) before any pair's buffers go, then the workers.
  for (auto& [name, net] : nets_) {
    for (auto& [key, pair] : net.pairs) {
      if (pair) pair->Close();
    }
  }
  for (auto& [name, net] : nets_) net.pairs.clear();
}

std::string UcxDevice::Block() const {
  nlohmann::json j;
  j["pid"] = static_cast<int>(::getpid());
  if (rdma()) {
    j["ports"] = ports_.size();
    j["rdma"] = nlohmann::json::array();
    // Both link layers' networks: auto's choice (PreferredFor) weighs them against each other.
    for (const InterLink& l : UsableRdmaLinks(ports_, ctx_.env.rdma.hca)) {
      j["rdma"].push_back({{"link", l.link}, {"network", l.network}, {"gbps", l.gbps}});
    }
    return j.dump();
  }
  j["subnets"] = nlohmann::json::array();
  for (const auto& i : ListInterfaces()) {
    if (i.name != "lo") j["subnets"].push_back(i.address + "/" + std::to_string(i.prefix));
  }
  return j.dump();
}

absl::Status UcxDevice::Start(const DeviceLayout& layout, const std::vector<std::string>& blocks) {
  layout_ = layout;
  peers_.assign(blocks.size(), {});
  for (size_t r = 0; r < blocks.size(); ++r) {
    if (blocks[r].empty()) continue;  // a build without the ucx transport: refused by CheckLink
    auto j = nlohmann::json::parse(blocks[r], nullptr, false);
    const char* list = rdma() ? "rdma" : "subnets";
    if (j.is_discarded() || !j.is_object() || !j.contains(list) || !j[list].is_array()) {
      return absl::DataLossError(
          absl::StrCat("bootstrap: rank ", r, " published an unreadable ", layer(), " address block"));
    }
    peers_[r].present = true;
    peers_[r].pid = JsonOr(j, "pid", 0);
    if (rdma()) {
      peers_[r].rdma.present = true;
      peers_[r].rdma.ports = JsonOr(j, "ports", 0);
      for (const auto& l : j["rdma"]) {
        peers_[r].rdma.links.push_back(
            InterLink{JsonOr(l, "link", std::string()), JsonOr(l, "network", std::string()), JsonOr(l, "gbps", 0.0)});
      }
      continue;
    }
    for (const auto& s : j["subnets"]) {
      if (s.is_string()) peers_[r].subnets.push_back(s.get<std::string>());
    }
  }
  return absl::OkStatus();
}

absl::Status UcxDevice::CheckLink(const LinkSpec& link, bool intra_step) const {
  (void)intra_step;
  if (rdma()) {
    std::vector<RdmaPeer> peers;
    for (const UcxPeer& p : peers_) peers.push_back(p.rdma);
    return CheckRdmaLink(peers, layer(), link.network);
  }
  for (size_t r = 0; r < peers_.size(); ++r) {
    if (!peers_[r].present) {
      return absl::InvalidArgumentError(
          absl::StrCat("link=", FormatLink(link), ": rank ", r, " runs a build without the ucx transport"));
    }
  }
  if (link.network.empty()) return absl::OkStatus();
  for (size_t r = 0; r < peers_.size(); ++r) {
    const auto& subnets = peers_[r].subnets;
    const bool has = std::any_of(subnets.begin(), subnets.end(), [&](const std::string& a) {
      return InSubnet(a.substr(0, a.find('/')), link.network);
    });
    if (!has) {
      return absl::InvalidArgumentError(
          absl::StrCat("link=ucx@", link.network, ": rank ", r, " has no interface in that network"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> UcxDevice::LocalNetdev(const std::string& network) const {
  for (const auto& i : ListInterfaces()) {
    if (InSubnet(i.address, network)) return i.name;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("link=ucx@", network, ": rank ", ctx_.rank, " has no interface in that network"));
}

absl::StatusOr<UcxWorker::Settings> UcxDevice::SettingsFor(const std::string& network) const {
  if (rdma()) {
    const std::vector<int> local = layout_.LocalRanks(ctx_.rank);
    const int local_rank = static_cast<int>(std::find(local.begin(), local.end(), ctx_.rank) - local.begin());
    auto choice = ChooseRdmaPort(ports_, ctx_.env.rdma.hca, layer(), network, CurrentNumaNode(), local_rank);
    if (!choice.ok()) return choice.status();
    return UcxRdmaSettings(*choice, ctx_.env.rdma);
  }
  if (network.empty()) return UcxWorker::Settings{};
  auto d = LocalNetdev(network);
  if (!d.ok()) return d.status();
  return UcxWorker::Settings{{"NET_DEVICES", *d}};
}

absl::StatusOr<std::string> UcxDevice::NetworkTo(const std::string& network, int peer) const {
  if (!rdma() || !network.empty()) return network;
  auto shared = PreferredRdmaLink(peers_[static_cast<size_t>(ctx_.rank)].rdma.links,
                                  peers_[static_cast<size_t>(peer)].rdma.links, layer());
  if (!shared) {
    return absl::FailedPreconditionError(absl::StrCat("rank ", ctx_.rank, ": link=", layer(), ": no ",
                                                      RdmaLinkLayerName(layer()), " network in common with rank ",
                                                      peer));
  }
  return shared->network;
}

bool UcxDevice::PreferredFor(int peer) const {
  const auto& node_of = layout_.node_of;
  if (!rdma() || node_of[static_cast<size_t>(peer)] == node_of[static_cast<size_t>(ctx_.rank)]) return false;
  auto shared = PreferredRdmaLink(peers_[static_cast<size_t>(ctx_.rank)].rdma.links,
                                  peers_[static_cast<size_t>(peer)].rdma.links);
  return shared && shared->link == layer();
}

std::vector<InterLink> UcxDevice::RdmaLinks(int rank) const {
  return rdma() ? LinksOfLayer(peers_[static_cast<size_t>(rank)].rdma.links, layer()) : std::vector<InterLink>{};
}

absl::StatusOr<UcxDevice::Net*> UcxDevice::OpenNet(const std::string& network) {
  Net& net = nets_[network];
  if (net.worker) return &net;
  auto settings = SettingsFor(network);
  if (!settings.ok()) return settings.status();
  auto w = UcxWorker::Create(*settings);
  if (!w.ok()) {
    return absl::Status(w.status().code(), absl::StrCat("rank ", ctx_.rank, ": ", w.status().message()));
  }
  net.worker = *std::move(w);
  if (absl::Status s = ctx_.store->Set(AddressKey(network, ctx_.rank), absl::BytesToHexString(net.worker->address()));
      !s.ok()) {
    return s;
  }
  return &net;
}

absl::StatusOr<UcxPair*> UcxDevice::PairTo(Net& net, const std::string& network, int peer, int lanes,
                                           absl::Time deadline) {
  if (auto it = net.pairs.find({peer, lanes}); it != net.pairs.end()) return it->second.get();
  if (!peers_[static_cast<size_t>(peer)].present) {
    return absl::FailedPreconditionError(absl::StrCat("rank ", ctx_.rank, ": link=", layer(), ": rank ", peer,
                                                      " runs a build without the ", layer(), " transport"));
  }
  auto& address = net.addresses[peer];
  if (address.empty()) {
    auto hex = GetUntil(*ctx_.store, AddressKey(network, peer), deadline, ctx_.probe);
    if (!hex.ok()) {
      return absl::Status(hex.status().code(),
                          absl::StrCat("rank ", ctx_.rank, ": link=", LinkName(network), ": rank ", peer,
                                       " did not publish its ucx worker address: ", hex.status().message()));
    }
    address = absl::HexStringToBytes(*hex);
  }
  UcxPairInfo info;
  info.rank = ctx_.rank;
  info.peer = peer;
  info.lanes = lanes;
  const auto& node_of = layout_.node_of;
  const bool same_node = node_of[static_cast<size_t>(peer)] == node_of[static_cast<size_t>(ctx_.rank)];
  info.peer_pid = same_node ? peers_[static_cast<size_t>(peer)].pid : 0;
  info.host_ranks = static_cast<int>(layout_.LocalRanks(ctx_.rank).size());
  info.peer_errors = net.peer_errors;
  info.link = layer();
  auto p = UcxPair::Create(net.worker.get(), address, info);
  if (!p.ok() && net.peer_errors && absl::IsFailedPrecondition(p.status())) {
    // No transport UCX_TLS allows can report a failed peer (UCX 1.13's shared memory cannot): go without.
    net.peer_errors = info.peer_errors = false;
    Log(LogLevel::kInfo, "rank ", ctx_.rank, ": ucx: no transport UCX_TLS allows offers peer failure handling; ",
        "its endpoints go without, and a dead peer is found by its process (same node) or HCCL_EXEC_TIMEOUT");
    p = UcxPair::Create(net.worker.get(), address, info);
  }
  if (!p.ok()) return p.status();
  auto& slot = net.pairs[{peer, lanes}];
  slot = *std::move(p);
  return slot.get();
}

void UcxDevice::LogLinks(const Net& net, const std::string& network, const std::vector<int>& group, int lanes) const {
  if (!LogEnabled(LogLevel::kInfo)) return;
  std::string peers;
  for (int r : group) {
    if (r == ctx_.rank) continue;
    absl::StrAppend(&peers, peers.empty() ? "" : ", ", "rank ", r, " ", net.pairs.at({r, lanes})->transports());
  }
  Log(LogLevel::kInfo, "rank ", ctx_.rank, ": link=", LinkName(network), " (NET_DEVICES ",
      net.worker->net_devices().empty() ? "UCX's choice" : net.worker->net_devices(), ", peer failure handling ",
      net.peer_errors ? "on" : "off", "): ", peers);
}

absl::StatusOr<std::vector<Pair*>> UcxDevice::Connect(const std::vector<int>& group, const std::string& network,
                                                      int lanes, absl::Duration call_limit) {
  const absl::Time deadline = absl::Now() + std::min(absl::Seconds(ctx_.env.connect_timeout_s), call_limit);
  std::vector<Pair*> pairs(static_cast<size_t>(ctx_.size), nullptr);
  std::map<std::string, std::vector<int>> by_net;  // the peers on each network (plain roce / ib: per peer)
  std::set<std::string> made;                      // the networks where a pair was made
  for (int r : group) {
    if (r == ctx_.rank) continue;
    auto name = NetworkTo(network, r);
    if (!name.ok()) return name.status();
    auto net = OpenNet(*name);
    if (!net.ok()) return net.status();
    if (!(*net)->pairs.count({r, lanes})) made.insert(*name);
    by_net[*name].push_back(r);
    auto p = PairTo(**net, *name, r, lanes, deadline);
    if (!p.ok()) return p.status();
    pairs[static_cast<size_t>(r)] = *p;
  }
  for (const std::string& name : made) LogLinks(nets_.at(name), name, by_net[name], lanes);
  return pairs;
}

}  // namespace

std::unique_ptr<Device> NewUcxRdmaDevice(const DeviceContext& ctx, LinkKind kind, std::vector<RdmaPort> ports) {
  return std::make_unique<UcxDevice>(ctx, kind, std::move(ports));
}

// This host's RDMA ports, read through libibverbs once per process (every communicator and Split shares them; a
// port that changes state later is seen by the next process).
static const absl::StatusOr<std::vector<RdmaPort>>& HostRdmaPorts() {
  static const auto* ports =
      new absl::StatusOr<std::vector<RdmaPort>>(ListRdmaPorts(*NewLibibverbsApi(), ListInterfaces()));
  return *ports;
}

std::vector<std::unique_ptr<Device>> NewUcxDevices(const DeviceContext& ctx) {
  std::vector<RdmaPort> ports;
  if (const auto& listed = HostRdmaPorts(); listed.ok()) {
    ports = *listed;
  } else {
    Log(LogLevel::kWarn, "rank ", ctx.rank, ": RDMA ports not read (", listed.status().message(),
        "); link=roce and link=ib have none here");
  }
  std::vector<std::unique_ptr<Device>> out;
  out.push_back(std::make_unique<UcxDevice>(ctx, LinkKind::kUcx, std::vector<RdmaPort>{}));
  out.push_back(std::make_unique<UcxDevice>(ctx, LinkKind::kRoce, ports));
  out.push_back(std::make_unique<UcxDevice>(ctx, LinkKind::kIb, ports));
  return out;
}

}  // namespace hccltune::transport
