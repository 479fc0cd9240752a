// A Pair whose peer is a script: reads return the script's bytes (as many as asked, or at most `chunk` at a
// time), then the link reports the peer gone; writes are taken and dropped. Lets a test or a fuzz target put
// any byte sequence — garbage, a truncated frame — in front of a StreamEndpoint's receive paths.
//
// Thread-safety: one thread, as every Pair.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "runtime/transport/pair.h"

namespace hccltune::fuzz {

class ScriptedPair final : public Pair {
 public:
  explicit ScriptedPair(std::string script, size_t chunk = SIZE_MAX) : script_(std::move(script)), chunk_(chunk) {}
  int lanes() const override { return 1; }
  absl::StatusOr<size_t> TryWrite(int, const void*, size_t bytes) override { return bytes; }
  absl::StatusOr<size_t> TryRead(int, void* data, size_t bytes) override {
    if (bytes == 0) return size_t{0};
    if (pos_ == script_.size()) {
      return absl::UnavailableError(
          absl::StrCat("scripted link lost: the peer closed the connection after ", pos_, " bytes"));
    }
    const size_t n = std::min({bytes, chunk_, script_.size() - pos_});
    std::memcpy(data, script_.data() + pos_, n);
    pos_ += n;
    return n;
  }
  std::string Describe() const override { return "scripted"; }
  size_t consumed() const { return pos_; }

 private:
  std::string script_;
  size_t chunk_;
  size_t pos_ = 0;
};

}  // namespace hccltune::fuzz
