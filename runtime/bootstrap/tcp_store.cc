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
#include "absl/synchronization/mutex.h"
#include "runtime/net/socket_io.h"

namespace hccltune {
namespace {

constexpr uint32_t kMagic = 0x48545354;  // "HTST"
constexpr uint32_t kVersion = 1;
enum Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kCheck = 4 };

absl::Status SysError(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat("tcp store: ", what, ": ", std::strerror(errno)));
}

void PutU32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }
void PutStr(std::string& out, const std::string& s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}
bool ReadStr(int fd, std::string& s) {
  uint32_t n = 0;
  if (!RecvAll(fd, &n, 4) || n > (64u << 20)) return false;
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
// no one: requests are answered as soon as they are complete, whoever else is connected.
class Server final : public TcpStoreServer {
 public:
  Server(int fd, int port) : listen_fd_(fd), port_(port) {
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
    bool greeted = false;  // the hello was checked and answered
    std::string in, out;
  };

  void Loop() {
    while (!stop_) {
      std::vector<pollfd> fds;
      fds.push_back({listen_fd_, POLLIN, 0});
      fds.push_back({wake_[0], POLLIN, 0});
      for (const Conn& c : clients_) {
        fds.push_back({c.fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
      }
      if (::poll(fds.data(), fds.size(), 1000) <= 0) continue;
      std::vector<Conn> alive;
      for (size_t i = 2; i < fds.size(); ++i) {
        Conn& c = clients_[i - 2];
        if (fds[i].revents == 0 || Progress(c)) {
          alive.push_back(std::move(c));
        } else {
          ::close(c.fd);
        }
      }
      if (fds[0].revents & POLLIN) {
        while (true) {
          int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
          if (fd < 0) break;
          int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          alive.push_back(Conn{fd, false, {}, {}});
        }
      }
      clients_ = std::move(alive);
    }
  }

  // Reads what the client sent, answers every complete request, writes what the socket takes. False when the
  // client is gone or spoke garbage (a client that does not speak our protocol sees EOF).
  bool Progress(Conn& c) {
    char buf[64 << 10];
    while (true) {
      const ssize_t r = ::recv(c.fd, buf, sizeof(buf), 0);
      if (r > 0) {
        c.in.append(buf, static_cast<size_t>(r));
        continue;
      }
      if (r == 0) return false;
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return false;
    }
    size_t pos = 0;
    if (!c.greeted) {
      if (c.in.size() >= 8) {
        uint32_t hello[2];
        std::memcpy(hello, c.in.data(), sizeof(hello));
        if (hello[0] != kMagic || hello[1] != kVersion) return false;
        c.out.append(c.in, 0, 8);
        c.greeted = true;
        pos = 8;
      }
    }
    while (c.greeted) {
      const int used = Serve(c.in, pos, c.out);
      if (used < 0) return false;
      if (used == 0) break;
      pos += static_cast<size_t>(used);
    }
    c.in.erase(0, pos);
    while (!c.out.empty()) {
      const ssize_t w = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (w > 0) {
        c.out.erase(0, static_cast<size_t>(w));
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      return false;
    }
    return true;
  }

  // Takes a string (u32 length + bytes) at `pos`: 1 = taken, 0 = not all there yet, -1 = garbage.
  static int TakeStr(const std::string& in, size_t& pos, std::string& s) {
    if (in.size() - pos < 4) return 0;
    uint32_t n = 0;
    std::memcpy(&n, in.data() + pos, 4);
    if (n > (64u << 20)) return -1;
    if (in.size() - pos - 4 < n) return 0;
    s.assign(in, pos + 4, n);
    pos += 4 + n;
    return 1;
  }

  // One request from in[start...]: the bytes it took (0: incomplete, wait for more; -1: garbage).
  int Serve(const std::string& in, size_t start, std::string& reply) {
    size_t pos = start;
    if (pos >= in.size()) return 0;
    const uint8_t op = static_cast<uint8_t>(in[pos++]);
    if (op != kSet && op != kGet && op != kAdd && op != kCheck) return -1;
    std::string key, value;
    if (int t = TakeStr(in, pos, key); t <= 0) return t;
    if (op == kSet || op == kAdd) {
      if (int t = TakeStr(in, pos, value); t <= 0) return t;
    }
    switch (op) {
      case kSet:
        data_[key] = value;
        reply.push_back(1);
        break;
      case kGet: {
        auto it = data_.find(key);
        reply.push_back(it != data_.end() ? 1 : 0);
        PutStr(reply, it != data_.end() ? it->second : std::string());
        break;
      }
      case kAdd: {
        int64_t delta = 0, cur = 0;
        if (!absl::SimpleAtoi(value, &delta)) return -1;
        auto it = data_.find(key);
        if (it != data_.end() && !absl::SimpleAtoi(it->second, &cur)) cur = 0;
        cur += delta;
        data_[key] = absl::StrCat(cur);
        reply.push_back(1);
        PutStr(reply, data_[key]);
        break;
      }
      default: reply.push_back(data_.count(key) ? 1 : 0); break;
    }
    return static_cast<int>(pos - start);
  }

  int listen_fd_;
  int port_;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::vector<Conn> clients_;  // only the server thread touches them until it is joined
  std::map<std::string, std::string> data_;
  std::thread thread_;
};

class Client final : public Store {
 public:
  explicit Client(int fd, std::string where) : fd_(fd), where_(std::move(where)) {}
  ~Client() override { ::close(fd_); }
  std::string Describe() const override { return absl::StrCat("tcp store ", where_); }

  absl::Status Set(const std::string& key, const std::string& value) override {
    std::string req(1, static_cast<char>(kSet));
    PutStr(req, key);
    PutStr(req, value);
    absl::MutexLock lock(&mu_);
    uint8_t ok = 0;
    if (!SendAll(fd_, req.data(), req.size()) || !RecvAll(fd_, &ok, 1)) return Lost();
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    if (absl::Status s = Store::Wait({key}, timeout); !s.ok()) return s;
    std::string req(1, static_cast<char>(kGet));
    PutStr(req, key);
    absl::MutexLock lock(&mu_);
    uint8_t found = 0;
    std::string value;
    if (!SendAll(fd_, req.data(), req.size()) || !RecvAll(fd_, &found, 1) || !ReadStr(fd_, value)) return Lost();
    return value;
  }
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    std::string req(1, static_cast<char>(kAdd));
    PutStr(req, key);
    PutStr(req, absl::StrCat(delta));
    absl::MutexLock lock(&mu_);
    uint8_t ok = 0;
    std::string value;
    int64_t v = 0;
    if (!SendAll(fd_, req.data(), req.size()) || !RecvAll(fd_, &ok, 1) || !ReadStr(fd_, value) ||
        !absl::SimpleAtoi(value, &v)) {
      return Lost();
    }
    return v;
  }
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override {
    absl::MutexLock lock(&mu_);
    for (const auto& k : keys) {
      std::string req(1, static_cast<char>(kCheck));
      PutStr(req, k);
      uint8_t found = 0;
      if (!SendAll(fd_, req.data(), req.size()) || !RecvAll(fd_, &found, 1)) return Lost();
      if (!found) return false;
    }
    return true;
  }

 private:
  absl::Status Lost() {
    return absl::UnavailableError(absl::StrCat("tcp store: lost the connection to the rendezvous server at ", where_));
  }
  absl::Mutex mu_;
  int fd_;
  std::string where_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(const std::string& host, int port) {
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
  return std::unique_ptr<TcpStoreServer>(std::make_unique<Server>(fd, actual));
}

absl::StatusOr<std::shared_ptr<Store>> ConnectTcpStore(const std::string& host, int port, absl::Duration timeout) {
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
      uint32_t hello[2] = {kMagic, kVersion}, answer[2] = {0, 0};
      if (SendAll(fd, hello, sizeof(hello)) && RecvAll(fd, answer, sizeof(answer)) && answer[0] == kMagic &&
          answer[1] == kVersion) {
        return std::shared_ptr<Store>(std::make_shared<Client>(fd, where));
      }
      ::close(fd);
      return absl::FailedPreconditionError(
          absl::StrCat("tcp store: ", where, " is not an hccl-tune rendezvous server of protocol version ", kVersion,
                       " (another service on that port, e.g. torch's TCPStore?)"));
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
