#include "tuner/doctor/dump_model.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/json_field.h"
#include "runtime/common/sizes.h"

namespace hccltune::doctor {
namespace {

absl::Status Bad(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": not a flight-recorder dump: ", what));
}

int64_t NsOrZero(const nlohmann::json& e, const char* key) {
  return e.contains(key) && !e[key].is_null() ? e[key].get<int64_t>() : 0;
}

Entry ParseEntry(const nlohmann::json& e) {
  Entry x;
  x.seq = e.at("collective_seq_id").get<uint32_t>();
  x.record_id = JsonOr<uint64_t>(e, "record_id", 0);
  x.collective = e.at("collective").get<std::string>();
  x.bytes = e.at("bytes").get<uint64_t>();
  x.config = e.at("configuration").get<std::string>();
  x.source = e.at("source").get<std::string>();
  x.state = e.at("state").get<std::string>();
  if (e.contains("input_dtypes") && e["input_dtypes"].is_array() && !e["input_dtypes"].empty()) {
    x.dtype = e["input_dtypes"][0].get<std::string>();
  }
  x.blocked_ns = NsOrZero(e, "time_blocked_ns");
  x.start_ns = NsOrZero(e, "time_discovered_started_ns");
  x.end_ns = NsOrZero(e, "time_discovered_completed_ns");
  if (e.contains("duration_ms") && !e["duration_ms"].is_null()) x.duration_ms = e["duration_ms"];
  return x;
}

// The fields a newer recorder adds (settings, cpu, buffer_overflows, topology): absent ones stay unknown.
void ParseHostFacts(const nlohmann::json& j, RankDump* d) {
  d->host = JsonOr<std::string>(j, "host", "");
  d->node = JsonOr<std::string>(j, "node", "");
  d->pid = JsonOr<int>(j, "pid", 0);
  d->fingerprint = JsonOr<std::string>(j, "topology_fingerprint", "");
  d->local_ranks = JsonOr<int>(j, "local_ranks", 0);
  d->nodes = JsonOr<int>(j, "nodes", 0);
  const nlohmann::json settings = j.value("settings", nlohmann::json::object());
  d->hccl_algo = JsonOr<std::string>(settings, "HCCL_ALGO", "");
  d->tune_algo = JsonOr<std::string>(settings, "HCCL_TUNE_ALGO", "");
  d->buffsize_bytes = JsonOr<uint64_t>(settings, "HCCL_BUFFSIZE_bytes", 0);
  const nlohmann::json cpu = j.value("cpu", nlohmann::json::object());
  if (cpu.contains("affinity") && cpu["affinity"].is_array()) d->affinity = cpu["affinity"].get<std::vector<int>>();
  d->online_cpus = JsonOr<int>(cpu, "online", 0);
  d->cpu_s = JsonOr<double>(cpu, "process_cpu_s", -1);
  d->wall_s = JsonOr<double>(cpu, "process_wall_s", -1);
  for (const nlohmann::json& o : j.value("buffer_overflows", nlohmann::json::array())) {
    d->overflows.push_back({o.at("min_bytes").get<uint64_t>(), o.at("max_bytes").get<uint64_t>(),
                            o.at("calls").get<uint64_t>(), o.at("max_need_bytes").get<uint64_t>()});
  }
}

// "interfaces", "links_used" and "rank_table" (absent: unknown).
void ParseLinks(const nlohmann::json& j, RankDump* d) {
  for (const nlohmann::json& i : j.value("interfaces", nlohmann::json::array())) {
    d->interfaces.push_back({i.at("name").get<std::string>(), i.at("address").get<std::string>(),
                             i.at("subnet").get<std::string>(), JsonOr<double>(i, "speed_mbps", 0)});
  }
  for (const nlohmann::json& l : j.value("links_used", nlohmann::json::array())) {
    d->links.push_back({l.at("kind").get<std::string>(), l.at("interface").get<std::string>(),
                        JsonOr<std::string>(l, "address", ""), JsonOr<std::string>(l, "subnet", ""),
                        l.at("bytes_sent").get<uint64_t>(), l.at("cross_node_bytes").get<uint64_t>(),
                        l.at("peers").get<std::vector<int>>(), l.at("peer_nodes").get<std::vector<int>>()});
  }
  const nlohmann::json table = j.value("rank_table", nlohmann::json());
  if (table.is_object()) {
    d->device_ip = JsonOr<std::string>(table, "device_ip", "");
    d->host_nic_ip = JsonOr<std::string>(table, "host_nic_ip", "");
    if (d->host_nic_ip == "reserve") d->host_nic_ip.clear();  // HCCL's placeholder for "none"
  }
}

}  // namespace

const Entry* RankDump::Pending(int64_t min_blocked_ns) const {
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    const Entry& e = it->second;
    if (e.state == "completed") return nullptr;
    if (e.state == "failed" || (e.blocked_ns != 0 && dump_time_ns - e.blocked_ns >= min_blocked_ns)) return &e;
  }
  return nullptr;
}

absl::StatusOr<RankDump> ParseDump(const std::string& name, absl::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Bad(name, "not JSON");
  if (JsonOr<std::string>(j, "version", "") != "hccl-tune-fr-1") return Bad(name, "no \"version\": \"hccl-tune-fr-1\"");
  RankDump d;
  d.path = name;
  try {
    d.tag = j.at("comm_tag").get<std::string>();
    d.reason = j.at("reason").get<std::string>();
    d.error = j.value("error", "");
    d.rank = j.at("rank").get<int>();
    d.world = j.at("world_size").get<int>();
    d.last_completed = j.at("last_completed_seq").get<int64_t>();
    d.dump_time_ns = j.value("dump_time_ns", int64_t{0});
    for (const nlohmann::json& e : j.at("entries")) {
      Entry x = ParseEntry(e);
      d.ops[x.seq] = std::move(x);
    }
    ParseHostFacts(j, &d);
    ParseLinks(j, &d);
  } catch (const nlohmann::json::exception& e) {
    return Bad(name, e.what());
  }
  if (d.world < 1 || d.rank < 0 || d.rank >= d.world) return Bad(name, "rank outside 0..world_size-1");
  return d;
}

CommTime TimeInCalls(const RankDump& d) {
  CommTime t;
  const Entry* first = nullptr;
  const Entry* last = nullptr;
  double sum_ms = 0;
  for (const auto& [seq, e] : d.ops) {
    if (!e.timed() || e.state != "completed") continue;
    if (first == nullptr) first = &e;
    last = &e;
    ++t.timed;
    sum_ms += static_cast<double>(e.end_ns - e.start_ns) / 1e6;
  }
  if (t.timed < 2) return t;
  t.mean_ms = sum_ms / t.timed;
  t.span_s = static_cast<double>(last->end_ns - first->start_ns) / 1e9;
  t.calls = last->seq - first->seq + 1;
  // The sample's mean can overshoot (a few slow calls among few timed ones): a rank is never blocked longer than
  // the span.
  t.busy_s = std::min(t.mean_ms * static_cast<double>(t.calls) / 1e3, t.span_s);
  t.share = t.span_s > 0 ? t.busy_s / t.span_s : 0;
  return t;
}

std::string Size(uint64_t bytes) {
  return bytes > 0 && bytes % 1024 == 0 ? FormatBytes(bytes) : absl::StrCat(bytes, " B");
}

std::string Fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string RankList(const std::vector<int>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ", "));
}

std::string Duration(double seconds) {
  if (seconds < 1e-3) return absl::StrCat(Fixed(seconds * 1e6, 0), " us");
  if (seconds < 1) return absl::StrCat(Fixed(seconds * 1e3, 1), " ms");
  return absl::StrCat(Fixed(seconds, 1), " s");
}

}  // namespace hccltune::doctor
