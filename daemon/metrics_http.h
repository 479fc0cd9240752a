// GET /metrics over HTTP for daemon/metrics.h, through civetweb (an embedded HTTP server from Debian). Off unless
// configured (metrics_port); bound to metrics_address, loopback unless told otherwise. Any other path answers 404.
// Nothing is authenticated: the metrics carry topology fingerprints, collectives, sizes and configurations, no
// table contents a reader could not already get from the socket.
//
// Thread-safety: Start/Stop from the owner; civetweb's threads call Metrics::Render concurrently.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/metrics.h"

struct mg_context;
struct mg_connection;

namespace hccltune::daemon {

class MetricsHttp {
 public:
  // Serves `metrics` (which must outlive the server) on address:port. An error names the address when it cannot
  // be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttp>> Start(const Metrics* metrics, const std::string& address,
                                                            int port);
  ~MetricsHttp();
  MetricsHttp(const MetricsHttp&) = delete;
  MetricsHttp& operator=(const MetricsHttp&) = delete;

  const std::string& url() const { return url_; }

 private:
  MetricsHttp(const Metrics* metrics, std::string url) : metrics_(metrics), url_(std::move(url)) {}
  static int Handle(::mg_connection* conn, void* self);

  const Metrics* metrics_;
  std::string url_;
  mg_context* ctx_ = nullptr;
};

}  // namespace hccltune::daemon
