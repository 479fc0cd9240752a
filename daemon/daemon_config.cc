#include "daemon/daemon_config.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/common/bounded_read.h"
#include "runtime/common/daemon_discovery.h"

namespace hccltune::daemon {

DaemonConfig DefaultDaemonConfig(const Environment& env, bool system_mode) {
  DaemonConfig c;
  if (system_mode) {
    c.socket = std::string(kSystemDaemonSocket);
    c.db = absl::StrCat(kSystemStateDir, "/tuning.db");
  } else {
    c.socket = UserDaemonSocket(env, ::getuid());
    if (!env.xdg_state_home.empty()) {
      c.db = absl::StrCat(env.xdg_state_home, "/hccl-tune/tuning.db");
    } else if (!env.home.empty()) {
      c.db = absl::StrCat(env.home, "/.local/state/hccl-tune/tuning.db");
    } else {
      c.db = absl::StrCat("/tmp/hccl-tune-", ::getuid(), "/tuning.db");
    }
  }
  c.log_level = LogLevel::kInfo;
  return c;
}

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text) {
  const std::string l = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  for (LogLevel lv : {LogLevel::kError, LogLevel::kWarn, LogLevel::kInfo, LogLevel::kDebug, LogLevel::kTrace}) {
    if (l == LogLevelName(lv)) return lv;
  }
  return absl::InvalidArgumentError(absl::StrCat("log level '", text, "': expected error, warn, info, debug or trace"));
}

absl::Status ApplyConfigText(absl::string_view text, absl::string_view origin, DaemonConfig* c,
                             std::vector<std::string>* keys_set) {
  if (text.size() > kMaxConfigFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": ", text.size(), " bytes, over the limit of ", kMaxConfigFileBytes, " bytes"));
  }
  int line_no = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_no;
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line[0] == '#') continue;
    auto where = [&] { return absl::StrCat(origin, ":", line_no, ": "); };
    size_t eq = line.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(where(), "expected key = value, got '", line, "'"));
    }
    const std::string key(absl::StripAsciiWhitespace(line.substr(0, eq)));
    const std::string value(absl::StripAsciiWhitespace(line.substr(eq + 1)));
    if (value.size() > kMaxConfigValueBytes) {
      return absl::InvalidArgumentError(absl::StrCat(where(), key.substr(0, 64), ": a value of ", value.size(),
                                                     " bytes is over the limit of ", kMaxConfigValueBytes, " bytes"));
    }
    auto int_value = [&](int64_t lo, int64_t hi, int64_t* out) -> absl::Status {
      if (!absl::SimpleAtoi(value, out) || *out < lo || *out > hi) {
        return absl::InvalidArgumentError(
            absl::StrCat(where(), key, " = '", value, "': expected an integer from ", lo, " to ", hi));
      }
      return absl::OkStatus();
    };
    auto double_value = [&](double* out) -> absl::Status {
      if (!absl::SimpleAtod(value, out) || !std::isfinite(*out)) {
        return absl::InvalidArgumentError(absl::StrCat(where(), key, " = '", value, "': expected a number"));
      }
      return absl::OkStatus();
    };
    int64_t n = 0;
    OnlinePolicyOptions& o = c->online;
    if (key == "socket") {
      c->socket = value;
    } else if (key == "listen") {
      c->listen = value;
    } else if (key == "insecure_listen") {
      if (value != "on" && value != "off") {
        return absl::InvalidArgumentError(absl::StrCat(where(), key, " = '", value, "': expected on or off"));
      }
      c->insecure_listen = value == "on";
    } else if (key == "tls_cert") {
      c->tls_cert = value;
    } else if (key == "tls_key") {
      c->tls_key = value;
    } else if (key == "tls_client_ca") {
      c->tls_client_ca = value;
    } else if (key == "tls_tuner_names") {
      c->tls_tuner_names = absl::StrSplit(value, ',', absl::SkipWhitespace());
      for (std::string& name : c->tls_tuner_names) name = std::string(absl::StripAsciiWhitespace(name));
    } else if (key == "tuner_group") {
      c->tuner_group = value;
    } else if (key == "db") {
      c->db = value;
    } else if (key == "log_level") {
      auto lv = ParseLogLevel(value);
      if (!lv.ok()) return absl::InvalidArgumentError(absl::StrCat(where(), lv.status().message()));
      c->log_level = *lv;
    } else if (key == "max_versions") {
      if (absl::Status s = int_value(2, 10000, &n); !s.ok()) return s;
      c->max_versions = static_cast<int>(n);
    } else if (key == "ingest_queue_samples") {
      if (absl::Status s = int_value(1024, 1 << 24, &n); !s.ok()) return s;
      c->ingest_queue_samples = static_cast<size_t>(n);
    } else if (key == "metrics_port") {
      if (absl::Status s = int_value(0, 65535, &n); !s.ok()) return s;
      c->metrics_port = static_cast<int>(n);
    } else if (key == "metrics_address") {
      c->metrics_address = value;
    } else if (key == "sweep_command") {
      c->sweep_command = std::string(value);
    } else if (key == "max_message_bytes") {
      if (absl::Status s = int_value(64 << 10, 64 << 20, &n); !s.ok()) return s;
      c->max_message_bytes = static_cast<int>(n);
    } else if (key == "online_policy") {
      if (value != "on" && value != "off") {
        return absl::InvalidArgumentError(absl::StrCat(where(), key, " = '", value, "': expected on or off"));
      }
      o.enabled = value == "on";
    } else if (key == "mini_sweep") {
      if (value != "on" && value != "off") {
        return absl::InvalidArgumentError(absl::StrCat(where(), key, " = '", value, "': expected on or off"));
      }
      c->mini_sweep.enabled = value == "on";
    } else if (key == "mini_sweep_idle_s") {
      if (absl::Status s = int_value(1, 86400, &n); !s.ok()) return s;
      c->mini_sweep.idle_s = static_cast<int>(n);
    } else if (key == "mini_sweep_max_per_hour") {
      if (absl::Status s = int_value(1, 3600, &n); !s.ok()) return s;
      c->mini_sweep.max_per_hour = static_cast<int>(n);
    } else if (key == "online_cooldown_s") {
      if (absl::Status s = int_value(0, 86400, &n); !s.ok()) return s;
      o.cooldown_s = static_cast<int>(n);
    } else if (key == "online_regression_ratio") {
      if (absl::Status s = double_value(&o.regression_ratio); !s.ok()) return s;
    } else if (key == "online_min_regression_us") {
      if (absl::Status s = double_value(&o.min_regression_us); !s.ok()) return s;
    } else if (key == "online_explore_max_ratio") {
      if (absl::Status s = double_value(&o.explore_max_ratio); !s.ok()) return s;
    } else if (key == "online_min_samples" || key == "online_window" || key == "online_explore_every" ||
               key == "online_explore_calls" || key == "online_explore_min_samples" || key == "online_interval_ms" ||
               key == "online_explore_timeout_s") {
      if (absl::Status s = int_value(1, 1 << 24, &n); !s.ok()) return s;
      int* field = key == "online_min_samples"           ? &o.min_samples
                   : key == "online_window"              ? &o.window
                   : key == "online_explore_every"       ? &o.explore_every
                   : key == "online_explore_calls"       ? &o.explore_calls
                   : key == "online_explore_min_samples" ? &o.explore_min_samples
                   : key == "online_interval_ms"         ? &o.interval_ms
                                                         : &o.explore_timeout_s;
      *field = static_cast<int>(n);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          where(), "unknown key '", key,
          "'; accepted: socket, listen, db, log_level, max_versions, ingest_queue_samples, max_message_bytes, "
          "sweep_command, "
          "online_policy, online_regression_ratio, online_min_samples, online_window, online_explore_every, "
          "online_explore_calls, online_explore_max_ratio, online_explore_min_samples, online_interval_ms, "
          "online_explore_timeout_s, online_cooldown_s, online_min_regression_us, mini_sweep, mini_sweep_idle_s, "
          "mini_sweep_max_per_hour"));
    }
    if (keys_set != nullptr) keys_set->push_back(key);
  }
  if (absl::Status s = ValidateOnlinePolicyOptions(c->online); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", s.message()));
  }
  if (absl::Status s = ValidateMiniSweepOptions(c->mini_sweep); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status ApplyConfigFile(const std::string& path, DaemonConfig* config, std::vector<std::string>* keys_set) {
  auto text = ReadFileAtMost(path, kMaxConfigFileBytes, "config file");
  if (!text.ok()) return text.status();
  return ApplyConfigText(*text, path, config, keys_set);
}

std::vector<std::string> ChangedConfigKeys(const DaemonConfig& a, const DaemonConfig& b) {
  std::vector<std::string> out;
  auto check = [&out](const char* key, bool same) {
    if (!same) out.push_back(key);
  };
  const OnlinePolicyOptions &x = a.online, &y = b.online;
  check("socket", a.socket == b.socket);
  check("listen", a.listen == b.listen);
  check("insecure_listen", a.insecure_listen == b.insecure_listen);
  check("tls_cert", a.tls_cert == b.tls_cert);
  check("tls_key", a.tls_key == b.tls_key);
  check("tls_client_ca", a.tls_client_ca == b.tls_client_ca);
  check("tls_tuner_names", a.tls_tuner_names == b.tls_tuner_names);
  check("tuner_group", a.tuner_group == b.tuner_group);
  check("db", a.db == b.db);
  check("log_level", a.log_level == b.log_level);
  check("max_versions", a.max_versions == b.max_versions);
  check("ingest_queue_samples", a.ingest_queue_samples == b.ingest_queue_samples);
  check("max_message_bytes", a.max_message_bytes == b.max_message_bytes);
  check("sweep_command", a.sweep_command == b.sweep_command);
  check("metrics_port", a.metrics_port == b.metrics_port);
  check("metrics_address", a.metrics_address == b.metrics_address);
  check("online_policy", x.enabled == y.enabled);
  check("online_regression_ratio", x.regression_ratio == y.regression_ratio);
  check("online_min_samples", x.min_samples == y.min_samples);
  check("online_window", x.window == y.window);
  check("online_explore_every", x.explore_every == y.explore_every);
  check("online_explore_calls", x.explore_calls == y.explore_calls);
  check("online_explore_max_ratio", x.explore_max_ratio == y.explore_max_ratio);
  check("online_explore_min_samples", x.explore_min_samples == y.explore_min_samples);
  check("online_interval_ms", x.interval_ms == y.interval_ms);
  check("online_explore_timeout_s", x.explore_timeout_s == y.explore_timeout_s);
  check("online_cooldown_s", x.cooldown_s == y.cooldown_s);
  check("online_min_regression_us", x.min_regression_us == y.min_regression_us);
  check("mini_sweep", a.mini_sweep.enabled == b.mini_sweep.enabled);
  check("mini_sweep_idle_s", a.mini_sweep.idle_s == b.mini_sweep.idle_s);
  check("mini_sweep_max_per_hour", a.mini_sweep.max_per_hour == b.mini_sweep.max_per_hour);
  return out;
}

}  // namespace hccltune::daemon
