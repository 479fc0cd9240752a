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
  TcpPair(int peer, std::vector<int> fds, std::string where, int host_ranks)
      : peer_(peer), fds_(std::move(fds)), where_(where), host_ranks_(host_ranks) {
    for (int fd : fds_) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  ~TcpPair() override {
    for (int fd : fds_) ::close(fd);
  }
  int lanes() const override { return static_cast<int>(fds_.size()); }

  absl::StatusOr<size_t> TryWrite(int lane, const void* data, size_t bytes) override {
    ssize_t w = ::send(fds_[static_cast<size_t>(lane)], data, bytes, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w >= 0) return Counted(static_cast<size_t>(w));
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
  // The communicator's ranks on this node (TcpDomain::host_ranks): TCP ranks compete for this node's CPUs as shm
  // ranks do, so the endpoint's waits yield at once when they outnumber the CPUs (StreamEndpoint).
  int HostRanks() const override { return host_ranks_; }
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
  int host_ranks_;
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
                                                             std::optional<std::pair<int, int>> port_range,
                                                             JobAuth auth) {
  auto d = std::unique_ptr<TcpDomain>(new TcpDomain());
  d->auth_ = std::move(auth);
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
  if (::pipe2(d->wake_, O_CLOEXEC | O_NONBLOCK) != 0 || ::pipe2(d->stashed_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return SysError("pipe");
  }
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
  if (listener_.joinable()) {
    stop_ = true;
    const char one = 1;
    (void)!::write(wake_[1], &one, 1);
    listener_.join();
  }
  for (int fd : {wake_[0], wake_[1], stashed_[0], stashed_[1]}) {
    if (fd >= 0) ::close(fd);
  }
  pairs_.clear();
  absl::MutexLock lock(&mu_);
  for (auto& [k, lanes] : stash_) {
    for (auto& [lane, fd] : lanes) ::close(fd);
  }
  for (const Incoming& c : incoming_) ::close(c.fd);
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

std::string TcpDomain::HandshakeContext(int connector, int acceptor, int lane, const std::string& key) const {
  std::string ctx = "tcp";
  const int32_t ints[3] = {connector, acceptor, lane};
  ctx.append(reinterpret_cast<const char*>(&tag_), sizeof(tag_));
  ctx.append(reinterpret_cast<const char*>(ints), sizeof(ints));
  return ctx + key;
}

void TcpDomain::SetPeers(std::map<int, TcpPeerInfo> peers) {
  peers_ = std::move(peers);
  host_ranks_ = static_cast<int>(std::count_if(peers_.begin(), peers_.end(),
                                               [&](const auto& p) { return p.first != rank_ && p.second.same_node; })) +
                1;
  {
    absl::MutexLock lock(&mu_);
    book_.clear();
    for (const auto& i : interfaces_) book_.insert(i.address);
    for (const auto& [r, info] : peers_) {
      for (const auto& i : info.interfaces) book_.insert(i.address);
    }
    world_ = std::max(rank_ + 1, peers_.empty() ? 0 : peers_.rbegin()->first + 1);
  }
  if (!listener_.joinable()) listener_ = std::thread([this] { ListenLoop(); });
}

// The listener thread: one poll over the listening sockets and the connections whose hello and handshake are
// under way; a connection past its deadline is dropped. Each connection is read only as far as its next message,
// so no connection waits for another.
void TcpDomain::ListenLoop() {
  while (!stop_.load(std::memory_order_relaxed)) {
    const absl::Time now = absl::Now();
    std::erase_if(incoming_, [&](Incoming& c) {
      if (now <= c.deadline) return false;
      Refuse(c, absl::StrCat("no complete hello and handshake within ", kHandshakeTimeoutMs, " ms"));
      return true;
    });
    std::vector<pollfd> polled;
    polled.push_back({wake_[0], POLLIN, 0});
    for (int l : listen_fds_) polled.push_back({l, POLLIN, 0});
    for (const Incoming& c : incoming_) polled.push_back({c.fd, POLLIN, 0});
    // Asleep until a connection, a byte of a handshake, the nearest handshake deadline or the destructor's poke:
    // an idle domain costs no wake-ups.
    int timeout_ms = -1;
    for (const Incoming& c : incoming_) {
      const int64_t left = std::max<int64_t>(0, absl::ToInt64Milliseconds(c.deadline - now) + 1);
      timeout_ms = timeout_ms < 0 ? static_cast<int>(left) : std::min(timeout_ms, static_cast<int>(left));
    }
    if (::poll(polled.data(), polled.size(), timeout_ms) <= 0) continue;
    if (polled[0].revents != 0) {
      char drain[64];
      while (::read(wake_[0], drain, sizeof(drain)) > 0) {
      }
    }
    size_t i = 1 + listen_fds_.size();
    std::vector<Incoming> going_on;
    for (Incoming& c : incoming_) {
      if (polled[i++].revents == 0 || Advance(c)) going_on.push_back(std::move(c));
    }
    incoming_ = std::move(going_on);
    for (size_t l = 0; l < listen_fds_.size(); ++l) {
      if (polled[1 + l].revents & POLLIN) AcceptOne(listen_fds_[l]);
    }
  }
}

void TcpDomain::Refuse(Incoming& c, absl::string_view why) {
  NoteRefusal(absl::StrCat("rank ", rank_, " (tcp listener, port ", port_, ")"), c.ip,
              absl::StrCat(why, " [", c.from, "]"));
  ::close(c.fd);
  c.fd = -1;
}

// Admission (docs/SECURITY.md, Job connections): a connection whose source address is not in the address book
// (the addresses the job's ranks published; this rank's own, loopback included) or, when it is on, HCCL's
// whitelist, is closed before anything is read. The others get kHandshakeTimeoutMs (or what is left of the
// connect deadline, whichever is longer) to complete their hello and handshake.
void TcpDomain::AcceptOne(int listen_fd) {
  sockaddr_in from{};
  socklen_t len = sizeof(from);
  Incoming c;
  c.fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (c.fd < 0) {
    // Out of descriptors: the listener stays readable; pause instead of spinning on it.
    if (errno == EMFILE || errno == ENFILE) absl::SleepFor(absl::Milliseconds(10));
    return;
  }
  char ip[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &from.sin_addr, ip, sizeof(ip));
  c.ip = ip;
  c.from = absl::StrCat(ip, ":", ntohs(from.sin_port));
  c.deadline = absl::Now() + absl::Milliseconds(kHandshakeTimeoutMs);
  bool known = false;
  {
    absl::MutexLock lock(&mu_);
    known = book_.count(c.ip) > 0;
  }
  if (!known) return Refuse(c, "its address is not one the job's ranks published");
  if (incoming_.size() >= kMaxPendingHandshakes) {
    return Refuse(c, absl::StrCat(kMaxPendingHandshakes, " handshakes are under way already"));
  }
  if (!auth_.Whitelisted(c.ip)) return Refuse(c, absl::StrCat("its address is not in ", auth_.whitelist_file));
  incoming_.push_back(std::move(c));
}

// The acceptor's side of one connection, message by message: the hello's fixed part, its key and the offer's
// mode byte, the offer's nonce, (answer) the proof. A connection that fails a check is refused; the listener and
// the other connections go on.
bool TcpDomain::Advance(Incoming& c) {
  while (c.in.size() < c.need) {
    char buf[kTcpHelloHeadBytes + kMaxTcpHelloKeyBytes + 1];
    const ssize_t r = ::recv(c.fd, buf, std::min(sizeof(buf), c.need - c.in.size()), MSG_DONTWAIT);
    if (r > 0) {
      c.in.append(buf, static_cast<size_t>(r));
      continue;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
    Refuse(c, absl::StrCat("the connection ended inside its hello or handshake (stage ", c.stage, ")"));
    return false;
  }
  if (c.stage == 0) {
    int world = 0;
    {
      absl::MutexLock lock(&mu_);
      world = world_;
    }
    auto hello = ParseTcpHelloHead(c.in, tag_, rank_, world);
    if (!hello.ok()) {
      Refuse(c, hello.status().message());
      return false;
    }
    c.hello = *hello;
    c.stage = 1;
    c.need += hello->key_bytes + 1;
    return Advance(c);
  }
  if (c.stage == 1) {
    c.key = c.in.substr(kTcpHelloHeadBytes, c.hello.key_bytes);
    c.stage = 2;
    c.need += OfferRestBytes(static_cast<uint8_t>(c.in.back()));
    return Advance(c);
  }
  const std::string ctx = HandshakeContext(c.hello.rank, rank_, c.hello.lane, c.key);
  if (c.stage == 2) {
    c.offer = c.in.substr(kTcpHelloHeadBytes + c.hello.key_bytes);
    AcceptorStep step = AnswerOffer(auth_, c.offer, ctx);
    if (!step.reply.empty()) (void)SendAll(c.fd, step.reply.data(), step.reply.size());
    if (!step.verdict.ok()) {
      Refuse(c, absl::StrCat("rank ", c.hello.rank, "'s handshake: ", step.verdict.message()));
      return false;
    }
    if (auth_.has_secret()) {
      c.nonce_a = step.nonce_a;
      c.stage = 3;
      c.need += kMacBytes;
      return Advance(c);
    }
  } else if (absl::Status proof = CheckProof(auth_, c.offer, c.nonce_a, c.in.substr(c.in.size() - kMacBytes), ctx);
             !proof.ok()) {
    Refuse(c, absl::StrCat("claiming rank ", c.hello.rank, ": ", proof.message()));
    return false;
  }
  Stash(c);
  return false;
}

void TcpDomain::Stash(Incoming& c) {
  bool second = false;
  {
    absl::MutexLock lock(&mu_);
    auto& lanes = stash_[{c.key, c.hello.rank}];
    second = lanes.count(c.hello.lane) > 0;
    if (!second) {
      Tune(c.fd);
      lanes[c.hello.lane] = c.fd;
      c.fd = -1;
    }
  }
  if (second)
    return Refuse(c, absl::StrCat("a second connection from rank ", c.hello.rank, " for lane ", c.hello.lane));
  const char one = 1;
  (void)!::write(stashed_[1], &one, 1);
}

absl::Status TcpDomain::Advance(Outgoing& c) {
  while (c.in.size() < c.need) {
    char buf[1 + kNonceBytes + kMacBytes];
    const ssize_t r = ::recv(c.fd, buf, std::min(sizeof(buf), c.need - c.in.size()), MSG_DONTWAIT);
    if (r > 0) {
      c.in.append(buf, static_cast<size_t>(r));
      if (c.in.size() > 1) continue;
      // The mode byte alone decides a mismatch (the acceptor closes after it): CheckChallenge names it.
      if ((c.in[0] == 1) != auth_.has_secret()) break;
      c.need += ChallengeRestBytes(static_cast<uint8_t>(c.in[0]));
      continue;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return absl::OkStatus();
    return absl::PermissionDeniedError(absl::StrCat(
        "rank ", rank_, ": rank ", c.peer, " at ", c.where,
        " closed the connection during the handshake: it refused this rank (its log names why: a different job "
        "secret, or this host's address outside its address book or HCCL_WHITELIST_FILE)"));
  }
  auto proof = CheckChallenge(auth_, c.nonce_c, c.in, HandshakeContext(rank_, c.peer, c.lane, c.key),
                              absl::StrCat("rank ", c.peer, " at ", c.where));
  if (!proof.ok()) {
    return absl::Status(proof.status().code(), absl::StrCat("rank ", rank_, ": ", proof.status().message()));
  }
  if (!proof->empty() && !SendAll(c.fd, proof->data(), proof->size())) {
    return SysError(absl::StrCat("handshake proof to rank ", c.peer, " at ", c.where));
  }
  c.done = true;
  return absl::OkStatus();
}

absl::Status TcpDomain::Dial(int peer, const std::string& network, const std::string& key, int channels,
                             absl::Time deadline, std::vector<Outgoing>* out) {
  auto addr = AddressFor(peer, network);
  if (!addr.ok()) return addr.status();
  const std::string where = absl::StrCat(*addr, ":", peers_[peer].port);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(peers_[peer].port));
  if (::inet_pton(AF_INET, addr->c_str(), &sa.sin_addr) != 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("tcp: rank ", peer, " published '", *addr, "', which is not an IPv4 address"));
  }
  for (int lane = 0; lane < channels; ++lane) {
    Outgoing c{.peer = peer, .lane = lane, .where = where, .key = key};
    while (true) {
      c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (c.fd < 0) return SysError(absl::StrCat("socket for the connection to rank ", peer));
      // Bounded by the deadline: an address that drops packets would otherwise hold connect() for the
      // kernel's SYN retries (about 2 minutes).
      const int err = ConnectBefore(c.fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa), deadline);
      if (err == 0) break;
      ::close(c.fd);
      absl::Status aborted = Aborted();
      if (!aborted.ok()) return aborted;
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat("rank ", rank_, ": cannot connect to rank ", peer, " at ",
                                                        where, ": ", std::strerror(err), " (", bound_name_, ")"));
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    out->push_back(c);
    Tune(c.fd);
    const uint32_t klen = static_cast<uint32_t>(key.size());
    const int32_t me = rank_, ln = lane;
    std::string hello;
    hello.append(reinterpret_cast<const char*>(&kHelloMagic), 4);
    hello.append(reinterpret_cast<const char*>(&tag_), 8);
    hello.append(reinterpret_cast<const char*>(&me), 4);
    hello.append(reinterpret_cast<const char*>(&ln), 4);
    hello.append(reinterpret_cast<const char*>(&klen), 4);
    hello += key + MakeOffer(auth_, &out->back().nonce_c);
    if (!SendAll(c.fd, hello.data(), hello.size()))
      return SysError(absl::StrCat("hello to rank ", peer, " at ", where));
  }
  return absl::OkStatus();
}

bool TcpDomain::Satisfied(const std::map<std::pair<std::string, int>, std::vector<int>>& wanted,
                          const std::vector<Outgoing>& outgoing) {
  for (const Outgoing& o : outgoing) {
    if (!o.done) return false;
  }
  absl::MutexLock lock(&mu_);
  for (const auto& [k, lanes] : wanted) {
    auto it = stash_.find(k);
    for (size_t lane = 0; lane < lanes.size(); ++lane) {
      if (it == stash_.end() || !it->second.count(static_cast<int>(lane))) return false;
    }
  }
  return true;
}

// Completes this rank's outgoing handshakes (one poll over them) while the listener thread stashes the incoming
// links, until both are done or the deadline.
absl::Status TcpDomain::AwaitLinks(const std::map<std::pair<std::string, int>, std::vector<int>>& wanted,
                                   std::vector<Outgoing>* outgoing, absl::Time deadline) {
  while (!Satisfied(wanted, *outgoing)) {
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) {
      std::string missing;
      {
        absl::MutexLock lock(&mu_);
        for (const auto& [k, lanes] : wanted) {
          auto it = stash_.find(k);
          if (it == stash_.end() || it->second.size() < lanes.size()) absl::StrAppend(&missing, " ", k.second);
        }
      }
      for (const Outgoing& o : *outgoing) {
        if (!o.done) absl::StrAppend(&missing, " (rank ", o.peer, " at ", o.where, " never answered the handshake)");
      }
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", rank_, ": tcp connections from ranks", missing, " never arrived (", bound_name_, ")"));
    }
    // Another rank that failed (e.g. rank 0 found no address in the requested network) posts an abort: report
    // its error now instead of waiting out HCCL_CONNECT_TIMEOUT for connections that will never come.
    if (absl::Status aborted = Aborted(); !aborted.ok()) return aborted;
    std::vector<pollfd> polled;
    polled.push_back({stashed_[0], POLLIN, 0});
    for (const Outgoing& o : *outgoing) polled.push_back({o.fd, static_cast<short>(o.done ? 0 : POLLIN), 0});
    if (::poll(polled.data(), polled.size(), static_cast<int>(std::min<int64_t>(ms, 100))) <= 0) continue;
    if (polled[0].revents != 0) {
      char drain[64];
      while (::read(stashed_[0], drain, sizeof(drain)) > 0) {
      }
    }
    for (size_t i = 0; i < outgoing->size(); ++i) {
      Outgoing& o = (*outgoing)[i];
      if (polled[i + 1].revents != 0 && !o.done) HT_RETURN_IF_ERROR(Advance(o));
    }
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
  std::vector<Outgoing> outgoing;
  absl::Status s;
  // Connect to higher ranks (all of them first; their handshakes complete in the accept loop), accept from lower.
  for (int peer : ranks) {
    if (peer == rank_) continue;
    auto existing = pairs_.find({network, channels, peer});
    if (existing != pairs_.end()) {
      out[static_cast<size_t>(peer)] = existing->second.get();
    } else if (peer < rank_) {
      wanted[{key, peer}] = std::vector<int>(static_cast<size_t>(channels));
    } else if (s.ok()) {
      s = Dial(peer, network, key, channels, deadline, &outgoing);
    }
  }
  if (s.ok()) s = AwaitLinks(wanted, &outgoing, deadline);
  if (!s.ok()) {
    for (const Outgoing& o : outgoing) ::close(o.fd);
    return s;
  }
  for (size_t i = 0; i < outgoing.size(); i += static_cast<size_t>(channels)) {
    std::vector<int> fds;
    for (int lane = 0; lane < channels; ++lane) fds.push_back(outgoing[i + static_cast<size_t>(lane)].fd);
    const int peer = outgoing[i].peer;
    auto pair = std::make_unique<TcpPair>(peer, std::move(fds), outgoing[i].where, host_ranks_);
    out[static_cast<size_t>(peer)] = pair.get();
    pairs_[{network, channels, peer}] = std::move(pair);
  }
  absl::MutexLock lock(&mu_);
  for (const auto& [k, lanes] : wanted) {
    auto& got = stash_[k];
    std::vector<int> fds;
    for (int lane = 0; lane < channels; ++lane) fds.push_back(got[lane]);
    stash_.erase(k);
    const int peer = k.second;
    auto pair = std::make_unique<TcpPair>(peer, std::move(fds), absl::StrCat("from rank ", peer), host_ranks_);
    out[static_cast<size_t>(peer)] = pair.get();
    pairs_[{network, channels, peer}] = std::move(pair);
  }
  return out;
}

}  // namespace hccltune
