// StepQueue: the completion queue a worker's StepStreams share, polled by
// the thread that waits on a step (gRPC's async API), not by gRPC's
// callback threads. gRPC 1.51's callback API runs each reaction on one of
// two threads per process that hand the poller's role and every event to
// one another: 4-6 thread switches a round trip on this machine, against
// one (the kernel waking the poller) for a thread that polls its own
// queue (docs/performance-history.md, "What gRPC's threading costs a round
// trip"). So a step's reply is read, checked and written into the parameters on
// the training thread itself, which wakes once per event.
//
// Nothing polls while nobody waits: events (a write done, the end of a
// call) queue up until the next Poll or Drain, which runs them in order.
//
// Thread-compatible: one thread polls at a time (ShardLinks' caller).
#ifndef PARAMD_WORKER_RPC_STEP_QUEUE_H_
#define PARAMD_WORKER_RPC_STEP_QUEUE_H_

#include <grpcpp/completion_queue.h>

#include "absl/time/time.h"

namespace paramd {

class StepQueue {
 public:
  // What an event on the queue runs: a call's operation passes a Tag as
  // its tag, and Poll calls Done with the operation's outcome.
  class Tag {
   public:
    virtual void Done(bool ok) = 0;

   protected:
    ~Tag() = default;
  };
  // A Tag that calls back one member of a call object: one per kind of
  // operation the call puts on the queue (its start, a write, a read,
  // its finish).
  template <typename Call>
  class Event final : public Tag {
   public:
    Event(Call* call, void (Call::*on)(bool)) : call_(call), on_(on) {}
    void Done(bool ok) override { (call_->*on_)(ok); }

   private:
    Call* const call_;
    void (Call::*const on_)(bool);
  };

  StepQueue() = default;
  // Shuts the queue down and runs what is left on it. Every call started
  // on it must be over by then (its tags all returned).
  ~StepQueue();
  StepQueue(const StepQueue&) = delete;
  StepQueue& operator=(const StepQueue&) = delete;

  grpc::CompletionQueue* cq() { return &cq_; }

  // Waits until an event comes or `until` passes; runs the event's tag.
  // Returns whether one came.
  bool Poll(absl::Time until);
  // Runs every event ready now, waiting for none.
  void Drain();

 private:
  grpc::CompletionQueue cq_;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_RPC_STEP_QUEUE_H_
