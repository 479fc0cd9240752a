#include "runtime/bootstrap/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "runtime/bootstrap/store_protocol.h"
#include "runtime/net/interfaces.h"
#include "runtime/net/socket_io.h"

namespace hccltune {
namespace {

using namespace store_protocol;  // NOLINT: the protocol's names are the file's vocabulary

// Replies queued for one client beyond which the server stops taking its requests until it reads them.
constexpr size_t kMaxPendingReplyBytes = 1u << 20;
// Connections over StoreLimits::max_connections are still accepted, told why and closed; beyond this many more
// they are closed at once.
constexpr size_t kRefusalSlack = 64;

// The client's address as the whitelist and the refusal log write it (an IPv4-mapped IPv6 address as IPv4).
std::string PeerIp(const sockaddr_storage& from) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (from.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&from)->sin_addr, text, sizeof(text));
  } else if (from.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&from)->sin6_addr, text, sizeof(text));
  }
  const std::string ip = text;
  return ip.rfind("::ffff:", 0) == 0 && ip.find('.') != std::string::npos ? ip.substr(7) : ip;
}

absl::Status SysError(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat("tcp store: ", what, ": ", std::strerror(errno)));
}

// Reads a string (u32 length + bytes) of at most `limit` bytes; false when the connection failed or the length
// is over the limit (*over is then set).
bool ReadStr(int fd, std::string& s, size_t limit, bool* over) {
  uint32_t n = 0;
  if (!RecvAll(fd, &n, 4)) return false;
  if (n > limit) {
    *over = true;
    return false;
  }
  s.resize(n);
  return RecvAll(fd, s.data(), n);
}

absl::StatusOr<sockaddr_storage> Resolve(const std::string& host, int port, socklen_t* len) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = absl::StrCat(port);
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("tcp store: cannot resolve '", host, "': ", gai_strerror(rc)));
  }
  sockaddr_storage ss{};
  std::memcpy(&ss, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  ::freeaddrinfo(res);
  return ss;
}

// One thread serves every client from a poll loop. Sockets are non-blocking and each client has its own input
// and output buffer, so a client that connects and says nothing (or sends half a request and stalls) holds up
// no one: requests are answered as soon as they are complete, whoever else is connected. Every buffer is
// bounded: a client's input by one request (kMaxRequestBytes), its unsent replies by kMaxPendingReplyBytes (then
// its requests wait until it reads), all buffers together by StoreLimits::max_buffered_bytes (then a client with
// an unfinished request is refused with an error).
class Server final : public TcpStoreServer {
 public:
  Server(int fd, int port, const StoreLimits& limits, JobAuth auth)
      : listen_fd_(fd), port_(port), limits_(limits), auth_(std::move(auth)), data_(limits) {
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
    ::fcntl(listen_fd_, F_SETFL, ::fcntl(listen_fd_, F_GETFL) | O_NONBLOCK);
    thread_ = std::thread([this] { Loop(); });
  }
  ~Server() override {
    stop_ = true;
    char c = 1;
    if (wake_[1] >= 0) (void)!::write(wake_[1], &c, 1);
    thread_.join();
    for (const Conn& conn : clients_) ::close(conn.fd);
    ::close(listen_fd_);
    if (wake_[0] >= 0) ::close(wake_[0]);
    if (wake_[1] >= 0) ::close(wake_[1]);
  }
  int port() const override { return port_; }

 private:
  struct Conn {
    int fd = -1;
    bool refused = false;  // over max_connections: answer the hello with kRefused, then close
    bool greeted = false;  // the hello and the job handshake completed
    int stage = 0;         // the handshake: 0 hello and offer, 1 proof
    absl::Time handshake_until;
    std::string peer;            // the client's address, for refusals
    std::string offer, nonce_a;  // the handshake's, until the proof is checked
    bool closing = false;        // an error was queued: close once it is sent
    // Closing, the reply sent: the write side is shut and input is read and dropped until EOF or this time, so
    // the kernel does not reset the connection (and discard the reply) over unread input.
    bool draining = false;
    absl::Time drain_until;
    std::string in, out;
  };

  bool MayRead(const Conn& c) const {
    return !c.closing && c.in.size() < kMaxRequestBytes + 8 && c.out.size() < kMaxPendingReplyBytes;
  }

  void Loop() {
    while (!stop_) {
      std::vector<pollfd> fds;
      fds.push_back({listen_fd_, POLLIN, 0});
      fds.push_back({wake_[0], POLLIN, 0});
      buffered_ = 0;
      for (const Conn& c : clients_) {
        buffered_ += c.in.size() + c.out.size();
        const bool read = MayRead(c) || c.draining;
        fds.push_back({c.fd, static_cast<short>((read ? POLLIN : 0) | (c.out.empty() ? 0 : POLLOUT)), 0});
      }
      // A timeout goes on too: quiet connections past their handshake or drain deadline are closed below.
      if (::poll(fds.data(), fds.size(), 1000) < 0) continue;
      std::vector<Conn> alive;
      for (size_t i = 2; i < fds.size(); ++i) {
        Conn& c = clients_[i - 2];
        if (fds[i].revents == 0 ? Idle(c) : Progress(c)) {
          alive.push_back(std::move(c));
        } else {
          buffered_ -= std::min(buffered_, c.in.size() + c.out.size());
          ::close(c.fd);
        }
      }
      if (fds[0].revents & POLLIN) Accept(alive);
      clients_ = std::move(alive);
    }
  }

  // False when a quiet connection is to be closed: its drain time is over, or its handshake's.
  bool Idle(Conn& c) const {
    if (c.draining) return absl::Now() <= c.drain_until;
    if (c.greeted || c.closing || absl::Now() <= c.handshake_until) return true;
    NoteRefusal(Listener(), c.peer,
                absl::StrCat("no complete hello and handshake within ", kHandshakeTimeoutMs, " ms"));
    return false;
  }

  std::string Listener() const { return absl::StrCat("tcp store (port ", port_, ")"); }

  void Accept(std::vector<Conn>& alive) {
    while (true) {
      sockaddr_storage from{};
      socklen_t len = sizeof(from);
      int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) break;
      const std::string peer = PeerIp(from);
      if (!auth_.Whitelisted(peer)) {
        NoteRefusal(Listener(), peer, absl::StrCat("its address is not in ", auth_.whitelist_file));
        ::close(fd);
        continue;
      }
      if (alive.size() >= limits_.max_connections + kRefusalSlack) {
        ::close(fd);
        continue;
      }
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      Conn c;
      c.fd = fd;
      c.peer = peer;
      c.handshake_until = absl::Now() + absl::Milliseconds(kHandshakeTimeoutMs);
      c.refused = alive.size() >= limits_.max_connections;
      alive.push_back(std::move(c));
    }
  }

  // Reads what the client sent, answers every complete request, writes what the socket takes. False when the
  // connection is to be closed: the client is gone, or it spoke garbage and its error reply was sent.
  bool Progress(Conn& c) {
    if (c.draining) return Drain(c);
    if (MayRead(c) && !Read(c)) return false;
    while (true) {
      const size_t before = c.in.size();
      Serve(c);
      if (!Write(c)) return false;
      if (c.in.size() == before || !c.out.empty() || c.closing) break;
    }
    if (c.closing && c.out.empty()) {
      ::shutdown(c.fd, SHUT_WR);
      c.draining = true;
      c.drain_until = absl::Now() + absl::Seconds(1);
      return Drain(c);
    }
    return true;
  }

  // False once the client closed its side (or the drain time is over).
  static bool Drain(Conn& c) {
    char buf[4096];
    while (true) {
      const ssize_t r = ::recv(c.fd, buf, sizeof(buf), 0);
      if (r > 0 && absl::Now() <= c.drain_until) continue;
      if (r < 0 && errno == EINTR) continue;
      return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && absl::Now() <= c.drain_until;
    }
  }

  bool Read(Conn& c) {
    char buf[64 << 10];
    while (MayRead(c)) {
      const size_t room = kMaxRequestBytes + 8 - c.in.size();
      const ssize_t r = ::recv(c.fd, buf, std::min(sizeof(buf), room), 0);
      if (r > 0) {
        c.in.append(buf, static_cast<size_t>(r));
        buffered_ += static_cast<size_t>(r);
        continue;
      }
      if (r == 0) return false;
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    return true;
  }

  bool Write(Conn& c) {
    while (!c.out.empty()) {
      const ssize_t w = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (w > 0) {
        c.out.erase(0, static_cast<size_t>(w));
        buffered_ -= std::min(buffered_, static_cast<size_t>(w));
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      return w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
    return true;
  }

  // Queues an error for the client and closes the connection once it is sent.
  static void Refuse(Conn& c, const absl::Status& why) {
    PutError(c.out, why);
    c.in.clear();
    c.closing = true;
  }

  // The hello and the job handshake (store_protocol.h): the hello with the offer, then (both holding a secret)
  // the proof. A client that fails a check is closed and logged once per address.
  void Greet(Conn& c) {
    if (c.stage == 0) {
      if (c.in.size() < 9) return;
      uint32_t hello[2];
      std::memcpy(hello, c.in.data(), sizeof(hello));
      const size_t offer_bytes = 1 + OfferRestBytes(static_cast<uint8_t>(c.in[8]));
      if (hello[0] != kMagic || hello[1] != kVersion) {
        NoteRefusal(Listener(), c.peer,
                    absl::StrFormat("not an hccl-tune store client of protocol version %u "
                                    "(magic 0x%08x, version %u)",
                                    kVersion, hello[0], hello[1]));
        return Close(c);
      }
      if (c.refused) {
        const uint32_t no[2] = {kMagic, kRefused};
        c.out.append(reinterpret_cast<const char*>(no), sizeof(no));
        PutString(c.out, absl::StrCat("tcp store: the server serves ", limits_.max_connections,
                                      " connections at most and has that many"));
        c.closing = true;
        return;
      }
      if (c.in.size() < 8 + offer_bytes) return;
      c.offer = c.in.substr(8, offer_bytes);
      c.in.erase(0, 8 + offer_bytes);
      AcceptorStep step = AnswerOffer(auth_, c.offer, "tcp store");
      if (step.reply.empty()) {
        NoteRefusal(Listener(), c.peer, step.verdict.message());
        return Close(c);
      }
      c.out.append(reinterpret_cast<const char*>(hello), sizeof(hello));
      c.out += step.reply;
      if (!step.verdict.ok()) {
        NoteRefusal(Listener(), c.peer, step.verdict.message());
        c.in.clear();
        c.closing = true;  // the challenge tells the client why; then close
        return;
      }
      c.nonce_a = step.nonce_a;
      c.stage = 1;
      c.greeted = !auth_.has_secret();
    }
    if (c.greeted || c.in.size() < kMacBytes) return;
    absl::Status proof =
        CheckProof(auth_, c.offer, c.nonce_a, absl::string_view(c.in).substr(0, kMacBytes), "tcp store");
    c.in.erase(0, kMacBytes);
    if (!proof.ok()) {
      NoteRefusal(Listener(), c.peer, proof.message());
      return Close(c);
    }
    c.greeted = true;
  }

  // Closes without a reply (the client sees EOF).
  static void Close(Conn& c) {
    c.in.clear();
    c.closing = true;
  }

  // Answers the complete requests in c.in while the client's unsent replies stay under their bound.
  void Serve(Conn& c) {
    if (c.closing) return;
    if (!c.greeted) Greet(c);
    size_t pos = 0;
    while (c.greeted && !c.closing && c.out.size() < kMaxPendingReplyBytes) {
      Request req;
      auto used = ParseStoreRequest(absl::string_view(c.in).substr(pos), &req);
      if (!used.ok()) {
        Refuse(c, used.status());
        return;
      }
      if (*used == 0) break;
      pos += *used;
      data_.Apply(req, &c.out);
    }
    c.in.erase(0, pos);
    buffered_ -= std::min(buffered_, pos);
    if (!c.closing && !c.in.empty() && buffered_ > limits_.max_buffered_bytes) {
      Refuse(c, absl::ResourceExhaustedError(absl::StrCat("tcp store: the server buffers ", buffered_,
                                                          " bytes of unfinished requests and unsent replies, "
                                                          "over the limit of ",
                                                          limits_.max_buffered_bytes)));
    }
  }

  int listen_fd_;
  int port_;
  const StoreLimits limits_;
  const JobAuth auth_;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  // Only the server thread touches these until it is joined.
  std::vector<Conn> clients_;
  StoreData data_;
  size_t buffered_ = 0;  // bytes in every client's in and out
  std::thread thread_;
};

class Client final : public Store {
 public:
  explicit Client(int fd, std::string where) : fd_(fd), where_(std::move(where)) {}
  ~Client() override { ::close(fd_); }
  std::string Describe() const override { return absl::StrCat("tcp store ", where_); }

  absl::Status Set(const std::string& key, const std::string& value) override {
    if (absl::Status s = CheckSizes(key, value.size()); !s.ok()) return s;
    std::string req(1, static_cast<char>(kSet));
    PutString(req, key);
    PutString(req, value);
    absl::MutexLock lock(&mu_);
    return Call(req, nullptr).status();
  }
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    if (absl::Status s = CheckSizes(key, 0); !s.ok()) return s;
    if (absl::Status s = Store::Wait({key}, timeout); !s.ok()) return s;
    std::string req(1, static_cast<char>(kGet));
    PutString(req, key);
    absl::MutexLock lock(&mu_);
    std::string value;
    auto found = Call(req, &value);
    if (!found.ok()) return found.status();
    return value;
  }
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    if (absl::Status s = CheckSizes(key, 0); !s.ok()) return s;
    std::string req(1, static_cast<char>(kAdd));
    PutString(req, key);
    PutString(req, absl::StrCat(delta));
    absl::MutexLock lock(&mu_);
    std::string value;
    int64_t v = 0;
    auto ok = Call(req, &value);
    if (!ok.ok()) return ok.status();
    if (!absl::SimpleAtoi(value, &v)) return Garbled(absl::StrCat("an add returned '", value, "'"));
    return v;
  }
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override {
    for (const auto& k : keys) {
      if (absl::Status s = CheckSizes(k, 0); !s.ok()) return s;
    }
    absl::MutexLock lock(&mu_);
    for (const auto& k : keys) {
      std::string req(1, static_cast<char>(kCheck));
      PutString(req, k);
      auto found = Call(req, nullptr);
      if (!found.ok()) return found.status();
      if (!*found) return false;
    }
    return true;
  }

 private:
  static absl::Status CheckSizes(const std::string& key, size_t value_bytes) {
    if (key.size() > kMaxKeyBytes) {
      return absl::InvalidArgumentError(absl::StrCat("tcp store: key '", key.substr(0, 64), "...' of ", key.size(),
                                                     " bytes is over the limit of ", kMaxKeyBytes, " bytes"));
    }
    if (value_bytes > kMaxValueBytes) {
      return absl::InvalidArgumentError(absl::StrCat("tcp store: a value of ", value_bytes, " bytes at key '", key,
                                                     "' is over the limit of ", kMaxValueBytes, " bytes"));
    }
    return absl::OkStatus();
  }

  // Sends `req` and reads the status byte, then the reply's string into `value` when given. Returns the status
  // byte (found or not), or the server's error, or why the connection failed.
  absl::StatusOr<bool> Call(const std::string& req, std::string* value) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    uint8_t status = 0;
    if (!SendAll(fd_, req.data(), req.size()) || !RecvAll(fd_, &status, 1)) return Lost();
    if (status == kReplyError) return ServerError();
    if (status > 1) return Garbled(absl::StrCat("reply status ", status));
    if (value != nullptr) {
      bool over = false;
      if (!ReadStr(fd_, *value, kMaxValueBytes, &over)) {
        return over ? Garbled(absl::StrCat("a reply longer than ", kMaxValueBytes, " bytes")) : Lost();
      }
    }
    return status == 1;
  }
  absl::Status ServerError() {
    uint8_t code = 0;
    std::string message;
    bool over = false;
    if (!RecvAll(fd_, &code, 1) || !ReadStr(fd_, message, kMaxMessageBytes, &over)) return Lost();
    const auto c = code > 0 && code <= 16 ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kUnknown;
    return absl::Status(c, absl::StrCat(message, " (server ", where_, ")"));
  }
  absl::Status Garbled(absl::string_view what) {
    return absl::DataLossError(
        absl::StrCat("tcp store: the rendezvous server at ", where_, " sent ", what, ": not an hccl-tune store?"));
  }
  absl::Status Lost() {
    return absl::UnavailableError(absl::StrCat("tcp store: lost the connection to the rendezvous server at ", where_));
  }
  absl::Mutex mu_;
  int fd_;
  std::string where_;
};

}  // namespace

std::string StoreListenAddress(const std::string& host) { return IsLocalAddress(host) ? host : "0.0.0.0"; }

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(const std::string& host, int port,
                                                                      const StoreLimits& limits, JobAuth auth) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcp store: cannot listen on ", host, ":", port, ": a port is 1-65535 (0 = any free port)"));
  }
  socklen_t len = 0;
  auto addr = Resolve(host.empty() ? "0.0.0.0" : host, port, &len);
  if (!addr.ok()) return addr.status();
  int fd = ::socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return SysError("socket");
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&*addr), len) != 0) {
    absl::Status s = absl::AlreadyExistsError(
        absl::StrCat("tcp store: cannot listen on ", host, ":", port, ": ", std::strerror(errno)));
    ::close(fd);
    return s;
  }
  if (::listen(fd, 1024) != 0) {
    ::close(fd);
    return SysError("listen");
  }
  sockaddr_storage bound{};
  socklen_t blen = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &blen);
  const int actual = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                       : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return std::unique_ptr<TcpStoreServer>(std::make_unique<Server>(fd, actual, limits, std::move(auth)));
}

namespace {

// The client's side of the hello and the job handshake on a connected socket: the store client, or why not.
absl::StatusOr<std::shared_ptr<Store>> GreetServer(int fd, const std::string& where, const JobAuth& auth) {
  std::string nonce_c;
  std::string hello(reinterpret_cast<const char*>(&kMagic), 4);
  hello.append(reinterpret_cast<const char*>(&kVersion), 4);
  hello += MakeOffer(auth, &nonce_c);
  uint32_t answer[2] = {0, 0};
  if (!SendAll(fd, hello.data(), hello.size()) || !RecvAll(fd, answer, sizeof(answer))) {
    return absl::FailedPreconditionError(
        absl::StrCat("tcp store: ", where,
                     " closed the connection without answering the hello: not an hccl-tune rendezvous "
                     "server of protocol version ",
                     kVersion,
                     " (another service on that port, e.g. torch's TCPStore?), or it "
                     "refused this process (its log says why: this host's address outside its HCCL_WHITELIST_FILE?)"));
  }
  std::string why;
  bool over = false;
  if (answer[0] == kMagic && answer[1] == kRefused && ReadStr(fd, why, kMaxMessageBytes, &over)) {
    return absl::ResourceExhaustedError(absl::StrCat(why, " (server ", where, ")"));
  }
  if (answer[0] != kMagic || answer[1] != kVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("tcp store: ", where, " is not an hccl-tune rendezvous server of protocol version ", kVersion,
                     " (another service on that port, e.g. torch's TCPStore?)"));
  }
  std::string challenge(1, '\0');
  if (RecvAll(fd, challenge.data(), 1)) {
    challenge.resize(1 + ChallengeRestBytes(static_cast<uint8_t>(challenge[0])));
    if (challenge.size() > 1 && !RecvAll(fd, challenge.data() + 1, challenge.size() - 1)) challenge.resize(1);
  } else {
    challenge.clear();
  }
  auto proof = CheckChallenge(auth, nonce_c, challenge, "tcp store", absl::StrCat("the rendezvous server at ", where));
  if (!proof.ok()) return absl::Status(proof.status().code(), absl::StrCat("tcp store: ", proof.status().message()));
  if (!proof->empty() && !SendAll(fd, proof->data(), proof->size())) {
    return SysError(absl::StrCat("the handshake's proof to ", where));
  }
  return std::shared_ptr<Store>(std::make_shared<Client>(fd, where));
}

}  // namespace

absl::StatusOr<std::shared_ptr<Store>> ConnectTcpStore(const std::string& host, int port, absl::Duration timeout,
                                                       const JobAuth& auth) {
  if (port < 1 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcp store: cannot connect to ", host, ":", port, ": a port is 1-65535"));
  }
  socklen_t len = 0;
  auto addr = Resolve(host, port, &len);
  if (!addr.ok()) return addr.status();
  const std::string where = absl::StrCat(host, ":", port);
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration pause = absl::Milliseconds(1);
  while (true) {
    int fd = ::socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return SysError("socket");
    // Bounded by the deadline: against an address that drops packets a blocking connect() waits for the
    // kernel's SYN retries (about 2 minutes) whatever the timeout says.
    const int err = ConnectBefore(fd, reinterpret_cast<sockaddr*>(&*addr), len, deadline);
    if (err == 0) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      timeval tv{static_cast<time_t>(absl::ToInt64Seconds(timeout)) + 5, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      auto client = GreetServer(fd, where, auth);
      if (!client.ok()) ::close(fd);
      return client;
    }
    ::close(fd);
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("tcp store: no rendezvous server at ", where, " after ",
                                                      absl::FormatDuration(timeout), ": ", std::strerror(err)));
    }
    absl::SleepFor(pause);
    pause = std::min(pause * 2, absl::Milliseconds(100));
  }
}

}  // namespace hccltune
