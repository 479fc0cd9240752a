// A FIFO of values in fixed blocks that are recycled, not freed: push_back / pop_front never move an element
// (references stay valid until the element is popped, as with std::deque) and, once the queue has reached its
// working size, never allocate. libstdc++'s deque allocates a 512-byte node per 512 bytes pushed and frees it
// when drained — for a 200-byte element that is a malloc/free pair every second element, on the hot path of
// every small collective (StreamEndpoint's operations).
//
// Contract: T is default-constructible and copy-assignable; popped slots keep their last value until reused.
// Thread-safety: none (a value type; one owner).
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <vector>

namespace hccltune {

template <typename T, size_t kBlock = 64>
class BlockQueue {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  T& operator[](size_t i) { return At(start_ + i); }
  const T& operator[](size_t i) const { return At(start_ + i); }
  T& front() { return At(start_); }
  T& back() { return At(start_ + size_ - 1); }

  void push_back(const T& value) {
    if (start_ + size_ == blocks_.size() * kBlock) {
      if (spare_.empty()) {
        blocks_.push_back(std::make_unique<Block>());
      } else {
        blocks_.push_back(std::move(spare_.back()));
        spare_.pop_back();
      }
    }
    At(start_ + size_) = value;
    ++size_;
  }

  // Precondition: !empty().
  void pop_front() {
    ++start_;
    --size_;
    if (start_ == kBlock) {
      spare_.push_back(std::move(blocks_.front()));
      blocks_.pop_front();
      start_ = 0;
    }
    if (size_ == 0 && !blocks_.empty()) {
      // Drained: restart at the first block's first slot (keeps the working set to one block).
      start_ = 0;
    }
  }

 private:
  struct Block {
    T slots[kBlock];
  };
  T& At(size_t j) { return blocks_[j / kBlock]->slots[j % kBlock]; }
  const T& At(size_t j) const { return blocks_[j / kBlock]->slots[j % kBlock]; }

  std::deque<std::unique_ptr<Block>> blocks_;  // blocks_[0] holds the front element at slot start_
  std::vector<std::unique_ptr<Block>> spare_;
  size_t start_ = 0;
  size_t size_ = 0;
};

}  // namespace hccltune
