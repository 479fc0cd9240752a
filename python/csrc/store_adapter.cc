#include "python/csrc/store_adapter.h"

#include <chrono>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace hccltune::torch_backend {
namespace {

std::chrono::milliseconds ToMillis(absl::Duration d) {
  if (d == absl::InfiniteDuration()) return std::chrono::hours(24 * 365);
  return std::chrono::milliseconds(std::max<int64_t>(1, absl::ToInt64Milliseconds(d)));
}

class C10dStore final : public Store {
 public:
  explicit C10dStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  absl::Status Set(const std::string& key, const std::string& value) override {
    try {
      store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("torch store: set '", key, "' failed: ", e.what()));
    }
  }

  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    absl::Status waited = Wait({key}, timeout);
    if (!waited.ok()) return waited;
    try {
      std::vector<uint8_t> v = store_->get(key);
      return std::string(v.begin(), v.end());
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("torch store: get '", key, "' failed: ", e.what()));
    }
  }

  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    try {
      return store_->add(key, delta);
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("torch store: add '", key, "' failed: ", e.what()));
    }
  }

  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override {
    try {
      return store_->check(keys);
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("torch store: check failed: ", e.what()));
    }
  }

  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override {
    try {
      store_->wait(keys, ToMillis(timeout));
      return absl::OkStatus();
    } catch (const std::exception& e) {
      // c10d stores throw on timeout; anything else (a closed connection) surfaces the same way, with torch's
      // message kept.
      return absl::DeadlineExceededError(absl::StrCat("torch store: waiting for '", keys.empty() ? "" : keys[0], "'",
                                                      keys.size() > 1 ? " and others" : "", " failed after ",
                                                      absl::FormatDuration(timeout), ": ", e.what()));
    }
  }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace

std::shared_ptr<Store> AdaptC10dStore(c10::intrusive_ptr<c10d::Store> store) {
  return std::make_shared<C10dStore>(std::move(store));
}

}  // namespace hccltune::torch_backend
