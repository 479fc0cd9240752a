#include "runtime/transport/tcp/tcp_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/common/configuration.h"
#include "runtime/common/json_field.h"
#include "runtime/common/logging.h"
#include "runtime/common/status_macros.h"
#include "runtime/net/socket_io.h"

namespace hccltune {
namespace {

constexpr uint32_t kHelloMagic = 0x48544350;  // "HTCP"

absl::Status SysError(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat("tcp: ", what, ": ", std::strerror(errno)));
}

void Tune(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

class TcpPair final : public Pair {
 public:
  TcpPair(int peer, std::vector<int> fds, std::string where) : peer_(peer), fds_(std::move(fds)), where_(where) {
    for (int fd : fds_) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  ~TcpPair() override {
    for (int fd : fds_) ::close(fd);
  }
  int lanes() const override { return static_cast<int>(fds_.size()); }

  absl::StatusOr<size_t> TryWrite(int lane, const void* data, size_t bytes) override {
    ssize_t w = ::send(fds_[static_cast<size_t>(lane)], data, bytes, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w >= 0) return static_cast<size_t>(w);
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return size_t{0};
    return Lost(std::strerror(errno));
  }
  absl::StatusOr<size_t> TryRead(int lane, void* data, size_t bytes) override {
    if (bytes == 0) return size_t{0};
    ssize_t r = ::recv(fds_[static_cast<size_t>(lane)], data, bytes, MSG_DONTWAIT);
    if (r > 0) return static_cast<size_t>(r);
    if (r == 0) return Lost("the peer closed the connection (did it exit or crash?)");
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return size_t{0};
    return Lost(std::strerror(errno));
  }
  void AddPollFds(int lane, bool want_read, bool want_write, std::vector<pollfd>* fds) override {
    short ev = 0;
    if (want_read) ev |= POLLIN;
    if (want_write) ev |= POLLOUT;
    fds->push_back({fds_[static_cast<size_t>(lane)], ev, 0});
  }
  std::string Describe() const override { return absl::StrCat("tcp ", where_, " x", fds_.size()); }
  std::string LocalAddress() const override { return Address(::getsockname); }
  std::string PeerAddress() const override { return Address(::getpeername); }

 private:
  // The IPv4 address getsockname/getpeername reports for the first connection ("" when it cannot tell).
  std::string Address(int (*name)(int, sockaddr*, socklen_t*)) const {
    sockaddr_in sa{};
    socklen_t len = sizeof(sa);
    char text[INET_ADDRSTRLEN] = {};
    if (fds_.empty() || name(fds_[0], reinterpret_cast<sockaddr*>(&sa), &len) != 0 || sa.sin_family != AF_INET ||
        ::inet_ntop(AF_INET, &sa.sin_addr, text, sizeof(text)) == nullptr) {
      return "";
    }
    return text;
  }
  absl::Status Lost(absl::string_view why) const {
    return absl::UnavailableError(absl::StrCat("tcp link to rank ", peer_, " (", where_, ") lost: ", why));
  }
  int peer_;
  std::vector<int> fds_;
  std::string where_;
};

std::string HelloKey(const std::string& network, int channels) { return absl::StrCat(network, "#", channels); }

}  // namespace

absl::StatusOr<TcpHello> ParseTcpHelloHead(absl::string_view head, uint64_t tag, int self, int world) {
  if (head.size() != kTcpHelloHeadBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a TCP hello of ", head.size(), " bytes (expected ", kTcpHelloHeadBytes, ")"));
  }
  uint32_t magic = 0;
  uint64_t their_tag = 0;
  int32_t rank = 0, lane = 0;
  uint32_t key_bytes = 0;
  std::memcpy(&magic, head.data(), 4);
  std::memcpy(&their_tag, head.data() + 4, 8);
  std::memcpy(&rank, head.data() + 12, 4);
  std::memcpy(&lane, head.data() + 16, 4);
  std::memcpy(&key_bytes, head.data() + 20, 4);
  if (magic != kHelloMagic) {
    return absl::InvalidArgumentError(absl::StrFormat("not an hccl-tune TCP hello (magic 0x%08x)", magic));
  }
  if (their_tag != tag) {
    return absl::FailedPreconditionError(
        absl::StrFormat("a hello of another communicator (tag %016x, this one %016x)", their_tag, tag));
  }
  if (rank < 0 || rank >= world || rank == self) {
    return absl::InvalidArgumentError(absl::StrCat("a hello from rank ", rank,
                                                   ", which is not another rank of this communicator (0..", world - 1,
                                                   ", this is ", self, ")"));
  }
  if (lane < 0 || lane >= kMaxChannels) {
    return absl::InvalidArgumentError(
        absl::StrCat("a hello from rank ", rank, " for lane ", lane, " (lanes are 0..", kMaxChannels - 1, ")"));
  }
  if (key_bytes > kMaxTcpHelloKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a hello from rank ", rank, " with a key of ", key_bytes,
                                                   " bytes (the limit is ", kMaxTcpHelloKeyBytes, ")"));
  }
  return TcpHello{rank, lane, key_bytes};
}

nlohmann::json TcpInfoToJson(int port, const std::vector<InterfaceAddress>& ifs, bool ifname_set) {
  nlohmann::json j;
  j["port"] = port;
  j["ifname_set"] = ifname_set;
  j["ifs"] = nlohmann::json::array();
  for (const auto& i : ifs) j["ifs"].push_back({{"name", i.name}, {"addr", i.address}, {"prefix", i.prefix}});
  return j;
}

TcpPeerInfo TcpInfoFromJson(const nlohmann::json& j) {
  TcpPeerInfo info;
  info.port = JsonOr(j, "port", 0);
  info.ifname_set = JsonOr(j, "ifname_set", false);
  if (j.contains("ifs")) {
    for (const auto& i : j["ifs"]) {
      info.interfaces.push_back({JsonOr(i, "name", ""), JsonOr(i, "addr", ""), JsonOr(i, "prefix", 32)});
    }
  }
  return info;
}

namespace {

void CloseAll(std::vector<int>* fds) {
  for (int fd : *fds) ::close(fd);
  fds->clear();
}

// A listening socket on address:port (port 0: one the kernel picks), or -1 with errno set.
int ListenOn(const std::string& address, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // a previous job's TIME_WAIT does not hold a port
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) {
    ::close(fd);
    errno = EINVAL;
    return -1;
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 4096) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

// Listens on every address on one port (0: the kernel picks it for the first address). On failure closes what
// it opened and returns errno (EADDRINUSE: the port is taken on some address); `failed` names that address.
int ListenOnAll(const std::vector<std::string>& addresses, int port, std::vector<int>* fds, int* bound_port,
                std::string* failed) {
  for (const std::string& a : addresses) {
    const int fd = ListenOn(a, port);
    if (fd < 0) {
      const int err = errno;
      *failed = a;
      CloseAll(fds);
      return err;
    }
    fds->push_back(fd);
    if (port == 0) {
      sockaddr_in addr{};
      socklen_t len = sizeof(addr);
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
      port = ntohs(addr.sin_port);
    }
  }
  *bound_port = port;
  return 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpDomain>> TcpDomain::Create(int rank, uint64_t comm_tag, std::string ifname,
                                                             absl::Duration connect_timeout,
                                                             std::optional<std::pair<int, int>> port_range) {
  auto d = std::unique_ptr<TcpDomain>(new TcpDomain());
  d->rank_ = rank;
  d->tag_ = comm_tag;
  d->ifname_ = std::move(ifname);
  d->connect_timeout_ = connect_timeout;
  d->interfaces_ = ListInterfaces();
  if (!d->ifname_.empty()) {
    // Only HCCL_SOCKET_IFNAME's addresses are listened on, so only they are published.
    std::erase_if(d->interfaces_, [&](const InterfaceAddress& i) { return i.name != d->ifname_; });
    if (d->interfaces_.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("HCCL_SOCKET_IFNAME='", d->ifname_, "': no IPv4 interface of that name is up on this node"));
    }
  }
  HT_RETURN_IF_ERROR(d->Listen(port_range));
  return d;
}

// Listening (docs/SECURITY.md, Job connections): one socket per IPv4 address the domain publishes (loopback
// included: peers on this node connect over it), never the wildcard, all on one port so the published port stays
// one number. Without a port range the kernel picks the first socket's port and the others bind to it; a clash on
// a later address (EADDRINUSE) starts over on a new kernel-chosen port, at most kKernelPortTries times. With
// HCCL_TUNE_PORT_RANGE the ports are tried from LO + pid % (HI-LO+1), walking the range (wrapping), so the ranks
// of a node start apart; a port taken on any address moves on to the next. No port free on every address: an
// error naming the range and the addresses.
absl::Status TcpDomain::Listen(std::optional<std::pair<int, int>> port_range) {
  std::vector<std::string> addresses;
  for (const auto& i : interfaces_) {
    if (std::find(addresses.begin(), addresses.end(), i.address) == addresses.end()) addresses.push_back(i.address);
  }
  if (addresses.empty()) return absl::UnavailableError("tcp: this node has no IPv4 interface that is up");
  constexpr int kKernelPortTries = 64;
  const int lo = port_range ? port_range->first : 0;
  const int count = port_range ? port_range->second - port_range->first + 1 : kKernelPortTries;
  const int first = port_range ? static_cast<int>(::getpid() % count) : 0;
  std::string failed;
  for (int k = 0; k < count; ++k) {
    const int port = port_range ? lo + (first + k) % count : 0;
    const int err = ListenOnAll(addresses, port, &listen_fds_, &port_, &failed);
    if (err == 0) return absl::OkStatus();
    if (err != EADDRINUSE) {
      return absl::UnavailableError(
          absl::StrCat("tcp: cannot listen on ", failed, ":", port, ": ", std::strerror(err)));
    }
  }
  if (!port_range) {
    return absl::UnavailableError(absl::StrCat("tcp: no port free on every address of this rank (",
                                               absl::StrJoin(addresses, ", "), ") after ", count, " tries"));
  }
  return absl::UnavailableError(absl::StrCat("no free port in HCCL_TUNE_PORT_RANGE ", port_range->first, "-",
                                             port_range->second, " on ", absl::StrJoin(addresses, ", ")));
}

TcpDomain::~TcpDomain() {
  pairs_.clear();
  for (auto& [k, lanes] : stash_) {
    for (auto& [lane, fd] : lanes) ::close(fd);
  }
  CloseAll(&listen_fds_);
}

absl::StatusOr<std::string> TcpDomain::AddressFor(int peer, const std::string& network) const {
  auto it = peers_.find(peer);
  if (it == peers_.end()) return absl::InternalError(absl::StrCat("tcp: no address of rank ", peer));
  const TcpPeerInfo& info = it->second;
  // Precedence (docs/CONVENTIONS.md, Networks): the user's HCCL_SOCKET_IFNAME, then the configuration's network (the
  // tuned table or an override), then the route to the peer.
  if (!ifname_.empty()) {
    for (const auto& i : info.interfaces) {
      if (i.name != ifname_) continue;
      if (!network.empty() && !InSubnet(i.address, network)) {
        static std::atomic<bool> warned{false};
        if (!warned.exchange(true)) {
          Log(LogLevel::kWarn, "HCCL_SOCKET_IFNAME=", ifname_, " overrides link=tcp@", network,
              " of the chosen configuration (the user's interface comes first)");
        }
      }
      return i.address;
    }
    return absl::FailedPreconditionError(
        absl::StrCat("HCCL_SOCKET_IFNAME=", ifname_, ": rank ", peer, " has no interface of that name"));
  }
  // A peer with HCCL_SOCKET_IFNAME listens on, and publishes, only that interface's addresses.
  if (info.ifname_set && !info.interfaces.empty()) return info.interfaces.front().address;
  if (!network.empty()) {
    for (const auto& i : info.interfaces) {
      if (InSubnet(i.address, network)) return i.address;
    }
    return absl::FailedPreconditionError(
        absl::StrCat("link=tcp@", network, ": rank ", peer, " has no interface in that network"));
  }
  if (info.same_node) return std::string("127.0.0.1");
  for (const auto& i : info.interfaces) {
    if (i.name == "lo") continue;
    for (const auto& mine : interfaces_) {
      if (mine.name != "lo" && InSubnet(i.address, mine.Subnet())) return i.address;
    }
  }
  for (const auto& i : info.interfaces) {
    if (i.name != "lo") return i.address;
  }
  return absl::FailedPreconditionError(absl::StrCat("tcp: rank ", peer, " published no reachable address"));
}

absl::Status TcpDomain::CheckNetwork(const std::string& network) const {
  // HCCL_SOCKET_IFNAME on any rank decides that rank's addresses instead (each rank knows which ranks set it).
  bool ifname_somewhere = !ifname_.empty();
  for (const auto& [r, info] : peers_) ifname_somewhere = ifname_somewhere || info.ifname_set;
  if (ifname_somewhere || network.empty()) return absl::OkStatus();
  const auto has = [&](const std::vector<InterfaceAddress>& ifs) {
    for (const auto& i : ifs) {
      if (InSubnet(i.address, network)) return true;
    }
    return false;
  };
  int missing = has(interfaces_) ? -1 : rank_;
  for (const auto& [r, info] : peers_) {
    if (missing >= 0 && missing < r) break;
    if (!has(info.interfaces)) missing = r;
  }
  if (missing < 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("link=tcp@", network, ": rank ", missing, " has no interface in that network"));
}

absl::Status TcpDomain::Aborted() {
  if (!abort_probe_) return absl::OkStatus();
  const absl::Time now = absl::Now();
  if (now - last_probe_ < absl::Milliseconds(50)) return absl::OkStatus();
  last_probe_ = now;
  return abort_probe_();
}

absl::StatusOr<std::pair<TcpHello, std::string>> TcpDomain::ReadHello(int fd, int64_t timeout_ms) const {
  timeval tv{static_cast<time_t>(timeout_ms / 1000), static_cast<suseconds_t>(timeout_ms % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char head[kTcpHelloHeadBytes];
  if (!RecvAll(fd, head, sizeof(head))) {
    return absl::InvalidArgumentError(absl::StrCat("no complete hello within ", timeout_ms, " ms"));
  }
  int world = rank_ + 1;
  if (!peers_.empty()) world = std::max(world, peers_.rbegin()->first + 1);
  auto hello = ParseTcpHelloHead(absl::string_view(head, sizeof(head)), tag_, rank_, world);
  if (!hello.ok()) return hello.status();
  std::string key(hello->key_bytes, '\0');
  if (!RecvAll(fd, key.data(), key.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("a hello from rank ", hello->rank, " ended inside its ", hello->key_bytes, "-byte key"));
  }
  return std::make_pair(*hello, std::move(key));
}

absl::Status TcpDomain::AcceptUntil(const std::map<std::pair<std::string, int>, std::vector<int>>& wanted,
                                    absl::Time deadline) {
  auto satisfied = [&] {
    for (const auto& [k, lanes] : wanted) {
      auto it = stash_.find(k);
      for (size_t lane = 0; lane < lanes.size(); ++lane) {
        if (it == stash_.end() || !it->second.count(static_cast<int>(lane))) return false;
      }
    }
    return true;
  };
  while (!satisfied()) {
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) {
      std::string missing;
      for (const auto& [k, lanes] : wanted) {
        auto it = stash_.find(k);
        if (it == stash_.end() || it->second.size() < lanes.size()) absl::StrAppend(&missing, " ", k.second);
      }
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", rank_, ": tcp connections from ranks", missing, " never arrived (", bound_name_, ")"));
    }
    // Another rank that failed (e.g. rank 0 found no address in the requested network) posts an abort: report
    // its error now instead of waiting out HCCL_CONNECT_TIMEOUT for connections that will never come.
    if (absl::Status aborted = Aborted(); !aborted.ok()) return aborted;
    std::vector<pollfd> polled;
    for (int l : listen_fds_) polled.push_back({l, POLLIN, 0});
    if (::poll(polled.data(), polled.size(), static_cast<int>(std::min<int64_t>(ms, 100))) <= 0) continue;
    int fd = -1;
    for (const pollfd& p : polled) {
      if (fd < 0 && (p.revents & POLLIN)) fd = ::accept4(p.fd, nullptr, nullptr, SOCK_CLOEXEC);
    }
    if (fd < 0) continue;
    sockaddr_in from{};
    socklen_t from_len = sizeof(from);
    ::getpeername(fd, reinterpret_cast<sockaddr*>(&from), &from_len);
    char from_ip[INET_ADDRSTRLEN] = "?";
    ::inet_ntop(AF_INET, &from.sin_addr, from_ip, sizeof(from_ip));
    auto hello = ReadHello(fd, std::min<int64_t>(ms, 5000));
    const auto have = hello.ok() ? stash_.find({hello->second, hello->first.rank}) : stash_.end();
    if (!hello.ok() || (have != stash_.end() && have->second.count(hello->first.lane))) {
      // Not one of ours (a scanner, another job, a damaged peer): drop it and go on waiting for the real ones.
      Log(absl::IsFailedPrecondition(hello.status()) ? LogLevel::kDebug : LogLevel::kWarn, "rank ", rank_,
          ": refused a TCP connection from ", from_ip, ":", ntohs(from.sin_port), ": ",
          hello.ok()
              ? absl::StrCat("a second connection from rank ", hello->first.rank, " for lane ", hello->first.lane)
              : std::string(hello.status().message()));
      ::close(fd);
      continue;
    }
    const int rank = hello->first.rank, lane = hello->first.lane;
    const std::string key = hello->second;
    timeval none{0, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
    Tune(fd);
    stash_[{key, rank}][lane] = fd;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Pair*>> TcpDomain::Connect(const std::vector<int>& ranks, const std::string& network,
                                                      int channels) {
  const std::string key = HelloKey(network, channels);
  bound_name_ = call_limit_ < connect_timeout_ ? "HCCL_EXEC_TIMEOUT" : "HCCL_CONNECT_TIMEOUT";
  const absl::Time deadline = absl::Now() + std::min(connect_timeout_, call_limit_);
  int max_rank = rank_;
  for (int r : ranks) max_rank = std::max(max_rank, r);
  std::vector<Pair*> out(static_cast<size_t>(max_rank) + 1, nullptr);
  std::map<std::pair<std::string, int>, std::vector<int>> wanted;
  // Connect to higher ranks.
  for (int peer : ranks) {
    if (peer == rank_) continue;
    auto existing = pairs_.find({network, channels, peer});
    if (existing != pairs_.end()) {
      out[static_cast<size_t>(peer)] = existing->second.get();
      continue;
    }
    if (peer < rank_) {
      wanted[{key, peer}] = std::vector<int>(static_cast<size_t>(channels));
      continue;
    }
    auto addr = AddressFor(peer, network);
    if (!addr.ok()) return addr.status();
    const std::string where = absl::StrCat(*addr, ":", peers_[peer].port);
    std::vector<int> fds;
    for (int lane = 0; lane < channels; ++lane) {
      int fd = -1;
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_port = htons(static_cast<uint16_t>(peers_[peer].port));
      if (::inet_pton(AF_INET, addr->c_str(), &sa.sin_addr) != 1) {
        for (int f : fds) ::close(f);
        return absl::FailedPreconditionError(
            absl::StrCat("tcp: rank ", peer, " published '", *addr, "', which is not an IPv4 address"));
      }
      while (true) {
        fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
          absl::Status s = SysError(absl::StrCat("socket for the connection to rank ", peer));
          for (int f : fds) ::close(f);
          return s;
        }
        // Bounded by the deadline: an address that drops packets would otherwise hold connect() for the
        // kernel's SYN retries (about 2 minutes).
        const int err = ConnectBefore(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa), deadline);
        if (err == 0) break;
        ::close(fd);
        absl::Status aborted = Aborted();
        if (!aborted.ok() || absl::Now() >= deadline) {
          for (int f : fds) ::close(f);
          if (!aborted.ok()) return aborted;
          return absl::DeadlineExceededError(absl::StrCat("rank ", rank_, ": cannot connect to rank ", peer, " at ",
                                                          where, ": ", std::strerror(err), " (", bound_name_, ")"));
        }
        absl::SleepFor(absl::Milliseconds(5));
      }
      Tune(fd);
      const uint32_t klen = static_cast<uint32_t>(key.size());
      const int32_t me = rank_, ln = lane;
      if (!SendAll(fd, &kHelloMagic, 4) || !SendAll(fd, &tag_, 8) || !SendAll(fd, &me, 4) || !SendAll(fd, &ln, 4) ||
          !SendAll(fd, &klen, 4) || !SendAll(fd, key.data(), klen)) {
        ::close(fd);
        for (int f : fds) ::close(f);
        return SysError(absl::StrCat("hello to rank ", peer, " at ", where));
      }
      fds.push_back(fd);
    }
    auto pair = std::make_unique<TcpPair>(peer, std::move(fds), where);
    out[static_cast<size_t>(peer)] = pair.get();
    pairs_[{network, channels, peer}] = std::move(pair);
  }
  if (absl::Status s = AcceptUntil(wanted, deadline); !s.ok()) return s;
  for (const auto& [k, lanes] : wanted) {
    auto& got = stash_[k];
    std::vector<int> fds;
    for (int lane = 0; lane < channels; ++lane) fds.push_back(got[lane]);
    stash_.erase(k);
    const int peer = k.second;
    auto pair = std::make_unique<TcpPair>(peer, std::move(fds), absl::StrCat("from rank ", peer));
    out[static_cast<size_t>(peer)] = pair.get();
    pairs_[{network, channels, peer}] = std::move(pair);
  }
  out.resize(out.size());
  return out;
}

}  // namespace hccltune
