#include "runtime/tuning_client/tuning_client.h"

#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hccltune/v1/tuner.grpc.pb.h"
#include "hccltune/version.h"
#include "rpc/channel.h"
#include "runtime/common/daemon_discovery.h"
#include "runtime/common/fingerprint.h"
#include "runtime/common/logging.h"
#include "runtime/common/sizes.h"
#include "runtime/selector/tuning.h"
#include "runtime/tuning_client/heartbeat.h"

namespace hccltune {
namespace {

namespace v1 = ::hccltune::v1;

// Process-wide: set in a forked child so that inherited clients stay silent.
std::atomic<bool> g_forked_child{false};
std::atomic<uint64_t> g_sent{0}, g_dropped{0}, g_failed{0}, g_fetched{0};
std::once_flag g_atfork_once;

void InstallAtFork() {
  std::call_once(g_atfork_once, [] {
    pthread_atfork(nullptr, nullptr, [] { g_forked_child.store(true, std::memory_order_relaxed); });
  });
}

constexpr size_t kQueueCap = 8192;
constexpr size_t kBatchMax = 2048;

absl::StatusOr<std::shared_ptr<const TunedTable>> TableFromProto(const v1::Table& t) {
  auto table = std::make_shared<TunedTable>();
  table->version = t.version();
  table->content_hash = t.content_hash();
  for (const v1::TableEntry& e : t.entries()) {
    auto coll = ParseCollective(e.key().collective());
    auto dtype = ParseDataType(e.key().dtype());
    auto cfg = Configuration::Parse(e.configuration());
    if (!coll.ok() || !dtype.ok() || !cfg.ok()) {
      Log(LogLevel::kWarn, "tuned table v", t.version(), ": skipping unreadable entry '", e.configuration(), "'");
      continue;
    }
    TunedEntry out;
    out.collective = *coll;
    out.dtype = *dtype;
    out.world_size = e.key().world_size();
    out.bytes.min = e.key().min_bytes();
    out.bytes.max = e.key().max_bytes() == 0 ? kUnbounded : e.key().max_bytes();
    out.config = *std::move(cfg);
    out.model_version = e.model_version() > 0 ? e.model_version() : 0;
    if (!e.explore().empty()) {
      auto plan = Configuration::Parse(e.explore());
      if (plan.ok() && e.explore_every() >= 2 && e.explore_calls() > 0) {
        out.explore = *std::move(plan);
        out.explore_every = e.explore_every();
        out.explore_calls = e.explore_calls();
      } else {
        Log(LogLevel::kWarn, "tuned table v", t.version(), ": ignoring unreadable exploration plan '", e.explore(),
            "'");
      }
    }
    table->entries.push_back(std::move(out));
  }
  return std::shared_ptr<const TunedTable>(std::move(table));
}

absl::Status FromGrpc(const grpc::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), absl::StrCat(what, ": ", s.error_message()));
}

class Sink;

class DaemonClient final : public TuningClient {
 public:
  DaemonClient(const TuningContext& ctx, DaemonTarget target)
      : ctx_(ctx),
        target_(std::move(target)),
        channel_(rpc::MakeChannel(target_.grpc_target)),
        stub_(v1::Tuner::NewStub(channel_)),
        pid_(::getpid()) {
    if (ctx_.progress) {
      heartbeat_id_ = tuning::Heartbeats::Get().Register(tuning::HeartbeatSource{
          target_.grpc_target, ctx_.job_id, ctx_.job_rank, ctx_.job_world, ctx_.progress, ctx_.dump, ctx_.nodes});
    }
    reporter_ = std::thread([this] { ReportLoop(); });
    if (ctx_.authority && ctx_.env.mode == TuneMode::kOnline && !ctx_.env.table_version) {
      poller_ = std::thread([this] { PollLoop(); });
    }
  }

  ~DaemonClient() override {
    if (g_forked_child.load() || ::getpid() != pid_) {
      // A forked child owns no threads: leak rather than touch inherited state.
      reporter_.detach();
      if (poller_.joinable()) poller_.detach();
      return;
    }
    if (heartbeat_id_ != 0) tuning::Heartbeats::Get().Unregister(heartbeat_id_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    reporter_.join();
    if (poller_.joinable()) poller_.join();
  }

  absl::StatusOr<std::shared_ptr<const TunedTable>> FetchTable(absl::Duration timeout) override {
    if (!target_.socket_path.empty() && ::access(target_.socket_path.c_str(), F_OK) != 0) {
      return absl::UnavailableError(absl::StrCat("no tuning daemon at ", target_.grpc_target));
    }
    const absl::Time deadline = absl::Now() + timeout;
    auto t = Get(0, timeout);
    if (t.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      key_settled_ = true;  // the daemon keys tables as this build does
    } else if (absl::IsNotFound(t.status()) && SettleKey(deadline)) {
      t = Get(0, std::max(deadline - absl::Now(), absl::Milliseconds(1)));  // the key changed: ask again
    }
    if (t.ok() && *t) {
      std::lock_guard<std::mutex> lock(mu_);
      latest_ = *t;
    } else if (t.ok()) {
      return absl::NotFoundError("the daemon has no table for this topology");
    }
    return t;
  }

  std::shared_ptr<const TunedTable> LatestTable() override {
    std::lock_guard<std::mutex> lock(mu_);
    return latest_;
  }

  // Single producer (the communicator's calling thread, under its call lock), single consumer (ReportLoop):
  // the producer owns tail_, the consumer head_; a slot is published by the release store of tail_.
  void Report(const RawTimingSample& s) override {
    if (g_forked_child.load(std::memory_order_relaxed)) return;
    const uint64_t t = tail_.load(std::memory_order_relaxed);
    if (t - head_.load(std::memory_order_acquire) >= kQueueCap) {
      g_dropped.fetch_add(1, std::memory_order_relaxed);
      dropped_since_batch_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    ring_[t % kQueueCap] = s;
    tail_.store(t + 1, std::memory_order_release);
  }

 private:
  // Takes up to kBatchMax samples out of the ring (consumer side).
  std::vector<RawTimingSample> Drain() {
    const uint64_t h = head_.load(std::memory_order_relaxed);
    const uint64_t n = std::min<uint64_t>(tail_.load(std::memory_order_acquire) - h, kBatchMax);
    std::vector<RawTimingSample> out(static_cast<size_t>(n));
    for (uint64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = ring_[(h + i) % kQueueCap];
    head_.store(h + n, std::memory_order_release);
    return out;
  }

  // The topology as this daemon keys it.
  struct Key {
    std::string fingerprint, json;
  };
  Key CurrentKey() {
    std::lock_guard<std::mutex> lock(mu_);
    return key_;
  }

  // Asks the daemon (once) which topology format it keys tables by; on one older than this build's, speaks to it
  // with the format-1 key from now on. Returns whether the key changed. Not settled when the daemon does not
  // answer (asked again next time).
  bool SettleKey(absl::Time deadline) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (key_settled_) return false;
    }
    grpc::ClientContext cc;
    cc.set_deadline(absl::ToChronoTime(deadline));
    v1::StatusResponse st;
    if (!stub_->Status(&cc, v1::StatusRequest(), &st).ok()) return false;
    const int format = st.topology_format() == 0 ? 1 : st.topology_format();
    std::optional<std::string> old;
    if (format < kTopologyFormat) {
      auto d = ParseTopologyJson(ctx_.topology_json);
      if (d.ok()) old = Format1TopologyJson(*d);
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (key_settled_) return false;
    key_settled_ = true;
    if (format >= kTopologyFormat) return false;
    const std::string versions = absl::StrCat("hccl-tuned ", st.library_version(), " at ", target_.grpc_target,
                                              " keys tables by topology fingerprint format ", format,
                                              "; this hccl-tune ", HCCL_TUNE_VERSION, " uses format ", kTopologyFormat);
    if (!old) {
      Log(LogLevel::kWarn, versions, ", and format ", format, " cannot express topology ", ctx_.fingerprint, " ",
          ctx_.topology_json, ": no tuned table from it until hccl-tuned is upgraded");
      return false;
    }
    key_ = Key{Fingerprint(*old), *std::move(old)};
    Log(LogLevel::kInfo, versions, ": topology ", ctx_.fingerprint, " is ", key_.fingerprint, " there");
    return true;
  }

  // GetTable; null table when the daemon says "unchanged".
  absl::StatusOr<std::shared_ptr<const TunedTable>> Get(int64_t if_newer_than, absl::Duration timeout) {
    const Key key = CurrentKey();
    v1::GetTableRequest req;
    req.mutable_topology()->set_fingerprint(key.fingerprint);
    req.mutable_topology()->set_json(key.json);
    req.set_world_size(ctx_.world_size);
    req.set_if_newer_than(if_newer_than);
    if (ctx_.env.table_version) req.set_version(*ctx_.env.table_version);
    v1::GetTableResponse resp;
    grpc::ClientContext cc;
    cc.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMicroseconds(timeout));
    grpc::Status s = stub_->GetTable(&cc, req, &resp);
    if (!s.ok()) return FromGrpc(s, absl::StrCat("GetTable from ", target_.grpc_target));
    if (resp.unchanged()) return std::shared_ptr<const TunedTable>();
    g_fetched.fetch_add(1, std::memory_order_relaxed);
    return TableFromProto(resp.table());
  }

  void ReportLoop() {
    absl::Duration backoff = absl::Milliseconds(200);
    bool warned = false;
    while (true) {
      std::vector<RawTimingSample> batch;
      uint64_t dropped = 0;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, absl::ToChronoMilliseconds(backoff), [&] { return stopping_; });
        batch = Drain();
        dropped = dropped_since_batch_.exchange(0);
        if (batch.empty() && stopping_) return;
      }
      const bool absent =
          !target_.socket_path.empty() && ctx_.env.daemon.empty() && ::access(target_.socket_path.c_str(), F_OK) != 0;
      if (!absent && heartbeat_id_ != 0) Heartbeat();
      if (batch.empty()) continue;
      if (absent) {
        // No daemon where discovery looked: nothing to report to, and nothing to warn about.
        g_dropped.fetch_add(batch.size(), std::memory_order_relaxed);
        continue;
      }
      absl::Status s = Send(batch, dropped);
      if (s.ok()) {
        if (warned) Log(LogLevel::kWarn, "tuning daemon at ", target_.grpc_target, " reachable again");
        warned = false;
        backoff = absl::Milliseconds(200);
        g_sent.fetch_add(batch.size(), std::memory_order_relaxed);
      } else {
        g_failed.fetch_add(1, std::memory_order_relaxed);
        g_dropped.fetch_add(batch.size(), std::memory_order_relaxed);
        if (!warned) Log(LogLevel::kWarn, "tuning daemon: ", s.message(), "; timings are dropped until it is back");
        warned = true;
        backoff = std::min(backoff * 2, absl::Seconds(5));
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return;
      }
    }
  }

  absl::Status Send(const std::vector<RawTimingSample>& batch, uint64_t dropped) {
    const absl::Time deadline = absl::Now() + absl::Seconds(2);  // for both calls
    SettleKey(deadline);
    const Key key = CurrentKey();
    v1::TimingBatch msg;
    msg.mutable_topology()->set_fingerprint(key.fingerprint);
    msg.mutable_topology()->set_json(key.json);
    msg.set_dropped_by_client(dropped);
    msg.set_client_id(absl::StrCat(key.fingerprint, "/", pid_, "/", ctx_.rank));
    // Configuration ids are formatted here, off the calling thread, once per distinct id in the batch.
    std::map<uint32_t, std::string> names;
    for (const RawTimingSample& t : batch) {
      if (t.config_id == 0) continue;  // the interner was full: no name to report
      v1::TimingSample* p = msg.add_samples();
      p->set_collective(std::string(CollectiveName(t.collective)));
      p->set_dtype(std::string(DataTypeName(t.dtype)));
      p->set_world_size(t.world_size);
      p->set_bytes(t.bytes);
      auto name = names.find(t.config_id);
      if (name == names.end()) name = names.emplace(t.config_id, InternedConfiguration(t.config_id)).first;
      p->set_configuration(name->second);
      p->set_duration_us(t.duration_us);
      p->set_sequence(t.sequence);
      p->set_rank(ctx_.rank);
    }
    grpc::ClientContext cc;
    cc.set_deadline(absl::ToChronoTime(deadline));
    v1::ReportTimingsResponse resp;
    auto writer = stub_->ReportTimings(&cc, &resp);
    writer->Write(msg);
    writer->WritesDone();
    return FromGrpc(writer->Finish(), absl::StrCat("ReportTimings to ", target_.grpc_target));
  }

  // The process's heartbeat to this daemon, when due (runtime/tuning_client/heartbeat.h).
  void Heartbeat() {
    tuning::Heartbeats::Get().Tick(target_.grpc_target,
                                   [this](const v1::HeartbeatRequest& req) -> absl::StatusOr<v1::HeartbeatResponse> {
                                     grpc::ClientContext cc;
                                     cc.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
                                     v1::HeartbeatResponse resp;
                                     grpc::Status s = stub_->Heartbeat(&cc, req, &resp);
                                     if (!s.ok())
                                       return FromGrpc(s, absl::StrCat("Heartbeat to ", target_.grpc_target));
                                     return resp;
                                   });
  }

  void PollLoop() {
    bool warned = false;
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (cv_.wait_for(lock, std::chrono::milliseconds(250), [&] { return stopping_; })) return;
      }
      int64_t have = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        have = latest_ ? latest_->version : 0;
      }
      auto t = Get(have, absl::Seconds(1));
      if (!t.ok()) {
        if (!warned && t.status().code() != absl::StatusCode::kNotFound) {
          Log(LogLevel::kWarn, "tuning daemon: ", t.status().message(), "; keeping table v", have);
        }
        warned = true;
        continue;
      }
      warned = false;
      if (*t) {
        std::lock_guard<std::mutex> lock(mu_);
        latest_ = *t;
      }
    }
  }

  TuningContext ctx_;
  Key key_{ctx_.fingerprint, ctx_.topology_json};  // guarded by mu_
  bool key_settled_ = false;                       // guarded by mu_
  DaemonTarget target_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Tuner::Stub> stub_;
  pid_t pid_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::unique_ptr<RawTimingSample[]> ring_{new RawTimingSample[kQueueCap]};
  std::atomic<uint64_t> head_{0}, tail_{0};
  std::atomic<uint64_t> dropped_since_batch_{0};
  std::shared_ptr<const TunedTable> latest_;
  std::thread reporter_, poller_;
  uint64_t heartbeat_id_ = 0;  // registered with tuning::Heartbeats (0: no progress to report)
};

}  // namespace

void InstallDaemonTuning() {
  InstallAtFork();
  InstallTuningClientFactory([](const TuningContext& ctx) -> std::unique_ptr<TuningClient> {
    auto target = ResolveDaemonTarget(ctx.env, "", ::getuid());
    if (!target.ok()) {
      Log(LogLevel::kWarn, "tuning daemon: ", target.status().message(), "; running on built-in defaults");
      return nullptr;
    }
    if (target->disabled) return nullptr;
    return std::make_unique<DaemonClient>(ctx, *target);
  });
}

TuningClientCounters GetTuningClientCounters() {
  return TuningClientCounters{g_sent.load(), g_dropped.load(), g_failed.load(), g_fetched.load()};
}

}  // namespace hccltune
