// The server's streaming calls on gRPC's async API, polled by one thread
// per server: AsyncCallQueue (the completion queue and its thread) and
// AsyncCall (one call, with the reactor-like interface the stream
// handlers are written against: StartRead, StartWrite, Finish, and
// OnReadDone, OnWriteDone, OnCancel called back).
//
// Why not gRPC's callback API: gRPC 1.51 runs its reactions on two threads
// per process that hand the poller's role and each event to one another,
// 4-6 thread switches a round trip on this machine; one thread polling its
// own queue wakes once per event, and under gRPC's default poller a second
// such thread would bring the hand-offs back (docs/performance-history.md, "What
// gRPC's threading costs a round trip"). So every streaming method of the
// server is served here by one thread, whatever the number of streams; the
// unary methods stay on gRPC's synchronous API, whose threads wait on their
// own queues and cost the streams nothing.
//
// An AsyncCall's events run on the queue's thread; StartWrite and Finish
// may also be called from any thread (the one whose push made a waiting
// pull readable). One read and one write at a time; a Finish asked for
// while a write is out is sent when the write is done; a read or write
// started after Finish is not started. The call deletes itself once it is
// finished, gRPC has said it is done and no read or write is out.
#ifndef PARAMD_SERVER_RPC_ASYNC_CALLS_H_
#define PARAMD_SERVER_RPC_ASYNC_CALLS_H_

#include <grpcpp/alarm.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/async_stream.h>
#include <grpcpp/support/byte_buffer.h>

#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace paramd {

class AsyncCall;

// What serves the calls: asks gRPC for the next call of its async method
// `method`, on `cq`, whose arrival comes back as `tag`. `request` receives
// a server-streaming call's one request (else nullptr).
class AsyncMethods {
 public:
  virtual void RequestCall(
      int method, grpc::ServerContext* context,
      grpc::internal::ServerAsyncStreamingInterface* stream,
      grpc::ByteBuffer* request, grpc::ServerCompletionQueue* cq,
      void* tag) = 0;

 protected:
  ~AsyncMethods() = default;
};

class AsyncCallQueue {
 public:
  // `cq` comes from the server's builder (ServerBuilder::AddCompletionQueue).
  explicit AsyncCallQueue(std::unique_ptr<grpc::ServerCompletionQueue> cq);
  ~AsyncCallQueue();
  AsyncCallQueue(const AsyncCallQueue&) = delete;
  AsyncCallQueue& operator=(const AsyncCallQueue&) = delete;

  grpc::ServerCompletionQueue* cq() { return cq_.get(); }

  // After the server started: each of `first` asks for its method's first
  // call (each call then asks for the next one); then the polling thread
  // starts.
  void Start(const std::vector<AsyncCall*>& first);
  // After the server's Shutdown (which cancels every call still open and
  // fails every call still asked for): waits until every AsyncCall is gone
  // — a call that came, one whose coming is still queued, one asked for —
  // so that none starts an operation on the queue once it is shut down;
  // then shuts the queue down and joins the thread. No call is asked for
  // once this began.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // Whether calls may still be asked for.
  bool open() ABSL_LOCKS_EXCLUDED(mu_);
  // An AsyncCall asked for its call (it counts until it is deleted).
  void Added() ABSL_LOCKS_EXCLUDED(mu_);
  void Removed() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Runs each event's tag until the queue is shut down and empty.
  void RunEvents();

  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::thread thread_;
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;  // Asked for, not deleted.
};

// One call of a streaming method. A handler derives from one of the three
// kinds below, implements OnStart (the call came: check its token, start
// reading or the pull), the events it uses, and Next. It must call Finish
// on every path, a failed read or write and a cancelled call included:
// the call ends (and the server's shutdown can complete) only then.
class AsyncCall {
 public:
  virtual ~AsyncCall() = default;
  AsyncCall(const AsyncCall&) = delete;
  AsyncCall& operator=(const AsyncCall&) = delete;

  // Asks gRPC for the next call of this object's method; its events follow
  // on the queue. Deleted without events if the server shuts down first.
  void Listen();

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
  AsyncCall(AsyncCallQueue* queue, AsyncMethods* methods, int method)
      : queue_(queue), methods_(methods), method_(method) {}

  grpc::ServerContext* context() { return &context_; }
  AsyncCallQueue* queue() const { return queue_; }
  AsyncMethods* methods() const { return methods_; }
  int method() const { return method_; }

  // Not after Finish (ignored then).
  void StartRead(grpc::ByteBuffer* message) ABSL_LOCKS_EXCLUDED(mu_);
  void StartWrite(const grpc::ByteBuffer* message) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the call with `status` (once; later calls are ignored).
  void Finish(const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
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
  // A new object for the next call of the same method.
  virtual AsyncCall* Next() = 0;

  // The kind's gRPC operations.
  virtual void Request(void* tag) = 0;
  virtual void Read(grpc::ByteBuffer* message, void* tag) = 0;
  virtual void Write(const grpc::ByteBuffer& message, void* tag) = 0;
  virtual void SendStatus(const grpc::Status& status, void* tag) = 0;

 private:
  enum class Event { kCame, kRead, kWritten, kStatusSent, kDone, kAlarm };
  friend class AsyncCallQueue;
  // What the queue's events carry.
  class Tag final {
   public:
    Tag(AsyncCall* call, Event event) : call_(call), event_(event) {}
    void Done(bool ok) { call_->Handle(event_, ok); }

   private:
    AsyncCall* const call_;
    const Event event_;
  };

  void Handle(Event event, bool ok) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether nothing of the call is left to come or to run; marks it ended.
  bool Over() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes this (once Over).
  void End();

  AsyncCallQueue* const queue_;
  AsyncMethods* const methods_;
  const int method_;
  grpc::ServerContext context_;
  Tag came_{this, Event::kCame}, read_{this, Event::kRead},
      written_{this, Event::kWritten},
      status_sent_tag_{this, Event::kStatusSent}, done_tag_{this, Event::kDone},
      alarm_tag_{this, Event::kAlarm};
  grpc::Alarm alarm_;

  absl::Mutex mu_;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool alarm_set_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_asked_ ABSL_GUARDED_BY(mu_) = false;
  // A Finish asked for while a write was out: sent when it is done.
  std::optional<grpc::Status> finish_after_write_ ABSL_GUARDED_BY(mu_);
  bool status_sent_ ABSL_GUARDED_BY(mu_) = false;  // Its tag came back.
  bool done_ ABSL_GUARDED_BY(mu_) = false;         // gRPC's done tag came.
  int holds_ ABSL_GUARDED_BY(mu_) = 0;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
};

// A bidirectional stream (StepStream).
class AsyncBidiCall : public AsyncCall {
 protected:
  using AsyncCall::AsyncCall;

 private:
  void Request(void* tag) override;
  void Read(grpc::ByteBuffer* message, void* tag) override;
  void Write(const grpc::ByteBuffer& message, void* tag) override;
  void SendStatus(const grpc::Status& status, void* tag) override;

  grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> stream_{
      context()};
};

// A client-streaming call (PushStream): reads, then one response.
class AsyncReaderCall : public AsyncCall {
 protected:
  using AsyncCall::AsyncCall;
  // Sent with an OK status.
  grpc::ByteBuffer* response() { return &response_; }

 private:
  void Request(void* tag) override;
  void Read(grpc::ByteBuffer* message, void* tag) override;
  // None on this kind.
  void Write(const grpc::ByteBuffer& message, void* tag) override;
  void SendStatus(const grpc::Status& status, void* tag) override;

  grpc::ByteBuffer response_;
  grpc::ServerAsyncReader<grpc::ByteBuffer, grpc::ByteBuffer> stream_{
      context()};
};

// A server-streaming call (PullStream): one request, then writes.
class AsyncWriterCall : public AsyncCall {
 protected:
  using AsyncCall::AsyncCall;
  // Valid from OnStart.
  const grpc::ByteBuffer& request() const { return request_; }

 private:
  void Request(void* tag) override;
  // None on this kind.
  void Read(grpc::ByteBuffer* message, void* tag) override;
  void Write(const grpc::ByteBuffer& message, void* tag) override;
  void SendStatus(const grpc::Status& status, void* tag) override;

  grpc::ByteBuffer request_;
  grpc::ServerAsyncWriter<grpc::ByteBuffer> stream_{context()};
};

}  // namespace paramd

#endif  // PARAMD_SERVER_RPC_ASYNC_CALLS_H_
