// Internal: the communicator's rank exchange — the rendezvous that makes a communicator instance out of `size`
// processes (part of CommImpl::Setup; not installed).
//
// Contract. Every rank calls RankExchange::Run once, with the store under the communicator's name. Rank 0
// publishes a fresh random tag ("tag"); the others join it (claiming "joined/<rank>" under it, so a tag an
// earlier job left in a reused store is recognised and waited past). Every key of the instance then lives under
// "job-<tag hex>/". Once joined, `join(tag, store)` makes what depends on the tag (the transport devices) and
// returns this rank's info, which Run publishes ("info/<rank>") and then gathers every rank's (rank 0 joins them
// into "info/all", which the others read once: O(n) store requests), checking that
// they belong together: the same tag and world size, the same wire protocol, the same decisive settings, no
// device claimed twice on a node. A tag that turns out to be an earlier job's (rank 0 of this job published a
// new one meanwhile) is left and the new one joined: `join` may run more than once. Waits end at
// HCCL_CONNECT_TIMEOUT (naming the ranks that never came) or at once when another rank announced a failure
// ("abort" under the tag).
//
// Thread-safety: one RankExchange per communicator instance, used by the thread that creates it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/bootstrap/store.h"
#include "runtime/common/config.h"

namespace hccltune {

struct RankInfo {
  int rank = 0;
  uint32_t protocol = 0;
  std::string node;
  std::string host;
  int pid = 0;
  int device = -1;       // -1 = none claimed
  std::string decisive;  // the settings that decide configurations, as "VAR=value;..."
  // Each transport device's address block (transport::Device::Block), by device name ("shm", "tcp"); the
  // communicator carries them, only the device reads its own.
  std::map<std::string, std::string> blocks;
};

// What a blocked wait asks: has another rank announced a failure ("abort" in `store`)? Aborted with the
// announcement when one has.
std::function<absl::Status()> AbortProbe(std::shared_ptr<Store> store);

class RankExchange {
 public:
  // `named`: the store under the communicator's name (its tag and instance keys go below it).
  RankExchange(int rank, int size, const Environment& env, std::shared_ptr<Store> named);

  using JoinFn = std::function<absl::StatusOr<RankInfo>(uint64_t tag, const std::shared_ptr<Store>& store)>;
  absl::Status Run(const JoinFn& join);

  uint64_t tag() const { return tag_; }
  // The store under the instance's tag (null before the first join).
  const std::shared_ptr<Store>& store() const { return store_; }
  // Every rank's info, by rank (after Run succeeded).
  std::vector<RankInfo>& infos() { return infos_; }

 private:
  // Takes (rank 0: publishes) a tag; `stale`: one found to be an earlier job's.
  absl::Status JoinTag(absl::Time deadline, std::optional<uint64_t> stale);
  // Waits for and reads every rank's info; *replaced: this rank's tag turned out to be an earlier job's.
  absl::Status Gather(absl::Time deadline, bool* replaced);
  // Waits for `keys` (naming the missing ranks at the deadline); *replaced as Gather's.
  absl::Status WaitFor(const std::vector<std::string>& keys, absl::Time deadline, bool* replaced);
  // "rank R: ranks <missing> never joined the communicator ... (HCCL_CONNECT_TIMEOUT)".
  absl::Status NeverJoined(const std::string& missing) const;
  // Whether the tag rank 0 published is no longer the one this rank joined.
  bool TagReplaced() const;
  absl::Status Check() const;

  int rank_ = 0, size_ = 1;
  const Environment& env_;
  std::shared_ptr<Store> named_, store_;
  uint64_t tag_ = 0;
  std::vector<RankInfo> infos_;
  std::vector<int> sizes_;  // the world size each rank was started with
};

}  // namespace hccltune
