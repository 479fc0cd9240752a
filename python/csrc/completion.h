// Completes the torch backend's futures off the threads that run the operations.
//
// c10::ivalue::Future runs its callbacks (`then`, DDP's comm hooks) inside markCompleted/setError, on the
// completing thread. Completing on the communicator's progress thread therefore ran user code there: a callback
// that issued another operation on the same group and waited on it (PowerSGD's hook does
// `.get_future().wait()` inside `.then`) queued behind the job that was running it and hung forever. A
// CompletionQueue completes futures on threads of its own, in the order Post was called.
//
// Order and nesting: futures become completed() strictly in Post order. The thread that completes one gives up
// the "dispatcher" role as soon as the future is marked — from a hand-off callback NewFuture registers ahead of
// every user callback — and only then runs the user's callbacks; if more completions are queued meanwhile, an
// idle thread (or a new one) takes them. So a callback that waits on a later operation of the group never
// blocks that operation's completion. Callbacks of different futures may thus run at the same time (as with
// gloo's worker threads); the number of threads is the most callbacks ever blocked at once, plus one.
//
// Thread-safety: NewFuture, Post and Poster may be called from any thread. The destructor completes what is
// still queued, then joins the threads (a thread that is destroying the queue from inside a callback is detached
// instead). A Poster outlives the queue safely: once the queue is gone it completes on the calling thread.
#pragma once

#include <ATen/core/ivalue.h>

#include <functional>
#include <memory>
#include <utility>

namespace hccltune::torch_backend {

class CompletionQueue {
 public:
  struct State;  // shared with the threads and Posters (both may outlive the queue)

  CompletionQueue();
  ~CompletionQueue();
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  // A future of tensor lists whose completion goes through Post (it carries the hand-off callback, which must
  // be its first). Completing it any other way is allowed and simply hands nothing off.
  c10::intrusive_ptr<c10::ivalue::Future> NewFuture();

  // Queues `complete`, which marks one future made by NewFuture completed or failed (markCompleted or
  // setError, once). It runs on the queue's threads after every completion posted before it; exceptions it
  // throws are swallowed (the future then stays as `complete` left it).
  void Post(std::function<void()> complete) const { poster()(std::move(complete)); }

  // Post, as a value that may outlive the queue (point-to-point threads can finish after the group is gone):
  // after the queue is destroyed it runs `complete` on the calling thread.
  class Poster {
   public:
    void operator()(std::function<void()> complete) const;

   private:
    friend class CompletionQueue;
    std::weak_ptr<State> state_;
  };
  Poster poster() const;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace hccltune::torch_backend
