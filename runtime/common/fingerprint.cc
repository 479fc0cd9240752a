#include "runtime/common/fingerprint.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "hccltune/version.h"
#include "nlohmann/json.hpp"

namespace hccltune {
namespace {

using json = nlohmann::json;

bool IsMajorMinor(absl::string_view v) {
  const size_t dot = v.find('.');
  if (dot == absl::string_view::npos || dot == 0 || dot + 1 == v.size()) return false;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i != dot && !absl::ascii_isdigit(static_cast<unsigned char>(v[i]))) return false;
  }
  return true;
}

// "hccl-tune", or NAME-MAJOR.MINOR with NAME lower-case letters, digits and dashes ("openmpi-4.1").
bool IsRuntime(absl::string_view r) {
  if (r == kOwnRuntime) return true;
  const size_t dash = r.rfind('-');
  if (dash == absl::string_view::npos || dash == 0 || !IsMajorMinor(r.substr(dash + 1))) return false;
  if (!absl::ascii_islower(static_cast<unsigned char>(r[0]))) return false;
  for (char c : r.substr(0, dash)) {
    if (!(absl::ascii_islower(static_cast<unsigned char>(c)) || absl::ascii_isdigit(static_cast<unsigned char>(c)) ||
          c == '-')) {
      return false;
    }
  }
  return true;
}

bool IsRdma(absl::string_view link) { return link == "roce" || link == "ib"; }

TopologyDescription Sorted(TopologyDescription d) {
  std::sort(d.ranks_per_node.begin(), d.ranks_per_node.end());
  std::sort(d.intra.begin(), d.intra.end());
  std::sort(d.inter.begin(), d.inter.end(), [](const InterLink& a, const InterLink& b) {
    return std::tie(a.link, a.network, a.gbps) < std::tie(b.link, b.network, b.gbps);
  });
  return d;
}

json Gbps(double g) {
  if (g == std::floor(g) && g < 9007199254740992.0) return static_cast<int64_t>(g);
  return g;
}

// The class fields (format, inter, intra, release, runtime) of a sorted description.
json ClassObject(const TopologyDescription& s) {
  // nlohmann::json's default object is a std::map: keys come out sorted, and dump() has no spaces.
  json j;
  j["format"] = kTopologyFormat;
  j["inter"] = json::array();
  for (const InterLink& l : s.inter) {
    json link{{"link", l.link}, {"network", l.network}};
    if (l.gbps > 0) link["gbps"] = Gbps(l.gbps);
    j["inter"].push_back(std::move(link));
  }
  j["intra"] = s.intra;
  j["release"] = s.release;
  j["runtime"] = s.runtime;
  return j;
}

absl::Status Bad(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("topology JSON: '", field, "' ", what));
}

absl::Status ReadInter(const json& j, int format, std::vector<InterLink>* out) {
  if (!j.is_array()) return Bad("inter", "must be an array");
  for (size_t i = 0; i < j.size(); ++i) {
    const json& e = j[i];
    const std::string where = absl::StrCat("inter[", i, "]");
    if (!e.is_object()) return Bad(where, "must be an object");
    InterLink l;
    for (const auto& [key, value] : e.items()) {
      if (key == "link" && value.is_string()) {
        l.link = value.get<std::string>();
      } else if (key == "network" && value.is_string()) {
        l.network = value.get<std::string>();
      } else if (key == "gbps" && value.is_number()) {
        l.gbps = value.get<double>();
      } else {
        return Bad(absl::StrCat(where, ".", key),
                   "is not a field of a link (link, network, gbps) or has the wrong type");
      }
    }
    if (l.link != "tcp" && !(format >= 2 && IsRdma(l.link))) {
      return Bad(absl::StrCat(where, ".link"),
                 absl::StrCat("'", absl::CHexEscape(l.link), "' is not ", format >= 2 ? "tcp, roce or ib" : "tcp"));
    }
    if (l.network.empty()) return Bad(absl::StrCat(where, ".network"), "must name a subnet");
    if (IsRdma(l.link) && !(std::isfinite(l.gbps) && l.gbps > 0)) {
      return Bad(absl::StrCat(where, ".gbps"), "must be the port's nominal speed in Gb/s (a positive number)");
    }
    if (!IsRdma(l.link) && e.contains("gbps")) return Bad(absl::StrCat(where, ".gbps"), "is only for RDMA ports");
    out->push_back(std::move(l));
  }
  return absl::OkStatus();
}

absl::Status ReadCounts(const json& j, int* nodes, std::vector<int>* out) {
  if (!j.is_array()) return Bad("ranks_per_node", "must be an array");
  for (const json& c : j) {
    if (!c.is_number_integer() || c.get<int64_t>() < 1 || c.get<int64_t>() > (1 << 20)) {
      return Bad("ranks_per_node", "must hold rank counts (whole numbers from 1)");
    }
    out->push_back(c.get<int>());
  }
  if (*nodes != static_cast<int>(out->size())) {
    return Bad("nodes", absl::StrCat(*nodes, " is not the number of ranks_per_node counts (", out->size(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string CanonicalTopologyJson(const TopologyDescription& d) {
  const TopologyDescription s = Sorted(d);
  json j = ClassObject(s);
  j["nodes"] = s.ranks_per_node.size();
  j["ranks_per_node"] = s.ranks_per_node;
  return j.dump();
}

std::string TopologyClassJson(const TopologyDescription& d) { return ClassObject(Sorted(d)).dump(); }

std::optional<std::string> Format1TopologyJson(const TopologyDescription& d) {
  if (d.runtime != kOwnRuntime) return std::nullopt;
  const TopologyDescription s = Sorted(d);
  json j;
  j["format"] = 1;
  j["inter"] = json::array();
  for (const InterLink& l : s.inter) {
    if (l.link != "tcp") return std::nullopt;
    j["inter"].push_back({{"link", "tcp"}, {"network", l.network}});
  }
  j["intra"] = s.intra;
  j["nodes"] = s.ranks_per_node.size();
  j["ranks_per_node"] = s.ranks_per_node;
  j["release"] = s.release;
  return j.dump();
}

absl::StatusOr<TopologyDescription> ParseTopologyJson(absl::string_view text) {
  const json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError("topology JSON: not a JSON object");
  const auto f = j.find("format");
  if (f == j.end() || !f->is_number_integer()) return Bad("format", "must be a whole number");
  const int64_t format = f->get<int64_t>();
  if (format < 1) return Bad("format", "must be 1 or more");
  if (format > kTopologyFormat) {
    return absl::FailedPreconditionError(absl::StrCat("topology JSON of format ", format, " is newer than hccl-tune ",
                                                      HCCL_TUNE_VERSION, " reads (formats 1 to ", kTopologyFormat,
                                                      "): upgrade it"));
  }
  TopologyDescription d;
  d.runtime.clear();
  int nodes = -1;
  const json* counts = nullptr;
  for (const auto& [key, value] : j.items()) {
    if (key == "format") continue;
    if (key == "nodes" && value.is_number_integer() && value.get<int64_t>() >= 1 && value.get<int64_t>() <= 1 << 20) {
      nodes = value.get<int>();
    } else if (key == "ranks_per_node") {
      counts = &value;
    } else if (key == "intra" && value.is_array()) {
      for (const json& c : value) {
        if (!c.is_string() || c.get<std::string>().empty()) return Bad("intra", "must hold link class names");
        d.intra.push_back(c.get<std::string>());
      }
    } else if (key == "inter") {
      if (absl::Status s = ReadInter(value, static_cast<int>(format), &d.inter); !s.ok()) return s;
    } else if (key == "release" && value.is_string() && IsMajorMinor(value.get<std::string>())) {
      d.release = value.get<std::string>();
    } else if (key == "runtime" && format >= 2 && value.is_string() && IsRuntime(value.get<std::string>())) {
      d.runtime = value.get<std::string>();
    } else {
      return Bad(key, key == "runtime" && format >= 2
                          ? "must be hccl-tune or a runtime and its major.minor (openmpi-4.1)"
                          : "is not a field of this format or has the wrong type");
    }
  }
  if (nodes < 0 || counts == nullptr) return Bad(nodes < 0 ? "nodes" : "ranks_per_node", "is missing");
  if (absl::Status s = ReadCounts(*counts, &nodes, &d.ranks_per_node); !s.ok()) return s;
  if (!j.contains("intra") || !j.contains("inter")) return Bad(j.contains("intra") ? "inter" : "intra", "is missing");
  if (d.release.empty()) return Bad("release", "is missing");
  if (format == 1) {
    d.runtime = kOwnRuntime;
  } else if (d.runtime.empty()) {
    return Bad("runtime", "is missing");
  }
  return d;
}

std::string Sha256Hex(absl::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 15]);
  }
  return out;
}

std::string Fingerprint(absl::string_view json_text) { return Sha256Hex(json_text).substr(0, 16); }

TopologyKeys KeysOf(const TopologyDescription& d) {
  TopologyKeys k;
  k.json = CanonicalTopologyJson(d);
  k.fingerprint = Fingerprint(k.json);
  k.topology_class = Fingerprint(TopologyClassJson(d));
  return k;
}

absl::StatusOr<TopologyKeys> CanonicalTopology(absl::string_view json_text) {
  auto d = ParseTopologyJson(json_text);
  if (!d.ok()) return d.status();
  return KeysOf(*d);
}

absl::Status ValidateTopologyHash(absl::string_view hash, absl::string_view what) {
  bool ok = hash.size() == 16;
  for (char c : hash) ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " '", absl::CHexEscape(hash.substr(0, 64)),
                                                 "' is invalid: expected 16 lower-case hex digits (a SHA-256 prefix)"));
}

}  // namespace hccltune
