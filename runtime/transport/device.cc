#include "runtime/transport/device.h"

#include "absl/strings/str_cat.h"

namespace hccltune::transport {

std::vector<int> DeviceLayout::LocalRanks(int rank) const {
  std::vector<int> local;
  const int mine = node_of[static_cast<size_t>(rank)];
  for (size_t r = 0; r < node_of.size(); ++r) {
    if (node_of[r] == mine) local.push_back(static_cast<int>(r));
  }
  return local;
}

void DeviceSet::Add(std::unique_ptr<Device> device) {
  const auto kind = static_cast<size_t>(device->kind());
  static_assert(static_cast<size_t>(LinkKind::kIb) < std::tuple_size_v<decltype(one_lane_)>);
  one_lane_[kind] = device->Lanes(2) == 1;
  devices_.push_back(std::move(device));
}

Device* DeviceSet::Find(LinkKind kind) const {
  for (const auto& d : devices_) {
    if (d->kind() == kind) return d.get();
  }
  return nullptr;
}

absl::Status DeviceSet::Start(int rank, const DeviceLayout& layout,
                              const std::vector<std::vector<std::string>>& blocks) {
  rank_ = rank;
  layout_ = layout;
  for (size_t d = 0; d < devices_.size(); ++d) {
    if (absl::Status s = devices_[d]->Start(layout, blocks[d]); !s.ok()) return s;
  }
  return absl::OkStatus();
}

bool DeviceSet::Reaches(const Device& device, int peer) const {
  if (device.scope() == Scope::kNetwork) return true;
  return layout_.node_of[static_cast<size_t>(peer)] == layout_.node_of[static_cast<size_t>(rank_)];
}

std::string DeviceSet::Available() const {
  std::string names;
  for (const auto& d : devices_) absl::StrAppend(&names, names.empty() ? "" : ", ", LinkKindName(d->kind()));
  return names;
}

absl::StatusOr<Device*> DeviceSet::For(const LinkSpec& link, int peer) const {
  if (link.kind == LinkKind::kAuto) {
    for (const auto& d : devices_) {
      if (d->PreferredFor(peer)) return d.get();
    }
    for (const auto& d : devices_) {
      if (Reaches(*d, peer)) return d.get();
    }
    return absl::FailedPreconditionError(absl::StrCat("link=auto: no transport reaches rank ", peer, " from rank ",
                                                      rank_, " (this build has ", Available(), ")"));
  }
  Device* d = Find(link.kind);
  if (d == nullptr) {
    return absl::UnimplementedError(absl::StrCat("link=", LinkKindName(link.kind),
                                                 ": this build has no transport for it (it has ", Available(), ")"));
  }
  if (!Reaches(*d, peer)) {
    return absl::FailedPreconditionError(absl::StrCat("link=", LinkKindName(link.kind), ": rank ", peer,
                                                      " is on another node than rank ", rank_, "; use tcp or auto"));
  }
  return d;
}

Device* DeviceSet::Sole(const LinkSpec& link) const {
  const int size = static_cast<int>(layout_.node_of.size());
  auto reaches_all = [&](const Device& d) {
    if (d.scope() == Scope::kNetwork) return true;
    for (int r = 0; r < size; ++r) {
      if (!Reaches(d, r)) return false;
    }
    return true;
  };
  if (link.kind != LinkKind::kAuto) {
    Device* d = Find(link.kind);
    return d != nullptr && reaches_all(*d) ? d : nullptr;
  }
  for (const auto& d : devices_) {
    if (reaches_all(*d)) return d.get();
  }
  return nullptr;
}

absl::Status DeviceSet::CheckLink(const LinkSpec& link, bool intra_step) const {
  if (link.kind == LinkKind::kAuto) return absl::OkStatus();
  const Device* d = Find(link.kind);
  if (d == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("link=", LinkKindName(link.kind),
                                                   ": this build has no transport for it (it has ", Available(), ")"));
  }
  return d->CheckLink(link, intra_step);
}

Doorbell* DeviceSet::doorbell() const {
  for (const auto& d : devices_) {
    if (Doorbell* b = d->doorbell(); b != nullptr) return b;
  }
  return nullptr;
}

}  // namespace hccltune::transport
