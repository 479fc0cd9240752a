#include "python/csrc/store_adapter.h"

#include <chrono>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace hccltune::torch_backend {
namespace {

// What a failed store call says besides torch's own text ("Broken pipe", "Connection reset by peer"): which
// process a TCPStore lives in, since its death is the usual cause.
constexpr char kStoreHint[] =
    " (torch's TCPStore is served by one process, rank 0's under env:// and tcp:// initialisation: did it exit?)";

class C10dStore final : public Store {
 public:
  explicit C10dStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  absl::Status Set(const std::string& key, const std::string& value) override {
    try {
      store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("torch store: set '", key, "' failed: ", e.what(), kStoreHint));
    }
  }

  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    absl::Status waited = Wait({key}, timeout);
    if (!waited.ok()) return waited;
    try {
      std::vector<uint8_t> v = store_->get(key);
      return std::string(v.begin(), v.end());
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("torch store: get '", key, "' failed: ", e.what(), kStoreHint));
    }
  }

  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    try {
      return store_->add(key, delta);
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("torch store: add '", key, "' failed: ", e.what(), kStoreHint));
    }
  }

  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override {
    try {
      return store_->check(keys);
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("torch store: check failed: ", e.what(), kStoreHint));
    }
  }

  // Polls check() instead of calling the store's blocking wait(): torch's TCPStore client holds its one lock for
  // the whole of a wait, so a blocking wait on one thread would stall every other thread's store calls in this
  // process — and point-to-point connects pairs of ranks from several threads at once (p2p.h), where that
  // stall closes a cycle across processes. Backoff: 50 us doubling to 5 ms.
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override {
    const absl::Time deadline = absl::Now() + timeout;
    absl::Duration pause = absl::Microseconds(50);
    while (true) {
      try {
        if (store_->check(keys)) return absl::OkStatus();
      } catch (const std::exception& e) {
        return absl::UnavailableError(absl::StrCat("torch store: waiting for '", keys.empty() ? "" : keys[0], "'",
                                                   keys.size() > 1 ? " and others" : "", " failed: ", e.what(),
                                                   kStoreHint));
      }
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat("torch store: waiting for '", keys.empty() ? "" : keys[0], "'",
                                                        keys.size() > 1 ? " and others" : "", " timed out after ",
                                                        absl::FormatDuration(timeout)));
      }
      absl::SleepFor(std::min(pause, deadline - absl::Now()));
      pause = std::min(pause * 2, absl::Milliseconds(5));
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
