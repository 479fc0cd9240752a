#include "python/csrc/completion.h"

#include <ATen/core/jit_type.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace hccltune::torch_backend {

struct CompletionQueue::State {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  std::vector<std::thread> threads;  // not yet joined
  int idle = 0;                      // threads waiting for work
  bool dispatching = false;          // a thread has taken a completion and not yet handed off
  std::thread::id dispatcher;
  bool stopping = false;  // the queue is being destroyed: threads exit once it is drained
  bool closed = false;    // destroyed: Posters complete on the calling thread

  // With `mu` held: makes sure some thread will take the queued completions.
  static void WakeLocked(const std::shared_ptr<State>& s) {
    if (s->dispatching || s->queue.empty()) return;
    if (s->idle > 0) {
      s->cv.notify_one();
    } else {
      s->threads.emplace_back([s] { Loop(s); });
    }
  }

  static void Loop(const std::shared_ptr<State>& s) {
    const std::thread::id self = std::this_thread::get_id();
    std::unique_lock<std::mutex> lock(s->mu);
    for (;;) {
      ++s->idle;
      s->cv.wait(lock, [&] { return (!s->dispatching && !s->queue.empty()) || (s->stopping && s->queue.empty()); });
      --s->idle;
      if (s->queue.empty()) return;  // stopping and drained
      std::function<void()> complete = std::move(s->queue.front());
      s->queue.pop_front();
      s->dispatching = true;
      s->dispatcher = self;
      lock.unlock();
      try {
        complete();  // the future's first callback hands off (HandOff) before the user's run
      } catch (...) {
      }
      complete = nullptr;  // may drop the last reference to Python objects: not under our lock
      lock.lock();
      if (s->dispatching && s->dispatcher == self) s->dispatching = false;  // nothing was handed off
    }
  }

  // The hand-off callback: the dispatcher has marked its future; later completions may go on elsewhere.
  static void HandOff(const std::shared_ptr<State>& s) {
    std::lock_guard<std::mutex> lock(s->mu);
    if (!s->dispatching || s->dispatcher != std::this_thread::get_id()) return;  // not completed through Post
    s->dispatching = false;
    WakeLocked(s);
  }
};

CompletionQueue::CompletionQueue() : state_(std::make_shared<State>()) {}

CompletionQueue::~CompletionQueue() {
  const std::thread::id self = std::this_thread::get_id();
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
    // Destroyed from inside a completion (a callback dropped the group's last reference): let others go on.
    if (state_->dispatching && state_->dispatcher == self) state_->dispatching = false;
    State::WakeLocked(state_);
    state_->cv.notify_all();
  }
  // Threads started while draining (a blocked callback handed off) are joined in the next round.
  for (;;) {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      threads.swap(state_->threads);
      if (threads.empty()) {
        state_->closed = true;
        break;
      }
    }
    for (std::thread& t : threads) {
      if (t.get_id() == self) {
        t.detach();  // it holds the state and exits once it returns from the callback
      } else {
        t.join();
      }
    }
  }
}

c10::intrusive_ptr<c10::ivalue::Future> CompletionQueue::NewFuture() {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  future->addCallback([weak = std::weak_ptr<State>(state_)](c10::ivalue::Future& /*unused*/) {
    if (auto s = weak.lock()) State::HandOff(s);
  });
  return future;
}

CompletionQueue::Poster CompletionQueue::poster() const {
  Poster p;
  p.state_ = state_;
  return p;
}

void CompletionQueue::Poster::operator()(std::function<void()> complete) const {
  if (auto s = state_.lock()) {
    std::unique_lock<std::mutex> lock(s->mu);
    if (!s->closed) {
      s->queue.push_back(std::move(complete));
      State::WakeLocked(s);
      return;
    }
  }
  try {
    complete();
  } catch (...) {
  }
}

}  // namespace hccltune::torch_backend
