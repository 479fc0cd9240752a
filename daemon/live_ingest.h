// LiveIngest: the path from ReportTimings to the store's live statistics. Handlers Offer() batches into a
// bounded queue (a full queue drops the surplus and counts it, so a flooding client cannot grow memory); one
// writer thread takes up to `max_batch` samples at a time and persists them with one RecordLiveSamples call per
// topology, i.e. one transaction per batch.
//
// Thread-safety: Offer/counters from any thread; Stop() once, from the owner.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "db/tuning_store.h"

namespace hccltune::daemon {

struct IngestOptions {
  size_t max_queued = 262144;  // samples
  size_t max_batch = 32768;    // samples per store write
  int flush_interval_ms = 50;
};

class LiveIngest {
 public:
  LiveIngest(db::TuningStore* store, IngestOptions options);  // store must outlive this
  ~LiveIngest();
  LiveIngest(const LiveIngest&) = delete;
  LiveIngest& operator=(const LiveIngest&) = delete;

  // Queues what fits; returns how many were accepted (the rest is counted as dropped).
  size_t Offer(const std::string& fingerprint, std::vector<db::LiveSample> samples);
  // Stops taking samples, persists what is queued, joins the writer.
  void Stop();

  uint64_t dropped() const { return dropped_.load(); }
  uint64_t persisted() const { return persisted_.load(); }
  uint64_t write_errors() const { return write_errors_.load(); }
  size_t queued();

 private:
  struct Item {
    std::string fingerprint;
    std::vector<db::LiveSample> samples;
  };
  void Run();
  void Write(std::vector<Item>& items);

  db::TuningStore* const store_;
  const IngestOptions options_;
  absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  size_t queued_samples_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> dropped_{0}, persisted_{0}, write_errors_{0};
  std::thread writer_;
};

}  // namespace hccltune::daemon
