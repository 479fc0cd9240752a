#include "daemon/activity.h"

#include <algorithm>

namespace hccltune::daemon {

void ActivityTracker::Note(const std::string& client_id, const std::string& fingerprint, uint64_t samples,
                           absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (clients_.size() >= kMaxClients && !clients_.contains(client_id)) Prune(now);
  if (clients_.size() >= kMaxClients && !clients_.contains(client_id)) {
    auto oldest = std::min_element(clients_.begin(), clients_.end(), [](const auto& a, const auto& b) {
      return a.second.last_seen < b.second.last_seen;
    });
    clients_.erase(oldest);
  }
  Client& c = clients_[client_id];
  c.fingerprint = fingerprint;
  c.last_seen = now;
  const int64_t second = absl::ToUnixSeconds(now);
  if (!c.per_second.empty() && c.per_second.back().first == second) {
    c.per_second.back().second += samples;
  } else {
    c.per_second.emplace_back(second, samples);
  }
  const int64_t horizon = second - absl::ToInt64Seconds(kForget);
  auto keep = std::find_if(c.per_second.begin(), c.per_second.end(), [&](const auto& p) { return p.first > horizon; });
  c.per_second.erase(c.per_second.begin(), keep);
}

std::vector<ActivityTracker::Reporter> ActivityTracker::Recent(absl::Duration window, absl::Time now) {
  absl::MutexLock lock(&mu_);
  Prune(now);
  std::vector<Reporter> out;
  const int64_t since = absl::ToUnixSeconds(now - window);
  for (const auto& [id, c] : clients_) {
    if (c.last_seen < now - window) continue;
    Reporter r{id, c.fingerprint, 0, c.last_seen};
    for (const auto& [second, n] : c.per_second) {
      if (second >= since) r.samples += n;
    }
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(), [](const Reporter& a, const Reporter& b) {
    return a.last_seen != b.last_seen ? a.last_seen > b.last_seen : a.client_id < b.client_id;
  });
  return out;
}

void ActivityTracker::Prune(absl::Time now) {
  for (auto it = clients_.begin(); it != clients_.end();) {
    auto cur = it++;
    if (cur->second.last_seen < now - kForget) clients_.erase(cur);
  }
}

}  // namespace hccltune::daemon
