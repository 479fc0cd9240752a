#include "runtime/bootstrap/rank_table.h"

#include <arpa/inet.h>

#include <algorithm>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "runtime/common/bounded_read.h"
#include "runtime/net/interfaces.h"

namespace hccltune {
namespace {

using nlohmann::json;

absl::Status Bad(absl::string_view source, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("rank table ", source, ": ", what));
}

// A required string field of `obj` of at most kMaxRankTableFieldBytes; `where` names the object in errors.
absl::StatusOr<std::string> StringField(const json& obj, const char* key, const std::string& where,
                                        absl::string_view source) {
  if (!obj.contains(key)) return Bad(source, absl::StrCat(where, " has no \"", key, "\""));
  if (!obj[key].is_string()) {
    return Bad(source, absl::StrCat(where, ": \"", key, "\" must be a string (e.g. \"0\"), got ",
                                    obj[key].dump().substr(0, 64)));
  }
  const std::string& v = obj[key].get_ref<const std::string&>();
  if (v.size() > kMaxRankTableFieldBytes) {
    return Bad(source, absl::StrCat(where, ": \"", key, "\" is ", v.size(), " bytes long, over the limit of ",
                                    kMaxRankTableFieldBytes));
  }
  return v;
}

// A required integer field (written as a string) in 0..max.
absl::StatusOr<int> IntField(const json& obj, const char* key, int max, const std::string& where,
                             absl::string_view source) {
  auto s = StringField(obj, key, where, source);
  if (!s.ok()) return s.status();
  int v = 0;
  if (!absl::SimpleAtoi(*s, &v) || v < 0 || v > max) {
    return Bad(source, absl::StrCat(where, ": \"", key, "\" is \"", *s, "\", expected an integer from 0 to ", max));
  }
  return v;
}

}  // namespace

absl::StatusOr<RankTable> ParseRankTable(absl::string_view json_text, absl::string_view source) {
  if (json_text.size() > kMaxRankTableBytes) {
    return Bad(source, absl::StrCat(json_text.size(), " bytes, over the limit of ", kMaxRankTableBytes));
  }
  json j = json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (j.is_discarded()) return Bad(source, "not valid JSON");
  if (!j.is_object()) return Bad(source, "expected a JSON object at the top level");
  auto version = StringField(j, "version", "the table", source);
  if (!version.ok()) return version.status();
  if (*version != "1.0") return Bad(source, absl::StrCat("version \"", *version, "\" is not supported (only \"1.0\")"));
  if (j.contains("status") && j["status"] != "completed") {
    return Bad(source, absl::StrCat("status is ", j["status"].dump(), ", expected \"completed\""));
  }
  if (!j.contains("server_list")) return Bad(source, "the table has no \"server_list\"");
  if (!j["server_list"].is_array() || j["server_list"].empty()) {
    return Bad(source, "\"server_list\" must be a non-empty array");
  }
  std::map<int, RankTableEntry> by_rank;
  std::map<std::pair<std::string, int>, int> device_owner;  // (server, device) -> rank
  std::map<std::string, int> servers;
  int index = 0;
  for (const json& server : j["server_list"]) {
    const std::string where = absl::StrCat("server_list[", index++, "]");
    if (!server.is_object()) return Bad(source, absl::StrCat(where, " is not an object"));
    auto server_id = StringField(server, "server_id", where, source);
    if (!server_id.ok()) return server_id.status();
    if (servers.count(*server_id)) return Bad(source, absl::StrCat("server_id \"", *server_id, "\" appears twice"));
    servers[*server_id] = 0;
    if (!server.contains("device")) return Bad(source, absl::StrCat(where, " (", *server_id, ") has no \"device\""));
    if (!server["device"].is_array() || server["device"].empty()) {
      return Bad(source, absl::StrCat(where, " (", *server_id, "): \"device\" must be a non-empty array"));
    }
    int d = 0;
    for (const json& dev : server["device"]) {
      const std::string dwhere = absl::StrCat("server ", *server_id, " device[", d++, "]");
      if (!dev.is_object()) return Bad(source, absl::StrCat(dwhere, " is not an object"));
      RankTableEntry e;
      e.server_id = *server_id;
      if (server.contains("host_nic_ip") && server["host_nic_ip"].is_string()) e.host_nic_ip = server["host_nic_ip"];
      if (by_rank.size() >= kMaxRankTableRanks) {
        return Bad(source, absl::StrCat("more than ", kMaxRankTableRanks, " devices (the limit of ranks)"));
      }
      auto rank = IntField(dev, "rank_id", static_cast<int>(kMaxRankTableRanks) - 1, dwhere, source);
      if (!rank.ok()) return rank.status();
      auto device = IntField(dev, "device_id", kMaxDeviceId, dwhere, source);
      if (!device.ok()) return device.status();
      auto ip = StringField(dev, "device_ip", dwhere, source);
      if (!ip.ok()) return ip.status();
      in_addr a{};
      if (::inet_pton(AF_INET, ip->c_str(), &a) != 1) {
        return Bad(source, absl::StrCat(dwhere, ": device_ip \"", *ip, "\" is not an IPv4 address"));
      }
      e.rank_id = *rank;
      e.device_id = *device;
      e.device_ip = *ip;
      if (auto it = by_rank.find(e.rank_id); it != by_rank.end()) {
        return Bad(source,
                   absl::StrCat("rank_id ", e.rank_id, " appears twice: on server ", it->second.server_id, " device ",
                                it->second.device_id, " and on server ", e.server_id, " device ", e.device_id));
      }
      auto key = std::make_pair(e.server_id, e.device_id);
      if (auto it = device_owner.find(key); it != device_owner.end()) {
        return Bad(source,
                   absl::StrCat("ranks ", it->second, " and ", e.rank_id, " are both bound to device ", e.device_id,
                                " of server ", e.server_id, ": each rank needs its own device (this would deadlock)"));
      }
      device_owner[key] = e.rank_id;
      by_rank[e.rank_id] = e;
    }
  }
  RankTable t;
  for (int r = 0; r < static_cast<int>(by_rank.size()); ++r) {
    auto it = by_rank.find(r);
    if (it == by_rank.end()) {
      return Bad(source, absl::StrCat("rank_id ", r, " is missing: the ", by_rank.size(),
                                      " devices must have rank_ids 0..", by_rank.size() - 1));
    }
    t.ranks.push_back(it->second);
  }
  if (j.contains("server_count")) {
    int count = 0;
    if (!j["server_count"].is_string() || !absl::SimpleAtoi(j["server_count"].get<std::string>(), &count) ||
        count != static_cast<int>(servers.size())) {
      return Bad(source, absl::StrCat("server_count is ", j["server_count"].dump(), " but server_list has ",
                                      servers.size(), " server(s)"));
    }
  }
  for (RankTableEntry& e : t.ranks) e.local_rank = servers[e.server_id]++;
  for (RankTableEntry& e : t.ranks) e.local_size = servers[e.server_id];
  return t;
}

absl::StatusOr<RankTable> LoadRankTable(const std::string& path) {
  auto text = ReadFileAtMost(path, kMaxRankTableBytes, "the rank table");
  if (!text.ok()) return absl::Status(text.status().code(), absl::StrCat("RANK_TABLE_FILE: ", text.status().message()));
  return ParseRankTable(*text, path);
}

absl::Status ApplyRankTable(const RankTable& table, int rank_id, const std::vector<std::string>& local_addresses,
                            Environment* env) {
  if (rank_id < 0 || rank_id >= table.world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("RANK_ID=", rank_id, " is not in the rank table (rank_ids 0..", table.world_size() - 1, ")"));
  }
  const RankTableEntry& me = table.ranks[static_cast<size_t>(rank_id)];
  if (std::find(local_addresses.begin(), local_addresses.end(), me.device_ip) == local_addresses.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank table: rank ", rank_id, " (server ", me.server_id, " device ", me.device_id, ") has device_ip ",
        me.device_ip, ", which no local interface has (local: ", absl::StrJoin(local_addresses, ", "), ")"));
  }
  env->rank = rank_id;
  env->rank_table_device_ip = me.device_ip;
  env->rank_table_host_nic_ip = me.host_nic_ip;
  env->world_size = table.world_size();
  env->local_rank = me.local_rank;
  env->local_world_size = me.local_size;
  if (env->node_id.empty()) env->node_id = absl::StrCat("rank-table:", me.server_id);
  if (!env->device) env->device = me.device_id;
  if (env->store.empty()) {
    if (!env->master_port) {
      return absl::InvalidArgumentError(
          "rank table bootstrap needs HCCL_TUNE_MASTER_PORT (the rendezvous is at rank 0's device_ip and that "
          "port), or HCCL_TUNE_STORE");
    }
    env->master_addr = table.ranks[0].device_ip;
  }
  return absl::OkStatus();
}

absl::Status ApplyRankTableFromEnvironment(Environment* env) {
  if (!env->rank_id) {
    return absl::InvalidArgumentError(
        absl::StrCat("RANK_TABLE_FILE='", env->rank_table_file, "' is set but RANK_ID is not: set RANK_ID"));
  }
  auto table = LoadRankTable(env->rank_table_file);
  if (!table.ok()) return table.status();
  std::vector<std::string> local;
  for (const InterfaceAddress& a : ListInterfaces()) local.push_back(a.address);
  if (absl::Status s = ApplyRankTable(*table, *env->rank_id, local, env); !s.ok()) return s;
  env->rank_table_file.clear();
  return absl::OkStatus();
}

}  // namespace hccltune
