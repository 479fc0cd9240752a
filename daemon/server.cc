#include "daemon/server.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "db/sqlite_store.h"
#include "rpc/channel.h"
#include "rpc/proto_convert.h"
#include "runtime/common/daemon_discovery.h"
#include "runtime/common/logging.h"

namespace hccltune::daemon {
namespace {

std::string Errno() { return std::strerror(errno); }

// Creates `dir` (and parents) when missing, then checks that it is a writable directory.
absl::Status EnsureWritableDir(const std::string& dir, mode_t mode, absl::string_view what) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", what, " ", dir, ": ", ec.message()));
    ::chmod(dir.c_str(), mode);
  }
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(absl::StrCat(what, " ", dir, " is not a directory"));
  }
  // access() reports EROFS for a read-only mount even to root, who ignores permission bits.
  if (::access(dir.c_str(), W_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(what, " ", dir, " is not writable: ", Errno()));
  }
  return absl::OkStatus();
}

// Whether `listen` ("host:port") binds a loopback address only: 127.0.0.0/8, ::1 or localhost.
bool IsLoopbackListen(const std::string& listen) {
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view key) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) return absl::InvalidArgumentError(absl::StrCat(key, " = ", path, ": cannot read it"));
  return text.str();
}

// The TCP listener's credentials: TLS requiring a client certificate signed by tls_client_ca when the tls_* keys
// are set, else plaintext (refused on a non-loopback address unless insecure_listen).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TcpCredentials(const DaemonConfig& c) {
  const int set = !c.tls_cert.empty() + !c.tls_key.empty() + !c.tls_client_ca.empty();
  if (set == 0) {
    if (!c.insecure_listen && !IsLoopbackListen(c.listen)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "refusing to listen in plaintext on ", c.listen,
          " (not a loopback address): its clients would be unauthenticated tuners; set tls_cert, tls_key and "
          "tls_client_ca, listen on 127.0.0.1, or pass --insecure (config: insecure_listen = on)"));
    }
    return grpc::InsecureServerCredentials();
  }
  if (set != 3) return absl::InvalidArgumentError("TLS needs all of tls_cert, tls_key and tls_client_ca");
  auto cert = ReadPem(c.tls_cert, "tls_cert");
  auto key = ReadPem(c.tls_key, "tls_key");
  auto ca = ReadPem(c.tls_client_ca, "tls_client_ca");
  for (const auto* s : {&cert, &key, &ca}) {
    if (!s->ok()) return s->status();
  }
  grpc::SslServerCredentialsOptions options(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = *ca;
  options.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(options);
}

std::string Parent(const std::string& path) {
  std::string p = std::filesystem::path(path).parent_path().string();
  return p.empty() ? "." : p;
}

}  // namespace

absl::Status TunerServer::TakeSocket() {
  const std::string& path = config_.socket;
  if (path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path ", path, " is too long for a unix socket"));
  }
  if (absl::Status s = EnsureWritableDir(Parent(path), 0750, "socket directory"); !s.ok()) return s;
  const std::string lock_path = path + ".lock";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0660);
  if (lock_fd_ < 0) return absl::FailedPreconditionError(absl::StrCat("cannot open ", lock_path, ": ", Errno()));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
    return absl::FailedPreconditionError(
        absl::StrCat("another hccl-tuned is serving ", path, " (it holds ", lock_path, "); stop it or use --socket"));
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a socket; refusing to replace it"));
    }
    if (UnixSocketAnswers(path)) {
      return absl::FailedPreconditionError(absl::StrCat("a live server answers on ", path, "; refusing to replace it"));
    }
    Log(LogLevel::kInfo, "replacing stale socket ", path);
    if (::unlink(path.c_str()) != 0) {
      return absl::FailedPreconditionError(absl::StrCat("cannot remove stale socket ", path, ": ", Errno()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TunerServer>> TunerServer::Start(const DaemonConfig& config) {
  std::unique_ptr<TunerServer> s(new TunerServer());
  s->config_ = config;
  if (config.socket.empty() && config.listen.empty()) {
    return absl::InvalidArgumentError("nothing to listen on: give --socket or --listen");
  }
  std::shared_ptr<grpc::ServerCredentials> tcp_credentials;
  if (!config.listen.empty()) {
    auto creds = TcpCredentials(config);
    if (!creds.ok()) return creds.status();
    tcp_credentials = *std::move(creds);
  }
  if (absl::Status st = EnsureWritableDir(Parent(config.db), 0750, "state directory"); !st.ok()) return st;
  db::StoreOptions store_options;
  store_options.max_versions = config.max_versions;
  auto store = db::OpenSqliteTuningStore(config.db, store_options);
  if (!store.ok()) return store.status();
  s->store_ = *std::move(store);
  if (!config.socket.empty()) {
    if (absl::Status st = s->TakeSocket(); !st.ok()) return st;
  }

  IngestOptions ingest;
  ingest.max_queued = config.ingest_queue_samples;
  s->ingest_ = std::make_unique<LiveIngest>(s->store_.get(), ingest);
  s->handlers_ = std::make_unique<TunerHandlers>(s->store_.get(), s->ingest_.get());
  // Peer runtimes' files (Open MPI rules, MPICH JSON) follow their tables.
  s->exports_ = std::make_unique<PeerExports>(s->store_.get(), Parent(config.db) + "/exports");
  s->exports_->RefreshAll();
  PeerExports* exports = s->exports_.get();
  s->handlers_->SetChangeObserver([exports](const std::string& fp) { exports->Refresh(fp); });
  s->handlers_->SetExportsDir(exports->dir());
  SweepRunnerOptions sweep_options;
  sweep_options.command = config.sweep_command;
  sweep_options.daemon_target = config.socket.empty() ? "" : "unix:" + config.socket;
  s->sweeps_ = std::make_unique<SweepRunner>(sweep_options);
  // The online policy publishes through the handlers, so their caches and WatchTable streams see its versions.
  TunerHandlers* handlers = s->handlers_.get();
  auto publish = [handlers](const db::Topology& topo, const std::vector<db::TunedEntry>& entries,
                            int64_t expected_version) -> absl::StatusOr<int64_t> {
    db::PutOptions options;
    options.expected_version = expected_version;
    return handlers->Publish(db::Topology{topo.fingerprint, ""}, entries, options);
  };
  s->policy_ = std::make_unique<OnlinePolicy>(s->store_.get(), publish, config.online);
  // Mini-sweeps re-measure what the policy marked stale (single-node topologies, idle node).
  s->mini_ = std::make_unique<MiniSweeper>(s->store_.get(), publish, s->sweeps_.get(), &s->handlers_->activity(),
                                           config.mini_sweep);
  if (config.metrics_port > 0) s->metrics_ = std::make_unique<Metrics>(s->MetricsSources());
  OnlinePolicy* policy = config.online.enabled ? s->policy_.get() : nullptr;
  Metrics* metrics = s->metrics_.get();
  if (policy != nullptr || metrics != nullptr) {
    s->handlers_->SetLiveObserver(
        [policy, metrics](const std::string& fp, absl::Span<const db::LiveSample> samples, Role reporter) {
          if (policy != nullptr) policy->Observe(fp, samples, reporter);
          if (metrics != nullptr) metrics->Observe(fp, samples);
        });
  }
  auto auth = Authorizer::Create(&s->peers_, ::geteuid(), config.tuner_group, config.tls_tuner_names);
  if (!auth.ok()) return auth.status();
  s->auth_ = std::make_unique<Authorizer>(*std::move(auth));
  s->service_ = std::make_unique<TunerService>(s->handlers_.get(), s->sweeps_.get(), s->auth_.get());
  s->service_->set_jobs(&s->jobs_);
  if (!config.socket.empty()) {
    auto unix_listener = UnixListener::Bind(config.socket);
    if (!unix_listener.ok()) return unix_listener.status();
    s->unix_ = *std::move(unix_listener);
    s->socket_created_ = true;
  }

  grpc::ServerBuilder builder;
  if (!config.listen.empty()) {
    builder.AddListeningPort(config.listen, tcp_credentials, &s->tcp_port_);
  }
  // Clients ping streams that may stay silent (rpc::MakeKeepaliveChannel); the default minimum interval (5 min)
  // would answer their pings with GOAWAY "too_many_pings" and end the watch.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             static_cast<int>(absl::ToInt64Milliseconds(rpc::kKeepaliveTime / 2)));
  builder.SetMaxReceiveMessageSize(config.max_message_bytes);
  builder.SetMaxSendMessageSize(config.max_message_bytes);
  builder.RegisterService(s->service_.get());
  s->server_ = builder.BuildAndStart();
  s->service_->set_listen_port(s->tcp_port_);
  if (s->server_ == nullptr || (!config.listen.empty() && s->tcp_port_ == 0)) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", config.socket.empty() ? "" : config.socket,
                                               config.socket.empty() || config.listen.empty() ? "" : " and ",
                                               config.listen, " (see the gRPC messages above)"));
  }
  if (config.socket.empty()) {
    const std::string host = config.listen.substr(0, config.listen.rfind(':'));
    s->sweeps_->set_daemon_target(
        absl::StrCat(host == "0.0.0.0" || host == "[::]" ? "localhost" : host, ":", s->tcp_port_));
  }
  if (s->metrics_ != nullptr) {
    auto http = MetricsHttp::Start(s->metrics_.get(), config.metrics_address, config.metrics_port);
    if (!http.ok()) return http.status();
    s->metrics_http_ = *std::move(http);
    Log(LogLevel::kInfo, "metrics on ", s->metrics_http_->url());
  }
  if (s->unix_ != nullptr) s->unix_->Serve(s->server_.get(), &s->peers_);
  s->policy_->Start();
  if (config.online.enabled) s->mini_->Start();
  Log(LogLevel::kInfo, "serving on ", config.socket.empty() ? "" : absl::StrCat("unix:", config.socket),
      config.listen.empty() ? "" : absl::StrCat(" tcp:", config.listen), "; database ", config.db);
  return s;
}

void TunerServer::Stop(absl::Duration drain) {
  if (stopped_) return;
  stopped_ = true;
  // No new mini-sweep; a running sweep (a mini-sweep too) stops first: it reports its cancelled state through
  // this server.
  metrics_http_.reset();  // no scrape reads the parts below while they stop
  if (mini_) mini_->Stop();
  if (sweeps_) sweeps_->Shutdown();
  if (handlers_) handlers_->Shutdown();  // watch streams end, new ones are refused
  jobs_.Shutdown();                      // DumpJob calls waiting for ranks return
  if (unix_) unix_->Stop();              // no new connection
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(drain));
    server_->Wait();
  }
  if (policy_) policy_->Stop();
  if (ingest_) ingest_->Stop();  // persist what was accepted
  if (ingest_) {
    Log(LogLevel::kInfo, "stopped: ", ingest_->persisted(), " live samples persisted, ", ingest_->dropped(),
        " dropped");
  }
  server_.reset();
  service_.reset();
  unix_.reset();
  mini_.reset();
  policy_.reset();
  handlers_.reset();
  sweeps_.reset();
  ingest_.reset();
  store_.reset();  // closes the database (WAL checkpoint on the last connection)
  if (socket_created_) ::unlink(config_.socket.c_str());
  if (lock_fd_ >= 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
  }
}

TunerServer::~TunerServer() { Stop(absl::ZeroDuration()); }

Metrics::Sources TunerServer::MetricsSources() {
  Metrics::Sources src;
  db::TuningStore* store = store_.get();
  src.table_versions = [store] {
    std::vector<std::pair<std::string, int64_t>> out;
    auto tables = store->ListTables();
    if (tables.ok()) {
      for (const db::TableSummary& t : *tables) out.emplace_back(t.topology.fingerprint, t.latest_version);
    }
    return out;
  };
  OnlinePolicy* policy = policy_.get();
  src.online_actions = [policy] { return policy->ActionCounts(); };
  SweepRunner* sweeps = sweeps_.get();
  src.running_sweeps = [sweeps] {
    std::vector<Metrics::Sweep> out;
    const std::string id = sweeps->running_id();
    uint64_t seq = 0;
    v1::SweepProgress p;
    if (!id.empty() && sweeps->Wait(id, &seq, absl::ZeroDuration(), &p).value_or(false)) {
      out.push_back({id, p.total() > 0 ? static_cast<double>(p.done()) / static_cast<double>(p.total()) : 0.0});
    }
    return out;
  };
  LiveIngest* ingest = ingest_.get();
  src.dropped_samples = [ingest, policy] {
    return std::vector<std::pair<std::string, uint64_t>>{{"ingest_queue", ingest->dropped()},
                                                         {"online_policy", policy->dropped()}};
  };
  TunerHandlers* handlers = handlers_.get();
  src.report_errors = [handlers] { return handlers->report_errors(); };
  return src;
}

}  // namespace hccltune::daemon
