#include "runtime/common/peer_configuration.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "runtime/common/configuration.h"
#include "runtime/common/fingerprint.h"
#include "runtime/common/sizes.h"

namespace hccltune {
namespace {

absl::Status Bad(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("peer configuration '", text, "': ", why));
}

bool IsName(absl::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_')) return false;
  }
  return true;
}

}  // namespace

bool PeerConfiguration::IsDefault() const {
  return (runtime == kOpenMpi && algorithm == "default") || (runtime == kMpich && algorithm == "auto");
}

std::string PeerConfiguration::ToString() const {
  if (runtime != kOpenMpi || IsDefault()) return absl::StrCat(runtime, ":", algorithm);
  return absl::StrCat(runtime, ":", algorithm, "(segment=", FormatBytes(segment), ")");
}

absl::StatusOr<PeerConfiguration> PeerConfiguration::Default(absl::string_view runtime) {
  if (runtime == kOpenMpi) return PeerConfiguration{kOpenMpi, "default", 0};
  if (runtime == kMpich) return PeerConfiguration{kMpich, "auto", 0};
  return absl::InvalidArgumentError(absl::StrCat("unknown peer runtime '", runtime, "'; accepted: openmpi, mpich"));
}

absl::StatusOr<PeerConfiguration> PeerConfiguration::Parse(absl::string_view text) {
  const size_t colon = text.find(':');
  if (colon == absl::string_view::npos) return Bad(text, "expected RUNTIME:ALGORITHM");
  PeerConfiguration p;
  p.runtime = std::string(text.substr(0, colon));
  if (p.runtime != kOpenMpi && p.runtime != kMpich) return Bad(text, "unknown runtime; accepted: openmpi, mpich");
  absl::string_view rest = text.substr(colon + 1);
  absl::string_view params;
  if (const size_t open = rest.find('('); open != absl::string_view::npos) {
    if (!absl::EndsWith(rest, ")")) return Bad(text, "missing ')' at the end");
    params = rest.substr(open + 1, rest.size() - open - 2);
    rest = rest.substr(0, open);
  }
  if (!IsName(rest)) return Bad(text, "the algorithm must be a lower-case name (letters, digits, '_')");
  p.algorithm = std::string(rest);
  if (params.empty()) return p;
  if (p.runtime == kMpich) return Bad(text, "MPICH configurations take no parameters");
  if (p.IsDefault()) return Bad(text, "openmpi:default takes no parameters");
  if (!absl::ConsumePrefix(&params, "segment=")) return Bad(text, "unknown parameter; accepted: segment");
  auto seg = ParseBytes(params);
  if (!seg.ok()) return Bad(text, absl::StrCat("segment: ", seg.status().message()));
  if (*seg > (1ull << 31)) return Bad(text, "segment above 2G");
  p.segment = *seg;
  return p;
}

bool IsPeerConfiguration(absl::string_view text) {
  const size_t colon = text.find(':');
  return colon != absl::string_view::npos && colon < text.find('(');
}

std::string PeerRuntimeName(absl::string_view fingerprint_runtime) {
  if (fingerprint_runtime == kOwnRuntime) return "";
  const size_t dash = fingerprint_runtime.rfind('-');
  return std::string(fingerprint_runtime.substr(0, dash));
}

bool IsOwnRuntimeTopology(absl::string_view topology_json) {
  auto d = ParseTopologyJson(topology_json);
  return d.ok() && d->runtime == kOwnRuntime;
}

absl::StatusOr<std::string> CanonicalConfigurationString(absl::string_view text) {
  if (IsPeerConfiguration(text)) {
    auto p = PeerConfiguration::Parse(text);
    if (!p.ok()) return p.status();
    return p->ToString();
  }
  auto c = Configuration::Parse(text);
  if (!c.ok()) return c.status();
  return c->ToString();
}

}  // namespace hccltune
