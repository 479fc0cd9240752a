#include "daemon/metrics_http.h"

#include <civetweb.h>

#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace hccltune::daemon {

absl::StatusOr<std::unique_ptr<MetricsHttp>> MetricsHttp::Start(const Metrics* metrics, const std::string& address,
                                                                int port) {
  static std::once_flag init;
  std::call_once(init, [] { mg_init_library(0); });
  const std::string where = absl::StrCat(address, ":", port);
  std::unique_ptr<MetricsHttp> s(new MetricsHttp(metrics, absl::StrCat("http://", where, "/metrics")));
  const char* options[] = {"listening_ports",    where.c_str(), "num_threads", "2",
                           "request_timeout_ms", "10000",       nullptr};
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof callbacks);
  char error[256] = {0};
  mg_init_data init_data;
  std::memset(&init_data, 0, sizeof init_data);
  init_data.callbacks = &callbacks;
  init_data.configuration_options = options;
  unsigned code = 0;
  mg_error_data error_data;
  std::memset(&error_data, 0, sizeof error_data);
  error_data.code = &code;
  error_data.text = error;
  error_data.text_buffer_size = sizeof error;
  s->ctx_ = mg_start2(&init_data, &error_data);
  if (s->ctx_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("metrics: cannot serve HTTP on ", where, ": ", error[0] ? error : "civetweb refused to start"));
  }
  mg_set_request_handler(s->ctx_, "/metrics$", &MetricsHttp::Handle, s.get());
  return s;
}

MetricsHttp::~MetricsHttp() {
  if (ctx_ != nullptr) mg_stop(ctx_);
}

int MetricsHttp::Handle(::mg_connection* conn, void* self) {
  const mg_request_info* req = mg_get_request_info(conn);
  if (req == nullptr || std::strcmp(req->request_method, "GET") != 0) {
    mg_send_http_error(conn, 405, "%s", "only GET\n");
    return 405;
  }
  const std::string body = static_cast<MetricsHttp*>(self)->metrics_->Render();
  mg_send_http_ok(conn, "text/plain; version=0.0.4; charset=utf-8", static_cast<long long>(body.size()));
  mg_write(conn, body.data(), body.size());
  return 200;
}

}  // namespace hccltune::daemon
