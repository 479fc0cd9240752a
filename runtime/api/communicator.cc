// Communicator setup: rendezvous, validation, topology, shm and TCP domains, endpoints, split.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "hccltune/version.h"
#include "nlohmann/json.hpp"
#include "runtime/api/communicator_impl.h"
#include "runtime/bootstrap/rank_table.h"
#include "runtime/bootstrap/tcp_store.h"
#include "runtime/common/host.h"
#include "runtime/common/json_field.h"
#include "runtime/common/logging.h"
#include "runtime/topology/topology.h"
#include "runtime/transport/shm/cma_cost.h"

namespace hccltune {
namespace {

std::string Hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// Keys of one communicator instance live under its tag, so nothing an earlier job left in a reused store
// (a file:// directory, a long-lived tcp:// server, a second Create on one Store) is read as this job's.
std::string TagPrefix(uint64_t tag) { return absl::StrCat("job-", absl::Hex(tag)); }

nlohmann::json InfoToJson(const RankInfo& i, int size, uint64_t tag) {
  return {{"rank", i.rank},         {"size", size},
          {"protocol", i.protocol}, {"tag", absl::StrCat(absl::Hex(tag))},
          {"node", i.node},         {"host", i.host},
          {"pid", i.pid},           {"device", i.device},
          {"decisive", i.decisive}, {"tcp", TcpInfoToJson(i.tcp.port, i.tcp.interfaces, i.tcp.ifname_set)},
          {"shm", i.shm_segment},   {"cpus", i.cpus}};
}

absl::StatusOr<RankInfo> InfoFromJson(const std::string& text, int expected_rank, uint64_t tag,
                                      const std::string& where) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::DataLossError(absl::StrCat("bootstrap: rank ", expected_rank, " published unreadable info"));
  }
  const std::string expected_tag = absl::StrCat(absl::Hex(tag));
  if (JsonOr(j, "tag", "") != expected_tag || JsonOr(j, "rank", -1) != expected_rank) {
    return absl::FailedPreconditionError(absl::StrCat(
        "bootstrap: the info published for rank ", expected_rank, " belongs to another communicator (tag '",
        JsonOr(j, "tag", ""), "', rank ", JsonOr(j, "rank", -1), "; this one is tag ", expected_tag,
        "): stale rendezvous data in ", where, " from an earlier job; use a fresh directory or store for each job"));
  }
  RankInfo i;
  i.rank = JsonOr(j, "rank", -1);
  i.protocol = JsonOr(j, "protocol", 0u);
  i.node = JsonOr(j, "node", "");
  i.host = JsonOr(j, "host", "");
  i.pid = JsonOr(j, "pid", 0);
  i.device = JsonOr(j, "device", -1);
  i.decisive = JsonOr(j, "decisive", "");
  if (j.contains("tcp")) i.tcp = TcpInfoFromJson(j["tcp"]);
  i.shm_segment = JsonOr(j, "shm", "");
  i.cpus = JsonOr(j, "cpus", 0);
  return i;
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

// The first differing "VAR=value" between two decisive strings.
std::string FirstDifference(const std::string& a, const std::string& b) {
  std::vector<std::string> pa = absl::StrSplit(a, ';'), pb = absl::StrSplit(b, ';');
  for (size_t i = 0; i < std::min(pa.size(), pb.size()); ++i) {
    if (pa[i] != pb[i]) return absl::StrCat(pa[i], "' vs '", pb[i]);
  }
  return absl::StrCat(a, "' vs '", b);
}

// What a blocked wait asks: has another rank announced a failure ("abort", under the communicator's tag)?
std::function<absl::Status()> AbortProbe(std::shared_ptr<Store> store) {
  return [store = std::move(store)]() -> absl::Status {
    auto present = store->Check({"abort"});
    if (!present.ok() || !*present) return absl::OkStatus();
    auto why = store->Get("abort", absl::Seconds(1));
    return absl::AbortedError(why.ok() ? *why : "another rank aborted the communicator");
  };
}

// store.Get(key) until `deadline`, in slices: gives up at once with the announcement when another rank posted
// "abort" (a rank whose setup failed, Create; a rank whose call failed) instead of waiting out the deadline.
absl::StatusOr<std::string> GetUnlessAborted(const std::shared_ptr<Store>& store, const std::string& key,
                                             absl::Time deadline) {
  const auto aborted = AbortProbe(store);
  while (true) {
    const absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
    auto v = store->Get(key, std::min(left, absl::Milliseconds(200)));
    if (v.ok() || v.status().code() != absl::StatusCode::kDeadlineExceeded || left <= absl::Milliseconds(200)) {
      return v;
    }
    if (absl::Status a = aborted(); !a.ok()) return a;
  }
}

// A rank other than 0: the tag rank 0 published, claimed for this rank (store key joined/<rank> under the
// tag). A tag whose rank was already claimed is an earlier job's (the store was reused; or two processes
// were given this rank): wait for rank 0 of this job to publish a new one.
absl::StatusOr<uint64_t> JoinTag(const std::shared_ptr<Store>& named, int rank, absl::Time deadline, int timeout_s,
                                 std::optional<uint64_t> stale) {
  Store& store = *named;
  absl::Status announced;  // the failure announced under a tag this rank skipped
  while (true) {
    auto t = store.Get("tag", std::max(deadline - absl::Now(), absl::ZeroDuration()));
    if (!t.ok() && t.status().code() != absl::StatusCode::kDeadlineExceeded) return t.status();
    if (!t.ok() && !stale) {
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", rank, ": rank 0 never arrived at the rendezvous (", t.status().message(), ")"));
    }
    uint64_t tag = 0;
    if (t.ok() && !absl::SimpleAtoi(*t, &tag)) return absl::DataLossError("bootstrap: bad communicator tag");
    if (!t.ok() || (stale && tag == *stale)) {
      if (absl::Now() >= deadline && !announced.ok()) return announced;
      if (absl::Now() >= deadline) {
        return absl::FailedPreconditionError(absl::StrCat(
            "rank ", rank, ": stale rendezvous data in ", store.Describe(),
            " from an earlier job: its communicator (tag ", absl::Hex(*stale), ") already has a rank ", rank,
            ", and rank 0 published no new one within ", timeout_s,
            " s (HCCL_CONNECT_TIMEOUT); use a fresh directory or store for each job (or: two processes were given "
            "rank ",
            rank, ", or the ranks disagree on the world size)"));
      }
      absl::SleepFor(absl::Milliseconds(20));
      continue;
    }
    const std::shared_ptr<Store> under_tag = NewPrefixStore(named, TagPrefix(tag));
    auto claimed = under_tag->Add(absl::StrCat("joined/", rank), 1);
    if (!claimed.ok()) return claimed.status();
    // A tag whose setup a rank already announced as failed (Init) is over: an earlier job's left in a reused
    // store, or this job's, whose rank 0 may publish a new one when restarted. Wait for a new tag; at the
    // deadline, report the announcement.
    if (absl::Status a = AbortProbe(under_tag)(); *claimed == 1 && !a.ok()) {
      announced = a;
      stale = tag;
      continue;
    }
    if (*claimed == 1) return tag;
    if (!stale) {
      Log(LogLevel::kInfo, "rank ", rank, ": the tag in ", store.Describe(), " (", absl::Hex(tag),
          ") already has a rank ", rank, " (an earlier job's); waiting for rank 0 to publish this job's");
    }
    stale = tag;
  }
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
  const absl::Duration connect_timeout = absl::Seconds(env_.connect_timeout_s);
  const absl::Time deadline = absl::Now() + connect_timeout;
  // A tag unique to this communicator instance: names shm segments and authenticates TCP hellos; every other
  // key of this instance lives under it.
  const std::shared_ptr<Store> named = store_;
  std::optional<uint64_t> stale;  // a tag found to be an earlier job's
  std::vector<int> sizes;         // the world size each rank was started with
  // Whether the tag rank 0 published is no longer the one this rank joined.
  auto tag_replaced = [&] {
    if (rank_ == 0) return false;
    auto now = named->Get("tag", absl::Seconds(1));
    return now.ok() && *now != absl::StrCat(tag_);
  };
  while (true) {
    if (rank_ == 0) {
      std::random_device rd;
      tag_ = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(::getpid());
      if (absl::Status s = named->Set("tag", absl::StrCat(tag_)); !s.ok()) return s;
    } else {
      auto tag = JoinTag(named, rank_, deadline, env_.connect_timeout_s, stale);
      if (!tag.ok()) return tag.status();
      tag_ = *tag;
    }
    store_ = NewPrefixStore(named, TagPrefix(tag_));
    tagged_ = true;

    auto tcp = TcpDomain::Create(rank_, tag_, env_.socket_ifname, connect_timeout);
    if (!tcp.ok()) return tcp.status();
    tcp_ = *std::move(tcp);
    tcp_->SetAbortProbe([this] { return CallProbe(); });  // connects happen inside calls too

    RankInfo me;
    me.rank = rank_;
    me.protocol = kWireProtocolVersion;
    me.node = LocalNodeId(env_);
    me.host = Hostname();
    me.pid = static_cast<int>(::getpid());
    me.device = env_.device ? *env_.device : (env_.local_rank ? *env_.local_rank : -1);
    me.decisive = Decisive(env_);
    me.tcp.port = tcp_->port();
    me.tcp.interfaces = tcp_->interfaces();
    me.tcp.ifname_set = tcp_->ifname_set();
    me.cpus = HostCpus();
    if (absl::Status s = store_->Set(absl::StrCat("info/", rank_), InfoToJson(me, size_, tag_).dump()); !s.ok())
      return s;

    std::vector<std::string> keys;
    for (int r = 0; r < size_; ++r) keys.push_back(absl::StrCat("info/", r));
    bool replaced = false;
    while (true) {
      // In slices, so that a rank that joined an earlier job's tag sees rank 0 of this job replace it.
      const absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
      absl::Status s = store_->Wait(keys, std::min(left, absl::Milliseconds(200)));
      if (s.ok()) break;
      // Only a deadline means ranks are missing; a store that failed (a lost connection) says so itself.
      if (s.code() != absl::StatusCode::kDeadlineExceeded) return s;
      if ((replaced = tag_replaced())) break;
      // A rank that failed its own setup says so (Create); no need to wait for the deadline.
      if (absl::Status a = AbortProbe(store_)(); !a.ok()) return a;
      if (absl::Now() < deadline) continue;
      std::vector<std::string> missing;
      for (int r = 0; r < size_; ++r) {
        auto ok = store_->Check({absl::StrCat("info/", r)});
        if (ok.ok() && !*ok) missing.push_back(absl::StrCat(r));
      }
      return absl::DeadlineExceededError(absl::StrCat("rank ", rank_, ": ranks ", absl::StrJoin(missing, ", "),
                                                      " never joined the communicator of ", size_, " ranks within ",
                                                      env_.connect_timeout_s, " s (HCCL_CONNECT_TIMEOUT)"));
    }
    if (!replaced) {
      infos_.assign(static_cast<size_t>(size_), RankInfo{});
      sizes.assign(static_cast<size_t>(size_), 0);
      for (int r = 0; r < size_; ++r) {
        auto text = store_->Get(absl::StrCat("info/", r), connect_timeout);
        if (!text.ok()) return text.status();
        auto info = InfoFromJson(*text, r, tag_, store_->Describe());
        if (!info.ok()) return info.status();
        infos_[static_cast<size_t>(r)] = *std::move(info);
        auto j = nlohmann::json::parse(*text, nullptr, false);
        sizes[static_cast<size_t>(r)] = JsonOr(j, "size", 0);
      }
      // Rank 0's info for another world size: the tag is an earlier job's (or the ranks disagree on the size,
      // which JoinTag's deadline reports).
      replaced = rank_ != 0 && (sizes[0] != size_ || tag_replaced());
    }
    if (!replaced) break;
    Log(LogLevel::kInfo, "rank ", rank_, ": communicator tag ", absl::Hex(tag_), " in ", store_->Describe(),
        " is an earlier job's; joining the one rank 0 publishes");
    stale = tag_;
  }
  for (int r = 0; r < size_; ++r) {
    if (sizes[static_cast<size_t>(r)] != size_) {
      return absl::FailedPreconditionError(absl::StrCat("rank ", r, " was started with a world size of ",
                                                        sizes[static_cast<size_t>(r)], ", rank ", rank_, " with ",
                                                        size_, ": every rank needs the same WORLD_SIZE"));
    }
  }

  // Checks every rank makes: same protocol, same decisive settings, no shared device on a node.
  for (const RankInfo& i : infos_) {
    if (i.protocol != kWireProtocolVersion) {
      return absl::FailedPreconditionError(absl::StrCat("rank ", i.rank, " runs wire protocol version ", i.protocol,
                                                        ", rank ", rank_, " runs version ", kWireProtocolVersion,
                                                        ": every rank must run the same hccl-tune release"));
    }
    if (i.decisive != infos_[0].decisive) {
      return absl::FailedPreconditionError(absl::StrCat(
          "ranks disagree on a setting that decides configurations: rank 0 has '",
          FirstDifference(infos_[0].decisive, i.decisive), "' on rank ", i.rank, "; set the same value on every rank"));
    }
  }
  for (size_t a = 0; a < infos_.size(); ++a) {
    for (size_t b = a + 1; b < infos_.size(); ++b) {
      if (infos_[a].node == infos_[b].node && infos_[a].device >= 0 && infos_[a].device == infos_[b].device) {
        return absl::FailedPreconditionError(
            absl::StrCat("ranks ", a, " and ", b, " both claim device ", infos_[a].device, " on node ", infos_[a].host,
                         " (HCCL_TUNE_DEVICE / LOCAL_RANK): each rank needs its own device"));
      }
    }
  }

  // Topology: dense node indices in order of first appearance.
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
  std::map<int, TcpPeerInfo> peers;
  for (const RankInfo& i : infos_) {
    TcpPeerInfo p = i.tcp;
    p.same_node = topo_.node_of[static_cast<size_t>(i.rank)] == my_node;
    peers[i.rank] = p;
  }
  tcp_->SetPeers(std::move(peers));

  TopologyFacts facts;
  facts.ranks_per_node.assign(nodes.size(), 0);
  for (int n : topo_.node_of) facts.ranks_per_node[static_cast<size_t>(n)]++;
  if (*std::max_element(facts.ranks_per_node.begin(), facts.ranks_per_node.end()) > 1) facts.intra_links = {"shm"};
  if (nodes.size() > 1) {
    std::vector<std::vector<NodeAddress>> per_node(nodes.size());
    for (const RankInfo& i : infos_) {
      auto& mine = per_node[static_cast<size_t>(topo_.node_of[static_cast<size_t>(i.rank)])];
      for (const auto& itf : i.tcp.interfaces) {
        if (itf.name != "lo") mine.push_back(NodeAddress{itf.Subnet(), itf.address});
      }
    }
    facts.inter_networks = InterNodeNetworks(per_node);
  }
  facts.release = HCCL_TUNE_RELEASE;
  topology_json_ = TopologyJson(facts);
  fingerprint_ = Fingerprint(topology_json_);

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

  // Shared memory among the ranks of this node.
  prealloc_bytes_ = env_.buffsize_bytes;
  if (local_ranks_.size() > 1) {
    // HCCL_BUFFSIZE is shared by the inbound rings (common/host.h: at most 4 MiB each, 1 MiB when this
    // communicator's ranks on the node take turns on its CPUs). Every local rank must map the same layout, so the
    // CPU count is the fewest any of them sees (containers of one pod may be shown different counts).
    int cpus = HostCpus();
    for (int r : local_ranks_) {
      const int theirs = infos_[static_cast<size_t>(r)].cpus;
      if (theirs > 0) cpus = std::min(cpus, theirs);
    }
    const size_t ring = ShmRingBytes(env_.buffsize_bytes, static_cast<int>(local_ranks_.size()), cpus);
    ShmOptions shm_options;
    shm_options.single_copy = env_.single_copy;
    if (env_.single_copy_min_bytes > 0) {
      shm_options.single_copy_min_bytes = static_cast<size_t>(std::min<uint64_t>(env_.single_copy_min_bytes, SIZE_MAX));
      Log(LogLevel::kInfo, "rank ", rank_, ": single copy from ", shm_options.single_copy_min_bytes,
          "-byte messages (HCCL_TUNE_SINGLE_COPY)");
    } else if (env_.single_copy) {
      // Measured: what a process_vm_readv costs here against a memcpy decides from which message size single copy
      // pays (transport/shm/cma_cost.h). Ranks taking turns on the CPUs (oversubscribed) start higher: a reader's
      // process_vm_readv pins the sender's pages while the other readers do the same (one page-table lock), and
      // nothing runs alongside it (4 ranks on 2 cores, Intel VM: 8 KiB broadcast 4.8 us through the ring against
      // 6.0 single-copied).
      const double ratio = SingleCopyCostRatio();
      shm_options.single_copy_min_bytes =
          SingleCopyMinBytes(ratio, Oversubscribed(static_cast<int>(local_ranks_.size())));
      Log(LogLevel::kInfo, "rank ", rank_, ": single copy from ", shm_options.single_copy_min_bytes,
          "-byte messages (a 64 KiB process_vm_readv costs ",
          ratio > 0 ? absl::StrFormat("%.1f memcpys here", ratio) : std::string("unmeasured: refused"),
          "; HCCL_TUNE_SINGLE_COPY=<size> sets it)");
    }
    auto shm = ShmDomain::Create(rank_, local_ranks_, ring, absl::StrCat("hccltune-", ::getpid(), "-", absl::Hex(tag_)),
                                 shm_options);
    if (!shm.ok()) return shm.status();
    shm_ = *std::move(shm);
    if (absl::Status s = store_->Set(absl::StrCat("shm/", rank_), shm_->segment_name()); !s.ok()) return s;
    std::map<int, std::string> names;
    for (int r : local_ranks_) {
      if (r == rank_) continue;
      auto n = GetUnlessAborted(store_, absl::StrCat("shm/", r), absl::Now() + connect_timeout);
      if (!n.ok()) return n.status();
      names[r] = *n;
    }
    if (absl::Status s = shm_->MapPeers(names); !s.ok()) return s;
    for (const auto& [r, unused] : names) {
      if (absl::Status cma = shm_->SingleCopyStatus(r); !cma.ok()) {
        Log(LogLevel::kInfo, "rank ", rank_, ": large messages from rank ", r,
            " stream through the shm ring (no single copy): ", cma.message());
      }
    }
    // Every local peer has mapped our segment once all have counted in: unlink so nothing leaks on SIGKILL.
    const std::string counter = absl::StrCat("shm_mapped/", my_node);
    auto n = store_->Add(counter, 1);
    if (!n.ok()) return n.status();
    const absl::Time map_deadline = absl::Now() + connect_timeout;
    for (int polls = 0;;) {
      auto v = store_->Add(counter, 0);
      if (!v.ok()) return v.status();
      if (*v >= static_cast<int64_t>(local_ranks_.size())) break;
      if (++polls % 64 == 0) {  // about every 13 ms: a rank that failed its setup says so (Create)
        if (absl::Status a = AbortProbe(store_)(); !a.ok()) return a;
      }
      if (absl::Now() > map_deadline) {
        return absl::DeadlineExceededError(absl::StrCat("rank ", rank_, ": local ranks did not all map shared memory"));
      }
      absl::SleepFor(absl::Microseconds(200));
    }
    shm_->Unlink();
  }
  if (absl::Status s = SetupTuning(); !s.ok()) return s;
  Log(LogLevel::kInfo, "rank ", rank_, "/", size_, " communicator '", name_, "' ready: ", topo_.num_nodes, " node(s), ",
      local_ranks_.size(), " local, topology ", fingerprint_, " ", topology_json_);
  return absl::OkStatus();
}

absl::Status CommImpl::SetupTuning() {
  if (env_.sample_rate > 0) {
    sample_every_ = static_cast<uint64_t>(std::max(1.0, std::round(1.0 / env_.sample_rate)));
    sample_countdown_ = sample_every_;
  }
  tuning_enabled_ = TuningEnabled(env_);
  if (!tuning_enabled_) return absl::OkStatus();
  TuningContext ctx{env_, fingerprint_, topology_json_, size_, rank_, rank_ == 0};
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
  last_endpoint_ = {};
  endpoints_.clear();
}

absl::Status CommImpl::CallProbe() const {
  if (absl::Status a = AbortProbe(store_)(); !a.ok()) return a;
  // While TCP links connect (inside a call), a rank of this node that is gone (killed before it announced
  // anything) is named now: no link to it exists yet to report its loss, and the wait would last
  // HCCL_CONNECT_TIMEOUT. Only then: a rank that finished its part of a call may exit while others still work.
  const size_t me = static_cast<size_t>(rank_);
  for (int r : connecting_) {
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

absl::StatusOr<StreamEndpoint*> CommImpl::EndpointFor(const LinkSpec& link, int channels,
                                                      const std::vector<int>& members) {
  if (link.kind == LinkKind::kRoce) {
    return absl::UnimplementedError("link=roce: the ibverbs transport is not available in this build");
  }
  const int lanes = link.kind == LinkKind::kShm ? 1 : channels;
  const bool whole = static_cast<int>(members.size()) == size_;
  if (whole && last_endpoint_.ep != nullptr && last_endpoint_.lanes == lanes && last_endpoint_.link == link) {
    last_endpoint_.ep->SetCall(call_);
    last_endpoint_.ep->SetStreamRegion(stream_);
    return last_endpoint_.ep;
  }
  const std::string key = absl::StrCat(FormatLink(link), "#", lanes);
  auto it = endpoints_.find(key);
  if (it == endpoints_.end()) {
    std::vector<Pair*> none(static_cast<size_t>(size_), nullptr);
    Doorbell* bell = shm_ ? shm_->doorbell() : nullptr;
    it =
        endpoints_.emplace(key, std::make_unique<StreamEndpoint>(rank_, none, bell, absl::Seconds(env_.exec_timeout_s)))
            .first;
    // A rank that fails or refuses a call announces it in the store; blocked peers pick it up instead of
    // waiting for the exec timeout (CallProbe).
    it->second->SetAbortProbe([this] { return CallProbe(); });
  }
  StreamEndpoint* ep = it->second.get();
  const int my_node = topo_.node_of[static_cast<size_t>(rank_)];
  std::vector<int> need_tcp;
  for (int r : members) {
    if (r == rank_ || ep->HasPair(r)) continue;
    const bool local = topo_.node_of[static_cast<size_t>(r)] == my_node;
    if (link.kind == LinkKind::kShm || (link.kind == LinkKind::kAuto && local)) {
      if (!local) {
        return absl::FailedPreconditionError(
            absl::StrCat("link=shm: rank ", r, " is on another node than rank ", rank_, "; use tcp or auto"));
      }
      ep->AttachPair(r, shm_->pair(r));
    } else {
      need_tcp.push_back(r);
    }
  }
  if (!need_tcp.empty()) {
    // Every member connects the same set so both ends of each pair take part.
    std::vector<int> group;
    for (int r : members) {
      const bool local = topo_.node_of[static_cast<size_t>(r)] == my_node;
      if (link.kind == LinkKind::kTcp || !local || r == rank_) group.push_back(r);
    }
    connecting_ = group;
    tcp_->SetCallLimit(call_.sequence > 0 || call_.collective == Collective::kSendRecv
                           ? absl::Seconds(env_.exec_timeout_s)
                           : absl::InfiniteDuration());
    auto pairs = tcp_->Connect(group, link.network, lanes);
    tcp_->SetCallLimit(absl::InfiniteDuration());
    connecting_.clear();
    if (!pairs.ok()) return pairs.status();
    for (int r : need_tcp) ep->AttachPair(r, (*pairs)[static_cast<size_t>(r)]);
  }
  // The whole communicator on this node over shm: small collectives exchange their blocks through the
  // mailbox (one_shot), every endpoint over these ranks taking its numbers from the one mailbox.
  if (whole && shm_ && local_ranks_.size() == static_cast<size_t>(size_) && link.kind != LinkKind::kTcp) {
    ep->SetMailbox(shm_->mailbox());
  }
  if (whole) last_endpoint_ = {link, lanes, ep};
  ep->SetCall(call_);
  ep->SetStreamRegion(stream_);
  return ep;
}

void* CommImpl::Scratch(int depth, size_t bytes) {
  if (scratch_.size() <= static_cast<size_t>(depth)) scratch_.resize(static_cast<size_t>(depth) + 1);
  auto& buf = scratch_[static_cast<size_t>(depth)];
  if (buf.size() < bytes) {
    size_t total = 0;
    for (const auto& b : scratch_) total += b.size();
    if (total + bytes - buf.size() > prealloc_bytes_) fallback_allocs_.fetch_add(1);
    buf.resize(bytes);
  }
  return buf.data();
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
    auto v = GetUnlessAborted(store_, absl::StrCat(base, "/", r), absl::Now() + absl::Seconds(env_.connect_timeout_s));
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
// Keeps rank 0's store server alive as long as the communicators that use it.
struct ServedStore final : Store {
  std::unique_ptr<TcpStoreServer> server;
  std::shared_ptr<Store> client;
  absl::Status Set(const std::string& k, const std::string& v) override { return client->Set(k, v); }
  absl::StatusOr<std::string> Get(const std::string& k, absl::Duration t) override { return client->Get(k, t); }
  absl::StatusOr<int64_t> Add(const std::string& k, int64_t d) override { return client->Add(k, d); }
  absl::StatusOr<bool> Check(const std::vector<std::string>& k) override { return client->Check(k); }
  std::string Describe() const override { return client->Describe(); }
};
}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::FromEnvironment(const Environment& env) {
  if (!env.rank_table_file.empty()) {
    // RANK_TABLE_FILE + RANK_ID: rank, world, node, device and rendezvous come from the table.
    Environment from_table = env;
    if (absl::Status s = ApplyRankTableFromEnvironment(&from_table); !s.ok()) return s;
    return FromEnvironment(from_table);
  }
  if (!env.rank || !env.world_size) {
    return absl::InvalidArgumentError(
        "env:// bootstrap needs this rank and the world size: set RANK and WORLD_SIZE (torchrun), or run under "
        "mpirun (OMPI_COMM_WORLD_RANK/SIZE) or srun (SLURM_PROCID/SLURM_NTASKS)");
  }
  const int rank = *env.rank, size = *env.world_size;
  const absl::Duration timeout = absl::Seconds(env.connect_timeout_s);
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
    auto client = ConnectTcpStore(hp.substr(0, colon), port, timeout);
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
          "HCCL_TUNE_MASTER_PORT, or MASTER_ADDR and MASTER_PORT (hccl-tune then serves on MASTER_PORT+1)");
    }
    auto served = std::make_shared<ServedStore>();
    if (rank == 0) {
      auto server = TcpStoreServer::Start(host, port);
      if (!server.ok()) {
        // The address may name another interface of this host; listen on all of them.
        server = TcpStoreServer::Start("0.0.0.0", port);
        if (!server.ok()) return server.status();
      }
      served->server = *std::move(server);
    }
    auto client = ConnectTcpStore(host, port, timeout);
    if (!client.ok()) return client.status();
    served->client = *client;
    store = served;
  }
  return Create(rank, size, store, env);
}

}  // namespace hccltune
