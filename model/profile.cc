#include "model/profile.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/common/bounded_read.h"

namespace hccltune::model {
namespace {

constexpr double kGiga = 1e9;
constexpr size_t kMaxProfileBytes = 1 << 20;
constexpr uint64_t kMaxSingleCopyBytes = uint64_t{1} << 30;

absl::Status Bad(absl::string_view source, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("profile ", source, ": ", what));
}

// The number at `key` of `obj`, which must be > 0 (or >= 0 when `zero_ok`).
absl::StatusOr<double> Positive(const nlohmann::json& obj, const std::string& path, const std::string& key,
                                absl::string_view source, bool zero_ok = false) {
  if (!obj.contains(key)) return Bad(source, absl::StrCat(path, key, " is missing"));
  const nlohmann::json& v = obj.at(key);
  const bool ok = v.is_number() && (zero_ok ? v.get<double>() >= 0 : v.get<double>() > 0);
  if (!ok) {
    return Bad(source,
               absl::StrCat(path, key, " must be a number ", zero_ok ? ">= 0" : "> 0", " (got ", v.dump(), ")"));
  }
  return v.get<double>();
}

absl::StatusOr<LinkCost> ReadLink(const nlohmann::json& j, const std::string& key, absl::string_view source) {
  if (!j.contains(key) || !j.at(key).is_object()) return Bad(source, absl::StrCat(key, " must be an object"));
  const nlohmann::json& link = j.at(key);
  for (const auto& [k, v] : link.items()) {
    if (k != "latency_us" && k != "message_us" && k != "bandwidth_GBps") {
      return Bad(source, absl::StrCat(key, ".", k, " is not a key of a link (latency_us, message_us, bandwidth_GBps)"));
    }
  }
  auto latency = Positive(link, key + ".", "latency_us", source, /*zero_ok=*/true);
  if (!latency.ok()) return latency.status();
  auto overhead = Positive(link, key + ".", "message_us", source, /*zero_ok=*/true);
  if (!overhead.ok()) return overhead.status();
  auto bandwidth = Positive(link, key + ".", "bandwidth_GBps", source);
  if (!bandwidth.ok()) return bandwidth.status();
  return LinkCost{*latency * 1e-6, *overhead * 1e-6, 1.0 / (*bandwidth * kGiga)};
}

absl::StatusOr<int> ReadCount(const nlohmann::json& j, const std::string& key, int fallback, int min,
                              absl::string_view source) {
  if (!j.contains(key)) return fallback;
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > 1 << 20) {
    return Bad(source, absl::StrCat(key, " must be an integer >= ", min, " (got ", v.dump(), ")"));
  }
  return v.get<int>();
}

// One "oversubscribed"-shaped object (profile.h) named `name` into `out`.
absl::Status ReadWait(const nlohmann::json& o, absl::string_view name, absl::string_view source, Oversubscribed* out) {
  if (!o.is_object()) return Bad(source, absl::StrCat(name, " must be an object"));
  for (const auto& [k, v] : o.items()) {
    if (k != "call_us" && k != "round_us" && k != "byte_ns") {
      return Bad(source, absl::StrCat(name, ".", k, " is not one of call_us, round_us, byte_ns"));
    }
  }
  const std::string prefix = absl::StrCat(name, ".");
  const std::pair<const char*, double*> keys[] = {
      {"call_us", &out->call_s}, {"round_us", &out->round_s}, {"byte_ns", &out->byte_s}};
  for (const auto& [key, value] : keys) {
    auto v = Positive(o, prefix, key, source, /*zero_ok=*/true);
    if (!v.ok()) return v.status();
    *value = *v * (std::string(key) == "byte_ns" ? 1e-9 : 1e-6);
  }
  return absl::OkStatus();
}

// "version" and the version 2 keys (profile.h) of `j` into `out`.
absl::Status ReadVersionTwo(const nlohmann::json& j, absl::string_view source, ClusterProfile* out) {
  ClusterProfile& p = *out;
  auto version = ReadCount(j, "version", 1, 1, source);
  if (!version.ok()) return version.status();
  if (*version > kProfileVersion) {
    return Bad(source, absl::StrCat("version ", *version, " is newer than this build reads (", kProfileVersion, ")"));
  }
  p.version = *version;
  if (p.version < 2) {
    for (const char* key : {"call_us", "mailbox_us", "oversubscribed", "inter_oversubscribed", "intra_tcp",
                            "cores_shared", "single_copy_bytes"}) {
      if (j.contains(key)) return Bad(source, absl::StrCat(key, " needs \"version\": 2"));
    }
  }
  if (j.contains("call_us")) {
    auto call = Positive(j, "", "call_us", source, /*zero_ok=*/true);
    if (!call.ok()) return call.status();
    p.call_s = *call * 1e-6;
  }
  if (j.contains("mailbox_us")) {
    auto mailbox = Positive(j, "", "mailbox_us", source, /*zero_ok=*/true);
    if (!mailbox.ok()) return mailbox.status();
    p.mailbox_s = *mailbox * 1e-6;
  }
  for (const auto& [key, wait] :
       {std::pair<const char*, Oversubscribed*>{"oversubscribed", &p.oversubscribed},
        std::pair<const char*, Oversubscribed*>{"inter_oversubscribed", &p.inter_oversubscribed}}) {
    if (!j.contains(key)) continue;
    if (absl::Status s = ReadWait(j.at(key), key, source, wait); !s.ok()) return s;
  }
  if (j.contains("cores_shared")) {
    if (!j.at("cores_shared").is_boolean()) return Bad(source, "cores_shared must be true or false");
    p.cores_shared = j.at("cores_shared").get<bool>();
  }
  if (j.contains("single_copy_bytes")) {
    const nlohmann::json& v = j.at("single_copy_bytes");
    if (!v.is_number_unsigned() || v.get<uint64_t>() > kMaxSingleCopyBytes) {
      return Bad(source, absl::StrCat("single_copy_bytes must be an integer from 0 to ", kMaxSingleCopyBytes, " (got ",
                                      v.dump(), ")"));
    }
    p.single_copy_bytes = v.get<uint64_t>();
  }
  if (j.contains("intra_tcp")) {
    auto tcp = ReadLink(j, "intra_tcp", source);
    if (!tcp.ok()) return tcp.status();
    p.intra_tcp = *tcp;
    p.intra_tcp_known = true;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ClusterProfile> ParseProfile(absl::string_view json_text, absl::string_view source) {
  if (json_text.size() > kMaxProfileBytes) return Bad(source, "larger than 1 MiB");
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Bad(source, "not a JSON object");
  static const char* kKeys[] = {"name",
                                "intra",
                                "inter",
                                "nics_per_node",
                                "reduce_GBps",
                                "cores_per_node",
                                "version",
                                "mailbox_us",
                                "intra_tcp",
                                "oversubscribed",
                                "call_us",
                                "cores_shared",
                                "inter_oversubscribed",
                                "single_copy_bytes"};
  for (const auto& [k, v] : j.items()) {
    bool known = false;
    for (const char* key : kKeys) known = known || k == key;
    if (!known) {
      return Bad(source, absl::StrCat("unknown key '", k,
                                      "' (accepted: name, version, intra, inter, nics_per_node, reduce_GBps, "
                                      "cores_per_node, call_us, mailbox_us, oversubscribed, inter_oversubscribed, "
                                      "intra_tcp, cores_shared, single_copy_bytes)"));
    }
  }
  ClusterProfile p;
  if (absl::Status s = ReadVersionTwo(j, source, &p); !s.ok()) return s;
  p.name = j.contains("name") && j["name"].is_string() ? j["name"].get<std::string>() : std::string(source);
  auto intra = ReadLink(j, "intra", source);
  if (!intra.ok()) return intra.status();
  absl::StatusOr<LinkCost> inter = LinkCost{};
  p.inter_known = j.contains("inter");
  if (p.inter_known) inter = ReadLink(j, "inter", source);
  if (!inter.ok()) return inter.status();
  auto reduce = Positive(j, "", "reduce_GBps", source);
  if (!reduce.ok()) return reduce.status();
  auto nics = ReadCount(j, "nics_per_node", 1, 1, source);
  if (!nics.ok()) return nics.status();
  auto cores = ReadCount(j, "cores_per_node", 0, 0, source);
  if (!cores.ok()) return cores.status();
  p.intra = *intra;
  p.inter = *inter;
  p.gamma_s = 1.0 / (*reduce * kGiga);
  p.nics_per_node = *nics;
  p.cores_per_node = *cores;
  return p;
}

std::string ProfileToJson(const ClusterProfile& p) {
  const auto link = [](const LinkCost& l) {
    return nlohmann::json{{"latency_us", l.alpha_s * 1e6},
                          {"message_us", l.overhead_s * 1e6},
                          {"bandwidth_GBps", l.beta_s > 0 ? 1.0 / (l.beta_s * kGiga) : 0.0}};
  };
  nlohmann::json j = {{"name", p.name},
                      {"intra", link(p.intra)},
                      {"nics_per_node", p.nics_per_node},
                      {"reduce_GBps", p.gamma_s > 0 ? 1.0 / (p.gamma_s * kGiga) : 0.0},
                      {"cores_per_node", p.cores_per_node}};
  if (p.inter_known) j["inter"] = link(p.inter);
  if (p.version >= 2) {
    j["version"] = p.version;
    j["call_us"] = p.call_s * 1e6;
    j["mailbox_us"] = p.mailbox_s * 1e6;
    const auto wait = [](const Oversubscribed& o) {
      return nlohmann::json{{"call_us", o.call_s * 1e6}, {"round_us", o.round_s * 1e6}, {"byte_ns", o.byte_s * 1e9}};
    };
    j["oversubscribed"] = wait(p.oversubscribed);
    if (p.inter_known) j["inter_oversubscribed"] = wait(p.inter_oversubscribed);
    if (p.intra_tcp_known) j["intra_tcp"] = link(p.intra_tcp);
    if (p.cores_shared) j["cores_shared"] = true;
    if (p.single_copy_bytes > 0) j["single_copy_bytes"] = p.single_copy_bytes;
  }
  return j.dump(2);
}

absl::StatusOr<ClusterProfile> ReadProfileFile(const std::string& path) {
  auto text = ReadFileAtMost(path, kMaxProfileBytes, "profile");
  if (!text.ok()) return text.status();
  return ParseProfile(*text, path);
}

}  // namespace hccltune::model
