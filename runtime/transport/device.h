// transport::Device: one transport kind (shm, tcp) as a communicator sees it, and DeviceSet, the communicator's
// devices in order of preference.
//
// The communicator never names a concrete transport: the device registry (runtime/transport/registry/devices.h),
// the only code between the api and the transports that does, makes one Device per transport kind for it. A
// device follows the communicator's setup:
//   1. Made (DeviceContext) once the communicator instance's tag is known; it may open what peers will connect to
//      (TCP: its listening socket).
//   2. Block(): this rank's address block for the device (JSON text), published in the rendezvous with the rank's
//      info. A device reads only its own blocks; the communicator carries them without looking inside.
//   3. Start(layout, blocks): every rank's block and where the ranks are. The device sets up what needs its peers
//      (shm: creates its segment, maps the node's others through the store, unlinks them). Every rank starts its
//      devices in the same order.
//   4. Connect(group, ...): the links (Pair) to the ranks of a group, owned by the device and reused by every
//      endpoint over them.
//
// Reach: a device reaches either the ranks of its own node (Scope::kNode: shm) or every rank (Scope::kNetwork:
// tcp). For link=auto, DeviceSet picks per peer a device that prefers it (PreferredFor: an RDMA path between
// nodes), else the first device, in preference order, that reaches it; an explicit link kind names its device,
// which must reach the peer.
//
// Optional abilities of a device are capability getters (null when it has none): its doorbell and mailbox (shm)
// and symmetric memory (SymmetricAllocator, shm). They are asked when an endpoint is made or memory allocated,
// never per call.
//
// Thread-safety: made and started by the communicator's setup thread; afterwards used by one thread at a time
// (the thread running the communicator's calls).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/bootstrap/store.h"
#include "runtime/common/config.h"
#include "runtime/common/configuration.h"
#include "runtime/common/fingerprint.h"
#include "runtime/transport/mailbox.h"
#include "runtime/transport/pair.h"
#include "runtime/transport/symmetric_region.h"

namespace hccltune::transport {

// What every device of one communicator is made with.
struct DeviceContext {
  int rank = 0;
  int size = 1;
  uint64_t tag = 0;  // the communicator instance's tag: names shm segments, part of the TCP handshake's context
  Environment env;   // HCCL_SOCKET_IFNAME, HCCL_BUFFSIZE, HCCL_TUNE_SINGLE_COPY, the timeouts, ...
  // The rendezvous, under the communicator instance's tag (devices keep their keys under their own names).
  std::shared_ptr<Store> store;
  // Asked while a device waits for its peers (at most every 50 ms): a non-OK status (another rank announced a
  // failure) ends the wait with it.
  std::function<absl::Status()> probe;
};

// Where the ranks of the communicator are: node_of[r] is rank r's node (dense indices, 0..num_nodes-1).
struct DeviceLayout {
  std::vector<int> node_of;
  int num_nodes = 1;
  // The ranks on this rank's node, ascending (this rank included).
  std::vector<int> LocalRanks(int rank) const;
};

// One network address a rank has on a device (loopback excluded): its subnet ("10.77.1.0/24") and address.
struct DeviceAddress {
  std::string subnet;
  std::string address;
};

enum class Scope : uint8_t {
  kNode,     // reaches the ranks of its own node
  kNetwork,  // reaches every rank
};

class Device {
 public:
  virtual ~Device() = default;

  // The link kind it serves (LinkKindName(kind()) names it: its block's key in the rank info, its messages).
  virtual LinkKind kind() const = 0;
  virtual Scope scope() const = 0;
  // This rank's address block (JSON text; "" when it has nothing to publish).
  virtual std::string Block() const = 0;
  // blocks[r]: rank r's block ("" when rank r published none). Errors name the rank whose block is unreadable
  // or the peer that never came.
  virtual absl::Status Start(const DeviceLayout& layout, const std::vector<std::string>& blocks) = 0;
  // InvalidArgument when `link` (of this kind) cannot serve this communicator (shm between nodes, unless
  // `intra_step`: a hierarchical algorithm's step inside one node; tcp@NET where some rank has no interface in
  // NET). The same verdict on every rank, before any traffic.
  virtual absl::Status CheckLink(const LinkSpec& link, bool intra_step) const = 0;
  // The lanes (parallel sub-streams) a link of `channels` channels has on this device (shm: 1).
  virtual int Lanes(int channels) const { return channels; }
  // Links to every rank of `group` but this one, indexed by rank (null elsewhere), for (network, lanes); made on
  // first use, then reused. Every rank of `group` calls it with the same group and key around the same time.
  // Inside a call (`call_limit` finite: HCCL_EXEC_TIMEOUT) a device that waits for its peers waits at most that.
  virtual absl::StatusOr<std::vector<Pair*>> Connect(const std::vector<int>& group, const std::string& network,
                                                     int lanes, absl::Duration call_limit) = 0;
  // The network addresses `rank` published (after Start; empty for a device inside a node).
  virtual std::vector<DeviceAddress> Addresses(int rank) const {
    (void)rank;
    return {};
  }
  // Whether link=auto takes this device to `peer` ahead of the preference order (after Start; an RDMA device for
  // a peer on another node with which this rank shares an RDMA network). Both ends of a pair answer alike.
  virtual bool PreferredFor(int peer) const {
    (void)peer;
    return false;
  }
  // The RDMA networks `rank`'s node reaches through this device (after Start; the topology's RDMA links).
  virtual std::vector<InterLink> RdmaLinks(int rank) const {
    (void)rank;
    return {};
  }

  // Capabilities (null: none). Owned by the device.
  virtual Doorbell* doorbell() { return nullptr; }
  // The mailbox of every rank this device reaches (null before Start, or when it has none).
  virtual Mailbox* mailbox() { return nullptr; }
  virtual SymmetricAllocator* symmetric() { return nullptr; }
};

// A communicator's devices, in order of preference (the order they were added).
class DeviceSet {
 public:
  void Add(std::unique_ptr<Device> device);
  const std::vector<std::unique_ptr<Device>>& devices() const { return devices_; }
  bool empty() const { return devices_.empty(); }
  // The device of `kind`, or null.
  Device* Find(LinkKind kind) const;

  // Starts every device (blocks[d][r]: rank r's block for devices()[d]) and keeps the layout for reach.
  absl::Status Start(int rank, const DeviceLayout& layout, const std::vector<std::vector<std::string>>& blocks);
  const DeviceLayout& layout() const { return layout_; }
  bool Reaches(const Device& device, int peer) const;
  // The device that links this rank to `peer` for `link` (auto: the first that reaches it). Unimplemented when
  // no device serves the kind; FailedPrecondition when the named one does not reach the peer.
  absl::StatusOr<Device*> For(const LinkSpec& link, int peer) const;
  // The device that serves `link` to every rank of the communicator, or null (then no mailbox is shared).
  Device* Sole(const LinkSpec& link) const;
  // InvalidArgument when `link` cannot serve this communicator (Device::CheckLink; a kind no device serves).
  absl::Status CheckLink(const LinkSpec& link, bool intra_step) const;
  // The lanes an endpoint over `link` with `channels` has (the named device's; auto: `channels`). Asked on every
  // call, so answered from a table filled by Add (no virtual call).
  int Lanes(const LinkSpec& link, int channels) const {
    return one_lane_[static_cast<size_t>(link.kind)] ? 1 : channels;
  }
  // The first device's doorbell (null: none has one).
  Doorbell* doorbell() const;

 private:
  std::string Available() const;
  int rank_ = 0;
  DeviceLayout layout_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::array<bool, 6> one_lane_{};  // by LinkKind: its device has one lane whatever the channels
};

}  // namespace hccltune::transport
