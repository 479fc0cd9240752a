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
// Admission: each domain runs a listener thread from SetPeers on (until then connections wait in the kernel's
// queue). It accepts only connections from the address book (the addresses the ranks published) and HCCL's
// whitelist, and runs every accepted connection's hello and job handshake (runtime/common/job_auth.h) at once,
// whenever it arrives — inside a Connect or not — so a foreign connection is refused (logged once per address)
// and never delays the ranks'. Completed connections wait in a stash until a Connect claims them.
//
// Thread-safety: the public methods are called by one thread at a time; the listener thread shares only the
// address book and the stash with them, under a mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "runtime/common/job_auth.h"
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
// tag, i32 rank, i32 lane, u32 key length, then the key ("network#channels"), then the job handshake's offer
// (runtime/common/job_auth.h). Host byte order. The accepting rank answers with the handshake's challenge; the
// connecting rank checks it and sends its proof. Only then is the link made.
inline constexpr size_t kTcpHelloHeadBytes = 24;
// Connections whose hello and handshake are under way at once, per domain; beyond it new ones are refused.
inline constexpr size_t kMaxPendingHandshakes = 1024;
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
  // range and the addresses when none is free on every address. `auth` (LoadJobAuth) is the job's secret and
  // whitelist: every connection either way completes the handshake, and an accepted one must come from an address
  // of the address book (the addresses the ranks published, SetPeers) and the whitelist; the default (no secret,
  // no whitelist) is for tests.
  static absl::StatusOr<std::unique_ptr<TcpDomain>> Create(int rank, uint64_t comm_tag, std::string ifname,
                                                           absl::Duration connect_timeout,
                                                           std::optional<std::pair<int, int>> port_range = {},
                                                           JobAuth auth = {});
  ~TcpDomain();
  int port() const { return port_; }
  bool ifname_set() const { return !ifname_.empty(); }
  const std::vector<InterfaceAddress>& interfaces() const { return interfaces_; }
  // The other ranks' published listeners: the address book (TcpPeerInfo::same_node marks the ranks on this node,
  // which every pair reports as Pair::HostRanks). Starts the listener thread on the first call.
  void SetPeers(std::map<int, TcpPeerInfo> peers);
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
  // An accepted connection whose hello and handshake are still arriving, and a connection to a higher rank
  // waiting for the acceptor's challenge. Both read exactly what the next message needs, never into the data that
  // follows it.
  struct Incoming {
    int fd = -1;
    std::string from;  // "ip:port"
    std::string ip;
    absl::Time deadline;
    std::string in;
    size_t need = kTcpHelloHeadBytes;
    int stage = 0;  // 0 head, 1 key and mode, 2 the offer's nonce, 3 the proof
    TcpHello hello;
    std::string key, offer, nonce_a;
  };
  struct Outgoing {
    int fd = -1;
    int peer = 0, lane = 0;
    std::string where, key, nonce_c, in;
    size_t need = 1;
    bool done = false;
  };
  // The context the handshake's MACs cover: the tag, both ranks, the lane and the key.
  std::string HandshakeContext(int connector, int acceptor, int lane, const std::string& key) const;
  // The listener thread: accepts, admits and runs the handshakes of incoming connections until stop_.
  void ListenLoop();
  void AcceptOne(int listen_fd);
  // Reads what `c` needs next and acts on it; false when the connection was refused (closed and logged) or
  // complete (stashed). Listener thread only.
  bool Advance(Incoming& c);
  void Stash(Incoming& c);
  // The same for a connection this rank made: OK while it goes on, the error that ends Connect otherwise.
  absl::Status Advance(Outgoing& c);
  void Refuse(Incoming& c, absl::string_view why);
  // Opens `channels` connections to `peer` and sends their hellos and offers.
  absl::Status Dial(int peer, const std::string& network, const std::string& key, int channels, absl::Time deadline,
                    std::vector<Outgoing>* out);
  // Waits until every wanted lane is stashed and every outgoing connection is proven.
  absl::Status AwaitLinks(const std::map<std::pair<std::string, int>, std::vector<int>>& wanted,
                          std::vector<Outgoing>* outgoing, absl::Time deadline);
  bool Satisfied(const std::map<std::pair<std::string, int>, std::vector<int>>& wanted,
                 const std::vector<Outgoing>& outgoing);

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
  int host_ranks_ = 0;  // ranks on this node, this one included (SetPeers); 0 before
  std::function<absl::Status()> abort_probe_;
  absl::Time last_probe_ = absl::InfinitePast();
  std::map<Key, std::unique_ptr<Pair>> pairs_;
  JobAuth auth_;

  absl::Mutex mu_;
  // Accepted and proven sockets not yet claimed: (key string, peer) -> fd per lane.
  std::map<std::pair<std::string, int>, std::map<int, int>> stash_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> book_ ABSL_GUARDED_BY(mu_);  // the address book: every rank's published addresses
  int world_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Incoming> incoming_;  // handshakes under way (listener thread only)
  std::thread listener_;
  std::atomic<bool> stop_{false};
  int wake_[2] = {-1, -1};     // pokes the listener thread (stop)
  int stashed_[2] = {-1, -1};  // the listener thread tells a waiting Connect that it stashed a connection
};

}  // namespace hccltune
