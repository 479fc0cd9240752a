#include "runtime/api/endpoint_cache.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace hccltune {

EndpointCache::EndpointCache(int rank, int size, const transport::DeviceSet* devices, absl::Duration exec_timeout,
                             std::function<absl::Status()> probe)
    : rank_(rank), size_(size), devices_(devices), exec_timeout_(exec_timeout), probe_(std::move(probe)) {}

absl::StatusOr<StreamEndpoint*> EndpointCache::Find(const LinkSpec& link, int lanes, const std::vector<int>& members,
                                                    const CallDescriptor& call, const StreamRegion& stream) {
  const bool whole = static_cast<int>(members.size()) == size_;
  if (link.kind != LinkKind::kAuto && devices_->Find(link.kind) == nullptr) {
    return devices_->For(link, rank_).status();  // no device serves the kind: Unimplemented, naming it
  }
  const std::string key = absl::StrCat(FormatLink(link), "#", lanes);
  auto it = endpoints_.find(key);
  if (it == endpoints_.end()) {
    std::vector<Pair*> none(static_cast<size_t>(size_), nullptr);
    it = endpoints_.emplace(key, std::make_unique<StreamEndpoint>(rank_, none, devices_->doorbell(), exec_timeout_))
             .first;
    // A rank that fails or refuses a call announces it in the store; blocked peers pick it up instead of
    // waiting for the exec timeout (CallProbe).
    it->second->SetAbortProbe(probe_);
  }
  StreamEndpoint* ep = it->second.get();
  if (absl::Status s = AttachPairs(*ep, link, lanes, members, call); !s.ok()) return s;
  // The whole communicator reached by one device with a mailbox (shm, every rank on this node): small
  // collectives exchange their blocks through it (one_shot), every endpoint over these ranks taking its numbers
  // from the one mailbox.
  if (transport::Device* sole = whole ? devices_->Sole(link) : nullptr; sole != nullptr && sole->mailbox()) {
    ep->SetMailbox(sole->mailbox());
  }
  if (whole) last_ = {link, lanes, ep};
  ep->SetCall(call);
  ep->SetStreamRegion(stream);
  return ep;
}

absl::Status EndpointCache::AttachPairs(StreamEndpoint& ep, const LinkSpec& link, int lanes,
                                        const std::vector<int>& members, const CallDescriptor& call) {
  // The members still without a pair, by the device that links them (in the devices' order).
  std::vector<std::pair<transport::Device*, std::vector<int>>> missing;
  for (int r : members) {
    if (r == rank_ || ep.HasPair(r)) continue;
    auto d = devices_->For(link, r);
    if (!d.ok()) return d.status();
    auto m = std::find_if(missing.begin(), missing.end(), [&](const auto& e) { return e.first == *d; });
    if (m == missing.end()) m = missing.emplace(missing.end(), *d, std::vector<int>{});
    m->second.push_back(r);
  }
  for (auto& [device, need] : missing) {
    // Every member connects the same set so both ends of each pair take part: this rank and every member the
    // device links it to.
    std::vector<int> group;
    for (int r : members) {
      auto d = r == rank_ ? absl::StatusOr<transport::Device*>(device) : devices_->For(link, r);
      if (d.ok() && *d == device) group.push_back(r);
    }
    connecting_ = group;
    // Inside a call (not the table broadcast at setup) a peer that does not come is one that does not arrive at
    // the call: HCCL_EXEC_TIMEOUT bounds the wait.
    const absl::Duration limit =
        call.sequence > 0 || call.collective == Collective::kSendRecv ? exec_timeout_ : absl::InfiniteDuration();
    auto pairs = device->Connect(group, link.network, lanes, limit);
    connecting_.clear();
    if (!pairs.ok()) return pairs.status();
    for (int r : need) {
      Pair* pair = (*pairs)[static_cast<size_t>(r)];
      ep.AttachPair(r, pair);
      if (usage_ != nullptr) Record(*device, link, r, pair);
    }
  }
  return absl::OkStatus();
}

void EndpointCache::Record(const transport::Device& device, const LinkSpec& link, int peer, const Pair* pair) {
  const std::vector<int>& node_of = devices_->layout().node_of;
  const auto node = [&](int r) {
    return static_cast<size_t>(r) < node_of.size() ? node_of[static_cast<size_t>(r)] : -1;
  };
  usage_->Add(pair, {std::string(LinkKindName(device.kind())), link.network, pair->LocalAddress(), pair->PeerAddress(),
                     pair->Describe(), peer, node(peer), node(peer) != node(rank_)});
}

}  // namespace hccltune
