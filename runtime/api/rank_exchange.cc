#include "runtime/api/rank_exchange.h"

#include <unistd.h>

#include <algorithm>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "runtime/api/communicator.h"
#include "runtime/bootstrap/store_protocol.h"
#include "runtime/common/json_field.h"
#include "runtime/common/logging.h"

namespace hccltune {
namespace {

// Keys of one communicator instance live under its tag, so nothing an earlier job left in a reused store
// (a file:// directory, a long-lived tcp:// server, a second Create on one Store) is read as this job's.
std::string TagPrefix(uint64_t tag) { return absl::StrCat("job-", absl::Hex(tag)); }

nlohmann::json InfoToJson(const RankInfo& i, int size, uint64_t tag) {
  return {
      {"rank", i.rank},         {"size", size},       {"protocol", i.protocol}, {"tag", absl::StrCat(absl::Hex(tag))},
      {"node", i.node},         {"host", i.host},     {"pid", i.pid},           {"device", i.device},
      {"decisive", i.decisive}, {"devices", i.blocks}};
}

absl::StatusOr<RankInfo> InfoFromJson(const std::string& text, int expected_rank, uint64_t tag,
                                      const std::string& where) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::DataLossError(absl::StrCat("bootstrap: rank ", expected_rank, " published unreadable info"));
  }
  const std::string expected_tag = absl::StrCat(absl::Hex(tag));
  if (JsonOr(j, "tag", "") != expected_tag || JsonOr(j, "rank", -1) != expected_rank) {
    return absl::FailedPreconditionError(absl::StrCat(
        "bootstrap: the info published for rank ", expected_rank, " belongs to another communicator (tag '",
        JsonOr(j, "tag", ""), "', rank ", JsonOr(j, "rank", -1), "; this one is tag ", expected_tag,
        "): stale rendezvous data in ", where, " from an earlier job; use a fresh directory or store for each job"));
  }
  RankInfo i;
  i.rank = JsonOr(j, "rank", -1);
  i.protocol = JsonOr(j, "protocol", 0u);
  i.node = JsonOr(j, "node", "");
  i.host = JsonOr(j, "host", "");
  i.pid = JsonOr(j, "pid", 0);
  i.device = JsonOr(j, "device", -1);
  i.decisive = JsonOr(j, "decisive", "");
  if (j.contains("devices") && j["devices"].is_object()) {
    for (const auto& [name, block] : j["devices"].items()) {
      if (block.is_string()) i.blocks[name] = block.get<std::string>();
    }
  }
  return i;
}

// The first differing "VAR=value" between two decisive strings.
std::string FirstDifference(const std::string& a, const std::string& b) {
  std::vector<std::string> pa = absl::StrSplit(a, ';'), pb = absl::StrSplit(b, ';');
  for (size_t i = 0; i < std::min(pa.size(), pb.size()); ++i) {
    if (pa[i] != pb[i]) return absl::StrCat(pa[i], "' vs '", pb[i]);
  }
  return absl::StrCat(a, "' vs '", b);
}

}  // namespace

std::function<absl::Status()> AbortProbe(std::shared_ptr<Store> store) {
  return [store = std::move(store)]() -> absl::Status {
    auto present = store->Check({"abort"});
    if (!present.ok() || !*present) return absl::OkStatus();
    auto why = store->Get("abort", absl::Seconds(1));
    return absl::AbortedError(why.ok() ? *why : "another rank aborted the communicator");
  };
}

namespace {

// A rank other than 0: the tag rank 0 published, claimed for this rank (store key joined/<rank> under the
// tag). A tag whose rank was already claimed is an earlier job's (the store was reused; or two processes
// were given this rank): wait for rank 0 of this job to publish a new one.
absl::StatusOr<uint64_t> ClaimTag(const std::shared_ptr<Store>& named, int rank, absl::Time deadline, int timeout_s,
                                  std::optional<uint64_t> stale) {
  Store& store = *named;
  absl::Status announced;  // the failure announced under a tag this rank skipped
  while (true) {
    auto t = store.Get("tag", std::max(deadline - absl::Now(), absl::ZeroDuration()));
    if (!t.ok() && t.status().code() != absl::StatusCode::kDeadlineExceeded) return t.status();
    if (!t.ok() && !stale) {
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", rank, ": rank 0 never arrived at the rendezvous (", t.status().message(), ")"));
    }
    uint64_t tag = 0;
    if (t.ok() && !absl::SimpleAtoi(*t, &tag)) return absl::DataLossError("bootstrap: bad communicator tag");
    if (!t.ok() || (stale && tag == *stale)) {
      if (absl::Now() >= deadline && !announced.ok()) return announced;
      if (absl::Now() >= deadline) {
        return absl::FailedPreconditionError(absl::StrCat(
            "rank ", rank, ": stale rendezvous data in ", store.Describe(),
            " from an earlier job: its communicator (tag ", absl::Hex(*stale), ") already has a rank ", rank,
            ", and rank 0 published no new one within ", timeout_s,
            " s (HCCL_CONNECT_TIMEOUT); use a fresh directory or store for each job (or: two processes were given "
            "rank ",
            rank, ", or the ranks disagree on the world size)"));
      }
      absl::SleepFor(absl::Milliseconds(20));
      continue;
    }
    const std::shared_ptr<Store> under_tag = NewPrefixStore(named, TagPrefix(tag));
    auto claimed = under_tag->Add(absl::StrCat("joined/", rank), 1);
    if (!claimed.ok()) return claimed.status();
    // A tag whose setup a rank already announced as failed (Init) is over: an earlier job's left in a reused
    // store, or this job's, whose rank 0 may publish a new one when restarted. Wait for a new tag; at the
    // deadline, report the announcement.
    if (absl::Status a = AbortProbe(under_tag)(); *claimed == 1 && !a.ok()) {
      announced = a;
      stale = tag;
      continue;
    }
    if (*claimed == 1) return tag;
    if (!stale) {
      Log(LogLevel::kInfo, "rank ", rank, ": the tag in ", store.Describe(), " (", absl::Hex(tag),
          ") already has a rank ", rank, " (an earlier job's); waiting for rank 0 to publish this job's");
    }
    stale = tag;
  }
}

}  // namespace

RankExchange::RankExchange(int rank, int size, const Environment& env, std::shared_ptr<Store> named)
    : rank_(rank), size_(size), env_(env), named_(std::move(named)) {}

absl::Status RankExchange::JoinTag(absl::Time deadline, std::optional<uint64_t> stale) {
  if (rank_ == 0) {
    std::random_device rd;
    tag_ = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(::getpid());
    if (absl::Status s = named_->Set("tag", absl::StrCat(tag_)); !s.ok()) return s;
  } else {
    auto tag = ClaimTag(named_, rank_, deadline, env_.connect_timeout_s, stale);
    if (!tag.ok()) return tag.status();
    tag_ = *tag;
  }
  store_ = NewPrefixStore(named_, TagPrefix(tag_));
  return absl::OkStatus();
}

bool RankExchange::TagReplaced() const {
  if (rank_ == 0) return false;
  auto now = named_->Get("tag", absl::Seconds(1));
  return now.ok() && *now != absl::StrCat(tag_);
}

absl::Status RankExchange::Run(const JoinFn& join) {
  const absl::Time deadline = absl::Now() + absl::Seconds(env_.connect_timeout_s);
  std::optional<uint64_t> stale;  // a tag found to be an earlier job's
  while (true) {
    if (absl::Status s = JoinTag(deadline, stale); !s.ok()) return s;
    auto me = join(tag_, store_);
    if (!me.ok()) return me.status();
    if (absl::Status s = store_->Set(absl::StrCat("info/", rank_), InfoToJson(*me, size_, tag_).dump()); !s.ok()) {
      return s;
    }
    bool replaced = false;
    if (absl::Status s = Gather(deadline, &replaced); !s.ok()) return s;
    if (!replaced) break;
    Log(LogLevel::kInfo, "rank ", rank_, ": communicator tag ", absl::Hex(tag_), " in ", store_->Describe(),
        " is an earlier job's; joining the one rank 0 publishes");
    stale = tag_;
  }
  return Check();
}

// Gather, in O(n) store requests: rank 0 waits for every rank's info ("info/<rank>"), reads them (n requests)
// and publishes them joined as one value, "info/all"; every other rank waits for that one key and reads it once.
// (Each rank reading every rank's key would be n requests per rank, n^2 through the one store server.) An
// aggregate over the store's value limit (a world of tens of thousands of ranks) is published empty, and the
// others then read the n keys themselves.
absl::Status RankExchange::Gather(absl::Time deadline, bool* replaced) {
  std::vector<std::string> keys;
  if (rank_ == 0) {
    for (int r = 0; r < size_; ++r) keys.push_back(absl::StrCat("info/", r));
  } else {
    keys.push_back("info/all");
  }
  if (absl::Status s = WaitFor(keys, deadline, replaced); !s.ok() || *replaced) return s;
  std::vector<std::string> texts;
  if (rank_ != 0) {
    auto all = store_->Get("info/all", absl::Seconds(env_.connect_timeout_s));
    if (!all.ok()) return all.status();
    if (!all->empty()) texts = absl::StrSplit(*all, '\n');
  }
  if (texts.empty()) {
    size_t bytes = 0;
    for (int r = 0; r < size_; ++r) {
      auto text = store_->Get(absl::StrCat("info/", r), absl::Seconds(env_.connect_timeout_s));
      if (!text.ok()) return text.status();
      bytes += text->size() + 1;
      texts.push_back(*std::move(text));
    }
    if (rank_ == 0) {
      // dump() escapes newlines inside strings: '\n' separates the infos.
      const std::string all = bytes < store_protocol::kMaxValueBytes / 2 ? absl::StrJoin(texts, "\n") : "";
      if (absl::Status s = store_->Set("info/all", all); !s.ok()) return s;
    }
  }
  infos_.assign(static_cast<size_t>(size_), RankInfo{});
  sizes_.assign(static_cast<size_t>(size_), 0);
  for (int r = 0; r < size_ && r < static_cast<int>(texts.size()); ++r) {
    const std::string& text = texts[static_cast<size_t>(r)];
    auto info = InfoFromJson(text, r, tag_, store_->Describe());
    if (!info.ok()) return info.status();
    infos_[static_cast<size_t>(r)] = *std::move(info);
    auto j = nlohmann::json::parse(text, nullptr, false);
    sizes_[static_cast<size_t>(r)] = JsonOr(j, "size", 0);
  }
  // Rank 0's info for another world size: the tag is an earlier job's (or the ranks disagree on the size,
  // which ClaimTag's deadline reports).
  *replaced = rank_ != 0 && (sizes_[0] != size_ || TagReplaced());
  return absl::OkStatus();
}

absl::Status RankExchange::NeverJoined(const std::string& missing) const {
  return absl::DeadlineExceededError(absl::StrCat("rank ", rank_, ": ranks ", missing,
                                                  " never joined the communicator of ", size_, " ranks within ",
                                                  env_.connect_timeout_s, " s (HCCL_CONNECT_TIMEOUT)"));
}

// Waits for `keys` in slices until the deadline, so that a rank that joined an earlier job's tag sees rank 0 of
// this job replace it (*replaced), and a rank's announced failure ends the wait at once. At the deadline, names
// the ranks whose info never came (rank 0 also publishes them as "missing", which ends the others' waits).
absl::Status RankExchange::WaitFor(const std::vector<std::string>& keys, absl::Time deadline, bool* replaced) {
  *replaced = false;
  while (true) {
    const absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
    absl::Status s = store_->Wait(keys, std::min(left, absl::Milliseconds(200)));
    if (s.ok()) return s;
    // Only a deadline means ranks are missing; a store that failed (a lost connection) says so itself.
    if (s.code() != absl::StatusCode::kDeadlineExceeded) return s;
    if ((*replaced = TagReplaced())) return absl::OkStatus();
    // A rank that failed its own setup says so (Create); no need to wait for the deadline.
    if (absl::Status a = AbortProbe(store_)(); !a.ok()) return a;
    if (auto known = store_->Check({"missing"}); rank_ != 0 && known.ok() && *known) {
      auto missing = store_->Get("missing", absl::Seconds(1));
      if (missing.ok()) return NeverJoined(*missing);
    }
    if (absl::Now() < deadline) continue;
    std::vector<std::string> missing;
    for (int r = 0; r < size_; ++r) {
      auto ok = store_->Check({absl::StrCat("info/", r)});
      if (ok.ok() && !*ok) missing.push_back(absl::StrCat(r));
    }
    // Rank 0 gathers for everyone: the others, waiting for "info/all", learn from it which ranks are missing.
    if (rank_ == 0) (void)store_->Set("missing", absl::StrJoin(missing, ", "));
    return NeverJoined(absl::StrJoin(missing, ", "));
  }
}

// Checks every rank makes: same world size, same protocol, same decisive settings, no shared device on a node.
absl::Status RankExchange::Check() const {
  for (int r = 0; r < size_; ++r) {
    if (sizes_[static_cast<size_t>(r)] != size_) {
      return absl::FailedPreconditionError(absl::StrCat("rank ", r, " was started with a world size of ",
                                                        sizes_[static_cast<size_t>(r)], ", rank ", rank_, " with ",
                                                        size_, ": every rank needs the same WORLD_SIZE"));
    }
  }
  for (const RankInfo& i : infos_) {
    if (i.protocol != kWireProtocolVersion) {
      return absl::FailedPreconditionError(absl::StrCat("rank ", i.rank, " runs wire protocol version ", i.protocol,
                                                        ", rank ", rank_, " runs version ", kWireProtocolVersion,
                                                        ": every rank must run the same hccl-tune release"));
    }
    if (i.decisive != infos_[0].decisive) {
      return absl::FailedPreconditionError(absl::StrCat(
          "ranks disagree on a setting that decides configurations: rank 0 has '",
          FirstDifference(infos_[0].decisive, i.decisive), "' on rank ", i.rank, "; set the same value on every rank"));
    }
  }
  for (size_t a = 0; a < infos_.size(); ++a) {
    for (size_t b = a + 1; b < infos_.size(); ++b) {
      if (infos_[a].node == infos_[b].node && infos_[a].device >= 0 && infos_[a].device == infos_[b].device) {
        return absl::FailedPreconditionError(
            absl::StrCat("ranks ", a, " and ", b, " both claim device ", infos_[a].device, " on node ", infos_[a].host,
                         " (HCCL_TUNE_DEVICE / LOCAL_RANK): each rank needs its own device"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace hccltune
