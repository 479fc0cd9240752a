#include "db/store_util.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "runtime/common/peer_configuration.h"

namespace hccltune::db {

absl::Status CheckTextBytes(absl::string_view text, size_t limit, absl::string_view what) {
  if (text.size() <= limit) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " of ", text.size(), " bytes is over the limit of ", limit, " bytes"));
}

absl::Status ValidateFingerprint(absl::string_view fp) { return ValidateTopologyHash(fp, "topology fingerprint"); }

absl::Status ValidateTopologyClass(absl::string_view c) { return ValidateTopologyHash(c, "topology class"); }

absl::StatusOr<std::string> ValidateTopology(const Topology& t) {
  if (absl::Status s = ValidateFingerprint(t.fingerprint); !s.ok()) return s;
  if (absl::Status s = CheckTextBytes(t.json, kMaxTopologyJsonBytes, "topology JSON"); !s.ok()) return s;
  if (t.json.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("topology ", t.fingerprint, " has no JSON: it is required when a table is first stored"));
  }
  const std::string expect = Fingerprint(t.json);
  if (expect != t.fingerprint) {
    return absl::InvalidArgumentError(absl::StrCat("topology fingerprint ", t.fingerprint,
                                                   " does not match its JSON (which hashes to ", expect, ")"));
  }
  auto d = ParseTopologyJson(t.json);
  if (!d.ok())
    return absl::Status(d.status().code(), absl::StrCat("topology ", t.fingerprint, ": ", d.status().message()));
  const TopologyKeys keys = KeysOf(*d);
  if (keys.json != t.json) {
    return absl::InvalidArgumentError(
        Format1TopologyJson(*d) == t.json
            ? absl::StrCat("topology ", t.fingerprint, " is of format 1: tables are stored under format ",
                           kTopologyFormat, " (fingerprint ", keys.fingerprint, ")")
            : absl::StrCat("topology ", t.fingerprint, ": the JSON is not in canonical form (", keys.json, ")"));
  }
  return keys.topology_class;
}

bool EntryKeyLess(const EntryKey& a, const EntryKey& b) {
  if (a.collective != b.collective) return a.collective < b.collective;
  if (a.dtype != b.dtype) return a.dtype < b.dtype;
  if (a.world_size != b.world_size) return a.world_size < b.world_size;
  return a.range.min < b.range.min;
}

namespace {

absl::Status CheckWorld(int world) {
  if (world < 1 || world > kMaxWorldSize) {
    return absl::InvalidArgumentError(absl::StrCat("world size ", world, " is out of range 1..", kMaxWorldSize));
  }
  return absl::OkStatus();
}

absl::Status CheckBytes(uint64_t bytes, absl::string_view what) {
  if (bytes > kMaxBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", bytes, " is absurd (limit ", FormatBytes(kMaxBytes), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Canonical(absl::string_view config, absl::string_view what) {
  if (absl::Status s = CheckTextBytes(config, kMaxTextBytes, what); !s.ok()) return s;
  // This runtime's configurations and peer runtimes' (runtime/common/peer_configuration.h).
  auto parsed = CanonicalConfigurationString(config);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", parsed.status().message()));
  }
  return *parsed;
}

absl::Status CheckDuration(double us, absl::string_view what) {
  if (!std::isfinite(us) || us < 0 || us > 1e12) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", us, " us is not a valid duration"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<TunedEntry>> NormalizeEntries(absl::Span<const TunedEntry> entries) {
  if (entries.size() > kMaxTableEntries) {
    return absl::InvalidArgumentError(
        absl::StrCat("table of ", entries.size(), " entries exceeds the limit of ", kMaxTableEntries));
  }
  std::vector<TunedEntry> out(entries.begin(), entries.end());
  for (TunedEntry& e : out) {
    if (absl::Status s = CheckTextBytes(e.sweep_id, kMaxTextBytes, "entry sweep_id"); !s.ok()) return s;
    if (absl::Status s = CheckTextBytes(e.library_version, kMaxTextBytes, "entry library_version"); !s.ok()) return s;
    if (absl::Status s = CheckWorld(e.key.world_size); !s.ok()) return s;
    if (e.key.range.min >= e.key.range.max) {
      return absl::InvalidArgumentError(
          absl::StrCat("byte range [", e.key.range.min, ", ", e.key.range.max, ") is empty or inverted"));
    }
    if (absl::Status s = CheckBytes(e.key.range.min, "range minimum"); !s.ok()) return s;
    if (e.key.range.max != kUnbounded) {
      if (absl::Status s = CheckBytes(e.key.range.max, "range maximum"); !s.ok()) return s;
    }
    auto cfg = Canonical(e.configuration, "winner");
    if (!cfg.ok()) return cfg.status();
    e.configuration = *cfg;
    if (!e.runner_up.empty()) {
      auto ru = Canonical(e.runner_up, "runner-up");
      if (!ru.ok()) return ru.status();
      e.runner_up = *ru;
    }
    for (double v : {e.time_us, e.busbw_gbps, e.margin, e.default_margin, e.rank_time_us}) {
      if (!std::isfinite(v)) return absl::InvalidArgumentError("entry holds a non-finite measurement");
    }
    if (e.rank_time_us < 0) return absl::InvalidArgumentError("entry rank_time_us must not be negative");
    if (e.model_version < 0) return absl::InvalidArgumentError("entry model_version must not be negative");
    if (!e.explore.empty()) {
      auto ex = Canonical(e.explore, "exploration");
      if (!ex.ok()) return ex.status();
      e.explore = *ex;
      if (e.explore == e.configuration) {
        return absl::InvalidArgumentError(
            absl::StrCat("exploration plan for ", e.configuration, " explores the winner itself"));
      }
      if (e.explore_every < 2 || e.explore_calls < 1) {
        return absl::InvalidArgumentError(absl::StrCat("exploration plan of ", e.explore, ": explore_every ",
                                                       e.explore_every, " must be >= 2 and explore_calls ",
                                                       e.explore_calls, " >= 1"));
      }
    } else if (e.explore_every != 0 || e.explore_calls != 0) {
      return absl::InvalidArgumentError("explore_every/explore_calls set without an exploration configuration");
    }
  }
  std::sort(out.begin(), out.end(),
            [](const TunedEntry& a, const TunedEntry& b) { return EntryKeyLess(a.key, b.key); });
  for (size_t i = 1; i < out.size(); ++i) {
    const EntryKey& a = out[i - 1].key;
    const EntryKey& b = out[i].key;
    if (a.collective == b.collective && a.dtype == b.dtype && a.world_size == b.world_size &&
        a.range.max > b.range.min) {
      return absl::InvalidArgumentError(absl::StrCat("overlapping byte ranges for ", CollectiveName(a.collective), "/",
                                                     DataTypeName(a.dtype), " world ", a.world_size, ": ",
                                                     FormatByteRange(a.range), " and ", FormatByteRange(b.range)));
    }
  }
  return out;
}

absl::Status ValidatePutOptions(const PutOptions& options) {
  if (options.min_version < 0 || options.min_version > kMaxTableVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("table version ", options.min_version, " is out of range 0..", kMaxTableVersion, " (2^53)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TunedEntry>> ValidatePut(const Topology& topology, absl::Span<const TunedEntry> entries,
                                                    const PutOptions& options) {
  if (absl::Status s = ValidateFingerprint(topology.fingerprint); !s.ok()) return s;
  if (!topology.json.empty()) {
    if (auto c = ValidateTopology(topology); !c.ok()) return c.status();
  }
  if (absl::Status s = ValidatePutOptions(options); !s.ok()) return s;
  return NormalizeEntries(entries);
}

absl::StatusOr<int64_t> NewVersion(absl::string_view fingerprint, int64_t next_version, const PutOptions& options) {
  const int64_t version = std::max(next_version, options.min_version);
  if (version < 1 || version == std::numeric_limits<int64_t>::max()) {
    return absl::FailedPreconditionError(absl::StrCat("table ", fingerprint, ": the stored next version number ",
                                                      next_version, " is out of range; it cannot take a new version"));
  }
  return version;
}

absl::Status CheckExpectedVersion(absl::string_view fingerprint, int64_t latest, const PutOptions& options) {
  if (options.expected_version == 0) return absl::OkStatus();
  const int64_t want = options.expected_version < 0 ? 0 : options.expected_version;
  if (latest == want) return absl::OkStatus();
  return absl::AbortedError(absl::StrCat("table ", fingerprint, " changed meanwhile: it is at ",
                                         latest == 0 ? std::string("no version") : absl::StrCat("version ", latest),
                                         ", the write expected ",
                                         want == 0 ? std::string("no table") : absl::StrCat("version ", want)));
}

std::string ContentHash(absl::Span<const TunedEntry> entries) {
  std::string text;
  for (const TunedEntry& e : entries) {
    absl::StrAppend(&text, CollectiveName(e.key.collective), "\t", DataTypeName(e.key.dtype), "\t", e.key.world_size,
                    "\t", e.key.range.min, "\t", e.key.range.max, "\t", e.configuration, "\t",
                    absl::StrFormat("%.17g\t%.17g\t", e.time_us, e.busbw_gbps), e.samples, "\t", e.runner_up, "\t",
                    absl::StrFormat("%.17g\t%.17g\t", e.margin, e.default_margin), e.sweep_id, "\t", e.library_version,
                    "\t", e.measured_unix_ms);
    // Online fields only when set, so tables without them keep the hash they always had.
    if (e.rank_time_us != 0 || e.stale || !e.explore.empty()) {
      absl::StrAppend(&text, absl::StrFormat("\t%.17g\t", e.rank_time_us), e.stale ? 1 : 0, "\t", e.explore, "\t",
                      e.explore_every, "\t", e.explore_calls);
    }
    if (e.model_version != 0) absl::StrAppend(&text, "\tmodel ", e.model_version);
    text += "\n";
  }
  return Sha256Hex(text);
}

const TunedEntry* FindEntry(absl::Span<const TunedEntry> entries, Collective collective, DataType dtype, int world,
                            uint64_t bytes) {
  EntryKey probe{collective, dtype, world, ByteRange{bytes, kUnbounded}};
  // First entry whose key is greater than the probe; the candidate is the one before it.
  auto it = std::upper_bound(entries.begin(), entries.end(), probe,
                             [](const EntryKey& k, const TunedEntry& e) { return EntryKeyLess(k, e.key); });
  if (it == entries.begin()) return nullptr;
  const TunedEntry& e = *(it - 1);
  if (e.key.collective != collective || e.key.dtype != dtype || e.key.world_size != world) return nullptr;
  return e.key.range.Contains(bytes) ? &e : nullptr;
}

absl::Status ValidateLiveSample(const LiveSample& s) {
  if (absl::Status st = CheckWorld(s.world_size); !st.ok()) return st;
  if (absl::Status st = CheckBytes(s.bytes, "bytes"); !st.ok()) return st;
  if (absl::Status st = CheckDuration(s.duration_us, "duration"); !st.ok()) return st;
  if (s.configuration.empty()) return absl::InvalidArgumentError("live sample without a configuration");
  if (absl::Status st = CheckTextBytes(s.configuration, kMaxTextBytes, "live sample configuration"); !st.ok())
    return st;
  return absl::OkStatus();
}

absl::Status ValidateSweepSample(const SweepSample& s) {
  if (absl::Status st = CheckWorld(s.world_size); !st.ok()) return st;
  if (absl::Status st = CheckBytes(s.bytes, "bytes"); !st.ok()) return st;
  if (absl::Status st = CheckDuration(s.time_us, "time"); !st.ok()) return st;
  if (absl::Status st = CheckDuration(s.rank_time_us, "rank time"); !st.ok()) return st;
  return Canonical(s.configuration, "sweep sample").status();
}

absl::Status ValidateSweep(const Sweep& s) {
  if (s.id.empty() || s.id.size() > 128) return absl::InvalidArgumentError("sweep id must have 1 to 128 characters");
  if (absl::Status st = CheckTextBytes(s.params_json, kMaxSweepJsonBytes, "sweep parameters JSON"); !st.ok()) return st;
  if (absl::Status st = CheckTextBytes(s.message, kMaxSweepJsonBytes, "sweep message"); !st.ok()) return st;
  if (!(s.progress >= 0 && s.progress <= 1)) return absl::InvalidArgumentError("sweep progress must be in [0, 1]");
  return absl::OkStatus();
}

absl::Status ValidateLinks(const StoredLinks& l) {
  if (absl::Status st = ValidateFingerprint(l.fingerprint); !st.ok()) return st;
  if (absl::Status st = CheckTextBytes(l.links_json, kMaxLinksJsonBytes, "link table JSON"); !st.ok()) return st;
  if (l.measured_unix_ms <= 0) return absl::InvalidArgumentError("link table: the measurement time must be > 0");
  nlohmann::json j = nlohmann::json::parse(l.links_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError("link table: not a JSON object");
  const auto ranks = j.find("ranks");
  if (ranks == j.end() || !ranks->is_number_integer() || ranks->get<int64_t>() < 2 ||
      ranks->get<int64_t>() > kMaxWorldSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("link table: \"ranks\" must be an integer in [2, ", kMaxWorldSize, "]"));
  }
  const auto links = j.find("links");
  if (links == j.end() || !links->is_array())
    return absl::InvalidArgumentError("link table: \"links\" must be an array");
  return absl::OkStatus();
}

absl::Status ValidateModel(const StoredModel& m) {
  if (absl::Status st = ValidateTopologyClass(m.topology_class); !st.ok()) return st;
  if (absl::Status st = CheckTextBytes(m.profile_json, kMaxTopologyJsonBytes, "model profile JSON"); !st.ok()) {
    return st;
  }
  if (absl::Status st = CheckTextBytes(m.source, kMaxTextBytes, "model source"); !st.ok()) return st;
  if (m.fitted_unix_ms <= 0) return absl::InvalidArgumentError("model: the fitting time must be > 0");
  nlohmann::json j = nlohmann::json::parse(m.profile_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("model for class ", m.topology_class, ": not a JSON object"));
  }
  return absl::OkStatus();
}

absl::Status ModelNotFound(absl::string_view topology_class, int64_t version) {
  if (version == 0)
    return absl::NotFoundError(absl::StrCat("no cost model stored for topology class ", topology_class));
  return absl::NotFoundError(absl::StrCat("topology class ", topology_class, " has no model version ", version));
}

ByteRange SizeBucket(uint64_t bytes) {
  if (bytes == 0) return ByteRange{0, 1};
  int k = 63 - __builtin_clzll(bytes);
  uint64_t lo = 1ull << k;
  return ByteRange{lo, k == 63 ? kUnbounded : lo << 1};
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::string_view SweepStatusName(SweepStatus s) {
  switch (s) {
    case SweepStatus::kPending: return "pending";
    case SweepStatus::kRunning: return "running";
    case SweepStatus::kDone: return "done";
    case SweepStatus::kFailed: return "failed";
    case SweepStatus::kCancelled: return "cancelled";
  }
  return "pending";
}

absl::StatusOr<SweepStatus> ParseSweepStatus(absl::string_view name) {
  for (SweepStatus s : {SweepStatus::kPending, SweepStatus::kRunning, SweepStatus::kDone, SweepStatus::kFailed,
                        SweepStatus::kCancelled}) {
    if (name == SweepStatusName(s)) return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown sweep status '", name, "': expected pending, running, done, failed or cancelled"));
}

void LatencyHistogram::Add(double us, uint64_t n) {
  int i = 0;
  if (us > kBase) i = static_cast<int>(std::floor(8.0 * std::log2(us / kBase)));
  i = std::clamp(i, 0, kBuckets - 1);
  counts_[i] += n;
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (int i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
}

uint64_t LatencyHistogram::Count() const {
  uint64_t n = 0;
  for (uint64_t c : counts_) n += c;
  return n;
}

double LatencyHistogram::Quantile(double q) const {
  const uint64_t total = Count();
  if (total == 0) return 0;
  // The smallest bucket whose cumulative count reaches ceil(q * total) (at least the first sample).
  const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(total))));
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank) return kBase * std::exp2((i + 0.5) / 8.0);
  }
  return kBase * std::exp2((kBuckets - 0.5) / 8.0);
}

std::string LatencyHistogram::Encode() const {
  std::string out(kBuckets * 8, '\0');
  for (int i = 0; i < kBuckets; ++i) {
    for (int b = 0; b < 8; ++b) out[i * 8 + b] = static_cast<char>((counts_[i] >> (8 * b)) & 0xff);
  }
  return out;
}

absl::StatusOr<LatencyHistogram> LatencyHistogram::Decode(absl::string_view blob) {
  if (blob.size() != kBuckets * 8) {
    return absl::DataLossError(absl::StrCat("latency histogram of ", blob.size(), " bytes, expected ", kBuckets * 8));
  }
  LatencyHistogram h;
  for (int i = 0; i < kBuckets; ++i) {
    uint64_t v = 0;
    for (int b = 7; b >= 0; --b) v = (v << 8) | static_cast<unsigned char>(blob[i * 8 + b]);
    h.counts_[i] = v;
  }
  return h;
}

}  // namespace hccltune::db
