#include "python/csrc/p2p.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "python/csrc/store_adapter.h"
#include "runtime/api/communicator.h"

namespace hccltune::torch_backend {
namespace {

// One protocol message header (the payload of DATA follows as a separate runtime message).
struct Header {
  enum Kind : uint64_t { kCts = 1, kData = 2 };
  uint64_t kind = 0;
  int64_t tag = 0;
  uint64_t bytes = 0;     // CTS: the receiver's buffer size; DATA: the sender's size
  uint64_t accepted = 0;  // DATA: 1 = the payload follows (sizes agree), 0 = refused, nothing follows
};
static_assert(sizeof(Header) == 32);

struct SendOp {
  int tag;
  const void* data;
  size_t bytes;
  P2pEngine::Done done;
};
struct RecvOp {
  int tag;
  void* data;
  size_t bytes;
  P2pEngine::Done done;
};
// What the writer sends next: a CTS for a posted recv, or the DATA of a matched send.
struct Outgoing {
  Header header;
  SendOp send;          // DATA only
  uint64_t posted = 0;  // DATA only: the size of the recv it matched
};

}  // namespace

struct P2pEngine::Channel {
  int rank = 0, peer = 0;
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;                             // communicators created
  bool stopping = false;                          // engine destroyed
  bool reader_busy = false, writer_busy = false;  // inside a runtime call (cannot be interrupted)
  absl::Status broken;                            // first failure; every later operation fails with it
  std::unique_ptr<Communicator> out, in;          // this rank -> peer, peer -> this rank
  std::deque<SendOp> sends;                       // posted, waiting for their CTS
  std::deque<Header> cts;                         // received CTS not matched by a send yet
  std::deque<RecvOp> recvs;                       // posted (their CTS queued or sent), in post order
  std::deque<Outgoing> outq;                      // for the writer, in order
  std::thread writer, reader;

  // Pairs CTS (in arrival order) with the first pending send of the same tag. REQUIRES: mu held.
  void Match() {
    for (auto c = cts.begin(); c != cts.end();) {
      auto s = sends.begin();
      while (s != sends.end() && s->tag != c->tag) ++s;
      if (s == sends.end()) {
        ++c;
        continue;
      }
      Outgoing o;
      o.header.kind = Header::kData;
      o.header.tag = s->tag;
      o.header.bytes = s->bytes;
      o.header.accepted = c->bytes == s->bytes ? 1 : 0;
      o.posted = c->bytes;
      o.send = std::move(*s);
      sends.erase(s);
      c = cts.erase(c);
      outq.push_back(std::move(o));
      cv.notify_all();
    }
  }

  // Records the first failure and takes every queued operation's callback. REQUIRES: mu held.
  std::vector<Done> FailAll(const absl::Status& s) {
    if (broken.ok()) broken = s;
    std::vector<Done> dones;
    for (auto& op : sends) dones.push_back(std::move(op.done));
    for (auto& op : recvs) dones.push_back(std::move(op.done));
    for (auto& o : outq) {
      if (o.header.kind == Header::kData) dones.push_back(std::move(o.send.done));
    }
    sends.clear();
    recvs.clear();
    outq.clear();
    cts.clear();
    cv.notify_all();
    return dones;
  }

  void Fail(const absl::Status& s) {
    std::vector<Done> dones;
    absl::Status first;
    {
      std::lock_guard<std::mutex> lock(mu);
      dones = FailAll(s);
      first = broken;
    }
    for (auto& d : dones) d(first);
  }

  absl::Status Wrap(const absl::Status& s, const char* what) const {
    return absl::Status(s.code(), absl::StrCat(what, " between ranks ", rank, " and ", peer, ": ", s.message()));
  }

  void WriterLoop(const c10::intrusive_ptr<c10d::Store>& store, const Environment& env) {
    // Both ranks create the two directions in the same order (lower rank's sends first).
    const int lo = std::min(rank, peer), hi = std::max(rank, peer);
    std::unique_ptr<Communicator> comms[2];
    for (int dir = 0; dir < 2; ++dir) {
      const int from = dir == 0 ? lo : hi, to = dir == 0 ? hi : lo;
      auto prefixed =
          c10::make_intrusive<c10d::PrefixStore>(absl::StrCat("p2p/", lo, "-", hi, "/", from, "-", to), store);
      auto c = Communicator::Create(from == rank ? 0 : 1, 2, AdaptC10dStore(prefixed), env);
      if (!c.ok()) {
        Fail(Wrap(c.status(), "connecting point-to-point"));
        std::lock_guard<std::mutex> lock(mu);
        writer_busy = false;
        return;
      }
      comms[dir] = *std::move(c);
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      out = std::move(comms[rank == lo ? 0 : 1]);
      in = std::move(comms[rank == lo ? 1 : 0]);
      ready = true;
      writer_busy = false;
      cv.notify_all();
    }
    while (true) {
      Outgoing o;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stopping || !broken.ok() || !outq.empty(); });
        if (stopping || !broken.ok()) return;
        o = std::move(outq.front());
        outq.pop_front();
        writer_busy = true;
      }
      absl::Status s = out->Send(&o.header, sizeof o.header, DataType::kUint8, 1);
      if (s.ok() && o.header.kind == Header::kData && o.header.accepted && o.send.bytes > 0) {
        s = out->Send(o.send.data, o.send.bytes, DataType::kUint8, 1);
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        writer_busy = false;
      }
      if (!s.ok()) {
        if (o.header.kind == Header::kData) o.send.done(Wrap(s, "send"));
        Fail(Wrap(s, "point-to-point"));
        return;
      }
      if (o.header.kind == Header::kData) {
        o.send.done(o.header.accepted ? absl::OkStatus()
                                      : absl::InvalidArgumentError(absl::StrCat(
                                            "send from rank ", rank, " to rank ", peer, " with tag ", o.header.tag,
                                            ": the send has ", o.send.bytes, " bytes, the matching recv ", o.posted)));
      }
    }
  }

  void ReaderLoop() {
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mu);
        // Read only while a message is due: DATA for a posted recv, or a CTS for an unmatched send.
        cv.wait(lock, [&] { return stopping || !broken.ok() || (ready && (!recvs.empty() || !sends.empty())); });
        if (stopping || !broken.ok()) return;
        reader_busy = true;
      }
      Header h;
      absl::Status s = in->Recv(&h, sizeof h, DataType::kUint8, 0);
      RecvOp op{};
      bool have_op = false;
      if (s.ok() && h.kind == Header::kCts) {
        std::lock_guard<std::mutex> lock(mu);
        reader_busy = false;
        cts.push_back(h);
        Match();
        continue;
      }
      if (s.ok() && h.kind == Header::kData) {
        std::lock_guard<std::mutex> lock(mu);
        auto it = recvs.begin();
        while (it != recvs.end() && it->tag != h.tag) ++it;
        if (it == recvs.end()) {
          s = absl::InternalError(absl::StrCat("protocol error: DATA with tag ", h.tag, " and no pending recv"));
        } else {
          op = std::move(*it);
          recvs.erase(it);
          have_op = true;
        }
      } else if (s.ok()) {
        s = absl::DataLossError(absl::StrCat("protocol error: unknown message kind ", h.kind));
      }
      absl::Status result;
      if (s.ok() && h.accepted && op.bytes > 0) s = in->Recv(op.data, op.bytes, DataType::kUint8, 0);
      if (s.ok() && !h.accepted) {
        result = absl::InvalidArgumentError(absl::StrCat("recv on rank ", rank, " from rank ", peer, " with tag ",
                                                         h.tag, ": the recv has ", op.bytes,
                                                         " bytes, the matching send ", h.bytes));
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        reader_busy = false;
      }
      if (!s.ok()) {
        if (have_op) op.done(Wrap(s, "recv"));
        Fail(Wrap(s, "point-to-point"));
        return;
      }
      op.done(result);
    }
  }
};

P2pEngine::P2pEngine(int rank, int size, c10::intrusive_ptr<c10d::Store> store, Environment env)
    : rank_(rank), size_(size), store_(std::move(store)), env_(std::move(env)) {}

P2pEngine::~P2pEngine() {
  std::map<int, std::shared_ptr<Channel>> channels;
  {
    std::lock_guard<std::mutex> lock(mu_);
    channels.swap(channels_);
  }
  for (auto& [peer, ch] : channels) {
    std::vector<Done> dones;
    bool join_writer, join_reader;
    {
      std::lock_guard<std::mutex> lock(ch->mu);
      ch->stopping = true;
      dones = ch->FailAll(absl::CancelledError("hccltune: the process group was destroyed"));
      // A thread inside a runtime call cannot be interrupted: it keeps the channel alive and exits when the
      // call returns (its peer answered, or the execution timeout passed).
      join_writer = !ch->writer_busy;
      join_reader = !ch->reader_busy;
    }
    for (auto& d : dones) d(absl::CancelledError("hccltune: the process group was destroyed"));
    if (join_writer)
      ch->writer.join();
    else
      ch->writer.detach();
    if (join_reader)
      ch->reader.join();
    else
      ch->reader.detach();
  }
}

std::shared_ptr<P2pEngine::Channel> P2pEngine::ChannelFor(int peer) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& ch = channels_[peer];
  if (!ch) {
    ch = std::make_shared<Channel>();
    ch->rank = rank_;
    ch->peer = peer;
    ch->writer_busy = true;  // creating the communicators
    // Threads hold the channel (not the engine), so a detached thread never touches a destroyed engine.
    ch->writer = std::thread([c = ch, store = store_, env = env_] { c->WriterLoop(store, env); });
    ch->reader = std::thread([c = ch] { c->ReaderLoop(); });
  }
  return ch;
}

void P2pEngine::PostSend(int peer, int tag, const void* data, size_t bytes, Done done) {
  auto ch = ChannelFor(peer);
  std::unique_lock<std::mutex> lock(ch->mu);
  if (!ch->broken.ok()) {
    absl::Status s = ch->broken;
    lock.unlock();
    done(s);
    return;
  }
  ch->sends.push_back(SendOp{tag, data, bytes, std::move(done)});
  ch->Match();
  ch->cv.notify_all();
}

void P2pEngine::PostRecv(int peer, int tag, void* data, size_t bytes, Done done) {
  auto ch = ChannelFor(peer);
  std::unique_lock<std::mutex> lock(ch->mu);
  if (!ch->broken.ok()) {
    absl::Status s = ch->broken;
    lock.unlock();
    done(s);
    return;
  }
  ch->recvs.push_back(RecvOp{tag, data, bytes, std::move(done)});
  Outgoing o;
  o.header.kind = Header::kCts;
  o.header.tag = tag;
  o.header.bytes = bytes;
  ch->outq.push_back(std::move(o));
  ch->cv.notify_all();
}

}  // namespace hccltune::torch_backend
