#include "runtime/transport/ucx/ucx_pair.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "runtime/common/host.h"

namespace hccltune::transport {
namespace {

constexpr size_t kDirectBytes = 64u << 10;    // writes from this size are sent from the caller's memory
constexpr size_t kCoalesceBytes = 64u << 10;  // an outbox is posted once it holds this much
constexpr size_t kBufferedBytes = 4u << 20;   // copied bytes in flight per lane
constexpr uint64_t kFullMask = ~uint64_t{0};

// The transports and devices of an endpoint's lanes, from ucp_ep_print_info ("lane[0]:  1:tcp/eth0.0 md[0] ...").
std::string EndpointTransports(ucp_ep_h ep) {
  char* text = nullptr;
  size_t size = 0;
  FILE* f = ::open_memstream(&text, &size);
  if (f == nullptr) return "(unknown)";
  ucp_ep_print_info(ep, f);
  std::fclose(f);
  std::set<std::string> seen;
  std::vector<std::string> names;
  std::istringstream lines(std::string(text, size));
  std::free(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t lane = line.find("lane[");
    if (lane == std::string::npos) continue;
    std::istringstream words(line.substr(line.find(':', lane) + 1));
    std::string word;
    words >> word;  // "1:tcp/eth0.0"
    word = word.substr(word.find(':') + 1);
    if (const size_t dot = word.rfind('.'); dot != std::string::npos && word.find('/') < dot) word.resize(dot);
    if (!word.empty() && seen.insert(word).second) names.push_back(word);
  }
  return names.empty() ? "(unknown)" : absl::StrJoin(names, ",");
}

// UCS_INPROGRESS, or the status it completed with (the request then released).
ucs_status_t Check(void*& request) {
  const ucs_status_t s = ucp_request_check_status(request);
  if (s == UCS_INPROGRESS) return s;
  ucp_request_free(request);
  request = nullptr;
  return s;
}

}  // namespace

UcxPair::UcxPair(UcxWorker* worker, const UcxPairInfo& info)
    : worker_(worker), info_(info), lanes_(static_cast<size_t>(info.lanes)) {}

absl::StatusOr<std::unique_ptr<UcxPair>> UcxPair::Create(UcxWorker* worker, const std::string& peer_address,
                                                         const UcxPairInfo& info) {
  std::unique_ptr<UcxPair> p(new UcxPair(worker, info));
  auto lock = worker->Lock();  // released before `p` is destroyed on failure (Close takes it)
  ucp_ep_params_t params{};
  params.field_mask =
      UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(peer_address.data());
  params.err_mode = info.peer_errors ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  params.err_handler.cb = &UcxPair::OnError;
  params.err_handler.arg = p.get();
  if (ucs_status_t s = ucp_ep_create(worker->worker(), &params, &p->ep_); s != UCS_OK) {
    p->ep_ = nullptr;
    const std::string what =
        absl::StrCat("rank ", info.rank, ": ", info.link, " cannot make an endpoint to rank ", info.peer,
                     " (peer failure handling ", info.peer_errors ? "on" : "off", "): ", UcxStatusText(s));
    return s == UCS_ERR_UNREACHABLE ? absl::FailedPreconditionError(what) : absl::UnavailableError(what);
  }
  p->transports_ = EndpointTransports(p->ep_);
  return p;
}

UcxPair::~UcxPair() { Close(); }

void UcxPair::OnError(void* arg, ucp_ep_h ep, ucs_status_t status) {
  (void)ep;
  auto* self = static_cast<UcxPair*>(arg);
  if (self->ep_status_ == UCS_OK) self->ep_status_ = status;
}

uint64_t UcxPair::Tag(int sender, int lane) const {
  return (static_cast<uint64_t>(info_.lanes) << 56) | (static_cast<uint64_t>(static_cast<uint32_t>(sender)) << 16) |
         static_cast<uint64_t>(lane);
}

absl::Status UcxPair::Fail(ucs_status_t status) {
  if (!broken_.ok()) return broken_;
  // UCX reports a dead peer by what its transport saw (over tcp often "Endpoint timeout", at once): a peer on this
  // node whose process is gone is named as such, so nobody reads it as a slow peer. Its sockets close while it
  // exits, a moment before it shows as gone: a failure path, so waiting up to 100 ms for that costs nothing else.
  bool gone = false;
  for (int i = 0; info_.peer_pid > 0 && i < 100 && !(gone = ProcessGone(info_.peer_pid)); ++i) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  broken_ =
      absl::UnavailableError(gone ? absl::StrCat("rank ", info_.rank, ": rank ", info_.peer, " (pid ", info_.peer_pid,
                                                 ") exited or was killed; the ", info_.link, " link to it (",
                                                 transports_, ") failed: ", UcxStatusText(status))
                                  : absl::StrCat("rank ", info_.rank, ": the ", info_.link, " link to rank ",
                                                 info_.peer, " (", transports_, ") failed: ", UcxStatusText(status)));
  return broken_;
}

void* UcxPair::Post(const void* data, size_t bytes, int lane) {
  ucp_request_param_t param = worker_->SendParam();
  void* r = ucp_tag_send_nbx(ep_, data, bytes, Tag(info_.rank, lane), &param);
  if (UCS_PTR_IS_PTR(r)) worker_->SendPosted();
  return r;
}

absl::Status UcxPair::Flush(int lane) {
  Lane& l = lanes_[static_cast<size_t>(lane)];
  if (l.outbox.empty()) return absl::OkStatus();
  void* r = Post(l.outbox.data(), l.outbox.size(), lane);
  if (UCS_PTR_IS_ERR(r)) return Fail(UCS_PTR_STATUS(r));
  if (r == nullptr) {
    l.outbox.clear();  // sent (or copied by UCX) already
    return absl::OkStatus();
  }
  l.in_flight_bytes += l.outbox.size();
  l.in_flight.push_back(Sent{r, std::move(l.outbox)});
  l.outbox.clear();
  if (!spare_.empty()) {
    l.outbox = std::move(spare_.back());
    spare_.pop_back();
  }
  return absl::OkStatus();
}

absl::Status UcxPair::FlushAll() {
  for (int lane = 0; lane < info_.lanes; ++lane) {
    if (absl::Status s = Flush(lane); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status UcxPair::Reap(Lane& l) {
  while (!l.in_flight.empty()) {
    Sent& front = l.in_flight.front();
    const ucs_status_t s = Check(front.request);
    if (s == UCS_INPROGRESS) break;
    if (s != UCS_OK) return Fail(s);
    l.in_flight_bytes -= front.buffer.size();
    front.buffer.clear();
    spare_.push_back(std::move(front.buffer));
    l.in_flight.pop_front();
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> UcxPair::FinishDirectSend(Lane& l, const void* data, size_t bytes) {
  worker_->Progress();
  const ucs_status_t s = Check(l.direct);
  if (s == UCS_INPROGRESS) return 0;
  if (s != UCS_OK) return Fail(s);
  if (data != l.direct_data || bytes < l.direct_bytes) {
    return absl::InternalError(absl::StrCat("rank ", info_.rank, ": ", info_.link, " send to rank ", info_.peer,
                                            " was retried at another position than it started"));
  }
  return Counted(l.direct_bytes);
}

absl::StatusOr<size_t> UcxPair::TryWrite(int lane, const void* data, size_t bytes) {
  auto lock = worker_->Lock();
  if (!broken_.ok()) return broken_;
  if (ep_status_ != UCS_OK) return Fail(ep_status_);
  Lane& l = lanes_[static_cast<size_t>(lane)];
  if (l.direct != nullptr) return FinishDirectSend(l, data, bytes);
  if (bytes == 0) return 0;
  if (bytes >= kDirectBytes) {
    if (absl::Status s = Flush(lane); !s.ok()) return s;
    void* r = Post(data, bytes, lane);
    if (UCS_PTR_IS_ERR(r)) return Fail(UCS_PTR_STATUS(r));
    if (r == nullptr) return Counted(bytes);
    l.direct = r;
    l.direct_data = data;
    l.direct_bytes = bytes;
    return 0;
  }
  if (absl::Status s = Reap(l); !s.ok()) return s;
  if (l.in_flight_bytes > 0 && l.in_flight_bytes + l.outbox.size() + bytes > kBufferedBytes) {
    worker_->Progress();
    if (absl::Status s = Reap(l); !s.ok()) return s;
    if (l.in_flight_bytes > 0 && l.in_flight_bytes + l.outbox.size() + bytes > kBufferedBytes) return 0;
  }
  const auto* p = static_cast<const uint8_t*>(data);
  l.outbox.insert(l.outbox.end(), p, p + bytes);
  if (l.outbox.size() >= kCoalesceBytes) {
    if (absl::Status s = Flush(lane); !s.ok()) return s;
  }
  return Counted(bytes);
}

size_t UcxPair::ReadStaged(Lane& l, void* data, size_t bytes) {
  const size_t n = std::min(bytes, l.staged_end - l.staged_at);
  std::memcpy(data, l.staged.data() + l.staged_at, n);
  l.staged_at += n;
  return n;
}

absl::StatusOr<size_t> UcxPair::FinishRecv(Lane& l, void* data, size_t bytes) {
  worker_->Progress();
  const ucs_status_t s = Check(l.recv);
  if (s == UCS_INPROGRESS) return 0;
  if (s != UCS_OK) return Fail(s);
  l.staged_at = 0;
  l.staged_end = l.recv_bytes;
  return ReadStaged(l, data, bytes);
}

absl::StatusOr<size_t> UcxPair::StartRecv(int lane, void* data, size_t bytes) {
  Lane& l = lanes_[static_cast<size_t>(lane)];
  worker_->Progress();
  ucp_tag_recv_info_t info{};
  ucp_tag_message_h m = ucp_tag_probe_nb(worker_->worker(), Tag(info_.peer, lane), kFullMask, 1, &info);
  if (m == nullptr) {
    // Nothing more will come from a failed endpoint (what arrived before the failure was read above).
    if (ep_status_ != UCS_OK) return Fail(ep_status_);
    return 0;
  }
  const size_t length = info.length;
  if (l.staged.size() < length) l.staged.resize(length);
  l.recv_bytes = length;
  ucp_request_param_t param{};
  void* r = ucp_tag_msg_recv_nbx(worker_->worker(), l.staged.data(), length, m, &param);
  if (UCS_PTR_IS_ERR(r)) return Fail(UCS_PTR_STATUS(r));
  if (r != nullptr) {
    l.recv = r;
    return 0;
  }
  l.staged_at = 0;
  l.staged_end = length;
  return ReadStaged(l, data, bytes);
}

absl::StatusOr<size_t> UcxPair::TryRead(int lane, void* data, size_t bytes) {
  auto lock = worker_->Lock();
  if (!broken_.ok()) return broken_;
  if (absl::Status s = FlushAll(); !s.ok()) return s;  // what the peer waits for before it answers
  Lane& l = lanes_[static_cast<size_t>(lane)];
  if (bytes == 0) return 0;
  if (l.staged_at < l.staged_end) return ReadStaged(l, data, bytes);
  if (l.recv != nullptr) return FinishRecv(l, data, bytes);
  return StartRecv(lane, data, bytes);
}

void UcxPair::Notify() {
  auto lock = worker_->Lock();
  if (broken_.ok()) (void)FlushAll();  // an error is returned by the next TryWrite / TryRead
}

void UcxPair::AddPollFds(int lane, bool want_read, bool want_write, std::vector<pollfd>* fds) {
  (void)lane, (void)want_read, (void)want_write;
  auto lock = worker_->Lock();
  if (broken_.ok()) (void)FlushAll();
  fds->push_back(pollfd{worker_->PrepareWait(), POLLIN, 0});
  fds->push_back(pollfd{worker_->wake_fd(), POLLIN, 0});
}

absl::Status UcxPair::CheckPeer() {
  auto lock = worker_->Lock();
  if (!broken_.ok()) return broken_;
  if (ep_status_ != UCS_OK) return Fail(ep_status_);
  if (info_.peer_pid > 0 && ProcessGone(info_.peer_pid)) {
    return absl::UnavailableError(absl::StrCat("rank ", info_.peer, " (pid ", info_.peer_pid,
                                               ") exited or was killed; the ", info_.link, " link to it (", transports_,
                                               ") is dead"));
  }
  return absl::OkStatus();
}

void UcxPair::Close() {
  auto lock = worker_->Lock();
  if (ep_ == nullptr) return;
  for (Lane& l : lanes_) {
    if (l.recv != nullptr) ucp_request_cancel(worker_->worker(), l.recv);
  }
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  void* closing = ucp_ep_close_nbx(ep_, &param);
  ep_ = nullptr;
  // Force close completes every request of the endpoint (cancelled); wait for that, bounded.
  const absl::Time deadline = absl::Now() + absl::Seconds(1);
  auto pending = [&] {
    bool any = closing != nullptr && UCS_PTR_IS_PTR(closing) && Check(closing) == UCS_INPROGRESS;
    for (Lane& l : lanes_) {
      if (l.direct != nullptr && Check(l.direct) == UCS_INPROGRESS) any = true;
      if (l.recv != nullptr && Check(l.recv) == UCS_INPROGRESS) any = true;
      for (Sent& s : l.in_flight) {
        if (s.request != nullptr && Check(s.request) == UCS_INPROGRESS) any = true;
      }
    }
    return any;
  };
  while (pending() && absl::Now() < deadline) worker_->Progress();
  // Whatever is still pending is released by UCX when it completes (the worker is destroyed next).
  for (Lane& l : lanes_) {
    for (void* r : {l.direct, l.recv}) {
      if (r != nullptr) ucp_request_free(r);
    }
    for (Sent& s : l.in_flight) {
      if (s.request != nullptr) ucp_request_free(s.request);
    }
    l.direct = l.recv = nullptr;
    l.in_flight.clear();
  }
  if (closing != nullptr && UCS_PTR_IS_PTR(closing)) ucp_request_free(closing);
}

}  // namespace hccltune::transport
