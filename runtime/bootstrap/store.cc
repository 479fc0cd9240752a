#include "runtime/bootstrap/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"

namespace hccltune {

absl::StatusOr<std::string> GetUntil(Store& store, const std::string& key, absl::Time deadline,
                                     const std::function<absl::Status()>& probe) {
  while (true) {
    const absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
    auto v = store.Get(key, std::min(left, absl::Milliseconds(200)));
    if (v.ok() || v.status().code() != absl::StatusCode::kDeadlineExceeded || left <= absl::Milliseconds(200)) {
      return v;
    }
    if (absl::Status a = probe(); !a.ok()) return a;
  }
}

absl::Status Store::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration pause = absl::Microseconds(100);
  while (true) {
    auto ok = Check(keys);
    if (!ok.ok()) return ok.status();
    if (*ok) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      std::vector<std::string> missing;
      for (const auto& k : keys) {
        auto one = Check({k});
        if (one.ok() && !*one) missing.push_back(k);
      }
      return absl::DeadlineExceededError(absl::StrCat("store: timed out after ", absl::FormatDuration(timeout),
                                                      " waiting for keys: ", absl::StrJoin(missing, ", ")));
    }
    absl::SleepFor(pause);
    pause = std::min(pause * 2, absl::Milliseconds(20));
  }
}

namespace {

class MemoryStore final : public Store {
 public:
  absl::Status Set(const std::string& key, const std::string& value) override {
    absl::MutexLock lock(&mu_);
    data_[key] = value;
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    absl::MutexLock lock(&mu_);
    auto present = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return data_.count(key) > 0; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&present), timeout)) {
      return absl::DeadlineExceededError(
          absl::StrCat("store: timed out after ", absl::FormatDuration(timeout), " waiting for key ", key));
    }
    return data_[key];
  }
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    absl::MutexLock lock(&mu_);
    int64_t v = 0;
    auto it = data_.find(key);
    if (it != data_.end() && !absl::SimpleAtoi(it->second, &v)) {
      return absl::FailedPreconditionError(absl::StrCat("store: key ", key, " does not hold an integer"));
    }
    v += delta;
    data_[key] = absl::StrCat(v);
    return v;
  }
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override {
    absl::MutexLock lock(&mu_);
    for (const auto& k : keys) {
      if (data_.count(k) == 0) return false;
    }
    return true;
  }
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override {
    absl::MutexLock lock(&mu_);
    auto all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const auto& k : keys) {
        if (data_.count(k) == 0) return false;
      }
      return true;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&all), timeout)) {
      std::vector<std::string> missing;
      for (const auto& k : keys) {
        if (data_.count(k) == 0) missing.push_back(k);
      }
      return absl::DeadlineExceededError(absl::StrCat("store: timed out after ", absl::FormatDuration(timeout),
                                                      " waiting for keys: ", absl::StrJoin(missing, ", ")));
    }
    return absl::OkStatus();
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, std::string> data_ ABSL_GUARDED_BY(mu_);
};

// Keys map to file names by hex-encoding, so any key is a valid file name.
std::string EncodeKey(const std::string& key) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(key.size() * 2);
  for (unsigned char c : key) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

class FileStore final : public Store {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}
  std::string Describe() const override { return absl::StrCat("file store ", dir_); }

  absl::Status Set(const std::string& key, const std::string& value) override {
    const std::string path = Path(key);
    const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid(), ".", counter_++);
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f << value;
      if (!f.good()) return absl::InternalError(absl::StrCat("file store: cannot write ", tmp));
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      return absl::InternalError(absl::StrCat("file store: rename to ", path, ": ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    if (absl::Status s = Store::Wait({key}, timeout); !s.ok()) return s;
    std::ifstream f(Path(key), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    const std::string path = Path(key);
    const std::string lock_path = path + ".lock";
    int lfd = ::open(lock_path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (lfd < 0) return absl::InternalError(absl::StrCat("file store: open ", lock_path, ": ", std::strerror(errno)));
    ::flock(lfd, LOCK_EX);
    int64_t v = 0;
    {
      std::ifstream f(path, std::ios::binary);
      std::string s;
      if (f.good() && std::getline(f, s) && !absl::SimpleAtoi(s, &v)) v = 0;
    }
    v += delta;
    absl::Status st = Set(key, absl::StrCat(v));
    ::flock(lfd, LOCK_UN);
    ::close(lfd);
    if (!st.ok()) return st;
    return v;
  }
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override {
    for (const auto& k : keys) {
      if (::access(Path(k).c_str(), F_OK) != 0) return false;
    }
    return true;
  }

 private:
  std::string Path(const std::string& key) const { return absl::StrCat(dir_, "/", EncodeKey(key)); }
  std::string dir_;
  std::atomic<uint64_t> counter_{0};
};

class PrefixStore final : public Store {
 public:
  PrefixStore(std::shared_ptr<Store> base, std::string prefix) : base_(std::move(base)), prefix_(std::move(prefix)) {}
  absl::Status Set(const std::string& key, const std::string& value) override { return base_->Set(K(key), value); }
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    return base_->Get(K(key), timeout);
  }
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override { return base_->Add(K(key), delta); }
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override { return base_->Check(Ks(keys)); }
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override {
    return base_->Wait(Ks(keys), timeout);
  }
  std::string Describe() const override { return base_->Describe(); }

 private:
  std::string K(const std::string& key) const { return absl::StrCat(prefix_, "/", key); }
  std::vector<std::string> Ks(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const auto& k : keys) out.push_back(K(k));
    return out;
  }
  std::shared_ptr<Store> base_;
  std::string prefix_;
};

}  // namespace

std::shared_ptr<Store> NewMemoryStore() { return std::make_shared<MemoryStore>(); }

absl::StatusOr<std::shared_ptr<Store>> NewFileStore(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::InvalidArgumentError(
        absl::StrCat("file store: cannot create directory ", dir, ": ", std::strerror(errno)));
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("file store: ", dir, " is not a directory"));
  }
  return std::shared_ptr<Store>(std::make_shared<FileStore>(dir));
}

std::shared_ptr<Store> NewPrefixStore(std::shared_ptr<Store> base, const std::string& prefix) {
  return std::make_shared<PrefixStore>(std::move(base), prefix);
}

}  // namespace hccltune
