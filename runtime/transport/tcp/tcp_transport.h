// TCP transport: links between nodes, and within a node so the tuner can compare links.
//
// Each rank listens on one port on each of its published addresses (never the wildcard). A link key names the network
// (a subnet as CONVENTIONS writes it, "" = the default choice) and the channel count; the links for a key are connected
// the first time an endpoint needs them (the lower rank connects, the higher accepts; hellos carry the communicator
// tag, rank, lane and key, so connections for different keys may arrive in any order) and are then reused. Each channel
// is its own connection (a lane of the Pair).
//
// Address choice for a peer, in order: with HCCL_SOCKET_IFNAME, the peer's address on that interface; a peer
// that has HCCL_SOCKET_IFNAME: its first published address (it listens on and publishes only that interface's);
// the peer's address inside the requested subnet; a peer on this node: loopback; otherwise the peer's first
// address that lies in a subnet of one of this rank's interfaces.
//
// Thread-safety: one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "runtime/net/interfaces.h"
#include "runtime/transport/pair.h"

namespace hccltune {

struct TcpPeerInfo {
  int port = 0;
  std::vector<InterfaceAddress> interfaces;
  bool same_node = false;
  bool ifname_set = false;  // the rank has HCCL_SOCKET_IFNAME
};
nlohmann::json TcpInfoToJson(int port, const std::vector<InterfaceAddress>& ifs, bool ifname_set);
TcpPeerInfo TcpInfoFromJson(const nlohmann::json& j);

// The hello that opens every TCP link, sent by the connecting (lower) rank: u32 magic "HTCP", u64 communicator
// tag, i32 rank, i32 lane, u32 key length, then the key ("network#channels"). Host byte order.
inline constexpr size_t kTcpHelloHeadBytes = 24;
// A key is a subnet in CIDR form, '#' and a channel count.
inline constexpr size_t kMaxTcpHelloKeyBytes = 256;
struct TcpHello {
  int rank = 0;
  int lane = 0;
  uint32_t key_bytes = 0;
};
// Parses and checks a hello's fixed part (kTcpHelloHeadBytes bytes) for the communicator with `tag` whose ranks
// are 0..world-1, received by rank `self`: the magic, the tag, a rank of the communicator other than `self`, a
// lane below kMaxChannels, a key of at most kMaxTcpHelloKeyBytes. InvalidArgument names the first field that is
// wrong and what was expected; a connection from another communicator (another tag) is FailedPrecondition.
absl::StatusOr<TcpHello> ParseTcpHelloHead(absl::string_view head, uint64_t tag, int self, int world);

class TcpDomain {
 public:
  // Starts listening on one port on each of this node's IPv4 addresses that are up (loopback included), or only
  // on `ifname`'s (HCCL_SOCKET_IFNAME; then only those are published); never on the wildcard. The port is one the
  // kernel picks, or with `port_range` (HCCL_TUNE_PORT_RANGE, inclusive) one inside it; Unavailable naming the
  // range and the addresses when none is free on every address.
  static absl::StatusOr<std::unique_ptr<TcpDomain>> Create(int rank, uint64_t comm_tag, std::string ifname,
                                                           absl::Duration connect_timeout,
                                                           std::optional<std::pair<int, int>> port_range = {});
  ~TcpDomain();
  int port() const { return port_; }
  bool ifname_set() const { return !ifname_.empty(); }
  const std::vector<InterfaceAddress>& interfaces() const { return interfaces_; }
  void SetPeers(std::map<int, TcpPeerInfo> peers) { peers_ = std::move(peers); }
  // Asked (at most every 50 ms) while Connect waits for peers: a non-OK status (another rank's abort) ends the
  // wait with that status.
  void SetAbortProbe(std::function<absl::Status()> probe) { abort_probe_ = std::move(probe); }

  // Connects made inside a collective call wait for their peers at most `limit` as well (HCCL_EXEC_TIMEOUT: a peer
  // that does not come is a peer that does not arrive at the call): Connect waits min(HCCL_CONNECT_TIMEOUT,
  // limit) and its error names the bound that applied. InfiniteDuration(): HCCL_CONNECT_TIMEOUT alone.
  void SetCallLimit(absl::Duration limit) { call_limit_ = limit; }

  // Links to every rank in `ranks` (excluding this rank) for (network, channels), connecting on first use.
  // Every rank in `ranks` must call this for the same key around the same time.
  absl::StatusOr<std::vector<Pair*>> Connect(const std::vector<int>& ranks, const std::string& network, int channels);

  // InvalidArgument naming the first rank (this one included) with no interface in `network` (a CIDR subnet), so a
  // configuration's link=tcp@network is refused before any traffic. Every rank holds every rank's interfaces
  // (exchanged at setup), so every rank reaches the same verdict. OK when HCCL_SOCKET_IFNAME is set (it decides).
  absl::Status CheckNetwork(const std::string& network) const;

 private:
  using Key = std::tuple<std::string, int, int>;  // network, channels, peer
  absl::Status Listen(std::optional<std::pair<int, int>> port_range);
  absl::StatusOr<std::string> AddressFor(int peer, const std::string& network) const;
  absl::Status Aborted();
  // Reads and checks the hello of an accepted connection, waiting at most `timeout_ms` for it: the hello and its key.
  absl::StatusOr<std::pair<TcpHello, std::string>> ReadHello(int fd, int64_t timeout_ms) const;
  absl::Status AcceptUntil(const std::map<std::pair<std::string, int>, std::vector<int>>& wanted, absl::Time deadline);

  int rank_ = 0;
  uint64_t tag_ = 0;
  std::string ifname_;
  absl::Duration connect_timeout_;
  absl::Duration call_limit_ = absl::InfiniteDuration();
  const char* bound_name_ = "HCCL_CONNECT_TIMEOUT";  // the variable whose bound the current Connect waits
  std::vector<int> listen_fds_;                      // one per published address, all on port_
  int port_ = 0;
  std::vector<InterfaceAddress> interfaces_;
  std::map<int, TcpPeerInfo> peers_;
  std::function<absl::Status()> abort_probe_;
  absl::Time last_probe_ = absl::InfinitePast();
  std::map<Key, std::unique_ptr<Pair>> pairs_;
  // Accepted sockets not yet claimed: (key string, peer) -> fd per lane.
  std::map<std::pair<std::string, int>, std::map<int, int>> stash_;
};

}  // namespace hccltune
