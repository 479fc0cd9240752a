#include "python/csrc/p2p.h"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <list>
#include <map>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "python/csrc/store_adapter.h"
#include "runtime/api/communicator.h"

namespace hccltune::torch_backend {
namespace {

using Clock = std::chrono::steady_clock;

// One protocol message header (a DATA payload follows as a separate runtime message).
struct Header {
  enum Kind : uint32_t { kCts = 1, kRts = 2, kData = 3, kWant = 4 };
  uint32_t kind = 0;
  uint32_t accepted = 0;  // DATA: 1 = the payload follows (sizes agree), 0 = refused, nothing follows
  int64_t tag = 0;
  uint64_t seq = 0;    // the send's number among the sender's sends with this tag to this receiver
  uint64_t bytes = 0;  // CTS: the receiver's buffer size; RTS, DATA: the send's size
};
static_assert(sizeof(Header) == 32);

struct Op {
  enum Phase { kUnmatched, kMatched, kTransfer };
  bool send = false;
  int peer = 0;  // send: the destination; recv: the source or kAnySource
  int64_t tag = 0;
  void* data = nullptr;
  size_t bytes = 0;
  P2pEngine::Done done;
  Clock::time_point deadline;
  Phase phase = kUnmatched;  // kTransfer: a thread is moving the payload (only that thread may finish it)
  int source = -1;           // recv: the peer whose send it claimed
  uint64_t seq = 0;          // send: from posting; recv: once claimed
  bool finished = false;     // done is called once: an operation may be failed on several paths (its own
                             // deadline, then the break of its pair found by another operation's deadline)
  absl::Status expired;      // its deadline passed while its data moved (the pair is broken for it): its thread
                             // finishes it with this even when the transfer then completes
};
using OpPtr = std::shared_ptr<Op>;

struct Announcement {
  int64_t tag;
  uint64_t seq;
  uint64_t stamp;  // arrival order across all peers
};

struct Outgoing {
  Header header;
  OpPtr op;                 // DATA: its send
  uint64_t recv_bytes = 0;  // DATA: the size of the recv that claimed it
};

struct Channel {
  int peer = 0;
  bool ready = false;  // communicators created
  absl::Status broken;
  bool writer_exited = false, reader_exited = false;
  bool writer_busy = true, reader_busy = false;  // inside a runtime call (connecting included): not interruptible
  bool announce = false;                         // the peer asked (WANT) for an RTS for every send that finds no CTS
  bool want_sent = false;                        // this rank asked the peer (it has posted a receive from any source)
  std::unique_ptr<Communicator> out, in;         // this rank -> peer, peer -> this rank
  c10::intrusive_ptr<c10d::Store> out_store, in_store;   // their rendezvous stores (the abort key lives there)
  std::deque<Outgoing> outq;                             // for the writer, in order
  std::condition_variable wcv, rcv, done_cv;             // writer: outq; reader: a message is due; exits
  std::map<std::pair<int64_t, uint64_t>, uint64_t> cts;  // CTS that came before their send: (tag, seq) -> bytes
  std::map<int64_t, uint64_t> next_send;                 // per tag: the number of this rank's next send
  std::map<int64_t, uint64_t> claimed;                   // per tag: the peer's first send no recv has claimed
  std::deque<Announcement> announced;                    // unclaimed RTS, in arrival order
  std::thread writer, reader;
};
using ChannelPtr = std::shared_ptr<Channel>;

// Work to do once the engine's lock is released: callbacks and store calls.
using Later = std::vector<std::function<void()>>;
void RunAll(Later& later) {
  for (auto& f : later) f();
  later.clear();
}

// `text` with the ranks of a two-rank link's communicator ("rank 0", "rank 1", "ranks 0 and 1") renamed to the
// job's ranks of its sender (0) and receiver (1).
std::string RenameLinkRanks(absl::string_view text, int sender, int receiver) {
  static const std::regex kRank(R"(\b(ranks? )([01])\b( and )?([01]\b)?)");
  auto job_rank = [&](const std::string& d) { return d == "0" ? sender : receiver; };
  std::string out;
  const std::string in(text);
  auto last = in.cbegin();
  for (std::sregex_iterator it(in.begin(), in.end(), kRank), end; it != end; ++it) {
    const std::smatch& m = *it;
    out.append(last, m[0].first);
    absl::StrAppend(&out, m[1].str(), job_rank(m[2].str()));
    if (m[4].matched)
      absl::StrAppend(&out, m[3].str(), job_rank(m[4].str()));
    else if (m[3].matched)
      out += m[3].str();
    last = m[0].second;
  }
  out.append(last, in.cend());
  return out;
}

std::string What(const Op& op, int rank) {
  if (op.send) return absl::StrCat("send from rank ", rank, " to rank ", op.peer, " with tag ", op.tag);
  if (op.peer == P2pEngine::kAnySource)
    return absl::StrCat("recv on rank ", rank, " from any source with tag ", op.tag);
  return absl::StrCat("recv on rank ", rank, " from rank ", op.peer, " with tag ", op.tag);
}

}  // namespace

struct P2pEngine::State : std::enable_shared_from_this<P2pEngine::State> {
  int rank = 0, size = 0;
  c10::intrusive_ptr<c10d::Store> store;
  Environment env;
  std::chrono::milliseconds op_timeout{0};

  std::mutex mu;
  std::condition_variable cv;  // the service thread: new operations, stopping
  bool stopping = false;
  bool dirty = false;                                         // something the service thread should look at
  Clock::time_point service_wake = Clock::time_point::max();  // when the service thread looks next
  bool any_mode = false;  // this rank has posted a receive from any source: every pair gets a WANT
  std::list<OpPtr> ops;   // unfinished operations, in post order
  std::map<int, ChannelPtr> channels;
  uint64_t stamp = 0;
  std::thread service;
  int64_t hello_seen = 0;  // service thread only

  // `sending`: the error came from this rank's direction of the pair. That direction's communicator numbers its
  // sender 0 and its receiver 1, and the runtime's text uses those numbers: the message names the job's ranks.
  absl::Status Wrap(const absl::Status& s, const char* what, int peer, bool sending) const {
    const int sender = sending ? rank : peer, receiver = sending ? peer : rank;
    return absl::Status(s.code(), absl::StrCat(what, " between ranks ", rank, " and ", peer, ": ",
                                               RenameLinkRanks(s.message(), sender, receiver)));
  }

  // REQUIRES: mu held (for all the members below up to the thread loops).
  void Finish(const OpPtr& op, const absl::Status& s, Later* later) {
    if (op->finished) return;
    op->finished = true;
    ops.remove(op);
    later->push_back([op, s] { op->done(s, op->send ? -1 : op->source); });
  }

  ChannelPtr ChannelFor(int peer) {
    ChannelPtr& ch = channels[peer];
    if (ch) return ch;
    ch = std::make_shared<Channel>();
    ch->peer = peer;
    const int lo = std::min(rank, peer), hi = std::max(rank, peer);
    auto dir_store = [&](int from, int to) -> c10::intrusive_ptr<c10d::Store> {
      return c10::make_intrusive<c10d::PrefixStore>(absl::StrCat("p2p/", lo, "-", hi, "/", from, "-", to), store);
    };
    ch->out_store = dir_store(rank, peer);
    ch->in_store = dir_store(peer, rank);
    if (any_mode) QueueWant(*ch);
    // The threads hold the state and the channel, so a thread that outlives the engine touches nothing freed.
    ch->writer = std::thread([st = shared_from_this(), c = ch] { st->WriterLoop(c); });
    ch->reader = std::thread([st = shared_from_this(), c = ch] { st->ReaderLoop(c); });
    return ch;
  }

  // Fails every operation tied to the pair (those in transfer are failed by their thread once its transport
  // call returns) and aborts the pair's communicators so the peer and our blocked threads learn at once.
  void Break(Channel& ch, const absl::Status& s, Later* later) {
    if (!ch.broken.ok()) return;
    ch.broken = s;
    for (const OpPtr& op : std::vector<OpPtr>(ops.begin(), ops.end())) {
      if (op->phase == Op::kTransfer) continue;
      const bool tied =
          op->send || op->peer != kAnySource ? op->peer == ch.peer : op->phase == Op::kMatched && op->source == ch.peer;
      if (tied) Finish(op, s, later);
    }
    ch.outq.clear();
    ch.cts.clear();
    ch.announced.clear();
    ch.wcv.notify_all();
    ch.rcv.notify_all();
    ch.done_cv.notify_all();
    const std::string why = std::string(s.message());
    later->push_back([out = ch.out_store, in = ch.in_store, why] {
      for (const auto& st : {out, in}) {
        try {
          st->set("abort", std::vector<uint8_t>(why.begin(), why.end()));
        } catch (const std::exception&) {  // the store is gone (shutdown): the peer finds out by itself
        }
      }
    });
    if (!stopping) Match(later);  // an any-source receive may have lost its last live peer
  }

  void QueueWant(Channel& ch) {
    if (ch.want_sent) return;
    ch.want_sent = true;
    Outgoing o;
    o.header.kind = Header::kWant;
    ch.outq.push_back(std::move(o));
    ch.wcv.notify_one();
  }

  void QueueRts(Channel& ch, const Op& op) {
    Outgoing o;
    o.header.kind = Header::kRts;
    o.header.tag = op.tag;
    o.header.seq = op.seq;
    o.header.bytes = op.bytes;
    ch.outq.push_back(std::move(o));
    ch.wcv.notify_one();
  }

  // Whether the peer owes this rank a message, so the reader should be reading: a CTS (or WANT) for an
  // unmatched send, DATA for a claimed receive, an RTS while a receive from any source waits. Otherwise the
  // reader sleeps outside the transport: an idle pair costs nothing and keeps the runtime's waits tuned for
  // traffic that comes.
  bool Expecting(const Channel& ch) const {
    for (const OpPtr& op : ops) {
      if (op->send ? op->peer == ch.peer && op->phase == Op::kUnmatched
                   : (op->phase == Op::kMatched && op->source == ch.peer) ||
                         (op->peer == kAnySource && op->phase == Op::kUnmatched)) {
        return true;
      }
    }
    return false;
  }

  void Claim(Channel& ch, const OpPtr& op, uint64_t seq) {
    op->phase = Op::kMatched;
    op->source = ch.peer;
    op->seq = seq;
    const uint64_t next = ch.claimed[op->tag];
    ch.announced.erase(std::remove_if(ch.announced.begin(), ch.announced.end(),
                                      [&](const Announcement& a) { return a.tag == op->tag && a.seq < next; }),
                       ch.announced.end());
    Outgoing o;
    o.header.kind = Header::kCts;
    o.header.tag = op->tag;
    o.header.seq = seq;
    o.header.bytes = op->bytes;
    ch.outq.push_back(std::move(o));
    ch.wcv.notify_one();
    ch.rcv.notify_one();  // DATA is due
  }

  // Gives unmatched receives their sends, in post order (see the header).
  void Match(Later* later) {
    bool any_waiting = false;  // an any-source receive still has no send
    std::vector<std::pair<OpPtr, absl::Status>> failed;
    for (const OpPtr& op : ops) {
      if (op->send || op->phase != Op::kUnmatched) continue;
      if (op->peer != kAnySource) {
        ChannelPtr ch = ChannelFor(op->peer);
        if (!ch->broken.ok()) {
          failed.emplace_back(op, ch->broken);
          continue;
        }
        Claim(*ch, op, ch->claimed[op->tag]++);
        continue;
      }
      Channel* best = nullptr;
      std::deque<Announcement>::iterator best_it;
      for (auto& [peer, ch] : channels) {
        if (!ch->broken.ok()) continue;
        const uint64_t next = ch->claimed[op->tag];
        for (auto it = ch->announced.begin(); it != ch->announced.end(); ++it) {
          if (it->tag != op->tag || it->seq != next) continue;
          if (best == nullptr || it->stamp < best_it->stamp) best = ch.get(), best_it = it;
          break;
        }
      }
      if (best == nullptr) {
        any_waiting = true;
        continue;
      }
      best->announced.erase(best_it);
      Claim(*best, op, best->claimed[op->tag]++);
    }
    // An any-source receive no peer can serve any more: every other rank's pair is broken.
    if (any_waiting && static_cast<int>(channels.size()) == size - 1) {
      std::string why;
      for (auto& [peer, ch] : channels) {
        if (ch->broken.ok()) return Fail(failed, later);
        absl::StrAppend(&why, why.empty() ? "" : "; ", ch->broken.message());
      }
      for (const OpPtr& op : ops) {
        if (!op->send && op->peer == kAnySource && op->phase == Op::kUnmatched) {
          failed.emplace_back(op, absl::UnavailableError(absl::StrCat(
                                      What(*op, rank), ": point-to-point with every other rank failed: ", why)));
        }
      }
    }
    Fail(failed, later);
  }

  void Fail(std::vector<std::pair<OpPtr, absl::Status>>& failed, Later* later) {
    for (auto& [op, s] : failed) Finish(op, s, later);
  }

  // A send matched by the receiver's CTS: DATA goes out next (refused when the sizes differ).
  void QueueData(Channel& ch, const OpPtr& op, uint64_t recv_bytes) {
    op->phase = Op::kMatched;
    Outgoing o;
    o.header.kind = Header::kData;
    o.header.tag = op->tag;
    o.header.seq = op->seq;
    o.header.bytes = op->bytes;
    o.header.accepted = recv_bytes == op->bytes ? 1 : 0;
    o.op = op;
    o.recv_bytes = recv_bytes;
    ch.outq.push_back(std::move(o));
    ch.wcv.notify_one();
  }

  void Post(const OpPtr& op) {
    Later later;
    {
      std::lock_guard<std::mutex> lock(mu);
      op->deadline = Clock::now() + op_timeout;
      if (stopping) {
        later.push_back([op] { op->done(absl::CancelledError("hccltune: the process group was destroyed"), -1); });
      } else if (op->send || op->peer != kAnySource) {
        ChannelPtr ch = ChannelFor(op->peer);
        if (!ch->broken.ok()) {
          later.push_back([op, s = ch->broken] { op->done(s, -1); });
        } else {
          ops.push_back(op);
          if (op->send) {
            op->seq = ch->next_send[op->tag]++;
            auto it = ch->cts.find({op->tag, op->seq});
            if (it != ch->cts.end()) {
              QueueData(*ch, op, it->second);
              ch->cts.erase(it);
            } else {
              if (ch->announce) QueueRts(*ch, *op);
              ch->rcv.notify_one();  // the reader: a CTS is due
            }
          } else {
            Match(&later);
          }
        }
      } else {
        ops.push_back(op);
        if (!any_mode) {
          any_mode = true;
          for (auto& [peer, ch] : channels) QueueWant(*ch);
        }
        for (auto& [peer, ch] : channels) ch->rcv.notify_one();  // readers: an RTS may come from any of them
        Match(&later);
      }
      if (!service.joinable() && !stopping) service = std::thread([st = shared_from_this()] { st->ServiceLoop(); });
      // The service thread sleeps until the earliest deadline, which a new operation rarely moves; it polls for
      // new pairs while an any-source receive waits.
      if (op->deadline < service_wake || (!op->send && op->peer == kAnySource)) {
        dirty = true;
        cv.notify_all();
      }
    }
    RunAll(later);
  }

  // --- threads ---

  void WriterLoop(const ChannelPtr& ch) {
    const int peer = ch->peer;
    // Announce the pair, so a peer with an any-source receive joins it (the "hello" entries of the header).
    try {
      const int64_t idx = store->add(absl::StrCat("p2p/hello/", peer), 1);
      const std::string me = std::to_string(rank);
      store->set(absl::StrCat("p2p/hello/", peer, "/", idx), std::vector<uint8_t>(me.begin(), me.end()));
    } catch (const std::exception&) {  // a broken store fails the connect below, with its own message
    }
    // Both ranks create the two directions in the same order (lower rank's sends first).
    std::unique_ptr<Communicator> comms[2];
    absl::Status status;
    for (int dir = 0; dir < 2 && status.ok(); ++dir) {
      const bool mine = (dir == 0) == (rank < peer);  // this direction is this rank's sends
      auto c = Communicator::Create(mine ? 0 : 1, 2, AdaptC10dStore(mine ? ch->out_store : ch->in_store), env);
      if (c.ok()) {
        comms[mine ? 0 : 1] = *std::move(c);
      } else {
        status = Wrap(c.status(), "connecting point-to-point", peer, mine);
      }
    }
    Later later;
    std::unique_lock<std::mutex> lock(mu);
    ch->writer_busy = false;
    if (!status.ok()) {
      Break(*ch, status, &later);
    } else if (ch->broken.ok() && !stopping) {
      ch->out = std::move(comms[0]);
      ch->in = std::move(comms[1]);
      ch->ready = true;
      ch->rcv.notify_one();
    }
    while (ch->ready) {
      lock.unlock();
      RunAll(later);
      lock.lock();
      ch->wcv.wait(lock, [&] { return stopping || !ch->broken.ok() || !ch->outq.empty(); });
      if (stopping || !ch->broken.ok()) break;
      Outgoing o = std::move(ch->outq.front());
      ch->outq.pop_front();
      if (o.op) o.op->phase = Op::kTransfer;
      ch->writer_busy = true;
      lock.unlock();
      absl::Status s = ch->out->Send(&o.header, sizeof o.header, DataType::kUint8, 1);
      if (s.ok() && o.header.kind == Header::kData && o.header.accepted && o.op->bytes > 0) {
        s = ch->out->Send(o.op->data, o.op->bytes, DataType::kUint8, 1);
      }
      lock.lock();
      ch->writer_busy = false;
      if (stopping) ch->done_cv.notify_all();
      if (!s.ok()) {
        if (o.op) Finish(o.op, Wrap(s, "send", peer, true), &later);
        Break(*ch, Wrap(s, "point-to-point", peer, true), &later);
        break;
      }
      if (o.op) {
        Finish(o.op,
               !o.op->expired.ok() ? o.op->expired
               : o.header.accepted
                   ? absl::OkStatus()
                   : absl::InvalidArgumentError(absl::StrCat(What(*o.op, rank), ": the send has ", o.op->bytes,
                                                             " bytes, the matching recv ", o.recv_bytes)),
               &later);
      }
    }
    ch->writer_exited = true;
    ch->done_cv.notify_all();
    lock.unlock();
    RunAll(later);
    comms[0].reset();  // (set only when the channel never became ready)
    comms[1].reset();
  }

  void ReaderLoop(const ChannelPtr& ch) {
    const int peer = ch->peer;
    Later later;
    std::unique_lock<std::mutex> lock(mu);
    while (true) {
      lock.unlock();
      RunAll(later);
      lock.lock();
      ch->rcv.wait(lock, [&] { return stopping || !ch->broken.ok() || (ch->ready && Expecting(*ch)); });
      if (stopping || !ch->broken.ok()) break;
      ch->reader_busy = true;
      lock.unlock();
      Header h;
      absl::Status s = ch->in->Recv(&h, sizeof h, DataType::kUint8, 0);
      lock.lock();
      ch->reader_busy = false;
      if (stopping) ch->done_cv.notify_all();
      if (stopping || !ch->broken.ok()) break;
      if (!s.ok()) {
        Break(*ch, Wrap(s, "point-to-point", peer, false), &later);
        break;
      }
      if (h.kind == Header::kCts) {
        OpPtr send;
        for (const OpPtr& op : ops) {
          if (op->send && op->peer == peer && op->tag == h.tag && op->seq == h.seq && op->phase == Op::kUnmatched) {
            send = op;
            break;
          }
        }
        if (send) {
          QueueData(*ch, send, h.bytes);
        } else {
          ch->cts[{h.tag, h.seq}] = h.bytes;
        }
      } else if (h.kind == Header::kWant) {
        ch->announce = true;  // announce the sends already waiting, in order, then every later one
        for (const OpPtr& op : ops) {
          if (op->send && op->peer == peer && op->phase == Op::kUnmatched) QueueRts(*ch, *op);
        }
      } else if (h.kind == Header::kRts) {
        if (h.seq >= ch->claimed[h.tag]) {  // else a CTS claimed that send already
          ch->announced.push_back(Announcement{h.tag, h.seq, ++stamp});
          Match(&later);
        }
      } else if (h.kind == Header::kData) {
        OpPtr recv;
        for (const OpPtr& op : ops) {
          if (!op->send && op->phase == Op::kMatched && op->source == peer && op->tag == h.tag && op->seq == h.seq) {
            recv = op;
            break;
          }
        }
        if (!recv || (h.accepted && h.bytes != recv->bytes)) {
          Break(
              *ch,
              absl::InternalError(absl::StrCat("protocol error between ranks ", rank, " and ", peer, ": DATA for tag ",
                                               h.tag, " number ", h.seq, " matches no pending recv")),
              &later);
          break;
        }
        if (!h.accepted) {
          Finish(recv,
                 absl::InvalidArgumentError(absl::StrCat(What(*recv, rank), ": the recv has ", recv->bytes,
                                                         " bytes, the matching send from rank ", peer, " ", h.bytes)),
                 &later);
          continue;
        }
        recv->phase = Op::kTransfer;
        ch->reader_busy = true;
        lock.unlock();
        absl::Status r =
            recv->bytes > 0 ? ch->in->Recv(recv->data, recv->bytes, DataType::kUint8, 0) : absl::OkStatus();
        lock.lock();
        ch->reader_busy = false;
        if (stopping) ch->done_cv.notify_all();
        if (!r.ok()) {
          Finish(recv, Wrap(r, "recv", peer, false), &later);
          Break(*ch, Wrap(r, "point-to-point", peer, false), &later);
          break;
        }
        Finish(recv, recv->expired, &later);  // OK unless its deadline passed and broke the pair meanwhile
      } else {
        Break(*ch, absl::DataLossError(absl::StrCat("protocol error: unknown message kind ", h.kind)), &later);
        break;
      }
    }
    ch->reader_exited = true;
    ch->done_cv.notify_all();
    lock.unlock();
    RunAll(later);
  }

  // Deadlines, and joining the pairs peers open towards this rank while an any-source receive waits.
  void ServiceLoop() {
    Later later;
    std::unique_lock<std::mutex> lock(mu);
    auto poll = std::chrono::microseconds(100);
    while (!stopping) {
      dirty = false;
      const auto now = Clock::now();
      // Idle, look again one timeout from now: every operation posted later has a deadline at or after that,
      // so posting one never has to wake this thread (a wake-up per operation costs a context switch).
      auto wake = now + op_timeout;
      bool any_waiting = false;
      for (const OpPtr& op : std::vector<OpPtr>(ops.begin(), ops.end())) {
        if (op->finished) continue;  // failed by the break of an operation expired before it in this pass
        if (op->deadline <= now) {
          Expire(op, &later);
        } else {
          wake = std::min(wake, op->deadline);
          any_waiting |= !op->send && op->peer == kAnySource && op->phase == Op::kUnmatched;
        }
      }
      if (any_waiting && static_cast<int>(channels.size()) < size - 1) {
        lock.unlock();
        RunAll(later);
        std::vector<int> peers = PollHello();
        lock.lock();
        if (stopping) break;
        for (int p : peers) ChannelFor(p);
        wake = std::min(wake, Clock::now() + poll);
        poll = std::min<std::chrono::microseconds>(poll * 2, std::chrono::milliseconds(5));
      } else {
        poll = std::chrono::microseconds(100);
      }
      lock.unlock();
      RunAll(later);
      lock.lock();
      service_wake = wake;
      cv.wait_until(lock, wake, [&] { return stopping || dirty; });
      service_wake = Clock::time_point::max();
    }
  }

  void Expire(const OpPtr& op, Later* later) {
    const absl::Status s = absl::DeadlineExceededError(
        absl::StrCat(What(*op, rank), " (", op->bytes, " bytes) did not complete within ", op_timeout.count(),
                     " ms (the group's timeout)", op->phase == Op::kTransfer ? " while moving its data" : ""));
    const int peer = op->send || op->peer != kAnySource ? op->peer : op->source;
    if (!op->send && op->phase == Op::kUnmatched) {  // nothing is promised to a peer yet
      Finish(op, s, later);
      return;
    }
    if (op->phase != Op::kTransfer) Finish(op, s, later);
    // A transfer that completes after this still fails: its pair is broken for it, so the operations after it
    // fail with this error, and reporting it done would point the user at an operation that succeeded.
    if (op->phase == Op::kTransfer) op->expired = s;
    // The peer was promised (or is moving) this operation's data: the pair cannot stay in step.
    Break(*channels.at(peer), s, later);
    op->deadline = Clock::time_point::max();  // a transfer is finished by its thread once the abort lands
  }

  // New "hello" entries for this rank: peers that opened a pair towards it. Service thread only.
  std::vector<int> PollHello() {
    std::vector<int> peers;
    try {
      const std::string key = absl::StrCat("p2p/hello/", rank);
      const int64_t count = store->add(key, 0);
      while (hello_seen < count) {
        const std::string entry = absl::StrCat(key, "/", hello_seen + 1);
        if (!store->check({entry})) break;  // added but not written yet: next poll
        const std::vector<uint8_t> v = store->get(entry);
        peers.push_back(std::stoi(std::string(v.begin(), v.end())));
        ++hello_seen;
      }
    } catch (const std::exception&) {  // the store is unreachable: the receive times out with its own message
    }
    return peers;
  }
};

P2pEngine::P2pEngine(int rank, int size, c10::intrusive_ptr<c10d::Store> store, Environment env,
                     std::chrono::milliseconds op_timeout)
    : state_(std::make_shared<State>()) {
  state_->rank = rank;
  state_->size = size;
  state_->store = std::move(store);
  state_->env = std::move(env);
  state_->op_timeout = op_timeout;
}

P2pEngine::~P2pEngine() {
  State& st = *state_;
  Later later;
  std::vector<ChannelPtr> channels;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    st.stopping = true;
    const absl::Status why =
        absl::CancelledError(absl::StrCat("hccltune: rank ", st.rank, " destroyed its process group"));
    for (auto& [peer, ch] : st.channels) {
      st.Break(*ch, why, &later);
      channels.push_back(ch);
    }
    for (const OpPtr& op : std::vector<OpPtr>(st.ops.begin(), st.ops.end())) {
      if (op->phase != Op::kTransfer) st.Finish(op, why, &later);
    }
    st.cv.notify_all();
  }
  RunAll(later);
  if (st.service.joinable()) st.service.join();
  // A thread outside the runtime sees `stopping` and exits: it is joined. One inside a runtime call returns
  // once the abort key lands (the runtime probes it every 50 ms) and is joined too; one still inside after a
  // few seconds (connecting, or its store is gone) is left to finish on its own (it holds the state).
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  std::unique_lock<std::mutex> lock(st.mu);
  for (const ChannelPtr& ch : channels) {
    ch->done_cv.wait_until(lock, deadline, [&] {
      return (ch->writer_exited || !ch->writer_busy) && (ch->reader_exited || !ch->reader_busy);
    });
    const bool detach_writer = !ch->writer_exited && ch->writer_busy;
    const bool detach_reader = !ch->reader_exited && ch->reader_busy;
    lock.unlock();
    if (detach_writer) {
      ch->writer.detach();
    } else {
      ch->writer.join();
    }
    if (detach_reader) {
      ch->reader.detach();
    } else {
      ch->reader.join();
    }
    lock.lock();
  }
}

void P2pEngine::PostSend(int peer, int tag, const void* data, size_t bytes, Done done) {
  auto op = std::make_shared<Op>();
  op->send = true;
  op->peer = peer;
  op->tag = tag;
  op->data = const_cast<void*>(data);
  op->bytes = bytes;
  op->done = std::move(done);
  state_->Post(op);
}

void P2pEngine::PostRecv(int peer, int tag, void* data, size_t bytes, Done done) {
  auto op = std::make_shared<Op>();
  op->peer = peer;
  op->tag = tag;
  op->data = data;
  op->bytes = bytes;
  op->done = std::move(done);
  state_->Post(op);
}

}  // namespace hccltune::torch_backend
