#include "runtime/common/config.h"

#include <csignal>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/common/configuration.h"
#include "runtime/common/launcher_env.h"
#include "runtime/common/status_macros.h"

namespace hccltune {
namespace {

absl::Status Bad(const std::string& var, const std::string& value, absl::string_view accepted) {
  return absl::InvalidArgumentError(absl::StrCat(var, "='", value, "' is invalid: expected ", accepted));
}

template <typename T>
absl::Status ReadIntInto(const Environment::Source& src, const std::string& var, int64_t lo, int64_t hi, T& out) {
  std::optional<int64_t> v;
  HT_RETURN_IF_ERROR(ReadIntVariable(src, var, lo, hi, v));
  if (v) out = static_cast<T>(*v);
  return absl::OkStatus();
}

// Reads "auto" (-> `automatic`), "off"/"0" (-> kUnbounded) or a positive byte size such as 32M; absent: unchanged.
// `what` names the size in the error ("a call size", "an allocation size").
absl::Status ReadAutoOffBytes(const Environment::Source& src, const std::string& var, uint64_t automatic,
                              absl::string_view what, uint64_t& out) {
  auto v = src(var);
  if (!v) return absl::OkStatus();
  const std::string a = absl::AsciiStrToLower(absl::StripAsciiWhitespace(*v));
  if (a == "auto") {
    out = automatic;
  } else if (a == "off" || a == "0") {
    out = kUnbounded;
  } else {
    auto b = ParseBytes(a);
    if (!b.ok() || *b == 0) return Bad(var, *v, absl::StrCat("auto, off or ", what, " such as 32M"));
    out = *b;
  }
  return absl::OkStatus();
}

std::string ReadString(const Environment::Source& src, const std::string& var) {
  auto v = src(var);
  return v ? std::string(absl::StripAsciiWhitespace(*v)) : std::string();
}

constexpr int kDay = 24 * 3600;

// The process environment: the only getenv of the project.
std::optional<std::string> ProcessVariable(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

absl::Status ReadTorchAlias(const Environment::Source& src, bool& out) {
  auto v = src("HCCL_TUNE_TORCH_ALIAS");
  if (!v) return absl::OkStatus();
  const std::string a = absl::AsciiStrToLower(absl::StripAsciiWhitespace(*v));
  if (a == "0" || a == "false" || a == "off") {
    out = false;
  } else if (a == "1" || a == "true" || a == "on") {
    out = true;
  } else {
    return Bad("HCCL_TUNE_TORCH_ALIAS", *v, "0 or 1");
  }
  return absl::OkStatus();
}

// HCCL_TUNE_SINGLE_COPY: auto (on, 1), off (0), or the smallest message to single-copy.
absl::Status ReadSingleCopy(const Environment::Source& src, Environment& e) {
  if (auto v = src("HCCL_TUNE_SINGLE_COPY")) {
    const std::string a = absl::AsciiStrToLower(absl::StripAsciiWhitespace(*v));
    if (a == "auto" || a == "on" || a == "1") {
      e.single_copy = true;
    } else if (a == "off" || a == "0") {
      e.single_copy = false;
    } else if (auto b = ParseBytes(a); b.ok() && *b > 0) {
      e.single_copy = true;
      e.single_copy_min_bytes = *b;
    } else {
      return Bad("HCCL_TUNE_SINGLE_COPY", *v, "auto, off or the smallest message to single-copy such as 64K");
    }
  }
  return absl::OkStatus();
}

// HCCL_TUNE_IB_HCA, HCCL_TUNE_IB_GID_INDEX and HCCL's HCCL_RDMA_TC (a multiple of 4: the DSCP times 4) and
// HCCL_RDMA_SL.
absl::Status ReadRdma(const Environment::Source& src, RdmaEnv& out) {
  if (auto v = src("HCCL_TUNE_IB_HCA")) {
    auto list = ParseHcaList(*v);
    if (!list.ok()) return list.status();
    out.hca = *std::move(list);
  }
  HT_RETURN_IF_ERROR(ReadOptInt(src, "HCCL_TUNE_IB_GID_INDEX", 0, 255, out.gid_index));
  HT_RETURN_IF_ERROR(ReadOptInt(src, "HCCL_RDMA_TC", 0, 255, out.tc));
  if (out.tc && *out.tc % 4 != 0) {
    return Bad("HCCL_RDMA_TC", *src("HCCL_RDMA_TC"), "a multiple of 4 from 0 to 255 (the DSCP times 4)");
  }
  return ReadOptInt(src, "HCCL_RDMA_SL", 0, 7, out.sl);
}

}  // namespace

absl::Status ReadIntVariable(const Environment::Source& src, const std::string& var, int64_t lo, int64_t hi,
                             std::optional<int64_t>& out) {
  auto v = src(var);
  if (!v) return absl::OkStatus();
  int64_t n = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*v), &n) || n < lo || n > hi) {
    return Bad(var, *v, absl::StrCat("an integer from ", lo, " to ", hi));
  }
  out = n;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TestDelay>> ParseTestDelay(absl::string_view text) {
  std::vector<TestDelay> out;
  constexpr absl::string_view kForm = "COLLECTIVE:ALGORITHM=DELAY[,...][/...] with DELAY like 200us, 2ms or 1s";
  auto bad = [&](absl::string_view part, absl::string_view why) {
    return Bad("HCCL_TUNE_TEST_DELAY", std::string(text), absl::StrCat(kForm, " ('", part, "': ", why, ")"));
  };
  for (absl::string_view group : absl::StrSplit(text, '/', absl::SkipWhitespace())) {
    group = absl::StripAsciiWhitespace(group);
    const size_t colon = group.find(':');
    if (colon == absl::string_view::npos) return bad(group, "no ':' after the collective");
    auto coll = ParseCollective(absl::StripAsciiWhitespace(group.substr(0, colon)));
    if (!coll.ok()) return bad(group, coll.status().message());
    // Split on ',' outside parentheses: configurations hold commas.
    absl::string_view rest = group.substr(colon + 1);
    size_t start = 0;
    int depth = 0;
    for (size_t i = 0; i <= rest.size(); ++i) {
      if (i < rest.size() && rest[i] == '(') ++depth;
      if (i < rest.size() && rest[i] == ')') --depth;
      if (i < rest.size() && (rest[i] != ',' || depth > 0)) continue;
      absl::string_view item = absl::StripAsciiWhitespace(rest.substr(start, i - start));
      start = i + 1;
      const size_t eq = item.rfind('=');
      if (eq == absl::string_view::npos) return bad(item, "no '=DELAY'");
      absl::string_view what = absl::StripAsciiWhitespace(item.substr(0, eq));
      absl::string_view delay = absl::StripAsciiWhitespace(item.substr(eq + 1));
      double scale = 0;
      if (absl::ConsumeSuffix(&delay, "us")) {
        scale = 1;
      } else if (absl::ConsumeSuffix(&delay, "ms")) {
        scale = 1e3;
      } else if (absl::ConsumeSuffix(&delay, "s")) {
        scale = 1e6;
      } else {
        return bad(item, "the delay needs a unit: us, ms or s");
      }
      double v = 0;
      if (!absl::SimpleAtod(delay, &v) || !(v >= 0) || v * scale > 10e6) {
        return bad(item, "the delay must be a number from 0 to 10 s");
      }
      auto cfg = Configuration::Parse(what);
      if (!cfg.ok()) return bad(item, cfg.status().message());
      TestDelay d;
      d.collective = *coll;
      d.match = what.find('(') == absl::string_view::npos ? std::string(what) : cfg->ToString();
      d.delay_us = v * scale;
      out.push_back(std::move(d));
    }
  }
  return out;
}

absl::string_view TuneModeName(TuneMode m) {
  switch (m) {
    case TuneMode::kOff: return "off";
    case TuneMode::kStatic: return "static";
    case TuneMode::kOnline: return "online";
  }
  return "online";
}

absl::string_view LogLevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kError: return "error";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kInfo: return "info";
    case LogLevel::kDebug: return "debug";
    case LogLevel::kTrace: return "trace";
  }
  return "warn";
}

absl::StatusOr<Environment> Environment::Load() { return LoadFrom(ProcessVariable); }

absl::StatusOr<bool> Environment::LoadTorchAlias() { return LoadTorchAliasFrom(ProcessVariable); }

absl::StatusOr<Environment::DaemonTls> Environment::LoadDaemonTls() { return LoadDaemonTlsFrom(ProcessVariable); }

absl::StatusOr<Environment::DaemonTls> Environment::LoadDaemonTlsFrom(const Source& source) {
  DaemonTls tls{ReadString(source, "HCCL_TUNE_DAEMON_TLS_CA"), ReadString(source, "HCCL_TUNE_DAEMON_TLS_CERT"),
                ReadString(source, "HCCL_TUNE_DAEMON_TLS_KEY")};
  const int set = !tls.ca.empty() + !tls.cert.empty() + !tls.key.empty();
  if (set != 0 && set != 3) {
    return absl::InvalidArgumentError(
        "HCCL_TUNE_DAEMON_TLS_CA, HCCL_TUNE_DAEMON_TLS_CERT and HCCL_TUNE_DAEMON_TLS_KEY: set all three or none");
  }
  return tls;
}

absl::StatusOr<bool> Environment::LoadTorchAliasFrom(const Source& source) {
  bool alias = Environment{}.torch_alias;
  HT_RETURN_IF_ERROR(ReadTorchAlias(source, alias));
  return alias;
}

absl::StatusOr<Environment> Environment::LoadFrom(const std::map<std::string, std::string>& vars) {
  return LoadFrom([&vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

namespace {
// HCCL_TUNE_FR_ENTRIES, HCCL_TUNE_FR_DUMP_DIR, HCCL_TUNE_FR_SIGNAL.
absl::Status ReadFlightRecorder(const Environment::Source& src, Environment& e) {
  HT_RETURN_IF_ERROR(ReadIntInto(src, "HCCL_TUNE_FR_ENTRIES", 0, Environment::kMaxFrEntries, e.fr_entries));
  e.fr_dump_dir = ReadString(src, "HCCL_TUNE_FR_DUMP_DIR");
  if (auto v = src("HCCL_TUNE_FR_SIGNAL")) {
    std::string name = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(*v));
    if (absl::StartsWith(name, "SIG")) name = name.substr(3);
    if (name == "USR1") {
      e.fr_signal = SIGUSR1;
    } else if (name == "USR2") {
      e.fr_signal = SIGUSR2;
    } else if (name == "OFF" || name.empty()) {
      e.fr_signal = 0;
    } else {
      return Bad("HCCL_TUNE_FR_SIGNAL", *v, "SIGUSR1, SIGUSR2 or off");
    }
  }
  return absl::OkStatus();
}

// HCCL_TUNE_JOB_SECRET, HCCL_TUNE_JOB_SECRET_FILE, HCCL_WHITELIST_DISABLE, HCCL_WHITELIST_FILE.
absl::Status ReadJobAuth(const Environment::Source& src, Environment& e) {
  e.job_secret = ReadString(src, "HCCL_TUNE_JOB_SECRET");
  e.job_secret_file = ReadString(src, "HCCL_TUNE_JOB_SECRET_FILE");
  if (!e.job_secret.empty() && !e.job_secret_file.empty()) {
    return absl::InvalidArgumentError("HCCL_TUNE_JOB_SECRET and HCCL_TUNE_JOB_SECRET_FILE are both set: set one");
  }
  if (auto v = src("HCCL_WHITELIST_DISABLE")) {
    const std::string d(absl::StripAsciiWhitespace(*v));
    if (d != "0" && d != "1") return Bad("HCCL_WHITELIST_DISABLE", *v, "0 (whitelist on) or 1 (off, the default)");
    e.whitelist_enabled = d == "0";
  }
  e.whitelist_file = ReadString(src, "HCCL_WHITELIST_FILE");
  if (e.whitelist_enabled && e.whitelist_file.empty()) {
    return absl::InvalidArgumentError("HCCL_WHITELIST_DISABLE=0 turns the whitelist on and needs HCCL_WHITELIST_FILE");
  }
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<Environment> Environment::LoadFrom(const Source& src) {
  Environment e;

  e.hccl_algo = ReadString(src, "HCCL_ALGO");
  {
    std::optional<int64_t> mb;
    HT_RETURN_IF_ERROR(ReadIntVariable(src, "HCCL_BUFFSIZE", 1, 64 * 1024, mb));
    if (mb) e.buffsize_bytes = static_cast<uint64_t>(*mb) << 20;
  }
  HT_RETURN_IF_ERROR(ReadIntInto(src, "HCCL_CONNECT_TIMEOUT", 1, kDay, e.connect_timeout_s));
  HT_RETURN_IF_ERROR(ReadIntInto(src, "HCCL_EXEC_TIMEOUT", kMinExecTimeoutS, kMaxExecTimeoutS, e.exec_timeout_s));
  e.socket_ifname = ReadString(src, "HCCL_SOCKET_IFNAME");
  e.rank_table_file = ReadString(src, "RANK_TABLE_FILE");
  HT_RETURN_IF_ERROR(ReadOptInt(src, "RANK_ID", 0, kMaxRanks - 1, e.rank_id));

  e.tune_algo = ReadString(src, "HCCL_TUNE_ALGO");
  e.daemon = ReadString(src, "HCCL_TUNE_DAEMON");
  if (auto v = src("HCCL_TUNE_MODE")) {
    const std::string m = absl::AsciiStrToLower(absl::StripAsciiWhitespace(*v));
    if (m == "off") {
      e.mode = TuneMode::kOff;
    } else if (m == "static") {
      e.mode = TuneMode::kStatic;
    } else if (m == "online") {
      e.mode = TuneMode::kOnline;
    } else {
      return Bad("HCCL_TUNE_MODE", *v, "off, static or online");
    }
  }
  if (auto v = src("HCCL_TUNE_SAMPLE_RATE")) {
    double r = 0;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(*v), &r) || !(r >= 0.0 && r <= 1.0)) {
      return Bad("HCCL_TUNE_SAMPLE_RATE", *v, "a fraction of calls from 0 to 1 (e.g. 0.01)");
    }
    e.sample_rate = r;
  }
  if (auto v = src("HCCL_TUNE_LOG_LEVEL")) {
    const std::string l = absl::AsciiStrToLower(absl::StripAsciiWhitespace(*v));
    bool found = false;
    for (LogLevel lv : {LogLevel::kError, LogLevel::kWarn, LogLevel::kInfo, LogLevel::kDebug, LogLevel::kTrace}) {
      if (l == LogLevelName(lv)) {
        e.log_level = lv;
        found = true;
      }
    }
    if (!found) return Bad("HCCL_TUNE_LOG_LEVEL", *v, "error, warn, info, debug or trace");
  }
  e.node_id = ReadString(src, "HCCL_TUNE_NODE_ID");
  HT_RETURN_IF_ERROR(ReadOptInt(src, "HCCL_TUNE_DEVICE", 0, 1 << 16, e.device));
  e.master_addr = ReadString(src, "HCCL_TUNE_MASTER_ADDR");
  HT_RETURN_IF_ERROR(ReadOptInt(src, "HCCL_TUNE_MASTER_PORT", 1, 65535, e.master_port));
  e.store = ReadString(src, "HCCL_TUNE_STORE");
  if (!e.store.empty() && e.store.rfind("file://", 0) != 0 && e.store.rfind("tcp://", 0) != 0) {
    return Bad("HCCL_TUNE_STORE", e.store, "file:///path/to/shared/dir or tcp://HOST:PORT (a running hccl-tune store)");
  }
  if (e.store.rfind("tcp://", 0) == 0) {
    const size_t colon = e.store.rfind(':');
    int port = 0;
    // The host is not empty (the last ':' comes after "tcp://" and at least one character).
    if (colon <= 6 || !absl::SimpleAtoi(e.store.substr(colon + 1), &port) || port < 1 || port > 65535) {
      return Bad("HCCL_TUNE_STORE", e.store, "tcp://HOST:PORT with a PORT from 1 to 65535");
    }
  }
  HT_RETURN_IF_ERROR(ReadOptInt(src, "HCCL_TUNE_TABLE_VERSION", 1, INT64_MAX, e.table_version));
  HT_RETURN_IF_ERROR(ReadTorchAlias(src, e.torch_alias));

  HT_RETURN_IF_ERROR(ReadIntInto(src, "HCCL_TUNE_SYNC_INTERVAL", 1, 1 << 20, e.sync_interval));
  HT_RETURN_IF_ERROR(ReadIntInto(src, "HCCL_TUNE_FETCH_TIMEOUT_MS", 0, 60000, e.fetch_timeout_ms));
  HT_RETURN_IF_ERROR(ReadIntInto(src, "HCCL_TUNE_KILL_GRACE", 0, kMaxKillGraceS, e.kill_grace_s));
  if (auto v = src("HCCL_TUNE_TEST_DELAY")) {
    auto delays = ParseTestDelay(*v);
    if (!delays.ok()) return delays.status();
    e.test_delays = *std::move(delays);
  }
  HT_RETURN_IF_ERROR(ReadSingleCopy(src, e));
  HT_RETURN_IF_ERROR(
      ReadAutoOffBytes(src, "HCCL_TUNE_NT_STORES", kDefaultNtStoresBytes, "a call size", e.nt_stores_bytes));
  e.nt_stores_auto = [&] {
    auto v = src("HCCL_TUNE_NT_STORES");
    return !v || absl::AsciiStrToLower(absl::StripAsciiWhitespace(*v)) == "auto";
  }();
  HT_RETURN_IF_ERROR(
      ReadAutoOffBytes(src, "HCCL_TUNE_HUGE_PAGES", kDefaultHugePagesBytes, "an allocation size", e.huge_pages_bytes));
  HT_RETURN_IF_ERROR(ReadAutoOffBytes(src, "HCCL_TUNE_THP", kDefaultThpBytes, "a buffer size", e.thp_bytes));
  HT_RETURN_IF_ERROR(ReadRdma(src, e.rdma));
  HT_RETURN_IF_ERROR(ReadFlightRecorder(src, e));
  HT_RETURN_IF_ERROR(ReadJobAuth(src, e));

  HT_RETURN_IF_ERROR(ReadLauncherEnvironment(src, e));
  e.launcher_master_addr = ReadString(src, "MASTER_ADDR");
  HT_RETURN_IF_ERROR(ReadOptInt(src, "MASTER_PORT", 1, 65535, e.launcher_master_port));
  e.xdg_runtime_dir = ReadString(src, "XDG_RUNTIME_DIR");
  e.xdg_state_home = ReadString(src, "XDG_STATE_HOME");
  e.home = ReadString(src, "HOME");
  e.path = ReadString(src, "PATH");
  return e;
}

}  // namespace hccltune
