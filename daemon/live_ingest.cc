#include "daemon/live_ingest.h"

#include <map>

#include "runtime/common/logging.h"

namespace hccltune::daemon {

LiveIngest::LiveIngest(db::TuningStore* store, IngestOptions options)
    : store_(store), options_(options), writer_([this] { Run(); }) {}

LiveIngest::~LiveIngest() { Stop(); }

size_t LiveIngest::Offer(const std::string& fingerprint, std::vector<db::LiveSample> samples) {
  absl::MutexLock lock(&mu_);
  const size_t room = stopping_ || queued_samples_ >= options_.max_queued ? 0 : options_.max_queued - queued_samples_;
  const size_t take = std::min(room, samples.size());
  dropped_ += samples.size() - take;
  if (take == 0) return 0;
  samples.resize(take);
  queued_samples_ += take;
  queue_.push_back(Item{fingerprint, std::move(samples)});
  return take;
}

size_t LiveIngest::queued() {
  absl::MutexLock lock(&mu_);
  return queued_samples_;
}

void LiveIngest::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && !writer_.joinable()) return;
    stopping_ = true;
  }
  if (writer_.joinable()) writer_.join();
}

void LiveIngest::Run() {
  while (true) {
    std::vector<Item> items;
    bool stop = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || queued_samples_ >= options_.max_batch;
      };
      mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(options_.flush_interval_ms));
      size_t taken = 0;
      while (!queue_.empty() && taken < options_.max_batch) {
        taken += queue_.front().samples.size();
        items.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      queued_samples_ -= taken;
      stop = stopping_ && queue_.empty();
    }
    if (!items.empty()) Write(items);
    if (stop) return;
  }
}

void LiveIngest::Write(std::vector<Item>& items) {
  std::map<std::string, std::vector<db::LiveSample>> by_topology;
  for (Item& it : items) {
    auto& v = by_topology[it.fingerprint];
    if (v.empty()) {
      v = std::move(it.samples);
    } else {
      v.insert(v.end(), it.samples.begin(), it.samples.end());
    }
  }
  for (const auto& [fp, samples] : by_topology) {
    absl::Status s = store_->RecordLiveSamples(fp, samples);
    if (s.ok()) {
      persisted_ += samples.size();
    } else {
      write_errors_ += samples.size();
      Log(LogLevel::kError, "live statistics: dropping ", samples.size(), " samples for ", fp, ": ", s.ToString());
    }
  }
}

}  // namespace hccltune::daemon
