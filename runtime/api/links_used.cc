// Communicator::LinksUsed: per peer, the link of the latest collective that moved data with it, from what the
// endpoints recorded (StreamEndpoint::LastCollectiveWith) and the pair's own addresses.
#include <mutex>

#include "runtime/api/communicator_impl.h"

namespace hccltune {

std::vector<PeerLink> CommImpl::LinksUsed() const {
  std::lock_guard<std::mutex> lock(exec_mu_);  // endpoints change only inside calls
  std::vector<PeerLink> out;
  for (int peer = 0; peer < size_; ++peer) {
    const Pair* pair = nullptr;
    uint32_t operation = 0;
    if (endpoints_) {
      endpoints_->ForEach([&](const StreamEndpoint& ep) {
        const uint32_t op = ep.LastCollectiveWith(peer);
        if (op > operation) operation = op, pair = ep.PairTo(peer);
      });
    }
    if (pair == nullptr) continue;
    const std::string what = pair->Describe();  // "shm" or "tcp ..."
    out.push_back(
        {peer, what.substr(0, what.find(' ')), pair->LocalAddress(), pair->PeerAddress(), pair->lanes(), operation});
  }
  return out;
}

}  // namespace hccltune
