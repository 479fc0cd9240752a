// Internal: the Communicator implementation, shared by communicator.cc (setup, endpoints), collectives.cc
// (argument checks, execution, timing) and async.cc (progress thread). Not installed as a public header.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "runtime/algorithms/algorithm.h"
#include "runtime/algorithms/registry.h"
#include "runtime/api/communicator.h"
#include "runtime/api/endpoint_cache.h"
#include "runtime/api/flight_recorder.h"
#include "runtime/api/rank_exchange.h"
#include "runtime/common/huge_page_advisor.h"
#include "runtime/selector/selector.h"
#include "runtime/selector/tuning.h"
#include "runtime/topology/topology.h"
#include "runtime/transport/device.h"
#include "runtime/transport/stream_endpoint.h"
#include "runtime/transport/symmetric_region.h"

namespace hccltune {

// Whether a call's configuration string leaves the choice to the communicator ("" or "auto"; a 4-byte compare,
// not a string compare: it runs on every call).
inline bool IsAutoConfig(const CallOptions& opt) {
  const std::string& c = opt.config;
  return c.empty() || (c.size() == 4 && std::memcmp(c.data(), "auto", 4) == 0);
}

class CommImpl final : public Communicator {
 public:
  static absl::StatusOr<std::unique_ptr<CommImpl>> Init(int rank, int size, std::shared_ptr<Store> store,
                                                        const Environment& env, std::string name);
  ~CommImpl() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return static_cast<int>(local_ranks_.size()); }
  int num_nodes() const override { return topo_.num_nodes; }
  const std::string& fingerprint() const override { return fingerprint_; }
  const std::string& topology_json() const override { return topology_json_; }
  absl::StatusOr<std::string> ResolveConfig(Collective c, DataType dtype, uint64_t bytes,
                                            const std::string& config) const override;
  std::string last_config() const override;
  std::vector<PeerLink> LinksUsed() const override;  // links_used.cc
  std::vector<std::string> ValidAlgorithms(Collective c) const override;
  uint64_t fallback_allocations() const override { return fallback_allocs_.load(); }
  void SetTimingSink(std::shared_ptr<TimingSink> sink) override;
  absl::StatusOr<std::string> DumpFlightRecorder() override;

  absl::Status Allreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                         const CallOptions& opt) override;
  absl::Status Allgather(const void* send, void* recv, size_t count, DataType dtype, const CallOptions& opt) override;
  absl::Status Allgatherv(const void* send, void* recv, absl::Span<const size_t> counts,
                          absl::Span<const size_t> displs, DataType dtype, const CallOptions& opt) override;
  absl::Status Reducescatter(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                             const CallOptions& opt) override;
  absl::Status Broadcast(const void* send, void* recv, size_t count, DataType dtype, int root,
                         const CallOptions& opt) override;
  absl::Status Reduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op, int root,
                      const CallOptions& opt) override;
  absl::Status Gather(const void* send, void* recv, size_t count, DataType dtype, int root,
                      const CallOptions& opt) override;
  absl::Status Scatter(const void* send, void* recv, size_t count, DataType dtype, int root,
                       const CallOptions& opt) override;
  absl::Status Alltoall(const void* send, void* recv, size_t count, DataType dtype, const CallOptions& opt) override;
  absl::Status Alltoallv(const void* send, absl::Span<const size_t> send_counts, absl::Span<const size_t> send_displs,
                         void* recv, absl::Span<const size_t> recv_counts, absl::Span<const size_t> recv_displs,
                         DataType dtype, const CallOptions& opt) override;
  absl::Status Barrier(const CallOptions& opt) override;
  absl::Status RefuseCall(Collective c, absl::string_view why) override;
  absl::Status Send(const void* data, size_t count, DataType dtype, int peer) override;
  absl::Status Recv(void* data, size_t count, DataType dtype, int peer) override;

  std::shared_ptr<Work> Iallreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                                   const CallOptions& opt) override;
  std::shared_ptr<Work> Iallgather(const void* send, void* recv, size_t count, DataType dtype,
                                   const CallOptions& opt) override;
  std::shared_ptr<Work> Ireducescatter(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                                       const CallOptions& opt) override;
  std::shared_ptr<Work> Ibroadcast(const void* send, void* recv, size_t count, DataType dtype, int root,
                                   const CallOptions& opt) override;
  std::shared_ptr<Work> Ireduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op, int root,
                                const CallOptions& opt) override;
  std::shared_ptr<Work> Ialltoall(const void* send, void* recv, size_t count, DataType dtype,
                                  const CallOptions& opt) override;
  std::shared_ptr<Work> Ibarrier(const CallOptions& opt) override;
  std::shared_ptr<Work> Enqueue(std::function<absl::Status(Communicator&)> call) override;

  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) override;
  absl::StatusOr<void*> AllocSymmetric(size_t bytes) override;
  absl::Status FreeSymmetric(void* p) override;

  // --- used by the call context (collectives.cc) ---
  // Endpoint over `link` with `channels`, connected to at least `members` (group ranks).
  absl::StatusOr<StreamEndpoint*> EndpointFor(const LinkSpec& link, int channels, const std::vector<int>& members) {
    return endpoints_->For(link, channels, members, call_, stream_);
  }
  void* Scratch(int depth, size_t bytes);
  // Scratch's accounting once the scratch held exceeds HCCL_BUFFSIZE: a call needing more than it is noted in
  // the flight recorder (its buffer_overflows).
  void NoteScratchNeed(int depth, size_t bytes);
  const GroupTopology& topology() const { return topo_; }
  const CallDescriptor& current_call() const { return call_; }
  // Whether [p, p + bytes) is inside one of this rank's symmetric allocations (REQUIRES: exec_mu_ held).
  bool FindSymmetric(const void* p, size_t bytes, SymmetricBuffer* out) const;
  const std::vector<char*>* SymmetricBases(uint64_t id) const;

 private:
  CommImpl() = default;
  absl::Status Setup();
  // Setup's steps. MakeDevices: the transport devices for the instance's tag (RankExchange's join) and this
  // rank's info with their address blocks. SetupLayout: node indices and local ranks from infos_. StartDevices:
  // every device with every rank's block. DescribeTopology: the topology facts, JSON and fingerprint.
  absl::StatusOr<RankInfo> MakeDevices();
  void SetupLayout();
  absl::Status StartDevices();
  void DescribeTopology();
  void DescribeJobNodes(const std::vector<std::vector<NodeAddress>>& per_node,
                        const std::vector<std::string>& inter_networks);
  absl::Status SetupTuning();
  absl::Status Execute(const CollectiveArgs& args, const CallOptions& opt);
  absl::Status ExecuteLocked(const CollectiveArgs& args, const CallOptions& opt);
  // A call this rank refuses (its arguments, its configuration) while the other ranks may already be in it,
  // waiting for this one — they passed their own checks. The refused call takes its operation number as theirs
  // did (`numbered`: it already has, ExecuteLocked's call_.sequence) and says why under "refused/<number>" in the
  // store, where their waits' probe (CallProbe) finds it after one blocked slice: they fail naming this rank and
  // the reason instead of waiting out HCCL_EXEC_TIMEOUT, and their failure breaks the communicator everywhere
  // (announced as "abort"). When every rank refused alike nobody waits, and every rank's numbers still agree.
  // Returns `s`. REQUIRES: exec_mu_ held.
  absl::Status Refuse(const CollectiveArgs& args, absl::Status s, bool numbered);
  // A communication failure of `what` ("allreduce (operation 7)", "a receive from rank 2"): the communicator is
  // broken, and the failure is announced in the store as "abort" (unless it is itself another rank's announcement,
  // kAborted, or another rank announced first), which the other ranks' waits pick up instead of waiting out
  // HCCL_EXEC_TIMEOUT. A lost link (Unavailable) while another rank's announcement is there becomes that
  // announcement ("...; then: <this failure>"): the rank behind the link may only have exited after failing.
  // Returns the failure as reported. REQUIRES: exec_mu_.
  absl::Status BreakAndAnnounce(absl::Status s, absl::string_view what);
  // A failure of the call running now (call_) with the refusal behind it, when there is one: another rank's of
  // this operation (the store's "refused/<number>", put first), or this rank's own of the previous one (noted
  // after: the others may have been waiting in it).
  absl::Status ExplainByRefusal(const absl::Status& s) const;
  // An endpoint's probe while it waits (StreamEndpoint::SetAbortProbe): another rank's abort, or its refusal of
  // the call running now. REQUIRES: exec_mu_ held (it runs inside a call).
  absl::Status CallProbe() const;
  // The configuration for a call (owned by the selector or the parse cache; valid until the next table switch).
  // `explored` non-null: the choice for the operation about to run (applies exploration plans; *explored says
  // whether this call explores); null: pure.
  // `repeats` (when given): whether the same request gets the same configuration until the selector's next table
  // switch (Selector::Repeats; true for an explicit configuration string).
  // `source` (when given): where the choice came from.
  absl::StatusOr<const Configuration*> Choose(const CollectiveArgs& args, const CallOptions& opt,
                                              bool* explored = nullptr, bool* repeats = nullptr,
                                              ChoiceSource* source = nullptr) const;
  // HCCL_TUNE_TEST_DELAY: the delay for `config` of `c` in microseconds (0 = none).
  double TestDelayUs(Collective c, const Configuration& config) const;
  // run_ when HCCL_TUNE_TEST_DELAY is set: registry::Run, then (on success, outside internal calls) the test
  // delay of the configuration that ran. `ctx` is a CallContext of the communicator that chose it.
  static absl::Status RunWithTestDelay(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx);
  // Bad arguments. *aliased_input (when given): the bytes of `send` to copy before the call because send and
  // recv overlap other than in the documented in-place layouts (0: none).
  absl::Status Validate(const CollectiveArgs& args, uint64_t* aliased_input = nullptr) const;
  // InvalidArgument where a configuration's links cannot reach its ranks here (roce in a build without it, shm
  // between nodes, tcp@network some rank has no interface in): the same verdict on every rank, before any
  // traffic, so a wrong forced configuration leaves the communicator usable. `intra_step`: the configuration is
  // a hierarchical algorithm's step inside one node.
  absl::Status CheckLinks(const Configuration& config, bool intra_step = false) const;
  // `symmetric` for an "auto" allreduce, allgather, reducescatter or broadcast of at least SymmetricFromBytes
  // whose buffers are symmetric here; else null.
  const Configuration* ChooseSymmetric(const CollectiveArgs& args, const CallOptions& opt) const;
  // HCCL_TUNE_THP: this rank's ordinary send and recv buffers of a call (from env_.thp_bytes) go through the
  // process's HugePageAdvisor (collapsed into 2 MiB pages at their second use). REQUIRES: exec_mu_ held.
  void AdviseHugePages(const CollectiveArgs& args) const;
  // Whether neither buffer of the call can reach HCCL_TUNE_THP (AdviseHugePages then does nothing); false for the
  // v-collectives, whose extents are sums worked out per call.
  bool BelowHugePageAdvice(const CollectiveArgs& args) const {
    return args.collective != Collective::kAllgatherv && args.collective != Collective::kAlltoallv &&
           args.count * DataTypeSize(args.dtype) * static_cast<uint64_t>(size_) < env_.thp_bytes;
  }
  // Rank 0 broadcasts `table` (its newest, or null) to every rank; every rank installs what it receives when
  // its version differs from the installed one. REQUIRES: exec_mu_ held; every rank calls it at the same op.
  absl::Status SyncTable(std::shared_ptr<const TunedTable> table);
  absl::Status PointToPoint(bool send, void* data, size_t count, DataType dtype, int peer);
  std::shared_ptr<Work> Submit(std::function<absl::Status()> fn);
  // Whether a blocking call made now must go behind queued non-blocking work (the caller's program order):
  // called off the progress thread while work is in flight. Locks q_mu_ only while work is in flight.
  bool MustQueue();
  void ProgressLoop();

  int rank_ = 0, size_ = 1;
  Environment env_;
  std::shared_ptr<Store> store_;
  std::string name_;
  uint64_t tag_ = 0;
  std::vector<RankInfo> infos_;
  GroupTopology topo_;
  std::vector<int> local_ranks_;
  int local_rank_ = 0;
  std::string fingerprint_, topology_json_;
  std::vector<JobNodeInfo> job_nodes_;  // multi-node only: each node's name, inter-network addresses and ranks
  std::optional<Selector> selector_;
  std::unique_ptr<TuningClient> tuning_;
  bool online_ = false;         // take new table versions at checkpoints
  uint32_t sync_interval_ = 0;  // operations between checkpoints
  bool internal_call_ = false;  // a table broadcast in progress (not sampled, no checkpoint)
  uint64_t sample_every_ = 0;   // 0 = never
  // How a call runs its chosen configuration: registry::Run, or RunWithTestDelay when HCCL_TUNE_TEST_DELAY is set
  // (decided once at init, so the production path never looks at the test hook).
  AlgorithmFn run_ = &registry::Run;
  uint64_t sample_countdown_ = 0;
  // Configurations passed on calls, parsed once (guarded by exec_mu_).
  mutable std::map<std::string, Configuration> parsed_configs_;
  // The transport devices (runtime/transport/device.h), in order of preference; they own every Pair.
  transport::DeviceSet devices_;
  // AllocSymmetric's allocations, in allocation order (guarded by exec_mu_); ids count allocations.
  std::vector<std::unique_ptr<SymmetricRegion>> symmetric_;
  uint64_t symmetric_next_id_ = 0;
  Configuration symmetric_config_;  // symmetric(link=auto), set at the first allocation
  bool tagged_ = false;             // store_ is under this instance's tag (Setup got that far)
  // The endpoints (EndpointCache; guarded by exec_mu_). Made in Setup, once the devices exist.
  std::optional<EndpointCache> endpoints_;
  std::vector<uint8_t> aliased_copy_;  // the input of a call whose buffers overlap other than in place
  bool warned_aliasing_ = false;
  std::vector<std::vector<uint8_t>> scratch_;
  std::atomic<uint64_t> fallback_allocs_{0};
  uint64_t prealloc_bytes_ = 0;
  uint64_t scratch_total_ = 0;  // bytes held in scratch_
  uint32_t need_call_ = 0;      // the operation need_ is of
  std::vector<size_t> need_;    // per depth, the largest request of operation need_call_
  // Per collective, its last call that may run again without its argument checks, configuration choice,
  // huge-page advice and output-region work (ExecuteLocked): a small call (below HCCL_TUNE_THP) that passed
  // Validate without aliasing and chose, under auto, a configuration the selector repeats (no exploration plan
  // for that size; Selector::Repeats), not symmetric, not a v-collective. Used while the arguments are equal
  // and the selector's generation is the same; symmetric allocations clear it (valid = false: config_copy stays,
  // last_config() may read it). Guarded by exec_mu_. Measured:
  // 2-rank 8-64 B allreduce 0.26 -> 0.23-0.24 us, 4 ranks 3-5%.
  struct CallMemo {
    bool valid = false;
    Collective collective{};
    DataType dtype{};
    ReduceOp op{};
    size_t count = 0;
    const void* send = nullptr;
    void* recv = nullptr;
    int root = 0;
    uint64_t generation = 0;
    const Configuration* config = nullptr;
    StreamRegion region;
    // The algorithm registry::Run resolved and checked for these arguments (set after the first call succeeded):
    // a repeat calls it directly.
    AlgorithmFn fn = nullptr;
    // And when that first run was exactly one mailbox exchange (CallContext::SoleExchange): the algorithm's
    // mailbox form (ExchangeFn) and the endpoint it ran on, which a repeat calls with no context at all —
    // 4-rank 8-256 B allreduce 6% faster.
    ExchangeFn exchange = nullptr;
    StreamEndpoint* ep = nullptr;
    // *config, copied once when remembered: what last_config() reports after a repeat (no copy per call).
    Configuration config_copy;
    uint32_t config_id = 0;  // the flight recorder's id of *config and where it came from
    ChoiceSource source = ChoiceSource::kDefault;
    bool Matches(const CollectiveArgs& a) const {
      return valid && a.collective == collective && a.count == count && a.send == send && a.recv == recv &&
             a.dtype == dtype && a.op == op && a.root == root;
    }
  };
  std::array<CallMemo, kNumCollectives> memo_{};
  // The call pipeline's steps (ExecuteLocked; REQUIRES: exec_mu_ held). PreparedCall: what one call runs. The
  // steps are always inlined into ExecuteLocked (they are defined and used in collectives.cc only): as calls, their
  // entries, exits and the status passed between them cost 77 instructions a call, on top of the ~1200 the runtime
  // spends on a 2-rank 8 B allreduce over shm outside its waits (callgrind, hccl-tune bench --link shm).
  struct PreparedCall {
    CollectiveArgs run;  // the arguments the algorithm gets (send may be a copy; stream set once numbered)
    const Configuration* config = nullptr;
    StreamRegion region;
    bool explored = false;   // the call explores (an exploration plan chose it)
    bool memo_hit = false;   // a remembered repeat (CallMemo): PrepareCall skipped
    uint32_t config_id = 0;  // the flight recorder's id of *config (0 when it is off)
    ChoiceSource source = ChoiceSource::kDefault;
  };
  // Validate, copy aliased input, choose the configuration and output region, remember a repeatable call.
  // Errors are refusals (Refuse), returned as such.
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status PrepareCall(const CollectiveArgs& args, const CallOptions& opt,
                                                               CallMemo& memo, PreparedCall* call);
  // Runs the chosen configuration (through a remembered call's algorithm or mailbox form where there is one).
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status RunPrepared(const CollectiveArgs& args, const PreparedCall& call,
                                                               CallMemo& memo);
  // After the run: last_config, the debug log, failures (CallFailed), timing samples and the user's sink.
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status FinishCall(const CollectiveArgs& args, const CallOptions& opt,
                                                              const PreparedCall& call, const CallMemo& memo,
                                                              absl::Status s, bool sampled, double us);
  // A failed run: an argument error is refused (the communicator stays usable); any other breaks it.
  // The message names the configuration and its source; a communication failure dumps the flight recorder.
  absl::Status CallFailed(const CollectiveArgs& args, const CallOptions& opt, const PreparedCall& call, absl::Status s);
  // The flight recorder's id of `config` for collective `c` (interned once per change of configuration).
  uint32_t RecordedConfigId(Collective c, const Configuration& config);
  std::vector<const void*> exchange_blocks_;  // a remembered exchange's block pointers (one per rank)
  void ForgetCalls() {
    for (CallMemo& m : memo_) m.valid = false;
  }
  // Call sizes from which allreduce/reducescatter, and every other collective, stream their output
  // (HCCL_TUNE_NT_STORES; under auto the reductions' threshold follows the last-level cache, AutoNtStoresBytes).
  uint64_t nt_reduce_bytes_ = Environment::kDefaultNtStoresBytes;
  uint64_t nt_other_bytes_ = Environment::kDefaultNtStoresBytes;

  // Calls are serialised by exec_mu_; call_/last_config_/broken_ are guarded by it.
  mutable std::mutex exec_mu_;
  CallDescriptor call_;
  StreamRegion stream_;  // this call's non-temporal-store region (HCCL_TUNE_NT_STORES), set with call_
  uint32_t sequence_ = 0;
  // The last call's configuration: memo_[last_memo_].config_copy when it was a remembered call (last_memo_ >= 0),
  // else last_config_.
  Configuration last_config_;
  int last_memo_ = -1;
  std::pair<uint32_t, std::string> refused_;  // this rank's last refused operation and why (Refuse)
  absl::Status broken_;
  int split_count_ = 0;
  std::shared_ptr<TimingSink> user_sink_;  // SetTimingSink: every call
  // Per collective, the last configuration reported to the tuning client and its interned id (formatted once
  // per change; per collective because jobs interleave collectives, e.g. an allreduce and a barrier per step).
  struct ReportedConfig {
    Configuration config;
    uint32_t id = 0;
  };
  std::array<ReportedConfig, kNumCollectives> reported_;
  // The flight recorder (null when HCCL_TUNE_FR_ENTRIES=0) and, per collective, the last configuration it
  // interned. Written by the calling thread under exec_mu_; dumps read the recorder from any thread.
  std::unique_ptr<FlightRecorder> recorder_;
  std::array<ReportedConfig, kNumCollectives> recorded_;
  // The ring slot of the call running now and whether one is (CallProbe marks it blocked); the countdown to the
  // next call the recorder times on its own.
  uint32_t fr_slot_ = 0;
  bool fr_active_ = false;
  static constexpr uint32_t kFlightTimedEvery = 64;
  uint32_t fr_countdown_ = kFlightTimedEvery;
  bool tuning_enabled_ = false;  // same on every rank (part of the decisive settings)

  // Progress thread (started on first non-blocking call).
  std::mutex q_mu_;
  std::condition_variable q_cv_;
  std::deque<std::function<void()>> queue_;
  // Queued + running on the progress thread. Changed under q_mu_; read without it by MustQueue's fast path: a
  // thread that queued work sees its own increment, and 0 (acquire) means every job it queued has finished.
  std::atomic<size_t> in_flight_{0};
  bool stopping_ = false;
  std::thread progress_;
};

}  // namespace hccltune
