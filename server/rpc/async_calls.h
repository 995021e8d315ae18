// The server's calls on gRPC's async API, polled by one thread per
// server: AsyncCallQueue (the completion queue, its thread, and the
// threads unary handlers may wait on) and AsyncCall (one call, with the
// reactor-like interface the handlers are written against: StartRead,
// StartWrite, Finish, and OnReadDone, OnWriteDone, OnCancel called back).
//
// Every method of every service reaches the server through one
// grpc::AsyncGenericService, gRPC's public way to serve a method on raw
// bytes: calls are asked for before their method is known (a CallSlot),
// and the queue's MakeCall turns each that comes into the AsyncCall that
// serves its method (server/rpc/served_methods.h). On the wire a call's
// kind (unary, client-, server- or bidirectional streaming) is only how
// many messages each side sends, so one kind of call serves them all.
//
// Why not gRPC's callback API: gRPC 1.51 runs its reactions on two threads
// per process that hand the poller's role and each event to one another,
// 4-6 thread switches a round trip on this machine; one thread polling its
// own queue wakes once per event, and under gRPC's default poller a second
// such thread would bring the hand-offs back (docs/performance-history.md,
// "What gRPC's threading costs a round trip"). So every method is polled
// here by one thread, whatever the number of calls; a unary handler, which
// may wait (a pull under sync), runs on a thread of the queue's
// HandlerThreads.
//
// An AsyncCall's events run on the queue's thread; StartWrite and Finish
// may also be called from any thread (the one whose push made a waiting
// pull readable, a unary handler's). One read and one write at a time; a
// Finish asked for while a write is out is sent when the write is done; a
// read or write started after Finish is not started. The call deletes
// itself once it is finished, gRPC has said it is done and no read or
// write is out.
#ifndef PARAMD_SERVER_RPC_ASYNC_CALLS_H_
#define PARAMD_SERVER_RPC_ASYNC_CALLS_H_

#include <grpcpp/alarm.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>

#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/faults/reply_faults.h"
#include "server/rpc/handler_threads.h"

namespace paramd {

class AsyncCall;
class AsyncCallQueue;

// What a completion queue's tag runs when its event comes.
class QueueEvent {
 public:
  virtual void Run(bool ok) = 0;

 protected:
  ~QueueEvent() = default;
};

// gRPC's objects for one call, asked for before its method is known; the
// AsyncCall that serves the call owns them once it came.
class CallSlot {
 public:
  grpc::GenericServerContext* context() { return &context_; }
  grpc::GenericServerAsyncReaderWriter* stream() { return &stream_; }

 private:
  friend class AsyncCall;
  friend class AsyncCallQueue;
  // gRPC returns it once the call is over, finished or cancelled (only for
  // a call that came); it is asked for with the call, and runs the
  // AsyncCall's kDone once that exists.
  class Done final : public QueueEvent {
   public:
    void Run(bool ok) override;
    AsyncCall* call = nullptr;
  };
  // The call came (or, not ok, the server shuts down).
  class Came final : public QueueEvent {
   public:
    void Run(bool ok) override;
    AsyncCallQueue* queue = nullptr;
    CallSlot* slot = nullptr;
  };

  grpc::GenericServerContext context_;
  grpc::GenericServerAsyncReaderWriter stream_{&context_};
  Done done_;
  Came came_;
};

class AsyncCallQueue {
 public:
  // Makes the AsyncCall that serves the call in `slot` (its method is
  // slot->context()->method()); called on the queue's thread.
  using MakeCall =
      std::function<AsyncCall*(AsyncCallQueue*, std::unique_ptr<CallSlot>)>;

  // `cq` comes from the server's builder (ServerBuilder::AddCompletionQueue),
  // `service` is registered with it (RegisterAsyncGenericService).
  AsyncCallQueue(std::unique_ptr<grpc::ServerCompletionQueue> cq,
                 grpc::AsyncGenericService* service);
  ~AsyncCallQueue();
  AsyncCallQueue(const AsyncCallQueue&) = delete;
  AsyncCallQueue& operator=(const AsyncCallQueue&) = delete;

  grpc::ServerCompletionQueue* cq() { return cq_.get(); }
  // Where unary handlers run (they may wait).
  HandlerThreads* handler_threads() { return &handler_threads_; }

  // After the server started: asks for the first calls (each that comes is
  // replaced by a new one asked for) and starts the polling thread; each
  // call that comes is served by `make`'s AsyncCall.
  void Start(MakeCall make);
  // After the server's Shutdown (which cancels every call still open and
  // fails every call still asked for): waits until every AsyncCall is gone
  // — a call that came, one whose coming is still queued, one asked for —
  // so that none starts an operation on the queue once it is shut down;
  // then shuts the queue down and joins the thread. No call is asked for
  // once this began.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class AsyncCall;
  friend class CallSlot;

  // Asks gRPC for one more call (unless shutting down).
  void Listen() ABSL_LOCKS_EXCLUDED(mu_);
  // A call asked for came (ok) or never will (not ok).
  void Came(CallSlot* slot, bool ok);
  // A call asked for or served ended.
  void Removed() ABSL_LOCKS_EXCLUDED(mu_);
  // Runs each event's tag until the queue is shut down and empty.
  void RunEvents();

  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  grpc::AsyncGenericService* const service_;
  MakeCall make_;
  HandlerThreads handler_threads_;
  std::thread thread_;
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;  // Asked for, not deleted.
};

// One call. A handler derives from it and implements OnStart (the call
// came: check its token, start reading or the pull) and the events it
// uses. It must call Finish on every path, a failed read or write and a
// cancelled call included: the call ends (and the server's shutdown can
// complete) only then.
class AsyncCall {
 public:
  virtual ~AsyncCall() = default;
  AsyncCall(const AsyncCall&) = delete;
  AsyncCall& operator=(const AsyncCall&) = delete;

  // Keeps the call (this object) alive while another thread works in it,
  // though the call may end meanwhile.
  class Hold {
   public:
    explicit Hold(AsyncCall* call);
    ~Hold();
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    AsyncCall* const call_;
  };

 protected:
  // Serves the call that came in `slot`.
  AsyncCall(AsyncCallQueue* queue, std::unique_ptr<CallSlot> slot);

  grpc::GenericServerContext* context() { return slot_->context(); }
  AsyncCallQueue* queue() const { return queue_; }

  // Not after Finish (ignored then).
  void StartRead(grpc::ByteBuffer* message) ABSL_LOCKS_EXCLUDED(mu_);
  void StartWrite(const grpc::ByteBuffer* message) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the call with `status` (once; later calls are ignored); an OK one
  // after the message `reply` when one is given (a unary or
  // client-streaming method's response).
  void Finish(const grpc::Status& status,
              std::optional<grpc::ByteBuffer> reply = std::nullopt)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Runs OnAlarm on the queue's thread once `delay` has passed, and after
  // the events gRPC has already queued for this call; one alarm at a time
  // (ignored while one is set). With no delay it settles the call: a read
  // fails alike when the client half-closed, cancelled or its deadline
  // passed, and gRPC tells a cancel only by the done event, which may
  // follow the failed read; a cancel that failed the read has been told
  // through OnCancel by the time OnAlarm runs. May be called from any
  // thread.
  void Alarm(absl::Duration delay = absl::ZeroDuration())
      ABSL_LOCKS_EXCLUDED(mu_);
  // An alarm set runs OnAlarm now (a cancelled call need not wait).
  void CancelAlarm() ABSL_LOCKS_EXCLUDED(mu_);
  // The testing section's faults on a handled reply of `rpc`
  // (server/faults/reply_faults.h): its fate is drawn (`*lost`: OK, or
  // the reply lost on purpose), then OnAlarm answers — after the drawn
  // delay, on the call's alarm (no thread waits), or at once on this
  // thread. Set what OnAlarm answers with first.
  void HoldReply(const ReplyFaults& faults, const char* rpc,
                 absl::Status* lost);

  // The call came; the handler's first event.
  virtual void OnStart() = 0;
  virtual void OnReadDone(bool /*ok*/) {}
  virtual void OnWriteDone(bool /*ok*/) {}
  // The call was cancelled (the client went away or cancelled, its
  // deadline passed, or the server shuts down); any time after OnStart,
  // at most once.
  virtual void OnCancel() {}
  // After Alarm (or CancelAlarm).
  virtual void OnAlarm() {}

 private:
  enum class Event { kRead, kWritten, kStatusSent, kDone, kAlarm };
  friend class AsyncCallQueue;
  friend class CallSlot;
  // What the queue's events carry.
  class Tag final : public QueueEvent {
   public:
    Tag(AsyncCall* call, Event event) : call_(call), event_(event) {}
    void Run(bool ok) override { call_->Handle(event_, ok); }

   private:
    AsyncCall* const call_;
    const Event event_;
  };

  // Sends the status (and the reply, if any).
  void SendStatus(const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Handle(Event event, bool ok) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether nothing of the call is left to come or to run; marks it ended.
  bool Over() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the call (End) if it is Over, after an event was handled.
  void EndIfOver() ABSL_LOCKS_EXCLUDED(mu_);
  // Deletes this (once Over).
  void End();

  AsyncCallQueue* const queue_;
  const std::unique_ptr<CallSlot> slot_;
  Tag read_{this, Event::kRead}, written_{this, Event::kWritten},
      status_sent_tag_{this, Event::kStatusSent},
      alarm_tag_{this, Event::kAlarm};
  grpc::Alarm alarm_;

  absl::Mutex mu_;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool alarm_set_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_asked_ ABSL_GUARDED_BY(mu_) = false;
  // A Finish asked for while a write was out: sent when it is done.
  std::optional<grpc::Status> finish_after_write_ ABSL_GUARDED_BY(mu_);
  // Sent with an OK status.
  std::optional<grpc::ByteBuffer> reply_ ABSL_GUARDED_BY(mu_);
  bool status_sent_ ABSL_GUARDED_BY(mu_) = false;  // Its tag came back.
  bool done_ ABSL_GUARDED_BY(mu_) = false;         // gRPC's done tag came.
  int holds_ ABSL_GUARDED_BY(mu_) = 0;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_RPC_ASYNC_CALLS_H_
