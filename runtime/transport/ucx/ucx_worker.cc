#include "runtime/transport/ucx/ucx_worker.h"

#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace hccltune::transport {

std::string UcxStatusText(ucs_status_t status) {
  return absl::StrCat(ucs_status_string(status), " (UCS status ", static_cast<int>(status), ")");
}

namespace {

constexpr int64_t kIdleNs = 500'000;  // the progress thread steps in after this long without the owner

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

absl::Status UcxError(const std::string& call, ucs_status_t status) {
  return absl::UnavailableError(absl::StrCat("ucx: ", call, " failed: ", UcxStatusText(status)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<UcxWorker>> UcxWorker::Create(const Settings& settings) {
  std::unique_ptr<UcxWorker> w(new UcxWorker());
  std::string described;
  for (const auto& [key, value] : settings) {
    if (key == "NET_DEVICES") w->net_devices_ = value;
    absl::StrAppend(&described, described.empty() ? "" : " ", key, "=", value);
  }
  ucp_config_t* config = nullptr;
  if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK) {
    return UcxError("ucp_config_read", s);
  }
  ucs_status_t s = UCS_OK;
  for (const auto& [key, value] : settings) {
    if (s == UCS_OK) s = ucp_config_modify(config, key.c_str(), value.c_str());
  }
  if (s == UCS_OK) {
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    params.mt_workers_shared = 0;
    s = ucp_init(&params, config, &w->context_);
  }
  ucp_config_release(config);
  if (s != UCS_OK) {
    return UcxError(described.empty() ? std::string("ucp_init") : absl::StrCat("ucp_init (", described, ")"), s);
  }
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  if (s = ucp_worker_create(w->context_, &wp, &w->worker_); s != UCS_OK) return UcxError("ucp_worker_create", s);
  if (s = ucp_worker_get_efd(w->worker_, &w->efd_); s != UCS_OK) return UcxError("ucp_worker_get_efd", s);
  ucp_address_t* address = nullptr;
  size_t length = 0;
  if (s = ucp_worker_get_address(w->worker_, &address, &length); s != UCS_OK) {
    return UcxError("ucp_worker_get_address", s);
  }
  w->address_.assign(reinterpret_cast<const char*>(address), length);
  ucp_worker_release_address(w->worker_, address);
  w->ready_fd_ = ::eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);
  w->wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (w->ready_fd_ < 0 || w->wake_fd_ < 0) return absl::InternalError("ucx: eventfd failed");
  w->thread_ = std::thread([p = w.get()] { p->Run(); });
  return w;
}

UcxWorker::~UcxWorker() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (ready_fd_ >= 0) ::close(ready_fd_);
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
}

bool UcxWorker::Progress() {
  bool any = false;
  while (ucp_worker_progress(worker_) != 0) any = true;
  return any;
}

std::unique_lock<std::mutex> UcxWorker::Lock() {
  std::unique_lock<std::mutex> lock(mu_);
  last_used_ns_ = NowNs();
  return lock;
}

void UcxWorker::OnSendDone(void* request, ucs_status_t status, void* user) {
  (void)request, (void)status;
  --static_cast<UcxWorker*>(user)->in_flight_;  // inside ucp_worker_progress: the lock is held
}

ucp_request_param_t UcxWorker::SendParam() {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &UcxWorker::OnSendDone;
  param.user_data = this;
  return param;
}

void UcxWorker::SendPosted() {
  if (in_flight_++ == 0) cv_.notify_one();
}

void UcxWorker::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (in_flight_ <= 0) {
      cv_.wait(lock);
      continue;
    }
    if (NowNs() - last_used_ns_ >= kIdleNs && Progress()) {
      const uint64_t one = 1;
      (void)!::write(wake_fd_, &one, sizeof(one));
    }
    cv_.wait_for(lock, std::chrono::microseconds(200));
  }
}

int UcxWorker::PrepareWait() {
  uint64_t drained = 0;
  (void)!::read(wake_fd_, &drained, sizeof(drained));
  if (Progress()) return ready_fd_;
  // BUSY: events arrived since the last progress; handle them instead of sleeping.
  if (ucp_worker_arm(worker_) == UCS_ERR_BUSY) {
    Progress();
    return ready_fd_;
  }
  return efd_;
}

}  // namespace hccltune::transport
