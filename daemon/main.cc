// hccl-tuned: the per-node tuning daemon (docs/ARCHITECTURE.md). Serves hccltune.v1.Tuner on a unix socket
// (and optionally TCP), keeps the tuning database, aggregates live timings.
//
// Signals: SIGTERM/SIGINT stop cleanly (stop accepting, end streams, persist queued samples, close the database,
// exit 0); SIGHUP re-reads the config file. Under systemd (Type=notify) it reports READY=1 and STOPPING=1.
#include <fcntl.h>
#include <signal.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/daemon_config.h"
#include "daemon/server.h"
#include "hccltune/version.h"
#include "runtime/common/daemon_discovery.h"
#include "runtime/common/logging.h"

namespace {

using hccltune::LogLevel;

// Signals arrive on whichever thread the kernel picks (libraries may start threads before main), so the handler
// only writes the signal number to a pipe that the main thread reads.
int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  const int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  ssize_t ignored = ::write(g_signal_pipe[1], &b, 1);
  (void)ignored;
  errno = saved;
}
using hccltune::daemon::DaemonConfig;

struct Flags {
  std::string socket, listen, db, config, log_level, sweep_command;
  bool no_socket = false;
  bool insecure = false;
};

// Defaults, then the config file, then flags.
absl::StatusOr<DaemonConfig> BuildConfig(const hccltune::Environment& env, const Flags& f, bool config_explicit) {
  DaemonConfig c = hccltune::daemon::DefaultDaemonConfig(env, ::geteuid() == 0);
  if (!f.config.empty()) {
    absl::Status s = hccltune::daemon::ApplyConfigFile(f.config, &c);
    // The default config file is optional; one named on the command line is not.
    if (!s.ok() && (config_explicit || s.code() != absl::StatusCode::kNotFound)) return s;
  }
  if (!f.socket.empty()) c.socket = f.socket;
  if (f.no_socket) c.socket.clear();
  if (!f.listen.empty()) c.listen = f.listen;
  if (f.insecure) c.insecure_listen = true;
  if (!f.db.empty()) c.db = f.db;
  if (!f.sweep_command.empty()) c.sweep_command = f.sweep_command;
  if (!f.log_level.empty()) {
    auto lv = hccltune::daemon::ParseLogLevel(f.log_level);
    if (!lv.ok()) return lv.status();
    c.log_level = *lv;
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hccl-tuned — the hccl-tune tuning daemon (serves hccltune.v1.Tuner)"};
  app.name("hccl-tuned");
  app.set_version_flag("--version", std::string("hccl-tuned ") + HCCL_TUNE_VERSION);
  Flags f;
  f.config = HCCL_TUNED_CONFIG;  // the installed config file (daemon/CMakeLists.txt)
  app.add_option("--socket", f.socket,
                 "Unix socket to listen on (default: /run/hccl-tune/tuned.sock as root, else "
                 "$XDG_RUNTIME_DIR/hccl-tune/tuned.sock or /tmp/hccl-tune-$UID/tuned.sock)");
  app.add_flag("--no-socket", f.no_socket, "Do not listen on a unix socket (needs --listen)");
  app.add_option("--listen", f.listen, "Also listen on TCP HOST:PORT (off by default)");
  app.add_flag("--insecure", f.insecure,
               "Allow --listen on a non-loopback address in plaintext: its clients are unauthenticated tuners");
  app.add_option("--db", f.db, "Tuning database (default: /var/lib/hccl-tune/tuning.db as root)");
  auto* config_opt = app.add_option("--config", f.config, "Config file (key = value)")->capture_default_str();
  app.add_option("--log-level", f.log_level, "error, warn, info, debug or trace (default info)");
  app.add_option("--sweep-command", f.sweep_command,
                 "hccl-tune binary that daemon-run sweeps execute (default: the one installed beside hccl-tuned)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (::pipe2(g_signal_pipe, O_CLOEXEC) != 0) {
    std::perror("hccl-tuned: pipe");
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto env = hccltune::Environment::Load();
  if (!env.ok()) {
    std::fprintf(stderr, "hccl-tuned: %s\n", std::string(env.status().message()).c_str());
    return 2;
  }
  const bool config_explicit = config_opt->count() > 0;
  auto config = BuildConfig(*env, f, config_explicit);
  if (!config.ok()) {
    std::fprintf(stderr, "hccl-tuned: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  hccltune::SetLogLevel(config->log_level);

  auto server = hccltune::daemon::TunerServer::Start(*config);
  if (!server.ok()) {
    hccltune::Log(LogLevel::kError, "cannot start: ", server.status().message());
    sd_notifyf(0, "STATUS=cannot start: %s", std::string(server.status().message()).c_str());
    return 1;
  }
  sd_notify(0, "READY=1\nSTATUS=serving");
  hccltune::Log(LogLevel::kInfo, "hccl-tuned ", HCCL_TUNE_VERSION, " ready (pid ", ::getpid(), ")");

  while (true) {
    unsigned char b = 0;
    ssize_t n = ::read(g_signal_pipe[0], &b, 1);
    if (n != 1) continue;  // EINTR
    const int sig = b;
    if (sig == SIGHUP) {
      sd_notify(0, "RELOADING=1");
      auto reloaded = BuildConfig(*env, f, config_explicit);
      if (!reloaded.ok()) {
        hccltune::Log(LogLevel::kError, "reload failed, keeping the running settings: ", reloaded.status().message());
      } else {
        // Only log_level applies to a running daemon; every other changed key is named, not silently ignored.
        std::vector<std::string> restart;
        for (const std::string& key : hccltune::daemon::ChangedConfigKeys(*config, *reloaded)) {
          if (key != "log_level") restart.push_back(key);
        }
        const LogLevel old_level = config->log_level;
        hccltune::SetLogLevel(reloaded->log_level);
        config->log_level = reloaded->log_level;
        if (!restart.empty()) {
          hccltune::Log(LogLevel::kWarn, "reload of ", f.config, ": ", absl::StrJoin(restart, ", "),
                        restart.size() == 1 ? " changed; it takes" : " changed; they take",
                        " effect only when hccl-tuned is restarted (the running daemon keeps its values)");
        }
        hccltune::Log(
            LogLevel::kInfo, "reloaded ", f.config,
            ": applied log_level = ", hccltune::LogLevelName(reloaded->log_level),
            old_level == reloaded->log_level ? " (unchanged)" : "",
            restart.empty() ? "" : absl::StrCat("; not applied until a restart: ", absl::StrJoin(restart, ", ")));
      }
      sd_notify(0, "READY=1");
      continue;
    }
    hccltune::Log(LogLevel::kInfo, "signal ", sig, ": stopping");
    sd_notify(0, "STOPPING=1");
    (*server)->Stop(absl::Seconds(5));
    hccltune::Log(LogLevel::kInfo, "stopped cleanly");
    return 0;
  }
}
