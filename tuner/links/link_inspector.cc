#include "tuner/links/link_inspector.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/common/json_field.h"
#include "runtime/net/interfaces.h"
#include "runtime/topology/topology.h"

namespace hccltune {
namespace {

constexpr size_t kBlob = 8192;  // bytes per rank for the exchanged JSON

double NowUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Every rank's JSON (at most kBlob - 1 bytes each), gathered to every rank.
absl::StatusOr<std::vector<nlohmann::json>> AllgatherJson(Communicator& comm, const nlohmann::json& mine) {
  const std::string text = mine.dump();
  if (text.size() >= kBlob) return absl::ResourceExhaustedError("link inspector: per-rank result too large");
  std::vector<char> send(kBlob, 0), recv(kBlob * static_cast<size_t>(comm.size()), 0);
  std::memcpy(send.data(), text.data(), text.size());
  if (absl::Status s = comm.Allgather(send.data(), recv.data(), kBlob, DataType::kUint8); !s.ok()) return s;
  std::vector<nlohmann::json> out;
  for (int r = 0; r < comm.size(); ++r) {
    const char* p = recv.data() + kBlob * static_cast<size_t>(r);
    out.push_back(nlohmann::json::parse(std::string(p, strnlen(p, kBlob)), nullptr, false));
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

}  // namespace

nlohmann::json LinkInfo::ToJson() const {
  return {{"src", src},
          {"dst", dst},
          {"type", type},
          {"network", network},
          {"interface", interface},
          {"peer_address", peer_address},
          {"default", is_default},
          {"bandwidth_gbps", bandwidth_gbps},
          {"latency_us", latency_us}};
}

absl::StatusOr<LinkInspector> LinkInspector::Measure(Communicator& comm, const Environment& env,
                                                     const LinkInspectorOptions& opt) {
  nlohmann::json mine = {{"node", LocalNodeId(env)}, {"ifname", env.socket_ifname}, {"ifs", nlohmann::json::array()}};
  for (const auto& i : ListInterfaces()) {
    if (i.name != "lo") mine["ifs"].push_back({{"name", i.name}, {"address", i.address}, {"prefix", i.prefix}});
  }
  auto all = AllgatherJson(comm, mine);
  if (!all.ok()) return all.status();
  std::vector<RankFacts> facts;
  for (const auto& j : *all) {
    if (j.is_discarded()) return absl::DataLossError("link inspector: unreadable rank facts");
    RankFacts f{JsonOr(j, "node", ""), JsonOr(j, "ifname", ""), {}};
    for (const auto& i : j["ifs"]) f.ifs.push_back({i["name"], i["address"], i["prefix"]});
    facts.push_back(std::move(f));
  }

  const int me = comm.rank();
  std::vector<LinkInfo> measured;  // pairs where this rank is src
  for (int a = 0; a < comm.size(); ++a) {
    for (int b = a + 1; b < comm.size(); ++b) {
      const bool in_pair = me == a || me == b;
      auto sub = comm.Split(in_pair ? 0 : -1, me);
      if (!sub.ok()) return sub.status();
      if (!in_pair) continue;
      std::vector<LinkInfo> cands;
      const RankFacts &fa = facts[static_cast<size_t>(a)], &fb = facts[static_cast<size_t>(b)];
      if (fa.node == fb.node) {
        cands.push_back({a, b, "shm", "", "", "", true, 0, 0});
      } else {
        const InterfaceAddress* def = DefaultPeerAddress(fa, fb);
        for (const auto& ia : fa.ifs) {
          for (const auto& ib : fb.ifs) {
            // One address on both nodes is a host-local network (docker0): it reaches this machine, not b.
            if (ia.Subnet() != ib.Subnet() || ia.address == ib.address) continue;
            cands.push_back({a, b, "tcp", ia.Subnet(), ia.name, ib.address, def && def->address == ib.address, 0, 0});
          }
        }
      }
      for (LinkInfo& l : cands) {
        const std::string link = l.type == "shm" ? "shm" : absl::StrCat("tcp@", l.network);
        if (absl::Status s = MeasurePair(**sub, link, opt, &l); !s.ok()) {
          return absl::Status(s.code(),
                              absl::StrCat("link inspector: ranks ", a, "-", b, " over ", link, ": ", s.message()));
        }
        if (me == a) measured.push_back(l);
      }
    }
  }
  nlohmann::json mj = nlohmann::json::array();
  for (const auto& l : measured) mj.push_back(l.ToJson());
  auto results = AllgatherJson(comm, mj);
  if (!results.ok()) return results.status();
  LinkInspector li;
  for (const auto& r : *results) {
    for (const auto& j : r) {
      li.links_.push_back({j["src"], j["dst"], j["type"], j["network"], j["interface"], j["peer_address"], j["default"],
                           j["bandwidth_gbps"], j["latency_us"]});
    }
  }
  std::sort(li.links_.begin(), li.links_.end(), [](const LinkInfo& x, const LinkInfo& y) {
    return std::tie(x.src, x.dst, x.network) < std::tie(y.src, y.dst, y.network);
  });
  return li;
}

absl::StatusOr<LinkInfo> LinkInspector::get_link(int src, int dst) const {
  const int a = std::min(src, dst), b = std::max(src, dst);
  for (const LinkInfo& l : links_) {
    if (l.src == a && l.dst == b && l.is_default) return l;
  }
  return absl::NotFoundError(
      absl::StrCat("link inspector: no measured default link between ranks ", src, " and ", dst));
}

nlohmann::json LinkInspector::ToJson() const {
  nlohmann::json j = {{"links", nlohmann::json::array()}};
  for (const auto& l : links_) j["links"].push_back(l.ToJson());
  return j;
}

}  // namespace hccltune
