#include "links/link_inspector.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "runtime/common/json_field.h"
#include "runtime/net/interfaces.h"
#include "runtime/topology/topology.h"

namespace hccltune {
namespace {

double NowUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Every rank's JSON, gathered to every rank: the texts' lengths first, then the texts padded to the longest.
absl::StatusOr<std::vector<nlohmann::json>> AllgatherJson(Communicator& comm, const nlohmann::json& mine) {
  const std::string text = mine.dump();
  const size_t n = static_cast<size_t>(comm.size());
  const int64_t len = static_cast<int64_t>(text.size());
  std::vector<int64_t> lens(n);
  if (absl::Status s = comm.Allgather(&len, lens.data(), 1, DataType::kInt64); !s.ok()) return s;
  const size_t blob = static_cast<size_t>(*std::max_element(lens.begin(), lens.end()));
  std::vector<char> send(blob, 0), recv(blob * n, 0);
  std::memcpy(send.data(), text.data(), text.size());
  if (absl::Status s = comm.Allgather(send.data(), recv.data(), blob, DataType::kUint8); !s.ok()) return s;
  std::vector<nlohmann::json> out;
  for (size_t r = 0; r < n; ++r) {
    out.push_back(
        nlohmann::json::parse(std::string(recv.data() + blob * r, static_cast<size_t>(lens[r])), nullptr, false));
  }
  return out;
}

struct RankFacts {
  std::string node, ifname;
  std::vector<InterfaceAddress> ifs;  // loopback excluded
};

// The transport's address choice for a peer on another node (tcp_transport.h): HCCL_SOCKET_IFNAME, else the
// peer's first address in a subnet of one of ours.
const InterfaceAddress* DefaultPeerAddress(const RankFacts& me, const RankFacts& peer) {
  for (const auto& p : peer.ifs) {
    if (!me.ifname.empty()) {
      if (p.name == me.ifname) return &p;
      continue;
    }
    for (const auto& m : me.ifs) {
      if (InSubnet(p.address, m.Subnet())) return &p;
    }
  }
  return nullptr;
}

// Latency and bandwidth between ranks 0 and 1 of a two-rank communicator over `link` (a link= value).
absl::Status MeasurePair(Communicator& pair, const std::string& link, const LinkInspectorOptions& opt, LinkInfo* out) {
  const std::string cfg = absl::StrCat("chain(link=", link, ")");
  CallOptions co;
  co.config = cfg;
  std::vector<uint8_t> small(8), big(opt.bytes);
  std::vector<double> rtts, sends;
  for (int it = 0; it < opt.latency_iters + 3; ++it) {
    if (absl::Status s = pair.Barrier(); !s.ok()) return s;
    const double t0 = NowUs();
    for (int root : {0, 1}) {
      if (absl::Status s = pair.Broadcast(small.data(), small.data(), small.size(), DataType::kUint8, root, co);
          !s.ok()) {
        return s;
      }
    }
    if (it >= 3) rtts.push_back(NowUs() - t0);
  }
  for (int it = 0; it < opt.iters + 1; ++it) {
    if (absl::Status s = pair.Barrier(); !s.ok()) return s;
    const double t0 = NowUs();
    if (absl::Status s = pair.Broadcast(big.data(), big.data(), big.size(), DataType::kUint8, 0, co); !s.ok()) return s;
    if (absl::Status s = pair.Broadcast(small.data(), small.data(), small.size(), DataType::kUint8, 1, co); !s.ok()) {
      return s;
    }
    if (it >= 1) sends.push_back(NowUs() - t0);
  }
  const double rtt = Median(rtts);
  out->latency_us = rtt / 2;
  const double t = std::max(1.0, Median(sends) - rtt / 2);  // minus the acknowledgement's latency
  out->bandwidth_gbps = static_cast<double>(opt.bytes) * 8 / (t * 1e3);
  return absl::OkStatus();
}

// Every rank's node and interfaces (loopback excluded), gathered over `comm`.
absl::StatusOr<std::vector<RankFacts>> GatherFacts(Communicator& comm, const Environment& env) {
  nlohmann::json mine = {{"node", LocalNodeId(env)}, {"ifname", env.socket_ifname}, {"ifs", nlohmann::json::array()}};
  for (const auto& i : ListInterfaces()) {
    if (i.name != "lo") mine["ifs"].push_back({{"name", i.name}, {"address", i.address}, {"prefix", i.prefix}});
  }
  auto all = AllgatherJson(comm, mine);
  if (!all.ok()) return all.status();
  std::vector<RankFacts> facts;
  for (const auto& j : *all) {
    if (j.is_discarded() || !j.contains("ifs") || !j["ifs"].is_array()) {
      return absl::DataLossError("link inspector: unreadable rank facts");
    }
    RankFacts f{JsonOr(j, "node", ""), JsonOr(j, "ifname", ""), {}};
    for (const auto& i : j["ifs"])
      f.ifs.push_back({JsonOr(i, "name", ""), JsonOr(i, "address", ""), JsonOr(i, "prefix", 32)});
    facts.push_back(std::move(f));
  }
  return facts;
}

// The links to measure between ranks a < b: shm on one node; between nodes tcp over every network both have an
// interface in.
std::vector<LinkInfo> Candidates(int a, int b, const RankFacts& fa, const RankFacts& fb) {
  std::vector<LinkInfo> out;
  LinkInfo l;
  l.src = a, l.dst = b, l.source = "measured";
  if (fa.node == fb.node) {
    l.type = "shm", l.is_default = true;
    out.push_back(l);
    return out;
  }
  const InterfaceAddress* def = DefaultPeerAddress(fa, fb);
  for (const auto& ia : fa.ifs) {
    for (const auto& ib : fb.ifs) {
      // One address on both nodes is a host-local network (docker0): it reaches this machine, not b.
      if (ia.Subnet() != ib.Subnet() || ia.address == ib.address) continue;
      l.type = "tcp", l.network = ia.Subnet();
      l.src_interface = ia.name, l.dst_interface = ib.name, l.src_address = ia.address, l.dst_address = ib.address;
      l.is_default = def != nullptr && def->address == ib.address;
      out.push_back(l);
    }
  }
  return out;
}

// Measures every pair over two-rank sub-communicators of `comm`; returns the links where this rank is src.
// (Splits of `comm` itself, not of a split: a file store's key, hence its file name, grows with each level.)
absl::StatusOr<std::vector<LinkInfo>> MeasurePairs(Communicator& comm, const std::vector<RankFacts>& facts,
                                                   const LinkInspectorOptions& opt) {
  const int me = comm.rank();
  std::vector<LinkInfo> measured;
  for (int a = 0; a < comm.size(); ++a) {
    for (int b = a + 1; b < comm.size(); ++b) {
      const bool in_pair = me == a || me == b;
      auto sub = comm.Split(in_pair ? 0 : -1, me);
      if (!sub.ok()) return sub.status();
      if (!in_pair) continue;
      for (LinkInfo& l : Candidates(a, b, facts[static_cast<size_t>(a)], facts[static_cast<size_t>(b)])) {
        const std::string link = l.type == "shm" ? "shm" : absl::StrCat("tcp@", l.network);
        if (absl::Status s = MeasurePair(**sub, link, opt, &l); !s.ok()) {
          return absl::Status(s.code(),
                              absl::StrCat("link inspector: ranks ", a, "-", b, " over ", link, ": ", s.message()));
        }
        l.measured_unix_ms = NowUnixMs();
        if (me == a) measured.push_back(l);
      }
    }
  }
  return measured;
}

// This host's interface that holds `address`, or null.
std::optional<InterfaceAddress> InterfaceOf(const std::vector<InterfaceAddress>& ifs, const std::string& address) {
  for (const auto& i : ifs) {
    if (i.address == address) return i;
  }
  return std::nullopt;
}

}  // namespace

nlohmann::json LinkInfo::ToJson() const {
  return {{"src", src},
          {"dst", dst},
          {"type", type},
          {"network", network},
          {"interface", src_interface},
          {"peer_interface", dst_interface},
          {"address", src_address},
          {"peer_address", dst_address},
          {"default", is_default},
          {"bandwidth_gbps", bandwidth_gbps},
          {"latency_us", latency_us},
          {"source", source},
          {"measured_unix_ms", measured_unix_ms}};
}

absl::StatusOr<LinkInfo> LinkInfo::FromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("link inspector: a link is not a JSON object");
  for (const char* k : {"src", "dst", "bandwidth_gbps", "latency_us", "measured_unix_ms"}) {
    if (!j.contains(k) || !j[k].is_number()) {
      return absl::InvalidArgumentError(absl::StrCat("link inspector: a link without a number '", k, "'"));
    }
  }
  for (const char* k : {"type", "network", "interface", "peer_interface", "address", "peer_address", "source"}) {
    if (!j.contains(k) || !j[k].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("link inspector: a link without a string '", k, "'"));
    }
  }
  if (!j.contains("default") || !j["default"].is_boolean()) {
    return absl::InvalidArgumentError("link inspector: a link without a boolean 'default'");
  }
  return LinkInfo{j["src"],
                  j["dst"],
                  j["type"],
                  j["network"],
                  j["interface"],
                  j["peer_interface"],
                  j["address"],
                  j["peer_address"],
                  j["default"],
                  j["bandwidth_gbps"],
                  j["latency_us"],
                  j["source"],
                  j["measured_unix_ms"]};
}

nlohmann::json UsedLink::ToJson() const {
  return {{"src", src},
          {"dst", dst},
          {"type", type},
          {"network", network},
          {"interface", interface},
          {"address", address},
          {"peer_address", peer_address},
          {"lanes", lanes},
          {"operation", operation}};
}

absl::StatusOr<LinkInspector> LinkInspector::Measure(Communicator& comm, const Environment& env,
                                                     const LinkInspectorOptions& opt) {
  if (opt.bytes == 0 || opt.iters < 1 || opt.latency_iters < 1) {
    return absl::InvalidArgumentError(absl::StrCat("link inspector: bytes must be > 0 and iterations >= 1 (got bytes ",
                                                   opt.bytes, ", iters ", opt.iters, ", latency iters ",
                                                   opt.latency_iters, ")"));
  }
  // Every message of the inspector goes over communicators of its own (splits of comm, which use only the store):
  // comm's links in use stay the program's.
  auto whole = comm.Split(0, comm.rank());
  if (!whole.ok()) return whole.status();
  auto facts = GatherFacts(**whole, env);
  if (!facts.ok()) return facts.status();
  auto measured = MeasurePairs(comm, *facts, opt);
  if (!measured.ok()) return measured.status();
  nlohmann::json mj = nlohmann::json::array();
  for (const auto& l : *measured) mj.push_back(l.ToJson());
  auto results = AllgatherJson(**whole, mj);
  if (!results.ok()) return results.status();
  nlohmann::json table = {{"ranks", comm.size()}, {"links", nlohmann::json::array()}};
  for (const auto& r : *results) {
    if (!r.is_array()) return absl::DataLossError("link inspector: unreadable results of a rank");
    for (const auto& j : r) table["links"].push_back(j);
  }
  return FromJson(table);
}

absl::StatusOr<LinkInspector> LinkInspector::FromJson(const nlohmann::json& j) {
  const int ranks = JsonOr(j, "ranks", 0);
  if (ranks < 1 || !j.contains("links") || !j["links"].is_array()) {
    return absl::DataLossError("link inspector: a table needs 'ranks' >= 1 and a 'links' array");
  }
  LinkInspector li;
  li.ranks_ = ranks;
  for (const auto& lj : j["links"]) {
    auto l = LinkInfo::FromJson(lj);
    if (!l.ok()) return absl::DataLossError(l.status().message());
    if (l->src < 0 || l->dst >= ranks || l->src >= l->dst) {
      return absl::DataLossError(absl::StrCat("link inspector: a link between ranks ", l->src, " and ", l->dst,
                                              " in a table of ", ranks, " ranks"));
    }
    li.links_.push_back(*std::move(l));
  }
  std::sort(li.links_.begin(), li.links_.end(), [](const LinkInfo& x, const LinkInfo& y) {
    return std::tie(x.src, x.dst, x.network) < std::tie(y.src, y.dst, y.network);
  });
  return li;
}

absl::StatusOr<LinkInspector> LinkInspector::FromStored(const nlohmann::json& j, int ranks) {
  auto li = FromJson(j);
  if (!li.ok()) return li.status();
  if (li->ranks_ != ranks) {
    return absl::FailedPreconditionError(
        absl::StrCat("link inspector: the stored table is of ", li->ranks_, " ranks, this group has ", ranks));
  }
  for (LinkInfo& l : li->links_) l.source = "stored";
  return li;
}

int64_t LinkInspector::measured_unix_ms() const {
  int64_t t = 0;
  for (const LinkInfo& l : links_) t = std::max(t, l.measured_unix_ms);
  return t;
}

absl::Status LinkInspector::CheckPair(int src, int dst) const {
  for (int r : {src, dst}) {
    if (r < 0 || r >= ranks_) {
      return absl::InvalidArgumentError(
          absl::StrCat("link inspector: rank ", r, " is not in this group of ", ranks_, " ranks"));
    }
  }
  if (src == dst) return absl::InvalidArgumentError(absl::StrCat("link inspector: ", src, " to itself is no pair"));
  return absl::OkStatus();
}

absl::StatusOr<LinkInfo> LinkInspector::get_link(int src, int dst) const {
  if (absl::Status s = CheckPair(src, dst); !s.ok()) return s;
  const int a = std::min(src, dst), b = std::max(src, dst);
  for (const LinkInfo& l : links_) {
    if (l.src == a && l.dst == b && l.is_default) return l;
  }
  return absl::NotFoundError(
      absl::StrCat("link inspector: no measured default link between ranks ", src, " and ", dst));
}

absl::StatusOr<LinkInfo> LinkInspector::best_link(int src, int dst) const {
  auto best = get_link(src, dst);
  if (!best.ok()) return best.status();
  for (const LinkInfo& l : links_) {
    if (l.src == best->src && l.dst == best->dst && l.bandwidth_gbps > best->bandwidth_gbps) best = l;
  }
  return best;
}

nlohmann::json LinkInspector::ToJson() const {
  nlohmann::json j = {{"ranks", ranks_}, {"links", nlohmann::json::array()}};
  for (const auto& l : links_) j["links"].push_back(l.ToJson());
  return j;
}

std::vector<UsedLink> LinkInspector::Used(const Communicator& comm) {
  const std::vector<InterfaceAddress> ifs = ListInterfaces();
  std::vector<UsedLink> out;
  for (const PeerLink& p : comm.LinksUsed()) {
    UsedLink u{comm.rank(), p.peer, p.type, "", "", p.local_address, p.peer_address, p.lanes, p.operation};
    if (auto i = InterfaceOf(ifs, p.local_address)) u.network = i->Subnet(), u.interface = i->name;
    out.push_back(std::move(u));
  }
  return out;
}

absl::StatusOr<UsedLink> LinkInspector::UsedBetween(const Communicator& comm, int src, int dst) {
  const int me = comm.rank();
  for (int r : {src, dst}) {
    if (r < 0 || r >= comm.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("link inspector: rank ", r, " is not in this group of ", comm.size(), " ranks"));
    }
  }
  if (src == dst || (src != me && dst != me)) {
    return absl::InvalidArgumentError(absl::StrCat("link inspector: rank ", me, " knows the links of its own pairs (",
                                                   me, " and another rank), not ", src, "-", dst));
  }
  const int peer = src == me ? dst : src;
  for (UsedLink& u : Used(comm)) {
    if (u.dst == peer) return u;
  }
  return absl::NotFoundError(absl::StrCat("link inspector: ranks ", me, " and ", peer,
                                          " have not exchanged data in a collective of this group yet"));
}

}  // namespace hccltune
