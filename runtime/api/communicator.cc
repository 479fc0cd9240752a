// Communicator setup (the rank exchange is rank_exchange.h), topology, transport devices, endpoints, split.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "hccltune/version.h"
#include "runtime/api/communicator_impl.h"
#include "runtime/api/job_progress.h"
#include "runtime/api/rank_exchange.h"
#include "runtime/bootstrap/launcher_rendezvous.h"
#include "runtime/bootstrap/rank_table.h"
#include "runtime/bootstrap/tcp_store.h"
#include "runtime/common/host.h"
#include "runtime/common/job_auth.h"
#include "runtime/common/logging.h"
#include "runtime/topology/topology.h"
#include "runtime/transport/registry/devices.h"

namespace hccltune {
namespace {

std::string Hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// Whether this process takes part in table distribution (a tuning client is installed and not turned off).
bool TuningEnabled(const Environment& env) { return TuningClientFactoryInstalled() && env.mode != TuneMode::kOff; }

std::string Decisive(const Environment& env) {
  return absl::StrCat("HCCL_ALGO=", env.hccl_algo, ";HCCL_TUNE_ALGO=", env.tune_algo,
                      ";HCCL_BUFFSIZE=", env.buffsize_bytes >> 20, ";HCCL_TUNE_MODE=", TuneModeName(env.mode),
                      ";HCCL_TUNE_TABLE_VERSION=", env.table_version ? absl::StrCat(*env.table_version) : "",
                      ";HCCL_TUNE_SYNC_INTERVAL=", env.sync_interval,
                      ";tuning client=", TuningEnabled(env) ? "installed" : "none");
}

}  // namespace

absl::StatusOr<std::unique_ptr<CommImpl>> CommImpl::Init(int rank, int size, std::shared_ptr<Store> store,
                                                         const Environment& env, std::string name) {
  if (size < 1 || size > kMaxRanks) {
    return absl::InvalidArgumentError(
        absl::StrCat("communicator size must be between 1 and ", kMaxRanks, ", got ", size));
  }
  if (rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is out of range for size ", size));
  }
  if (!store) return absl::InvalidArgumentError("communicator needs a rendezvous store");
  std::unique_ptr<CommImpl> c(new CommImpl());
  c->rank_ = rank;
  c->size_ = size;
  c->env_ = env;
  c->name_ = std::move(name);
  c->store_ = NewPrefixStore(std::move(store), absl::StrCat("hccltune/", c->name_));
  if (absl::Status s = c->Setup(); !s.ok()) {
    // The other ranks wait for this one in the rendezvous: tell them why it will not come (under the tag, so
    // a later job on the same store never sees it) — unless this is itself another rank's announcement, or a
    // deadline the others reach as well (each then names the ranks it was missing).
    if (c->tagged_ && s.code() != absl::StatusCode::kAborted && s.code() != absl::StatusCode::kDeadlineExceeded) {
      (void)c->store_->Set("abort", absl::StrCat("rank ", rank, " could not set up the communicator: ", s.message()));
    }
    return s;
  }
  return c;
}

absl::Status CommImpl::Setup() {
  const absl::Time t0 = absl::Now();
  endpoints_.emplace(rank_, size_, &devices_, absl::Seconds(env_.exec_timeout_s), [this] { return CallProbe(); });
  RankExchange exchange(rank_, size_, env_, store_);
  absl::Status s = exchange.Run([this](uint64_t tag, const std::shared_ptr<Store>& store) -> absl::StatusOr<RankInfo> {
    tag_ = tag;
    store_ = store;
    tagged_ = true;
    return MakeDevices();
  });
  if (!s.ok()) return s;
  const absl::Time t_exchange = absl::Now();
  infos_ = std::move(exchange.infos());
  if (env_.fr_entries > 0) {
    recorder_ = std::make_unique<FlightRecorder>(
        env_, FlightIdentity{rank_, size_, name_, tag_, int64_t{env_.exec_timeout_s} * 1000});
    endpoints_->SetLinkUsage(&recorder_->links());
  }
  if (env_.fr_signal != 0) {
    if (s = InstallFlightSignal(env_.fr_signal); !s.ok()) return s;
  }
  SetupLayout();
  if (s = StartDevices(); !s.ok()) return s;
  const absl::Time t_devices = absl::Now();
  DescribeTopology();
  if (recorder_) {
    recorder_->SetJobFacts({fingerprint_, infos_[static_cast<size_t>(rank_)].node,
                            static_cast<int>(local_ranks_.size()), topo_.num_nodes});
  }

  auto selector = Selector::Create(env_, size_, topo_);
  if (!selector.ok()) return selector.status();
  selector_.emplace(*std::move(selector));

  run_ = env_.test_delays.empty() ? &registry::Run : &CommImpl::RunWithTestDelay;
  nt_other_bytes_ = env_.nt_stores_bytes;
  nt_reduce_bytes_ = env_.nt_stores_auto
                         ? AutoNtStoresBytes(LastLevelCacheBytes(), static_cast<int>(local_ranks_.size()))
                         : env_.nt_stores_bytes;
  if (env_.nt_stores_auto) {
    Log(LogLevel::kInfo, "rank ", rank_, ": last-level cache ", LastLevelCacheBytes(), " bytes; allreduce and ",
        "reducescatter stream their output from ", nt_reduce_bytes_, "-byte calls (HCCL_TUNE_NT_STORES=auto)");
  }
  prealloc_bytes_ = env_.buffsize_bytes;
  if (s = SetupTuning(); !s.ok()) return s;
  const absl::Time t_end = absl::Now();
  Log(LogLevel::kDebug, "rank ", rank_, " init phases (ms): rank exchange and devices made ",
      absl::ToDoubleMilliseconds(t_exchange - t0), ", devices started ",
      absl::ToDoubleMilliseconds(t_devices - t_exchange), ", selector and tuning ",
      absl::ToDoubleMilliseconds(t_end - t_devices));
  Log(LogLevel::kInfo, "rank ", rank_, "/", size_, " communicator '", name_, "' ready: ", topo_.num_nodes, " node(s), ",
      local_ranks_.size(), " local, topology ", fingerprint_, " ", topology_json_);
  return absl::OkStatus();
}

absl::StatusOr<RankInfo> CommImpl::MakeDevices() {
  transport::DeviceContext ctx;
  ctx.rank = rank_;
  ctx.size = size_;
  ctx.tag = tag_;
  ctx.env = env_;
  ctx.store = store_;
  ctx.probe = [this] { return CallProbe(); };  // devices wait for peers inside calls too (TCP connects)
  auto devices = transport::CreateDevices(ctx);
  if (!devices.ok()) return devices.status();
  devices_ = *std::move(devices);
  RankInfo me;
  me.rank = rank_;
  me.protocol = kWireProtocolVersion;
  me.node = LocalNodeId(env_);
  me.host = Hostname();
  me.pid = static_cast<int>(::getpid());
  me.device = env_.device ? *env_.device : (env_.local_rank ? *env_.local_rank : -1);
  me.decisive = Decisive(env_);
  for (const auto& d : devices_.devices()) me.blocks[std::string(LinkKindName(d->kind()))] = d->Block();
  return me;
}

void CommImpl::SetupLayout() {
  // Dense node indices in order of first appearance.
  std::vector<std::string> nodes;
  topo_.node_of.resize(static_cast<size_t>(size_));
  for (const RankInfo& i : infos_) {
    auto it = std::find(nodes.begin(), nodes.end(), i.node);
    if (it == nodes.end()) {
      nodes.push_back(i.node);
      it = nodes.end() - 1;
    }
    topo_.node_of[static_cast<size_t>(i.rank)] = static_cast<int>(it - nodes.begin());
  }
  topo_.num_nodes = static_cast<int>(nodes.size());
  const int my_node = topo_.node_of[static_cast<size_t>(rank_)];
  for (int r = 0; r < size_; ++r) {
    if (topo_.node_of[static_cast<size_t>(r)] == my_node) {
      if (r == rank_) local_rank_ = static_cast<int>(local_ranks_.size());
      local_ranks_.push_back(r);
    }
  }
}

absl::Status CommImpl::StartDevices() {
  const auto& devices = devices_.devices();
  std::vector<std::vector<std::string>> blocks(devices.size(), std::vector<std::string>(static_cast<size_t>(size_)));
  for (size_t d = 0; d < devices.size(); ++d) {
    const std::string name(LinkKindName(devices[d]->kind()));
    for (const RankInfo& i : infos_) {
      auto it = i.blocks.find(name);
      if (it != i.blocks.end()) blocks[d][static_cast<size_t>(i.rank)] = it->second;
    }
  }
  return devices_.Start(rank_, transport::DeviceLayout{topo_.node_of, topo_.num_nodes}, blocks);
}

void CommImpl::DescribeTopology() {
  const size_t num_nodes = static_cast<size_t>(topo_.num_nodes);
  TopologyFacts facts;
  facts.ranks_per_node.assign(num_nodes, 0);
  for (int n : topo_.node_of) facts.ranks_per_node[static_cast<size_t>(n)]++;
  const bool shared_node = *std::max_element(facts.ranks_per_node.begin(), facts.ranks_per_node.end()) > 1;
  for (const auto& d : devices_.devices()) {
    if (shared_node && d->scope() == transport::Scope::kNode) facts.intra_links.emplace_back(LinkKindName(d->kind()));
  }
  if (num_nodes > 1) {
    std::vector<std::vector<NodeAddress>> per_node(num_nodes);
    std::vector<std::vector<InterLink>> rdma(num_nodes);
    for (int r = 0; r < size_; ++r) {
      const auto node = static_cast<size_t>(topo_.node_of[static_cast<size_t>(r)]);
      for (const auto& d : devices_.devices()) {
        for (const auto& a : d->Addresses(r)) per_node[node].push_back(NodeAddress{a.subnet, a.address});
        for (const auto& l : d->RdmaLinks(r)) rdma[node].push_back(l);
      }
    }
    facts.inter_networks = InterNodeNetworks(per_node);
    facts.rdma_links = InterNodeRdmaLinks(rdma);
    DescribeJobNodes(per_node, facts.inter_networks);
  }
  facts.release = HCCL_TUNE_RELEASE;
  topology_json_ = TopologyJson(facts);
  fingerprint_ = Fingerprint(topology_json_);
}

// The job view's node list: node n's addresses on the networks between nodes (in the topology's order) and ranks.
void CommImpl::DescribeJobNodes(const std::vector<std::vector<NodeAddress>>& per_node,
                                const std::vector<std::string>& inter_networks) {
  job_nodes_.assign(per_node.size(), JobNodeInfo{});
  for (const RankInfo& i : infos_) {
    JobNodeInfo& n = job_nodes_[static_cast<size_t>(topo_.node_of[static_cast<size_t>(i.rank)])];
    n.name = i.node;
    n.ranks.push_back(i.rank);
  }
  for (size_t n = 0; n < per_node.size(); ++n) {
    for (const std::string& net : inter_networks) {
      for (const NodeAddress& a : per_node[n]) {
        auto& out = job_nodes_[n].addresses;
        if (a.subnet == net && std::find(out.begin(), out.end(), a.address) == out.end()) out.push_back(a.address);
      }
    }
  }
}

absl::Status CommImpl::SetupTuning() {
  if (env_.sample_rate > 0) {
    sample_every_ = static_cast<uint64_t>(std::max(1.0, std::round(1.0 / env_.sample_rate)));
    sample_countdown_ = sample_every_;
  }
  tuning_enabled_ = TuningEnabled(env_);
  if (!tuning_enabled_) return absl::OkStatus();
  TuningContext ctx;
  ctx.env = env_;
  ctx.fingerprint = fingerprint_;
  ctx.topology_json = topology_json_;
  ctx.world_size = size_;
  ctx.rank = rank_;
  ctx.authority = rank_ == 0;
  // The job view's heartbeats: this communicator's progress and dumps (the client goes before the recorder).
  ctx.job_id = JobIdFor(env_, tag_);
  ctx.job_rank = env_.rank && env_.world_size ? *env_.rank : rank_;
  ctx.job_world = env_.rank && env_.world_size ? *env_.world_size : size_;
  ctx.progress = [this] { return ReadProgress(recorder_.get(), name_, tag_, rank_, size_); };
  ctx.dump = [this] { return DumpForDaemon(recorder_.get(), tag_, rank_); };
  if (ctx.job_world == size_ && ctx.job_rank == rank_) ctx.nodes = job_nodes_;  // the job's world: its ranks
  tuning_ = MakeTuningClient(ctx);
  std::shared_ptr<const TunedTable> table;
  if (rank_ == 0 && tuning_) {
    // An absent daemon answers at once (no socket file, or nobody listening on it: connection refused); one
    // that is there gets HCCL_TUNE_FETCH_TIMEOUT_MS (default 2 s) to answer, so a loaded node still hands the
    // job its table instead of defaults.
    auto fetched = tuning_->FetchTable(absl::Milliseconds(env_.fetch_timeout_ms));
    if (fetched.ok()) {
      table = *fetched;
    } else if (fetched.status().code() == absl::StatusCode::kNotFound) {
      Log(LogLevel::kInfo, "no tuned table for topology ", fingerprint_, " (", size_, " ranks): built-in defaults");
    } else {
      // No daemon where discovery looked is normal (info); a daemon the user named that fails is a warning.
      Log(env_.daemon.empty() && fetched.status().code() == absl::StatusCode::kUnavailable ? LogLevel::kInfo
                                                                                           : LogLevel::kWarn,
          "tuning daemon: ", fetched.status().message(), "; running on built-in defaults");
    }
  }
  online_ = env_.mode == TuneMode::kOnline && !env_.table_version;
  {
    std::lock_guard<std::mutex> lock(exec_mu_);
    if (absl::Status s = SyncTable(table); !s.ok()) return s;
  }
  sync_interval_ = static_cast<uint32_t>(env_.sync_interval);
  return absl::OkStatus();
}

absl::Status CommImpl::SyncTable(std::shared_ptr<const TunedTable> table) {
  internal_call_ = true;
  std::string payload;
  int64_t header[2] = {0, 0};  // version, payload bytes (0 = no change)
  if (rank_ == 0 && table) {
    header[0] = table->version;
    if (table->version != selector_->table_version()) {
      payload = table->Serialize();
      header[1] = static_cast<int64_t>(payload.size());
    }
  }
  CallOptions tree;
  tree.config = "binomial_tree";
  CollectiveArgs a;
  a.collective = Collective::kBroadcast;
  a.send = header;
  a.recv = header;
  a.count = 2;
  a.dtype = DataType::kInt64;
  absl::Status s = ExecuteLocked(a, tree);
  if (s.ok() && header[1] > 0) {
    payload.resize(static_cast<size_t>(header[1]));
    a.send = payload.data();
    a.recv = payload.data();
    a.count = payload.size();
    a.dtype = DataType::kUint8;
    s = ExecuteLocked(a, tree);
    if (s.ok()) {
      if (rank_ != 0) {
        auto parsed = TunedTable::Deserialize(payload);
        if (!parsed.ok()) s = parsed.status();
        if (s.ok()) table = std::make_shared<const TunedTable>(*std::move(parsed));
      }
      if (s.ok()) {
        Log(LogLevel::kInfo, "rank ", rank_, ": tuned table v", table->version, " (", table->entries.size(),
            " entries) in effect from operation ", sequence_ + 1);
        // Exploration plans only in online mode (static and a pinned version never explore).
        selector_->SetTable(std::move(table), online_);
      }
    }
  }
  internal_call_ = false;
  return s;
}

CommImpl::~CommImpl() {
  {
    std::lock_guard<std::mutex> lock(q_mu_);
    stopping_ = true;
  }
  q_cv_.notify_all();
  if (progress_.joinable()) progress_.join();
  tuning_.reset();  // its heartbeat thread reads recorder_ (TuningContext::progress)
  endpoints_.reset();
}

absl::Status CommImpl::CallProbe() const {
  // The call has been blocked a slice: the flight recorder notes since when (the first probe of the call).
  if (fr_active_) recorder_->ring().MarkBlocked(fr_slot_, CoarseNowNs());
  if (absl::Status a = AbortProbe(store_)(); !a.ok()) return a;
  // While TCP links connect (inside a call), a rank of this node that is gone (killed before it announced
  // anything) is named now: no link to it exists yet to report its loss, and the wait would last
  // HCCL_CONNECT_TIMEOUT. Only then: a rank that finished its part of a call may exit while others still work.
  const size_t me = static_cast<size_t>(rank_);
  for (int r : endpoints_->connecting()) {
    const size_t k = static_cast<size_t>(r);
    if (me >= infos_.size() || k >= infos_.size() || r == rank_ || infos_[k].pid <= 0) continue;
    if (infos_[k].node == infos_[me].node && ::kill(infos_[k].pid, 0) != 0 && errno == ESRCH) {
      return absl::UnavailableError(absl::StrCat("rank ", r, " (pid ", infos_[k].pid, ") exited or was killed"));
    }
  }
  // Point-to-point takes no operation number of its own (call_.sequence is the last collective's).
  if (call_.collective == Collective::kSendRecv || call_.sequence == 0) return absl::OkStatus();
  const std::string key = absl::StrCat("refused/", call_.sequence);
  auto present = store_->Check({key});
  if (!present.ok() || !*present) return absl::OkStatus();
  auto why = store_->Get(key, absl::Seconds(1));
  return absl::FailedPreconditionError(
      absl::StrCat(why.ok() ? *why : absl::StrCat("another rank refused operation ", call_.sequence), "; rank ", rank_,
                   " stops waiting for it"));
}

void* CommImpl::Scratch(int depth, size_t bytes) {
  if (scratch_.size() <= static_cast<size_t>(depth)) scratch_.resize(static_cast<size_t>(depth) + 1);
  auto& buf = scratch_[static_cast<size_t>(depth)];
  if (buf.size() < bytes) {
    size_t total = 0;
    for (const auto& b : scratch_) total += b.size();
    if (total + bytes - buf.size() > prealloc_bytes_) fallback_allocs_.fetch_add(1);
    scratch_total_ = total + bytes - buf.size();
    buf.resize(bytes);
  }
  // Only once the scratch held exceeds HCCL_BUFFSIZE can a call's need: a compare per Scratch call otherwise.
  if (scratch_total_ > prealloc_bytes_) NoteScratchNeed(depth, bytes);
  return buf.data();
}

void CommImpl::NoteScratchNeed(int depth, size_t bytes) {
  // A call's need: per depth the largest request of the call, summed over depths (a depth's buffer is reused).
  if (need_call_ != call_.sequence) {
    need_call_ = call_.sequence;
    need_.assign(need_.size(), 0);
  }
  if (need_.size() <= static_cast<size_t>(depth)) need_.resize(static_cast<size_t>(depth) + 1, 0);
  need_[static_cast<size_t>(depth)] = std::max(need_[static_cast<size_t>(depth)], bytes);
  uint64_t need = 0;
  for (size_t n : need_) need += n;
  if (need > prealloc_bytes_ && fr_active_)
    recorder_->NoteOverflow(call_.sequence, recorder_->ring().BytesAt(fr_slot_), need);
}

absl::StatusOr<std::unique_ptr<Communicator>> CommImpl::Split(int color, int key) {
  {
    // Behind queued non-blocking work, like a blocking collective (the caller's program order).
    std::unique_lock<std::mutex> lock(q_mu_);
    const bool on_progress = progress_.joinable() && std::this_thread::get_id() == progress_.get_id();
    if (!on_progress && in_flight_ > 0) {
      lock.unlock();
      std::unique_ptr<Communicator> sub;
      absl::Status s = Submit([this, color, key, &sub] {
                         absl::StatusOr<std::unique_ptr<Communicator>> r = Split(color, key);
                         if (r.ok()) sub = *std::move(r);
                         return r.status();
                       })->Wait();
      if (!s.ok()) return s;
      return sub;
    }
  }
  // Serialised with the calls of other threads (split_count_ is guarded by exec_mu_).
  std::lock_guard<std::mutex> exec_lock(exec_mu_);
  // Exchange (color, key) over the store, under a name unique to this split call.
  const int split_id = split_count_++;
  const std::string base = absl::StrCat("split", split_id);
  if (absl::Status s = store_->Set(absl::StrCat(base, "/", rank_), absl::StrCat(color, ",", key)); !s.ok()) return s;
  std::vector<std::tuple<int, int, int>> same;  // key, rank
  for (int r = 0; r < size_; ++r) {
    auto v = GetUntil(*store_, absl::StrCat(base, "/", r), absl::Now() + absl::Seconds(env_.connect_timeout_s),
                      AbortProbe(store_));
    if (!v.ok()) return v.status();
    int c = 0, k = 0;
    std::vector<std::string> parts = absl::StrSplit(*v, ',');
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &c) || !absl::SimpleAtoi(parts[1], &k)) {
      return absl::DataLossError("split: unreadable color/key");
    }
    if (c == color && color >= 0) same.emplace_back(k, r, c);
  }
  if (color < 0) return std::unique_ptr<Communicator>();
  std::sort(same.begin(), same.end());
  int new_rank = 0;
  for (size_t i = 0; i < same.size(); ++i) {
    if (std::get<1>(same[i]) == rank_) new_rank = static_cast<int>(i);
  }
  auto sub = CommImpl::Init(new_rank, static_cast<int>(same.size()), store_, env_, absl::StrCat(base, "c", color));
  if (!sub.ok()) return sub.status();
  return std::unique_ptr<Communicator>(*std::move(sub));
}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(int rank, int size, std::shared_ptr<Store> store,
                                                                   const Environment& env) {
  SetLogLevel(env.log_level);
  auto c = CommImpl::Init(rank, size, std::move(store), env, "world");
  if (!c.ok()) return c.status();
  return std::unique_ptr<Communicator>(*std::move(c));
}

namespace {
// Create over a store this rank may serve: when init fails, the server stays up kServerLinger longer, so the ranks
// still waiting read why (the announcement, or rank 0's list of missing ranks) rather than a lost connection.
absl::StatusOr<std::unique_ptr<Communicator>> CreateServed(int rank, int size, std::shared_ptr<ServedStore> store,
                                                           const Environment& env) {
  auto c = Communicator::Create(rank, size, store, env);
  if (!c.ok() && store->serving()) absl::SleepFor(kServerLinger);
  return c;
}

// Whether the rendezvous is the launcher's: no explicit setting (HCCL_TUNE_STORE, HCCL_TUNE_MASTER_ADDR/PORT,
// MASTER_ADDR/PORT) and a launcher that implies one.
bool UsesLauncherRendezvous(const Environment& env) {
  return env.store.empty() && env.master_addr.empty() && !env.master_port && env.launcher_master_addr.empty() &&
         !env.launcher_master_port && HasLauncherRendezvous(env);
}
}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::FromEnvironment(const Environment& env) {
  SetLogLevel(env.log_level);  // before the rendezvous, which logs where it is
  if (!env.rank_table_file.empty()) {
    // RANK_TABLE_FILE + RANK_ID: rank, world, node, device and rendezvous come from the table.
    Environment from_table = env;
    if (absl::Status s = ApplyRankTableFromEnvironment(&from_table); !s.ok()) return s;
    return FromEnvironment(from_table);
  }
  // A PMIx server alone gives the world size at its rendezvous (runtime/bootstrap/pmix_rendezvous.h).
  const bool pmix_alone = env.launcher == "pmix" && UsesLauncherRendezvous(env);
  if ((!env.rank || !env.world_size) && !pmix_alone) {
    return absl::InvalidArgumentError(
        "env:// bootstrap needs this rank and the world size: set RANK and WORLD_SIZE (torchrun), or run under "
        "mpirun (OMPI_COMM_WORLD_RANK/SIZE), srun (SLURM_PROCID/SLURM_NTASKS) or a PMIx server (PMIX_RANK)");
  }
  if (UsesLauncherRendezvous(env)) {
    auto launched = ConnectLauncherRendezvous(env);
    if (!launched.ok()) return launched.status();
    return CreateServed(*launched->env.rank, *launched->env.world_size, launched->store, launched->env);
  }
  const int rank = *env.rank, size = *env.world_size;
  const absl::Duration timeout = absl::Seconds(env.connect_timeout_s);
  auto auth = LoadJobAuth(env);
  if (!auth.ok()) return auth.status();
  std::shared_ptr<Store> store;
  if (env.store.rfind("tcp://", 0) == 0) {
    const std::string hp = env.store.substr(6);
    const size_t colon = hp.rfind(':');
    int port = 0;
    if (colon == std::string::npos || colon == 0 || !absl::SimpleAtoi(hp.substr(colon + 1), &port) || port < 1 ||
        port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("HCCL_TUNE_STORE='", env.store, "': expected tcp://HOST:PORT with a PORT from 1 to 65535"));
    }
    auto client = ConnectTcpStore(hp.substr(0, colon), port, timeout, *auth);
    if (!client.ok()) return client.status();
    store = *client;
  } else if (!env.store.empty()) {
    auto fs = NewFileStore(env.store.substr(std::string("file://").size()));
    if (!fs.ok()) return fs.status();
    store = *fs;
  } else {
    std::string host = env.master_addr;
    int port = env.master_port.value_or(0);
    if (host.empty()) host = env.launcher_master_addr;
    if (env.master_port && (port < 1 || port > 65535)) {
      return absl::InvalidArgumentError(
          absl::StrCat("HCCL_TUNE_MASTER_PORT=", port, " is invalid: expected an integer from 1 to 65535"));
    }
    if (!env.master_port && env.launcher_master_port) {
      if (*env.launcher_master_port < 1 || *env.launcher_master_port > 65534) {
        return absl::InvalidArgumentError(absl::StrCat(
            "MASTER_PORT=", *env.launcher_master_port,
            ": hccl-tune serves its rendezvous on MASTER_PORT+1, so MASTER_PORT must be from 1 to 65534 (or set "
            "HCCL_TUNE_MASTER_PORT)"));
      }
      port = *env.launcher_master_port + 1;
    }
    if (host.empty() || port == 0) {
      return absl::InvalidArgumentError(
          "env:// bootstrap needs a rendezvous: HCCL_TUNE_STORE=file:///shared/dir, or HCCL_TUNE_MASTER_ADDR and "
          "HCCL_TUNE_MASTER_PORT, or MASTER_ADDR and MASTER_PORT (hccl-tune then serves on MASTER_PORT+1), or a "
          "launcher that implies one: srun, mpirun (Open MPI), mpiexec (MPICH) (docs/LAUNCHING.md)");
    }
    std::unique_ptr<TcpStoreServer> served;
    if (rank == 0) {
      // Only the master address when it is one of this host's (StoreListenAddress says why not otherwise).
      auto server = TcpStoreServer::Start(StoreListenAddress(host), port, {}, *auth);
      if (!server.ok()) return server.status();
      served = *std::move(server);
    }
    auto client = ConnectTcpStore(host, port, timeout, *auth);
    if (!client.ok()) return client.status();
    return CreateServed(rank, size, std::make_shared<ServedStore>(std::move(served), *client), env);
  }
  return Create(rank, size, store, env);
}

}  // namespace hccltune
