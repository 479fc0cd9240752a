// PeriodicWorker: one background thread that calls a function every `interval` until stopped — the loop of
// the daemon's online policy and mini-sweeper.
//
// Thread-safety: Start/Stop from the owner (not concurrently with each other); the function runs on the worker
// thread only. Stop (also run by the destructor) wakes a waiting worker at once and joins it; a call in
// progress finishes first.
#pragma once

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace hccltune::daemon {

class PeriodicWorker {
 public:
  PeriodicWorker() = default;
  PeriodicWorker(const PeriodicWorker&) = delete;
  PeriodicWorker& operator=(const PeriodicWorker&) = delete;
  ~PeriodicWorker() { Stop(); }

  // Starts calling `tick` every `interval` (the first call one interval from now). No-op when running.
  void Start(absl::Duration interval, std::function<void()> tick) {
    if (thread_.joinable()) return;
    {
      absl::MutexLock lock(&mu_);
      stopping_ = false;
    }
    thread_ = std::thread([this, interval, tick = std::move(tick)] {
      while (true) {
        {
          absl::MutexLock lock(&mu_);
          auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
          if (mu_.AwaitWithTimeout(absl::Condition(&stop), interval)) return;
        }
        tick();
      }
    });
  }

  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace hccltune::daemon
