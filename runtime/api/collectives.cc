// Collective entry points: argument checks, configuration choice, execution through the registry, timing.
#include <chrono>
#include <cstring>
#include <limits>
#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/algorithms/registry.h"
#include "runtime/algorithms/sub_endpoint.h"
#include "runtime/api/communicator_impl.h"
#include "runtime/common/logging.h"
#include "runtime/common/sizes.h"

namespace hccltune {
namespace {

std::vector<int> Iota(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

// 0..n-1, kept per thread so a call does not allocate it.
const std::vector<int>& AllRanks(int n) {
  thread_local std::vector<int> all;
  if (all.size() != static_cast<size_t>(n)) all = Iota(n);
  return all;
}

// The AlgorithmContext of one call (depth 0) or of a sub-collective (depth > 0, `members` a subset).
class CallContext final : public AlgorithmContext {
 public:
  // `members` are the global ranks taking part in a sub-collective; at depth 0 (every rank) it is ignored.
  CallContext(CommImpl& comm, int depth, int channels, std::vector<int> members)
      : comm_(comm), depth_(depth), channels_(channels), members_(std::move(members)) {
    if (depth_ == 0) {
      topo_ref_ = &comm_.topology();  // no copy per call
    } else {
      for (int r : members_) topo_.node_of.push_back(comm_.topology().node_of[static_cast<size_t>(r)]);
      // Re-number nodes densely within the sub-group.
      std::vector<int> seen;
      for (int& n : topo_.node_of) {
        auto it = std::find(seen.begin(), seen.end(), n);
        if (it == seen.end()) {
          seen.push_back(n);
          it = seen.end() - 1;
        }
        n = static_cast<int>(it - seen.begin());
      }
      topo_.num_nodes = static_cast<int>(seen.size());
    }
  }

  absl::StatusOr<Endpoint*> GetEndpoint(const LinkSpec& link) override {
    auto ep = comm_.EndpointFor(link, channels_, group());
    if (!ep.ok()) return ep.status();
    if (depth_ == 0) {
      if (watch_ && opened_ == nullptr) {
        opened_ = *ep;
        opened_stats_ = opened_->stats();
      } else if (watch_ && opened_ != *ep) {
        several_ = true;
      }
      return static_cast<Endpoint*>(*ep);
    }
    subs_.push_back(std::make_unique<SubEndpoint>(*ep, members_));
    return static_cast<Endpoint*>(subs_.back().get());
  }
  const GroupTopology& topology() const override { return topo_ref_ != nullptr ? *topo_ref_ : topo_; }
  int rank() const override {
    if (depth_ == 0) return comm_.rank();
    for (size_t i = 0; i < members_.size(); ++i) {  // depth > 0
      if (members_[i] == comm_.rank()) return static_cast<int>(i);
    }
    return -1;
  }
  void* Scratch(size_t bytes) override { return comm_.Scratch(depth_, bytes); }
  const CommImpl& comm() const { return comm_; }
  bool FindSymmetric(const void* p, size_t bytes, SymmetricBuffer* out) const override {
    return depth_ == 0 && comm_.FindSymmetric(p, bytes, out);
  }
  const std::vector<char*>* SymmetricBases(uint64_t id) const override {
    return depth_ == 0 ? comm_.SymmetricBases(id) : nullptr;
  }
  absl::Status RunSubCollective(const CollectiveArgs& args, const Configuration& config,
                                absl::Span<const int> members) override {
    several_ = true;
    std::vector<int> global;
    for (int m : members) global.push_back(group()[static_cast<size_t>(m)]);
    CallContext sub(comm_, depth_ + 1, config.channels, std::move(global));
    return registry::Run(args, config, sub);
  }
  absl::StatusOr<Configuration> ChooseStep(Collective c, uint64_t bytes, int group_size, int nodes) override {
    return Selector::ChooseStep(c, bytes, group_size, nodes);
  }

  // Notes the endpoints this call opens, for SoleExchange (depth 0; off by default: a stats copy per open).
  void WatchExchange() { watch_ = true; }
  // Under WatchExchange, after the call: its one endpoint when the call was exactly one mailbox exchange on it
  // and nothing else (no message, no other endpoint, no sub-collective); else null.
  StreamEndpoint* SoleExchange() const {
    if (!watch_ || several_ || opened_ == nullptr) return nullptr;
    const EndpointStats now = opened_->stats();
    const bool one = now.exchanges == opened_stats_.exchanges + 1 && now.sends == opened_stats_.sends &&
                     now.recvs == opened_stats_.recvs;
    return one ? opened_ : nullptr;
  }

 private:
  const std::vector<int>& group() const { return depth_ == 0 ? AllRanks(comm_.size()) : members_; }
  CommImpl& comm_;
  int depth_;
  int channels_;
  std::vector<int> members_;
  GroupTopology topo_;                       // depth > 0: the sub-group's
  const GroupTopology* topo_ref_ = nullptr;  // depth 0: the communicator's
  std::vector<std::unique_ptr<SubEndpoint>> subs_;
  bool watch_ = false;
  bool several_ = false;  // under watch_: a second endpoint or a sub-collective
  StreamEndpoint* opened_ = nullptr;
  EndpointStats opened_stats_;
};

uint64_t Sum(absl::Span<const size_t> counts) {
  uint64_t total = 0;
  for (size_t c : counts) total += c;
  return total;
}

// Bytes as docs/CONVENTIONS.md defines them for a call.
uint64_t CallBytes(const CollectiveArgs& a, int n) {
  const uint64_t es = DataTypeSize(a.dtype);
  switch (a.collective) {
    case Collective::kAllgather:
    case Collective::kGather:
    case Collective::kReducescatter:
    case Collective::kScatter:
    case Collective::kAlltoall: return a.count * es * static_cast<uint64_t>(n);
    case Collective::kAllgatherv: return Sum(a.counts) * es;
    case Collective::kAlltoallv: return Sum(a.send_counts) * es;
    case Collective::kBarrier: return 0;
    default: return a.count * es;
  }
}

// The bytes a call writes into `recv` on this rank (its output buffer's extent; gather/reduce roots only use it).
uint64_t OutputBytes(const CollectiveArgs& a, int n) {
  const uint64_t es = DataTypeSize(a.dtype);
  switch (a.collective) {
    case Collective::kAllgather:
    case Collective::kGather:
    case Collective::kAlltoall: return a.count * es * static_cast<uint64_t>(n);
    case Collective::kAllgatherv: return CallBytes(a, n);
    case Collective::kAlltoallv: return Sum(a.recv_counts) * es;
    case Collective::kBarrier: return 0;
    default: return a.count * es;
  }
}

// The bytes a call reads from `send` on this rank: the call size except where that is the whole output
// (allgather, gather: one block); 0 where this file does not work it out (the v variants) or nothing is read.
uint64_t InputBytes(const CollectiveArgs& a, int n) {
  switch (a.collective) {
    case Collective::kAllgather:
    case Collective::kGather: return a.count * DataTypeSize(a.dtype);
    case Collective::kAllgatherv:
    case Collective::kAlltoallv:
    case Collective::kBarrier:
    case Collective::kSendRecv: return 0;
    default: return CallBytes(a, n);
  }
}

// The bytes an alltoallv's blocks reach in one buffer (the furthest block end), into *extent; an error names the
// `side` ("send", "receive") and block whose end overflows.
absl::Status AlltoallvExtent(absl::Span<const size_t> counts, absl::Span<const size_t> displs, uint64_t es,
                             const char* side, uint64_t* extent) {
  for (size_t i = 0; i < counts.size(); ++i) {
    uint64_t end = 0;  // blocks of 0 elements reach nothing, whatever their displacement
    if (counts[i] == 0) continue;
    if (__builtin_add_overflow(displs[i], counts[i], &end) || __builtin_mul_overflow(end, es, &end)) {
      return absl::InvalidArgumentError(absl::StrCat(side, " block ", i, " overflows the byte size"));
    }
    *extent = std::max(*extent, end);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CommImpl::Validate(const CollectiveArgs& a, uint64_t* aliased_input) const {
  if (aliased_input != nullptr) *aliased_input = 0;
  const auto what = [&] { return absl::StrCat(CollectiveName(a.collective), " on rank ", rank_); };
  const uint64_t es = DataTypeSize(a.dtype);
  const uint64_t n = static_cast<uint64_t>(size_);
  uint64_t total_bytes = 0;  // a multiplication with an overflow check, not two divisions per call
  if (__builtin_mul_overflow(a.count, es * n, &total_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(what(), ": count ", a.count, " overflows the byte size"));
  }
  if (IsReducing(a.collective)) {
    if (absl::Status s = CheckReduceSupported(a.op, a.dtype); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(what(), ": ", s.message()));
    }
  }
  const bool rooted = a.collective == Collective::kBroadcast || a.collective == Collective::kReduce ||
                      a.collective == Collective::kGather || a.collective == Collective::kScatter;
  if (rooted && (a.root < 0 || a.root >= size_)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what(), ": root ", a.root, " is not a rank of this communicator (0..", size_ - 1, ")"));
  }
  if (a.collective == Collective::kAllgatherv && (a.counts.size() != n || a.displs.size() != n)) {
    return absl::InvalidArgumentError(absl::StrCat(what(), ": counts and displs need one entry per rank (", n, ")"));
  }
  if (a.collective == Collective::kAlltoallv && (a.send_counts.size() != n || a.send_displs.size() != n ||
                                                 a.recv_counts.size() != n || a.recv_displs.size() != n)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what(), ": send/recv counts and displacements need one entry per rank (", n, ")"));
  }
  const uint64_t r = static_cast<uint64_t>(rank_);
  if (a.collective == Collective::kAlltoallv && a.send_counts[r] != a.recv_counts[r]) {
    // Only this rank can see it: refused here, before the call starts, like every argument error.
    return absl::InvalidArgumentError(
        absl::StrCat(what(), ": sends ", a.send_counts[r], " elements to itself but expects ", a.recv_counts[r]));
  }
  const uintptr_t su = reinterpret_cast<uintptr_t>(a.send), du = reinterpret_cast<uintptr_t>(a.recv);
  if (a.send != nullptr && a.recv != nullptr && a.collective != Collective::kAllgatherv &&
      a.collective != Collective::kAlltoallv && (su > du ? su - du : du - su) >= total_bytes) {
    return absl::OkStatus();  // the common call: two buffers further apart than either extent (at most the call)
  }
  // What this rank reads from `send` and writes into `recv` (0 where it does not use the buffer).
  const bool root = a.root == rank_;
  uint64_t in = 0, out = 0;
  switch (a.collective) {
    case Collective::kAllgatherv:
      in = a.counts[r] * es;
      out = CallBytes(a, size_);
      break;
    case Collective::kAlltoallv:
      if (absl::Status s = AlltoallvExtent(a.send_counts, a.send_displs, es, "send", &in); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(what(), ": ", s.message()));
      }
      if (absl::Status s = AlltoallvExtent(a.recv_counts, a.recv_displs, es, "receive", &out); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(what(), ": ", s.message()));
      }
      break;
    case Collective::kBarrier: break;
    default: in = InputBytes(a, size_); out = OutputBytes(a, size_);
  }
  if ((a.collective == Collective::kBroadcast || a.collective == Collective::kScatter) && !root) in = 0;
  if ((a.collective == Collective::kReduce || a.collective == Collective::kGather) && !root) out = 0;
  if (a.collective == Collective::kAlltoallv) {
    // Each side from its own counts: a rank may send nothing and still receive.
    if (in > 0 && a.send == nullptr) return absl::InvalidArgumentError(absl::StrCat(what(), ": null send buffer"));
    if (out > 0 && a.recv == nullptr) return absl::InvalidArgumentError(absl::StrCat(what(), ": null receive buffer"));
  } else if (a.count > 0 || (a.collective == Collective::kAllgatherv && out > 0)) {
    // Null buffers where data must flow.
    const bool send_null = in > 0 && a.send == nullptr, recv_null = out > 0 && a.recv == nullptr;
    if (send_null || recv_null) {
      return absl::InvalidArgumentError(
          absl::StrCat(what(), ": null ", send_null ? "send" : "receive", " buffer for ", a.count, " elements"));
    }
  }
  // Overlapping buffers other than the documented in-place layouts (algorithm.h): the algorithm would read input
  // it had already overwritten, with a result that depends on the algorithm. Such a call is not refused — the
  // verdict depends on the rank (send == recv is in place for allgather on rank 0 only), and a rank that
  // refused would leave the others waiting — but its input is copied first (ExecuteLocked).
  if (in > 0 && out > 0 && su < du + out && du < su + in) {
    bool in_place = su == du;
    switch (a.collective) {
      case Collective::kAllgather:
      case Collective::kGather: in_place = su == du + r * a.count * es; break;
      case Collective::kAllgatherv: in_place = su == du + a.displs[r] * es; break;
      case Collective::kReducescatter:
      case Collective::kScatter: in_place = du == su + r * a.count * es; break;
      default: break;
    }
    if (!in_place && aliased_input != nullptr) *aliased_input = in;
  }
  return absl::OkStatus();
}

absl::StatusOr<const Configuration*> CommImpl::Choose(const CollectiveArgs& args, const CallOptions& opt,
                                                      bool* explored, bool* repeats, ChoiceSource* source) const {
  if (repeats != nullptr) *repeats = true;
  if (source != nullptr) *source = ChoiceSource::kCall;
  if (IsAutoConfig(opt)) {
    // alltoallv: each rank knows only its own counts, so its size differs between ranks and cannot pick the
    // configuration (docs/CONVENTIONS.md, Sizes): every rank looks up size 0.
    const uint64_t bytes = args.collective == Collective::kAlltoallv ? 0 : CallBytes(args, size_);
    if (explored == nullptr) {
      const Selector::Choice pure = selector_->Choose(args.collective, args.dtype, bytes);
      if (source != nullptr) *source = pure.source;
      return pure.config;
    }
    const Selector::Choice choice = selector_->ChooseForCall(args.collective, args.dtype, bytes);
    if (source != nullptr) *source = choice.source;
    *explored = choice.source == ChoiceSource::kExplore;
    if (repeats != nullptr) *repeats = selector_->Repeats(args.collective, args.dtype, bytes, choice);
    return choice.config;
  }
  const std::string key = absl::StrCat(CollectiveName(args.collective), "|", opt.config);
  auto cached = parsed_configs_.find(key);
  if (cached != parsed_configs_.end()) return &cached->second;
  auto c = Configuration::Parse(opt.config);
  if (!c.ok()) return c.status();
  if (registry::Find(args.collective, c->algorithm) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("configuration '", opt.config, "': ", CollectiveName(args.collective), " has no algorithm '",
                     c->algorithm, "'; accepted: ", absl::StrJoin(registry::AlgorithmsFor(args.collective), ", ")));
  }
  if (absl::Status s = CheckLinks(*c); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("configuration '", opt.config, "': ", s.message()));
  }
  if (absl::Status s = registry::CheckForm(args.collective, *c, topo_); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("configuration '", opt.config, "': ", s.message()));
  }
  if (parsed_configs_.size() >= 1024) parsed_configs_.clear();  // a bounded cache of distinct strings
  return &parsed_configs_.emplace(key, *std::move(c)).first->second;
}

absl::Status CommImpl::CheckLinks(const Configuration& config, bool intra_step) const {
  if (config.intra != nullptr) {
    if (absl::Status s = CheckLinks(*config.intra, true); !s.ok()) return s;
  }
  if (config.inter != nullptr) {
    if (absl::Status s = CheckLinks(*config.inter); !s.ok()) return s;
  }
  return devices_.CheckLink(config.link, intra_step);
}

absl::StatusOr<std::string> CommImpl::ResolveConfig(Collective c, DataType dtype, uint64_t bytes,
                                                    const std::string& config) const {
  CollectiveArgs a;
  a.collective = c;
  a.dtype = dtype;
  const uint64_t per = c == Collective::kAllgather || c == Collective::kGather || c == Collective::kReducescatter ||
                               c == Collective::kScatter || c == Collective::kAlltoall
                           ? static_cast<uint64_t>(size_)
                           : 1;
  a.count = bytes / DataTypeSize(dtype) / per;
  CallOptions opt;
  opt.config = config;
  std::lock_guard<std::mutex> lock(exec_mu_);
  auto chosen = Choose(a, opt);
  if (!chosen.ok()) return chosen.status();
  return (*chosen)->ToString();
}

namespace {
// Equal fields and the same intra/inter objects: certainly the same configuration (a false "different" only
// costs one more interning).
bool SameConfiguration(const Configuration& a, const Configuration& b) {
  return a.algorithm == b.algorithm && a.chunk == b.chunk && a.channels == b.channels && a.link == b.link &&
         a.intra == b.intra && a.inter == b.inter && a.form == b.form;
}
}  // namespace

double CommImpl::TestDelayUs(Collective c, const Configuration& config) const {
  double us = 0;
  std::string canonical;
  for (const TestDelay& d : env_.test_delays) {
    if (d.collective != c) continue;
    if (d.match.find('(') == std::string::npos) {
      if (d.match == config.algorithm) us += d.delay_us;
      continue;
    }
    if (canonical.empty()) canonical = config.ToString();
    if (d.match == canonical) us += d.delay_us;
  }
  return us;
}

absl::Status CommImpl::RunWithTestDelay(const CollectiveArgs& args, const Configuration& config,
                                        AlgorithmContext& ctx) {
  absl::Status s = registry::Run(args, config, ctx);
  const CommImpl& comm = static_cast<CallContext&>(ctx).comm();
  if (!s.ok() || comm.internal_call_) return s;
  // Test hook (HCCL_TUNE_TEST_DELAY): this configuration is slow on purpose.
  const double delay = comm.TestDelayUs(args.collective, config);
  if (delay > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(delay));
  return s;
}

std::vector<std::string> CommImpl::ValidAlgorithms(Collective c) const { return registry::ListValid(c, size_, topo_); }

std::string CommImpl::last_config() const {
  std::lock_guard<std::mutex> lock(exec_mu_);
  const Configuration& c = last_memo_ >= 0 ? memo_[static_cast<size_t>(last_memo_)].config_copy : last_config_;
  return c.algorithm.empty() ? std::string() : c.ToString();
}

void CommImpl::SetTimingSink(std::shared_ptr<TimingSink> sink) {
  std::lock_guard<std::mutex> lock(exec_mu_);
  user_sink_ = std::move(sink);
}

void CommImpl::AdviseHugePages(const CollectiveArgs& args) const {
  if (BelowHugePageAdvice(args)) return;
  const uint64_t in = args.send == nullptr ? 0 : InputBytes(args, size_);
  const uint64_t out = args.recv == nullptr || args.recv == args.send ? 0 : OutputBytes(args, size_);
  for (const auto& [p, bytes] : {std::pair<const void*, uint64_t>{args.send, in}, {args.recv, out}}) {
    SymmetricBuffer unused;
    if (bytes < env_.thp_bytes || bytes > SIZE_MAX || FindSymmetric(p, static_cast<size_t>(bytes), &unused)) continue;
    const HugePageAdvisor::Outcome o = HugePageAdvisor::Process().Use(p, static_cast<size_t>(bytes));
    if (o == HugePageAdvisor::Outcome::kCollapsed || o == HugePageAdvisor::Outcome::kRefused) {
      Log(LogLevel::kDebug, "rank ", rank_, ": ", bytes, "-byte buffer at ", absl::Hex(reinterpret_cast<uintptr_t>(p)),
          o == HugePageAdvisor::Outcome::kCollapsed ? " collapsed into 2 MiB pages"
                                                    : ": the kernel declined to collapse it into 2 MiB pages");
    }
  }
}

// The call pipeline: validate and choose (PrepareCall, skipped for a remembered repeat), number the call, run it
// (RunPrepared), then report (FinishCall).
absl::Status CommImpl::ExecuteLocked(const CollectiveArgs& args, const CallOptions& opt) {
  if (!broken_.ok()) return broken_;
  if (online_ && !internal_call_ && (sequence_ + 1) % sync_interval_ == 0) {
    // Checkpoint: rank 0 hands its newest table to everyone; all switch here, at the same operation.
    if (absl::Status s = SyncTable(rank_ == 0 && tuning_ ? tuning_->LatestTable() : nullptr); !s.ok()) return s;
  }
  PreparedCall call;
  call.run = args;
  CallMemo& memo = memo_[static_cast<size_t>(args.collective)];
  if (IsAutoConfig(opt) && !internal_call_ && memo.Matches(args) && memo.generation == selector_->generation()) {
    // The same small call as this collective's last one: its checks, choice and output region stand (CallMemo).
    call.memo_hit = true;
    call.config = memo.config;
    call.region = memo.region;
    call.config_id = memo.config_id;
    call.source = memo.source;
  } else if (absl::Status s = PrepareCall(args, opt, memo, &call); !s.ok()) {
    return s;
  }
  call_.sequence = ++sequence_;
  call_.collective = args.collective;
  call_.dtype = args.dtype;
  call_.op = args.op;
  call_.count = args.collective == Collective::kAllgatherv || args.collective == Collective::kAlltoallv
                    ? CallBytes(args, size_) / DataTypeSize(args.dtype)
                    : args.count;
  call_.root = args.root;
  // alltoallv: each rank knows only its own counts, so the count is not compared.
  if (args.collective == Collective::kAlltoallv) call_.count = 0;
  // From a local: reading stream_ back right after its two 8-byte stores stalled the 16-byte copy (a failed
  // store-to-load forward, a quarter of this function's own time in a 1-rank call).
  stream_ = call.region;
  call.run.stream = call.region;
  // The call is timed only where the time is read: a call sampled or exploring for the daemon, a user timing
  // sink, the debug log (two clock reads otherwise, a tenth of a small call's fixed cost here).
  const bool sampled = !internal_call_ && tuning_ && sample_every_ > 0 && sample_countdown_ == 1;
  // The flight recorder times one call in kFlightTimedEvery of its own (two steady clock reads, ~50 ns: under
  // 1 ns a call on average).
  const bool fr_timed = recorder_ && --fr_countdown_ == 0;
  if (fr_timed) fr_countdown_ = kFlightTimedEvery;
  const bool timed = sampled || (call.explored && tuning_) || user_sink_ || fr_timed || LogEnabled(LogLevel::kDebug);
  if (recorder_) {  // every call; no clock read (times of timed calls at its end, a blocked call's in CallProbe)
    fr_slot_ = recorder_->ring().Begin(call_.sequence, args.collective, args.dtype, CallBytes(args, size_),
                                       call.config_id, static_cast<FlightSource>(call.source));
    fr_active_ = true;
  }
  const auto t0 = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  absl::Status s = RunPrepared(args, call, memo);
  const auto t1 = timed ? std::chrono::steady_clock::now() : t0;
  if (recorder_) {
    fr_active_ = false;
    const FlightState end = s.ok() ? FlightState::kCompleted : FlightState::kFailed;
    if (timed) {
      recorder_->ring().End(fr_slot_, end, SteadyNs(t0), SteadyNs(t1));
    } else {
      recorder_->ring().End(fr_slot_, end);
    }
  }
  const double us = timed ? std::chrono::duration<double, std::micro>(t1 - t0).count() : 0.0;
  return FinishCall(args, opt, call, memo, std::move(s), sampled, us);
}

absl::Status CommImpl::PrepareCall(const CollectiveArgs& args, const CallOptions& opt, CallMemo& memo,
                                   PreparedCall* call) {
  memo.valid = false;
  uint64_t aliased = 0;
  if (absl::Status s = Validate(args, &aliased); !s.ok()) return Refuse(args, s, false);
  if (aliased > 0) {
    // send and recv overlap, but not in place: the input as it was before the call, from a copy.
    if (!warned_aliasing_) {
      warned_aliasing_ = true;
      Log(LogLevel::kWarn, "rank ", rank_, ": ", CollectiveName(args.collective),
          " with send and receive buffers that overlap but not in place (see runtime/algorithms/algorithm.h): the ",
          aliased, "-byte input is copied first (warned once per communicator)");
    }
    if (aliased > SIZE_MAX) return Refuse(args, absl::ResourceExhaustedError("input too large to copy"), false);
    aliased_copy_.resize(static_cast<size_t>(aliased));
    std::memcpy(aliased_copy_.data(), args.send, static_cast<size_t>(aliased));
    call->run.send = aliased_copy_.data();
  }
  bool repeats = false;
  // Symmetric buffers first: they are not the tuned table's business (and must not use up an exploration plan).
  call->config = ChooseSymmetric(call->run, opt);
  call->source = ChoiceSource::kDefault;  // symmetric: the automatic choice for symmetric buffers
  if (call->config == nullptr) {
    auto chosen = Choose(args, opt, internal_call_ ? nullptr : &call->explored, &repeats, &call->source);
    if (!chosen.ok()) return Refuse(args, chosen.status(), false);
    call->config = *chosen;
  }
  if (recorder_) call->config_id = RecordedConfigId(args.collective, *call->config);
  if (call->config != &symmetric_config_) AdviseHugePages(args);
  const bool reducing = args.collective == Collective::kAllreduce || args.collective == Collective::kReducescatter;
  call->region = CallBytes(args, size_) >= (reducing ? nt_reduce_bytes_ : nt_other_bytes_)
                     ? StreamRegion{static_cast<const char*>(args.recv), OutputBytes(args, size_)}
                     : StreamRegion{};
  // Remembered only where skipping the above cannot change anything: no input copy, no exploration plan for
  // this size, not symmetric, fixed counts (a v-collective's count arrays may change behind the same
  // pointers), below the huge-page advice's threshold (it acts on a buffer's later uses).
  if (IsAutoConfig(opt) && !internal_call_ && repeats && aliased == 0 && call->config != &symmetric_config_ &&
      BelowHugePageAdvice(args)) {
    memo = CallMemo{true,      args.collective,         args.dtype,   args.op,     args.count, args.send, args.recv,
                    args.root, selector_->generation(), call->config, call->region};
    memo.config_copy = *call->config;
    memo.config_id = call->config_id;
    memo.source = call->source;
  }
  return absl::OkStatus();
}

absl::Status CommImpl::RunPrepared(const CollectiveArgs& args, const PreparedCall& call, CallMemo& memo) {
  if (call.memo_hit && memo.exchange != nullptr) {
    // A repeat whose first run was one mailbox exchange: the algorithm's mailbox form, on that endpoint.
    memo.ep->SetCall(call_);
    memo.ep->SetStreamRegion(call.region);
    return memo.exchange(call.run, *memo.ep, memo.ep->rank(), memo.ep->size(), exchange_blocks_.data());
  }
  const Configuration& config = *call.config;
  CallContext ctx(*this, 0, config.channels, {});
  // A remembered call's first successful run (memo.valid: just remembered, or a repeat whose first run was
  // refused): the algorithm Run resolved and checked for these arguments serves its repeats directly — in its
  // mailbox form when that run was one mailbox exchange and nothing else.
  const bool first = memo.valid && memo.fn == nullptr;
  if (first) ctx.WatchExchange();
  absl::Status s = call.memo_hit && memo.fn != nullptr ? memo.fn(call.run, config, ctx) : run_(call.run, config, ctx);
  if (first && s.ok()) {
    // Under the test hook a repeat goes through run_ as well (its delay), never straight to the algorithm.
    const bool plain = run_ == &registry::Run;
    memo.fn = plain ? registry::Find(args.collective, config.algorithm) : run_;
    memo.ep = plain ? ctx.SoleExchange() : nullptr;
    memo.exchange = memo.ep != nullptr ? registry::FindExchange(args.collective, config.algorithm) : nullptr;
    if (memo.exchange != nullptr && exchange_blocks_.size() < static_cast<size_t>(size_)) {
      exchange_blocks_.resize(static_cast<size_t>(size_));
    }
  }
  return s;
}

absl::Status CommImpl::FinishCall(const CollectiveArgs& args, const CallOptions& opt, const PreparedCall& call,
                                  const CallMemo& memo, absl::Status s, bool sampled, double us) {
  const Configuration* config = call.config;
  if (!internal_call_) {
    // A remembered call (a repeat, or just remembered) has its configuration copied in its memo already.
    if (memo.valid) {
      last_memo_ = static_cast<int>(args.collective);
    } else {
      last_config_ = *config;
      last_memo_ = -1;
    }
  }
  if (LogEnabled(LogLevel::kDebug)) {
    Log(LogLevel::kDebug, "rank ", rank_, " op ", call_.sequence, " ", CollectiveName(args.collective), " ",
        DataTypeName(args.dtype), " ", CallBytes(args, size_), " B ", config->ToString(),
        call.region.bytes > 0 ? " output streamed" : "", " ", us, " us ", s.ok() ? "ok" : std::string(s.message()));
  }
  if (!s.ok()) return CallFailed(args, opt, call, std::move(s));
  if (internal_call_) return s;
  if (tuning_ && sample_every_ > 0) --sample_countdown_;  // reaches 0 exactly when `sampled`
  // Exploring calls are always reported (bounded by the plan's budget): the daemon decides on their timings, and
  // a periodic sample rate could alias with a periodic plan and never see one.
  if (sampled || (call.explored && tuning_)) {
    if (sampled) sample_countdown_ = sample_every_;
    // A fixed-size sample with an interned configuration id: the string is formatted only when the configuration
    // differs from the last one reported for this collective (field compare; intra/inter steps by identity,
    // shared with the table).
    ReportedConfig& r = reported_[static_cast<size_t>(args.collective)];
    if (r.id == 0 || !SameConfiguration(*config, r.config)) {
      r.id = InternConfiguration(config->ToString());
      r.config = *config;
    }
    tuning_->Report(
        RawTimingSample{CallBytes(args, size_), call_.sequence, us, r.id, size_, args.collective, args.dtype});
  }
  if (user_sink_) {
    user_sink_->Record(TimingSample{args.collective, args.dtype, CallBytes(args, size_), size_, config->ToString(),
                                    call_.sequence, us});
  }
  return s;
}

absl::Status CommImpl::CallFailed(const CollectiveArgs& args, const CallOptions& opt, const PreparedCall& call,
                                  absl::Status s) {
  const Configuration& config = *call.config;
  if (config.algorithm == "symmetric" && &config != &symmetric_config_ && IsAutoConfig(opt)) {
    // `symmetric` depends on the call's buffers, so an override may choose it for a call it cannot run (the
    // algorithm's header exchange gives every rank the same verdict): the error names where the choice came from.
    const uint64_t bytes = CallBytes(args, size_);
    s = absl::Status(
        s.code(), absl::StrCat(config.ToString(), " was chosen by ",
                               ChoiceSourceName(selector_->Choose(args.collective, args.dtype, bytes).source),
                               " for this ", CollectiveName(args.collective), " of ", bytes, " bytes: ", s.message()));
  }
  // Argument errors leave the communicator usable; communication errors break it and are announced to the
  // other ranks (unless this error is itself the announcement of another rank).
  if (s.code() != absl::StatusCode::kInvalidArgument) {
    if (s.code() == absl::StatusCode::kDeadlineExceeded) {
      // A timeout names what the call ran (the wait itself knows only the collective and the peer).
      s = absl::Status(s.code(), absl::StrCat(s.message(), " [the call ran ", config.ToString(), ", chosen by ",
                                              ChoiceSourceName(call.source), "]"));
    }
    s = ExplainByRefusal(s);
    s = BreakAndAnnounce(s, absl::StrCat(CollectiveName(args.collective), " (operation ", call_.sequence, ")"));
    if (recorder_ && !internal_call_) {
      auto path = recorder_->Dump(s.code() == absl::StatusCode::kDeadlineExceeded ? "timeout" : "abort", s.message());
      if (path.ok()) Log(LogLevel::kWarn, "rank ", rank_, ": flight recorder dumped to ", *path);
    }
    return s;
  }
  return Refuse(args, s, true);
}

uint32_t CommImpl::RecordedConfigId(Collective c, const Configuration& config) {
  ReportedConfig& r = recorded_[static_cast<size_t>(c)];
  if (r.id == 0 || !SameConfiguration(config, r.config)) {
    r.id = InternConfiguration(config.ToString());
    r.config = config;
  }
  return r.id;
}

absl::StatusOr<std::string> CommImpl::DumpFlightRecorder() {
  if (!recorder_) return absl::FailedPreconditionError("the flight recorder is off (HCCL_TUNE_FR_ENTRIES=0)");
  return recorder_->Dump("request");
}

absl::Status CommImpl::BreakAndAnnounce(absl::Status s, absl::string_view what) {
  // A lost link may be a rank that failed first and exited: then its announcement names the real cause (the rank
  // it lost), and this rank reports that rather than blaming a rank that only exited after failing.
  std::optional<std::string> announced;
  if (auto present = store_->Check({"abort"}); present.ok() && *present) {
    if (auto why = store_->Get("abort", absl::Seconds(1)); why.ok()) announced = *why;
  }
  if (announced && s.code() == absl::StatusCode::kUnavailable && !absl::StrContains(s.message(), *announced)) {
    s = absl::AbortedError(absl::StrCat(*announced, "; then: ", s.message()));
  }
  broken_ = s;
  // The first announcement stays: a later one is usually a consequence of it.
  if (s.code() != absl::StatusCode::kAborted && !announced) {
    (void)store_->Set("abort", absl::StrCat("rank ", rank_, " aborted ", what, ": ", s.message()));
  }
  return s;
}

absl::Status CommImpl::Refuse(const CollectiveArgs& args, absl::Status s, bool numbered) {
  if (internal_call_) return s;
  // A verdict the ranks reached together (after exchanging what decides it) has nobody waiting for this rank.
  if (numbered && IsAgreedVerdict(s)) return s;
  if (!numbered) {
    ++sequence_;
    if (recorder_) {  // a call refused before it was numbered: recorded as failed, with no configuration
      const uint32_t slot = recorder_->ring().Begin(sequence_, args.collective, args.dtype, 0, 0, 0);
      recorder_->ring().End(slot, FlightState::kFailed);
    }
  }
  refused_ = {sequence_, absl::StrCat("rank ", rank_, " refused its ", CollectiveName(args.collective), " (operation ",
                                      sequence_, "): ", s.message())};
  (void)store_->Set(absl::StrCat("refused/", sequence_), refused_.second);
  return s;
}

absl::Status CommImpl::ExplainByRefusal(const absl::Status& s) const {
  if (refused_.first != 0 && refused_.first + 1 == call_.sequence && !absl::StrContains(s.message(), refused_.second)) {
    // This rank refused the call before; if the others were in it, that is why this one fails.
    return absl::Status(s.code(), absl::StrCat(s.message(),
                                               " (this rank refused the previous call, which the other ranks "
                                               "may have been waiting in: ",
                                               refused_.second, ")"));
  }
  // Another rank refused this very call: the others see it first as a mismatch (that rank went on to its next
  // call) or in their probe (whose message already says it).
  const std::string key = absl::StrCat("refused/", call_.sequence);
  auto present = store_->Check({key});
  if (!present.ok() || !*present) return s;
  auto why = store_->Get(key, absl::Seconds(1));
  if (!why.ok() || absl::StrContains(s.message(), *why)) return s;
  return absl::Status(s.code(), absl::StrCat(*why, "; then: ", s.message()));
}

absl::Status CommImpl::Execute(const CollectiveArgs& args, const CallOptions& opt) {
  // Keep issue order: run behind the queued non-blocking work.
  if (MustQueue()) return Submit([this, args, opt] { return Execute(args, opt); })->Wait();
  std::lock_guard<std::mutex> lock(exec_mu_);
  return ExecuteLocked(args, opt);
}

absl::Status CommImpl::PointToPoint(bool send, void* data, size_t count, DataType dtype, int peer) {
  // Behind queued non-blocking work like a collective: a send issued right after an Iallreduce would otherwise
  // reach the peer's ring first, and the peer's allreduce would read it as a mismatched call.
  if (MustQueue()) {
    return Submit([this, send, data, count, dtype, peer] { return PointToPoint(send, data, count, dtype, peer); })
        ->Wait();
  }
  std::lock_guard<std::mutex> lock(exec_mu_);
  if (!broken_.ok()) return broken_;
  if (peer < 0 || peer >= size_ || peer == rank_) {
    return absl::InvalidArgumentError(absl::StrCat(send ? "send" : "recv", " on rank ", rank_, ": peer ", peer,
                                                   " is not another rank of this communicator (0..", size_ - 1, ")"));
  }
  if (count > 0 && data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(send ? "send" : "recv", " on rank ", rank_, ": null buffer"));
  }
  // Point-to-point does not advance the collective sequence (other ranks do not take part).
  call_ = CallDescriptor{sequence_, Collective::kSendRecv, dtype, ReduceOp::kSum, count, 0};
  stream_ = {};
  auto ep = EndpointFor(LinkSpec{}, 1, {rank_, peer});
  if (!ep.ok()) return ep.status();
  const size_t bytes = count * DataTypeSize(dtype);
  absl::Status s = send ? (*ep)->Send(peer, data, bytes) : (*ep)->Recv(peer, data, bytes);
  if (!s.ok() && s.code() != absl::StatusCode::kInvalidArgument) {
    return BreakAndAnnounce(s, absl::StrCat(send ? "a send to" : "a receive from", " rank ", peer));
  }
  return s;
}

}  // namespace hccltune
