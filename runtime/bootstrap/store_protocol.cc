#include "runtime/bootstrap/store_protocol.h"

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace hccltune::store_protocol {
namespace {

// A string at in[*pos...] of at most `limit` bytes: 1 = taken, 0 = not all there yet, or the error.
absl::StatusOr<int> TakeString(absl::string_view in, size_t* pos, size_t limit, absl::string_view what,
                               std::string* s) {
  if (in.size() - *pos < 4) return 0;
  uint32_t n = 0;
  std::memcpy(&n, in.data() + *pos, 4);
  if (n > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcp store: a request's ", what, " of ", n, " bytes is over the limit of ", limit, " bytes"));
  }
  if (in.size() - *pos - 4 < n) return 0;
  s->assign(in.data() + *pos + 4, n);
  *pos += 4 + n;
  return 1;
}

}  // namespace

absl::StatusOr<size_t> ParseStoreRequest(absl::string_view in, Request* out) {
  if (in.empty()) return 0;
  const uint8_t op = static_cast<uint8_t>(in[0]);
  if (op != kSet && op != kGet && op != kAdd && op != kCheck) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcp store: unknown request op ", op, " (1 set, 2 get, 3 add, 4 check): not a store client?"));
  }
  out->op = static_cast<Op>(op);
  size_t pos = 1;
  auto key = TakeString(in, &pos, kMaxKeyBytes, "key", &out->key);
  if (!key.ok() || *key == 0) return key.ok() ? absl::StatusOr<size_t>(0) : key.status();
  out->value.clear();
  if (op == kSet || op == kAdd) {
    auto value =
        TakeString(in, &pos, op == kAdd ? 32 : kMaxValueBytes, op == kAdd ? "add delta" : "value", &out->value);
    if (!value.ok() || *value == 0) return value.ok() ? absl::StatusOr<size_t>(0) : value.status();
    int64_t delta = 0;
    if (op == kAdd && !absl::SimpleAtoi(out->value, &delta)) {
      return absl::InvalidArgumentError(absl::StrCat("tcp store: add of '", out->value, "' to key '", out->key,
                                                     "': the delta is not a 64-bit integer"));
    }
  }
  return pos;
}

void PutString(std::string& out, absl::string_view s) {
  const uint32_t n = static_cast<uint32_t>(s.size());
  out.append(reinterpret_cast<const char*>(&n), 4);
  out.append(s.data(), s.size());
}

void PutError(std::string& out, const absl::Status& status) {
  out.push_back(static_cast<char>(kReplyError));
  out.push_back(static_cast<char>(status.code()));
  PutString(out, status.message().substr(0, kMaxMessageBytes));
}

absl::Status StoreData::Put(const std::string& key, std::string value) {
  auto it = data_.find(key);
  const size_t old = it == data_.end() ? 0 : key.size() + it->second.size();
  if (it == data_.end() && data_.size() >= limits_.max_keys) {
    return absl::ResourceExhaustedError(
        absl::StrCat("tcp store: cannot add key '", key, "': the store holds ", data_.size(), " keys, the limit"));
  }
  const size_t now = stored_bytes_ - old + key.size() + value.size();
  if (now > limits_.max_stored_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("tcp store: cannot store ", value.size(), " bytes at key '", key,
                                                     "': the store would hold ", now, " bytes, over the limit of ",
                                                     limits_.max_stored_bytes));
  }
  stored_bytes_ = now;
  data_[key] = std::move(value);
  return absl::OkStatus();
}

void StoreData::Apply(const Request& req, std::string* reply) {
  switch (req.op) {
    case kSet: {
      absl::Status s = Put(req.key, req.value);
      if (!s.ok()) return PutError(*reply, s);
      reply->push_back(1);
      return;
    }
    case kGet: {
      auto it = data_.find(req.key);
      reply->push_back(it != data_.end() ? 1 : 0);
      PutString(*reply, it != data_.end() ? absl::string_view(it->second) : absl::string_view());
      return;
    }
    case kAdd: {
      int64_t delta = 0, cur = 0;
      (void)absl::SimpleAtoi(req.value, &delta);  // checked by ParseStoreRequest
      auto it = data_.find(req.key);
      if (it != data_.end() && !absl::SimpleAtoi(it->second, &cur)) cur = 0;
      // Wraps like the two's-complement counter it is, instead of overflowing.
      const std::string sum =
          absl::StrCat(static_cast<int64_t>(static_cast<uint64_t>(cur) + static_cast<uint64_t>(delta)));
      absl::Status s = Put(req.key, sum);
      if (!s.ok()) return PutError(*reply, s);
      reply->push_back(1);
      PutString(*reply, sum);
      return;
    }
    case kCheck: reply->push_back(data_.count(req.key) ? 1 : 0); return;
  }
}

}  // namespace hccltune::store_protocol
