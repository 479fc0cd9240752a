#include "runtime/transport/tcp/tcp_device.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/common/job_auth.h"
#include "runtime/transport/tcp/tcp_transport.h"

namespace hccltune::transport {
namespace {

class TcpDevice final : public Device {
 public:
  TcpDevice(const DeviceContext& ctx, std::unique_ptr<TcpDomain> domain) : ctx_(ctx), domain_(std::move(domain)) {
    domain_->SetAbortProbe(ctx_.probe);  // connects happen inside calls too
  }

  LinkKind kind() const override { return LinkKind::kTcp; }
  Scope scope() const override { return Scope::kNetwork; }
  std::string Block() const override {
    return TcpInfoToJson(domain_->port(), domain_->interfaces(), domain_->ifname_set()).dump();
  }
  absl::Status Start(const DeviceLayout& layout, const std::vector<std::string>& blocks) override;
  absl::Status CheckLink(const LinkSpec& link, bool intra_step) const override {
    (void)intra_step;
    return domain_->CheckNetwork(link.network);
  }
  absl::StatusOr<std::vector<Pair*>> Connect(const std::vector<int>& group, const std::string& network, int lanes,
                                             absl::Duration call_limit) override {
    domain_->SetCallLimit(call_limit);
    auto pairs = domain_->Connect(group, network, lanes);
    domain_->SetCallLimit(absl::InfiniteDuration());
    return pairs;
  }
  std::vector<DeviceAddress> Addresses(int rank) const override { return addresses_[static_cast<size_t>(rank)]; }

 private:
  DeviceContext ctx_;
  std::unique_ptr<TcpDomain> domain_;
  std::vector<std::vector<DeviceAddress>> addresses_;  // by rank (Start)
};

absl::Status TcpDevice::Start(const DeviceLayout& layout, const std::vector<std::string>& blocks) {
  const int my_node = layout.node_of[static_cast<size_t>(ctx_.rank)];
  std::map<int, TcpPeerInfo> peers;
  addresses_.assign(blocks.size(), {});
  for (size_t r = 0; r < blocks.size(); ++r) {
    auto j = nlohmann::json::parse(blocks[r], nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      return absl::DataLossError(absl::StrCat("bootstrap: rank ", r, " published an unreadable tcp address block"));
    }
    TcpPeerInfo p = TcpInfoFromJson(j);
    p.same_node = layout.node_of[r] == my_node;
    for (const auto& itf : p.interfaces) {
      if (itf.name != "lo") addresses_[r].push_back(DeviceAddress{itf.Subnet(), itf.address});
    }
    peers[static_cast<int>(r)] = std::move(p);
  }
  domain_->SetPeers(std::move(peers));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Device>> NewTcpDevice(const DeviceContext& ctx) {
  std::optional<std::pair<int, int>> range;
  if (ctx.env.port_range_set) range = std::make_pair(ctx.env.port_range_lo, ctx.env.port_range_hi);
  auto auth = LoadJobAuth(ctx.env);
  if (!auth.ok()) return auth.status();
  auto domain = TcpDomain::Create(ctx.rank, ctx.tag, ctx.env.socket_ifname, absl::Seconds(ctx.env.connect_timeout_s),
                                  range, *std::move(auth));
  if (!domain.ok()) return domain.status();
  return std::unique_ptr<Device>(std::make_unique<TcpDevice>(ctx, *std::move(domain)));
}

}  // namespace hccltune::transport
