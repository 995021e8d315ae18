// The streams' wire contract over real loopback gRPC, as a client written
// against proto/ alone may try it, byte by byte: StepStream, PushStream
// and PullStream messages that do not parse, a step cut off in the middle
// of its push, an empty push, steps written ahead of their replies and
// garbage after a good step. Each ends its call with a status naming the
// method, applies nothing of what was refused, applies a good step once,
// and leaves the server serving the next stream.
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "proto/paramd.grpc.pb.h"
#include "tests/local_cluster.h"
#include "tests/shard_client.h"
#include "tests/test_files.h"
#include "tests/whole_push.h"

namespace paramd {
namespace {

using testing::JobOptions;
using testing::LocalCluster;

constexpr char kStepStream[] = "/paramd.proto.ParameterService/StepStream";
constexpr char kPushStream[] = "/paramd.proto.ParameterService/PushStream";
constexpr char kPullStream[] = "/paramd.proto.ParameterService/PullStream";

// A length-delimited field whose length runs past the end.
const std::string& Garbage() {
  static const std::string* const garbage = new std::string("\x0a\x7f\x01");
  return *garbage;
}

// One call of `method` as raw bytes on gRPC's async generic API, each
// operation waited for; bounded by `deadline` (30 s unless given).
class RawCall {
 public:
  RawCall(const std::shared_ptr<grpc::Channel>& channel, const char* method,
          std::chrono::milliseconds deadline = std::chrono::seconds(30))
      : generic_(channel) {
    context_.set_deadline(std::chrono::system_clock::now() + deadline);
    call_ = generic_.PrepareCall(&context_, method, &queue_);
    call_->StartCall(this);
    started_ = Wait();
  }
  ~RawCall() {
    if (!finished_) {
      context_.TryCancel();
      (void)Finish();
    }
    queue_.Shutdown();
    void* tag;
    bool ok;
    while (queue_.Next(&tag, &ok)) {
    }
  }

  bool started() const { return started_; }
  bool Write(const std::string& bytes) {
    grpc::Slice slice(bytes.data(), bytes.size());
    grpc::ByteBuffer buffer(&slice, 1);
    call_->Write(buffer, this);
    return Wait();
  }
  bool Write(const google::protobuf::Message& message) {
    return Write(message.SerializeAsString());
  }
  bool WritesDone() {
    call_->WritesDone(this);
    return Wait();
  }
  void Cancel() { context_.TryCancel(); }
  // The next message, parsed as `out`; false once the call has no more.
  bool Read(google::protobuf::Message* out) {
    grpc::ByteBuffer buffer;
    call_->Read(&buffer, this);
    if (!Wait()) return false;
    grpc::Slice slice;
    REQUIRE(buffer.DumpToSingleSlice(&slice).ok());
    REQUIRE(out->ParseFromArray(slice.begin(), static_cast<int>(slice.size())));
    return true;
  }
  // Reads what is left, then the call's status.
  grpc::Status Finish() {
    grpc::ByteBuffer ignored;
    for (;;) {
      call_->Read(&ignored, this);
      if (!Wait()) break;
    }
    grpc::Status status;
    call_->Finish(&status, this);
    Wait();
    finished_ = true;
    return status;
  }

 private:
  bool Wait() {
    void* tag = nullptr;
    bool ok = false;
    REQUIRE(queue_.Next(&tag, &ok));
    REQUIRE(tag == this);
    return ok;
  }

  grpc::GenericStub generic_;
  grpc::ClientContext context_;
  grpc::CompletionQueue queue_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  bool started_ = false;
  bool finished_ = false;
};

struct Server {
  explicit Server(const std::string& policy) {
    JobOptions o;
    o.servers = {"127.0.0.1:0"};
    o.workers = 1;
    o.layers = "[20, 10]";
    o.policy = policy;
    config = testing::MakeJob(o, testing::NewTempDir());
    cluster = std::make_unique<LocalCluster>(config);
    channel = grpc::CreateChannel(cluster->addresses()[0],
                                  grpc::InsecureChannelCredentials());
    auto stub = proto::ParameterService::NewStub(channel);
    testing::RegisterOverGrpc(*stub, config, shard().plan(), 0);
  }
  Shard& shard() { return *cluster->server(0).shard(); }
  proto::PushRequest Push(uint64_t clock, float value) {
    return testing::WholePush(shard(), config.job_id, 0, clock, value);
  }
  proto::ShardStatus Status() {
    proto::ShardStatus st;
    shard().GetStatus(&st);
    return st;
  }
  // One whole push on a new PushStream, ended by the client: its reply.
  proto::PushResponse PushOnStream(uint64_t clock, float value) {
    RawCall call(channel, kPushStream);
    REQUIRE(call.Write(Push(clock, value)));
    REQUIRE(call.WritesDone());
    proto::PushResponse reply;
    REQUIRE(call.Read(&reply));
    const grpc::Status s = call.Finish();
    INFO(s.error_message());
    CHECK(s.ok());
    return reply;
  }
  // One whole step on a new StepStream: its reply's version.
  uint64_t Step(uint64_t clock, float value) {
    RawCall step(channel, kStepStream);
    REQUIRE(step.Write(Push(clock, value)));
    proto::PullResponse reply;
    REQUIRE(step.Read(&reply));
    REQUIRE(step.WritesDone());
    const grpc::Status s = step.Finish();
    INFO(s.error_message());
    CHECK(s.ok());
    return reply.version();
  }

  JobConfig config;
  std::unique_ptr<LocalCluster> cluster;
  std::shared_ptr<grpc::Channel> channel;
};

TEST_CASE(
    "stream messages that do not parse end the call with INVALID_ARGUMENT "
    "naming the method; nothing is applied and the server serves on",
    "[integration][stream][contract]") {
  Server server("sync");
  struct Case {
    const char* method;
    const char* says;
  };
  const Case cases[] = {
      {kStepStream, "StepStream message 1: Push: malformed message"},
      {kPushStream, "PushStream message 1: Push: malformed message"},
      {kPullStream, "PullStream: malformed PullRequest"},
  };
  for (const Case& c : cases) {
    RawCall call(server.channel, c.method);
    REQUIRE(call.started());
    call.Write(Garbage());  // May fail once the server has ended the call.
    call.WritesDone();
    const grpc::Status s = call.Finish();
    INFO(c.method << ": " << s.error_message());
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(s.error_message(), Catch::StartsWith(c.says));
  }
  CHECK(server.Status().pushes() == 0);
  CHECK(server.Status().version() == 0);
  CHECK(server.Step(0, 1.0f) == 1);
  CHECK(server.Status().pushes() == 1);
}

TEST_CASE(
    "a StepStream half-closed in the middle of its push applies nothing, "
    "says so, and the step sent again is applied once",
    "[integration][stream][contract]") {
  Server server("sync");
  const std::vector<proto::PushRequest> pieces =
      testing::SplitPush(server.Push(0, 1.0f), 2, /*more=*/true);
  {
    RawCall step(server.channel, kStepStream);
    REQUIRE(step.Write(pieces[0]));
    REQUIRE(step.WritesDone());
    const grpc::Status s = step.Finish();
    INFO(s.error_message());
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(s.error_message(),
               Catch::StartsWith("StepStream: the stream ended after message "
                                 "1 of a push") &&
                   Catch::EndsWith("nothing applied"));
  }
  CHECK(server.Status().pushes() == 0);
  CHECK(server.Status().version() == 0);
  CHECK(server.Step(0, 1.0f) == 1);
  CHECK(server.Status().pushes() == 1);
}

TEST_CASE(
    "an empty message as a StepStream's push is refused naming its empty "
    "job_id",
    "[integration][stream][contract]") {
  Server server("async");
  RawCall step(server.channel, kStepStream);
  REQUIRE(step.Write(std::string()));
  step.WritesDone();
  const grpc::Status s = step.Finish();
  INFO(s.error_message());
  CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK_THAT(s.error_message(), Catch::Contains("job_id ''"));
  CHECK(server.Status().pushes() == 0);
  CHECK(server.Step(0, 1.0f) == 1);
}

TEST_CASE(
    "StepStream steps written ahead of their replies are applied in order, "
    "once each; garbage after them ends the call and keeps them",
    "[integration][stream][contract]") {
  const std::string policy = GENERATE("sync", "async", "ssp");
  INFO(policy);
  Server server(policy);
  RawCall step(server.channel, kStepStream);
  for (uint64_t clock = 0; clock < 3; ++clock) {
    REQUIRE(step.Write(server.Push(clock, 0.5f)));
  }
  for (uint64_t version = 1; version <= 3; ++version) {
    proto::PullResponse reply;
    REQUIRE(step.Read(&reply));
    CHECK(reply.version() == version);
  }
  step.Write(Garbage());
  step.WritesDone();
  const grpc::Status s = step.Finish();
  INFO(s.error_message());
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(server.Status().pushes() == 3);
  CHECK(server.Status().version() == 3);
  CHECK(server.Step(3, 0.5f) == 4);
}

TEST_CASE(
    "a PushStream cut off before the client ends it — cancelled, or past its "
    "deadline — applies nothing though its whole push arrived; the push sent "
    "again is applied once, not taken for a duplicate",
    "[integration][stream][contract]") {
  const std::string policy = GENERATE("sync", "async");
  const bool cancel = GENERATE(true, false);
  INFO(policy << (cancel ? ", cancelled" : ", past its deadline"));
  Server server(policy);
  {
    RawCall call(server.channel, kPushStream,
                 cancel ? std::chrono::milliseconds(30000)
                        : std::chrono::milliseconds(300));
    REQUIRE(call.started());
    REQUIRE(call.Write(server.Push(0, 1.0f)));
    // Every piece is in; the stream is never half-closed.
    if (cancel) call.Cancel();
    const grpc::Status s = call.Finish();  // Past the deadline: it passed.
    INFO(s.error_message());
    CHECK(s.error_code() == (cancel ? grpc::StatusCode::CANCELLED
                                    : grpc::StatusCode::DEADLINE_EXCEEDED));
  }
  // The server reads the cut-off stream's end before this stream's push
  // (one connection, one polling thread): had it applied the first, this
  // one would be a duplicate.
  const proto::PushResponse again = server.PushOnStream(0, 1.0f);
  CHECK_FALSE(again.duplicate());
  CHECK(again.version() == 1);
  CHECK(server.Status().pushes() == 1);
  CHECK(server.Step(1, 1.0f) == 2);
}

}  // namespace
}  // namespace paramd
