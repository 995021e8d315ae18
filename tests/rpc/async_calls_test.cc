// AsyncCall and AsyncCallQueue (server/rpc/async_calls.h) over real gRPC:
// a small bidirectional method served through the generic service that
// answers each message with the count so far, called by the generated
// protobuf client; a method the table lacks is UNIMPLEMENTED.
// Every event runs on the queue's one thread; a Finish asked for while a
// write is out goes after the write; a cancelled call is told once and
// ends; the queue's Shutdown, after the server's, waits for an open call to
// end; a call's objects are all deleted.
#include "server/rpc/async_calls.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/rpc/grpc_frames.h"
#include "proto/paramd.grpc.pb.h"
#include "server/rpc/served_methods.h"

namespace paramd {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(30);

// What the calls saw, shared with the test.
struct Seen {
  absl::Mutex mu;
  std::set<std::thread::id> threads ABSL_GUARDED_BY(mu);
  int alive ABSL_GUARDED_BY(mu) = 0;  // Handler objects not deleted.
  int cancels ABSL_GUARDED_BY(mu) = 0;

  void On() {
    absl::MutexLock lock(&mu);
    threads.insert(std::this_thread::get_id());
  }
  bool AwaitAlive(int n) {
    absl::MutexLock lock(&mu);
    auto at = [this, n]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return alive == n; };
    return mu.AwaitWithTimeout(absl::Condition(&at), kTimeout);
  }
};

// Answers message n with a PullResponse of version n; at message
// `abort_at` writes that answer and at once asks to finish with ABORTED
// (the write is still out then). The client's half-close finishes OK.
class Counter final : public AsyncCall {
 public:
  Counter(AsyncCallQueue* queue, std::unique_ptr<CallSlot> slot, Seen* seen,
          int abort_at)
      : AsyncCall(queue, std::move(slot)), seen_(seen), abort_at_(abort_at) {
    absl::MutexLock lock(&seen_->mu);
    ++seen_->alive;
  }
  ~Counter() override {
    absl::MutexLock lock(&seen_->mu);
    --seen_->alive;
  }

 private:
  void OnStart() override {
    seen_->On();
    StartRead(&in_);
  }
  void OnReadDone(bool ok) override {
    seen_->On();
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    proto::PullResponse reply;
    reply.set_version(++count_);
    out_ = SerializeMessage(reply);
    StartWrite(&out_);
    if (count_ == static_cast<uint64_t>(abort_at_)) {
      Finish(grpc::Status(grpc::StatusCode::ABORTED, "enough"));
    }
  }
  void OnWriteDone(bool ok) override {
    seen_->On();
    if (ok) {
      StartRead(&in_);  // Ignored once finishing.
    } else {
      // The client went away: a call ends only once it is finished.
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "gone"));
    }
  }
  void OnCancel() override {
    seen_->On();
    absl::MutexLock lock(&seen_->mu);
    ++seen_->cancels;
  }
  Seen* const seen_;
  const int abort_at_;
  grpc::ByteBuffer in_, out_;
  uint64_t count_ = 0;
};

struct CountServer {
  explicit CountServer(int abort_at = 0) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterAsyncGenericService(&service);
    std::unique_ptr<grpc::ServerCompletionQueue> cq =
        builder.AddCompletionQueue();
    server = builder.BuildAndStart();
    REQUIRE(server != nullptr);
    // ParameterService's StepStream name, so that the generated client
    // calls it.
    methods.AddStream(
        "/paramd.proto.ParameterService/StepStream",
        [this, abort_at](AsyncCallQueue* q, std::unique_ptr<CallSlot> slot) {
          return new Counter(q, std::move(slot), &seen, abort_at);
        });
    queue = std::make_unique<AsyncCallQueue>(std::move(cq), &service);
    queue->Start([this](AsyncCallQueue* q, std::unique_ptr<CallSlot> slot) {
      return methods.Make(q, std::move(slot));
    });
    stub = proto::ParameterService::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                            grpc::InsecureChannelCredentials()));
  }
  ~CountServer() { Stop(); }
  void Stop() {
    if (queue == nullptr) return;
    server->Shutdown(std::chrono::system_clock::now());
    queue->Shutdown();
    queue.reset();
  }

  int port = 0;
  Seen seen;
  ServedMethods methods;
  grpc::AsyncGenericService service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<AsyncCallQueue> queue;
  std::unique_ptr<proto::ParameterService::Stub> stub;
};

proto::PushRequest Message() {
  proto::PushRequest m;
  m.set_job_id("count");
  return m;
}

using Stream =
    grpc::ClientReaderWriter<proto::PushRequest, proto::PullResponse>;

// A stream on `c` whose first message was answered.
std::unique_ptr<Stream> Answered(CountServer& s, grpc::ClientContext* c) {
  std::unique_ptr<Stream> stream = s.stub->StepStream(c);
  proto::PullResponse reply;
  REQUIRE(stream->Write(Message()));
  REQUIRE(stream->Read(&reply));
  CHECK(reply.version() == 1);
  return stream;
}

TEST_CASE(
    "async calls: every event of every stream runs on the queue's one "
    "thread, and a half-closed stream finishes",
    "[rpc][async]") {
  CountServer s;
  grpc::ClientContext c1, c2;
  auto one = s.stub->StepStream(&c1);
  auto two = s.stub->StepStream(&c2);
  proto::PullResponse reply;
  for (uint64_t n = 1; n <= 3; ++n) {
    for (auto* stream : {one.get(), two.get()}) {
      REQUIRE(stream->Write(Message()));
      REQUIRE(stream->Read(&reply));
      CHECK(reply.version() == n);
    }
  }
  for (auto* stream : {one.get(), two.get()}) {
    REQUIRE(stream->WritesDone());
    CHECK_FALSE(stream->Read(&reply));
    CHECK(stream->Finish().ok());
  }
  // The two calls' objects are gone.
  REQUIRE(s.seen.AwaitAlive(0));
  absl::MutexLock lock(&s.seen.mu);
  CHECK(s.seen.threads.size() == 1);
  CHECK(s.seen.threads.count(std::this_thread::get_id()) == 0);
  CHECK(s.seen.cancels == 0);
}

TEST_CASE(
    "async calls: a Finish asked for while a write is out is sent after it",
    "[rpc][async]") {
  CountServer s(/*abort_at=*/2);
  grpc::ClientContext c;
  std::unique_ptr<Stream> stream = Answered(s, &c);
  proto::PullResponse reply;
  REQUIRE(stream->Write(Message()));
  REQUIRE(stream->Read(&reply));  // The write, then the status.
  CHECK(reply.version() == 2);
  CHECK_FALSE(stream->Read(&reply));
  const grpc::Status status = stream->Finish();
  CHECK(status.error_code() == grpc::StatusCode::ABORTED);
  CHECK(status.error_message() == "enough");
  REQUIRE(s.seen.AwaitAlive(0));
}

TEST_CASE("async calls: a cancelled call is told once and ends",
          "[rpc][async]") {
  CountServer s;
  grpc::ClientContext c;
  std::unique_ptr<Stream> stream = Answered(s, &c);
  proto::PullResponse reply;
  c.TryCancel();
  CHECK_FALSE(stream->Read(&reply));
  CHECK(stream->Finish().error_code() == grpc::StatusCode::CANCELLED);
  REQUIRE(s.seen.AwaitAlive(0));
  absl::MutexLock lock(&s.seen.mu);
  CHECK(s.seen.cancels == 1);
}

TEST_CASE("async calls: a method the table lacks is UNIMPLEMENTED, named",
          "[rpc][async]") {
  CountServer s;
  grpc::ClientContext c;
  proto::PullRequest request;
  proto::PullResponse reply;
  const grpc::Status status = s.stub->Pull(&c, request, &reply);
  CHECK(status.error_code() == grpc::StatusCode::UNIMPLEMENTED);
  CHECK_THAT(status.error_message(),
             Catch::Contains("/paramd.proto.ParameterService/Pull"));
  absl::MutexLock lock(&s.seen.mu);
  CHECK(s.seen.alive == 0);
}

TEST_CASE(
    "async calls: the queue's Shutdown after the server's ends an open call "
    "and deletes every object",
    "[rpc][async]") {
  CountServer s;
  grpc::ClientContext c;
  std::unique_ptr<Stream> stream = Answered(s, &c);
  proto::PullResponse reply;
  s.Stop();  // The call is open, its read waiting.
  {
    absl::MutexLock lock(&s.seen.mu);
    CHECK(s.seen.alive == 0);
    CHECK(s.seen.cancels == 1);
  }
  CHECK_FALSE(stream->Read(&reply));
  CHECK_FALSE(stream->Finish().ok());
}

TEST_CASE(
    "async calls: calls still coming while the server shuts down all end, "
    "and every object is deleted",
    "[rpc][async]") {
  CountServer s;
  constexpr int kCallers = 16;
  std::vector<std::thread> callers;
  absl::Mutex mu;
  int opened = 0;
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back([&] {
      grpc::ClientContext c;
      auto stream = s.stub->StepStream(&c);
      proto::PullResponse reply;
      if (stream->Write(Message())) stream->Read(&reply);
      {
        absl::MutexLock lock(&mu);
        ++opened;
      }
      stream->Finish();  // OK or not: the server may be gone.
    });
  }
  {
    // Some calls in flight, others still to come.
    absl::MutexLock lock(&mu);
    auto some = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return opened > 0; };
    REQUIRE(mu.AwaitWithTimeout(absl::Condition(&some), kTimeout));
  }
  s.Stop();
  for (std::thread& t : callers) t.join();
  absl::MutexLock lock(&s.seen.mu);
  CHECK(s.seen.alive == 0);
}

}  // namespace
}  // namespace paramd
