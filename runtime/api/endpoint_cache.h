// Internal: the communicator's endpoint cache (part of CommImpl; not installed).
//
// Contract. One StreamEndpoint per (link, lanes), made on first use and kept for the communicator's life; every
// endpoint over the same peers shares their pairs, which the transport devices own. An endpoint gets the pairs
// a call's members need when it first needs them: each peer through the device that links it for the call's
// link (transport::DeviceSet::For), every member of a group connecting the same set so both ends of each pair
// take part. The whole communicator reached by one device with a mailbox (shm, every rank on this node) shares
// that mailbox. The last endpoint for the whole communicator is remembered, so a call on the same link skips
// the key and the map (the small-message path's fixed cost). Every returned endpoint carries the call's
// descriptor and stream region.
//
// Thread-safety: used by one thread at a time — the one running the communicator's calls (under its exec_mu_).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/common/configuration.h"
#include "runtime/common/stream_copy.h"
#include "runtime/transport/device.h"
#include "runtime/transport/link_usage.h"
#include "runtime/transport/stream_endpoint.h"

namespace hccltune {

class EndpointCache {
 public:
  // `devices` outlive the cache; `probe` is every endpoint's abort probe (StreamEndpoint::SetAbortProbe).
  EndpointCache(int rank, int size, const transport::DeviceSet* devices, absl::Duration exec_timeout,
                std::function<absl::Status()> probe);
  ~EndpointCache() { Clear(); }

  // The endpoint over `link` with `channels`, connected to at least `members` (ranks), set up for `call`.
  absl::StatusOr<StreamEndpoint*> For(const LinkSpec& link, int channels, const std::vector<int>& members,
                                      const CallDescriptor& call, const StreamRegion& stream) {
    const int lanes = devices_->Lanes(link, channels);
    const bool whole = static_cast<int>(members.size()) == size_;
    if (whole && last_.ep != nullptr && last_.lanes == lanes && last_.link == link) {
      last_.ep->SetCall(call);
      last_.ep->SetStreamRegion(stream);
      return last_.ep;
    }
    return Find(link, lanes, members, call, stream);
  }
  // Calls `f(const StreamEndpoint&)` for every endpoint made so far, in no particular order.
  template <typename F>
  void ForEach(F&& f) const {
    for (const auto& [key, ep] : endpoints_) f(*ep);
  }
  // Every pair attached from now on is recorded in `usage` (the flight recorder's links_used; null: none).
  void SetLinkUsage(LinkUsage* usage) { usage_ = usage; }
  // The ranks links are being connected to right now (empty outside a connect); a probe may check they live.
  const std::vector<int>& connecting() const { return connecting_; }
  void Clear() {
    last_ = {};
    endpoints_.clear();
  }

 private:
  // For's path past the remembered endpoint: the map, new endpoints, new pairs, the mailbox.
  absl::StatusOr<StreamEndpoint*> Find(const LinkSpec& link, int lanes, const std::vector<int>& members,
                                       const CallDescriptor& call, const StreamRegion& stream);
  // Links `ep` to every member it has no pair with yet, through the device that reaches it.
  absl::Status AttachPairs(StreamEndpoint& ep, const LinkSpec& link, int lanes, const std::vector<int>& members,
                           const CallDescriptor& call);

  // Adds a newly attached pair to usage_.
  void Record(const transport::Device& device, const LinkSpec& link, int peer, const Pair* pair);

  int rank_ = 0, size_ = 1;
  const transport::DeviceSet* devices_;
  absl::Duration exec_timeout_;
  std::function<absl::Status()> probe_;
  std::vector<int> connecting_;
  LinkUsage* usage_ = nullptr;
  std::map<std::string, std::unique_ptr<StreamEndpoint>> endpoints_;
  struct Last {
    LinkSpec link;
    int lanes = 0;
    StreamEndpoint* ep = nullptr;
  };
  Last last_;
};

}  // namespace hccltune
