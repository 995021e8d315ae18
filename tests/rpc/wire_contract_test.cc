// The wire contract over real loopback gRPC, as any client may try it:
// bad requests, streams refused whole, messages over the limits and
// requests that do not parse get a clear status and change nothing; a plain
// protobuf client pushes and pulls; lost replies are applied once.
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "proto/paramd.grpc.pb.h"
#include "tests/local_cluster.h"
#include "tests/test_files.h"
#include "tests/whole_push.h"

namespace paramd {
namespace {

using testing::JobOptions;
using testing::LocalCluster;

// A job of one server on a local port and a tiny model ([20, 10]).
JobConfig TinyJob(int workers) {
  JobOptions o;
  o.servers = {"127.0.0.1:0"};
  o.workers = workers;
  o.layers = "[20, 10]";
  return testing::MakeJob(o, testing::NewTempDir());
}
// Registers rank 0 through a generated stub, both phases.
void RegisterRank0(proto::ParameterService::Stub& stub, const JobConfig& config,
                   const PartitionPlan& plan) {
  testing::RegisterOverGrpc(stub, config, plan, 0);
}

TEST_CASE("bad requests over the wire get a clear status and change nothing",
          "[integration]") {
  JobOptions o;
  o.servers = {"127.0.0.1:0"};
  const JobConfig config = testing::MakeJob(o, testing::NewTempDir());
  LocalCluster cluster(config);
  auto stub = proto::ParameterService::NewStub(grpc::CreateChannel(
      cluster.addresses()[0], grpc::InsecureChannelCredentials()));

  proto::RegisterRequest reg;
  reg.set_job_id("someone-elses-job");
  reg.set_rank(0);
  proto::RegisterResponse reg_resp;
  grpc::ClientContext c1;
  grpc::Status s = stub->Register(&c1, reg, &reg_resp);
  CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(s.error_message().find("job_id 'someone-elses-job'") !=
        std::string::npos);

  proto::PushRequest push;
  push.set_job_id(config.job_id);
  push.set_rank(0);
  proto::PushResponse push_resp;
  {
    // Not registered yet: refused before anything else is looked at.
    grpc::ClientContext c;
    s = stub->Push(&c, push, &push_resp);
    CHECK(s.error_code() == grpc::StatusCode::ABORTED);
    CHECK_THAT(s.error_message(),
               Catch::Contains("Push: rank 0 has not registered with shard 0"));
  }
  RegisterRank0(*stub, config, cluster.server(0).shard()->plan());
  grpc::ClientContext c2;
  s = stub->Push(&c2, push, &push_resp);
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(s.error_message().find("Push: rank 0 sent 0 chunks") !=
        std::string::npos);

  // A pull for a version that cannot exist yet ends at the caller's deadline.
  proto::PullRequest pull;
  pull.set_job_id(config.job_id);
  pull.set_rank(0);
  pull.set_clock(1);
  proto::PullResponse pull_resp;
  grpc::ClientContext c3;
  c3.set_deadline(std::chrono::system_clock::now() +
                  std::chrono::milliseconds(300));
  s = stub->Pull(&c3, pull, &pull_resp);
  CHECK(s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
  CHECK(cluster.server(0).shard()->plan().num_shards() == 1);
  proto::ShardStatus st;
  cluster.server(0).shard()->GetStatus(&st);
  CHECK(st.version() == 0);
  CHECK(st.pushes() == 0);
}

TEST_CASE("a plain protobuf client pushes and pulls through the tensor path",
          "[integration]") {
  const JobConfig config = TinyJob(1);
  LocalCluster cluster(config);
  auto channel = grpc::CreateChannel(cluster.addresses()[0],
                                     grpc::InsecureChannelCredentials());
  auto stub = proto::ParameterService::NewStub(channel);
  const PartitionPlan& plan = cluster.server(0).shard()->plan();

  RegisterRank0(*stub, config, plan);
  auto pull = [&](uint64_t clock) {
    proto::PullRequest req;
    req.set_job_id(config.job_id);
    req.set_rank(0);
    req.set_clock(clock);
    proto::PullResponse resp;
    grpc::ClientContext c;
    grpc::Status s = stub->Pull(&c, req, &resp);
    INFO(s.error_message());
    REQUIRE(s.ok());
    return resp;
  };
  const proto::PullResponse before = pull(0);
  CHECK(before.version() == 0);
  REQUIRE(before.chunks_size() == static_cast<int>(plan.chunks().size()));

  // A gradient of all ones: the first SGD step (momentum or not) moves
  // every parameter by -learning_rate.
  proto::PushRequest push;
  push.set_job_id(config.job_id);
  push.set_rank(0);
  push.set_clock(0);
  for (const proto::TensorChunk& c : before.chunks()) {
    proto::TensorChunk* g = push.add_chunks();
    g->set_tensor_id(c.tensor_id());
    g->set_chunk_index(c.chunk_index());
    g->set_dtype(proto::DTYPE_FLOAT32);
    std::vector<float> ones(c.data().size() / 4, 1.0f);
    g->set_data(std::string(reinterpret_cast<const char*>(ones.data()),
                            c.data().size()));
  }
  proto::PushResponse pushed;
  grpc::ClientContext c;
  REQUIRE(stub->Push(&c, push, &pushed).ok());
  CHECK(pushed.version() == 1);

  const proto::PullResponse after = pull(1);
  CHECK(after.version() == 1);
  REQUIRE(after.chunks_size() == before.chunks_size());
  for (int k = 0; k < after.chunks_size(); ++k) {
    CHECK(after.chunks(k).tensor_id() == before.chunks(k).tensor_id());
    CHECK(after.chunks(k).chunk_index() == before.chunks(k).chunk_index());
    const std::string& b = before.chunks(k).data();
    const std::string& a = after.chunks(k).data();
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size() / 4; ++i) {
      float x, y;
      std::memcpy(&x, b.data() + 4 * i, 4);
      std::memcpy(&y, a.data() + 4 * i, 4);
      CHECK(y == Approx(x - static_cast<float>(config.optimizer.learning_rate))
                     .margin(1e-6));
    }
  }

  // Bytes that are not a PushRequest: refused, nothing applied.
  grpc::GenericStub generic(channel);
  const std::string junk = "\x22\x7f\x08";  // A chunk longer than the message.
  grpc::Slice slice(junk.data(), junk.size());
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext c2;
  grpc::Status status;
  absl::Notification done;
  generic.UnaryCall(&c2, "/paramd.proto.ParameterService/Push",
                    grpc::StubOptions(), &request, &response,
                    [&](grpc::Status s) {
                      status = s;
                      done.Notify();
                    });
  REQUIRE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(status.error_message(),
             Catch::Contains("Push: malformed message"));
  proto::ShardStatus st;
  cluster.server(0).shard()->GetStatus(&st);
  CHECK(st.version() == 1);
}

TEST_CASE(
    "PushStream over the wire refuses a bad stream whole; PullStream serves "
    "what Pull serves",
    "[integration][stream]") {
  const JobConfig config = TinyJob(1);
  LocalCluster cluster(config);
  auto stub = proto::ParameterService::NewStub(grpc::CreateChannel(
      cluster.addresses()[0], grpc::InsecureChannelCredentials()));
  const PartitionPlan& plan = cluster.server(0).shard()->plan();
  RegisterRank0(*stub, config, plan);
  // One message per chunk; the last chunk's gradient holds a NaN.
  auto push_all = [&](bool poison) {
    proto::PushResponse resp;
    grpc::ClientContext c;
    auto writer = stub->PushStream(&c, &resp);
    for (size_t k = 0; k < plan.chunks().size(); ++k) {
      const ChunkSpec& spec = plan.chunks()[k];
      proto::PushRequest m;
      if (k == 0) {
        m.set_job_id(config.job_id);
        m.set_rank(0);
        m.set_clock(0);
      }
      proto::TensorChunk* chunk = m.add_chunks();
      chunk->set_tensor_id(spec.tensor_id);
      chunk->set_chunk_index(spec.chunk_index);
      chunk->set_dtype(proto::DTYPE_FLOAT32);
      std::vector<float> g(spec.length, 0.5f);
      if (poison && k + 1 == plan.chunks().size()) g.back() = NAN;
      chunk->set_data(std::string(reinterpret_cast<const char*>(g.data()),
                                  g.size() * sizeof(float)));
      REQUIRE(writer->Write(m));
    }
    writer->WritesDone();
    return writer->Finish();
  };
  REQUIRE(plan.chunks().size() >= 2);
  grpc::Status s = push_all(/*poison=*/true);
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(s.error_message(), Catch::Contains("is not finite"));
  proto::ShardStatus st;
  cluster.server(0).shard()->GetStatus(&st);
  CHECK(st.version() == 0);

  // The same stream without the NaN is applied whole.
  s = push_all(/*poison=*/false);
  INFO(s.error_message());
  CHECK(s.ok());
  cluster.server(0).shard()->GetStatus(&st);
  CHECK(st.version() == 1);

  // The assembly's other refusals (header fields after the first message,
  // too many chunks, an empty stream) are unit-tested in
  // push_assembler_test; here the gRPC handler's wiring.

  // PullStream serves the same chunks as Pull, over one or more messages,
  // each naming the version.
  proto::PullRequest req;
  req.set_job_id(config.job_id);
  req.set_rank(0);
  req.set_clock(1);
  proto::PullResponse whole;
  {
    grpc::ClientContext c;
    REQUIRE(stub->Pull(&c, req, &whole).ok());
  }
  grpc::ClientContext c;
  auto reader = stub->PullStream(&c, req);
  proto::PullResponse part, joined;
  while (reader->Read(&part)) {
    CHECK(part.version() == 1);
    for (const auto& chunk : part.chunks()) *joined.add_chunks() = chunk;
  }
  REQUIRE(reader->Finish().ok());
  joined.set_version(1);
  CHECK(joined.SerializeAsString() == whole.SerializeAsString());
}

TEST_CASE(
    "a whole PushStream followed by a message over the size limit is not "
    "applied",
    "[integration][stream]") {
  const JobConfig config = TinyJob(1);
  LocalCluster cluster(config);
  Shard& shard = *cluster.server(0).shard();
  auto stub = proto::ParameterService::NewStub(grpc::CreateChannel(
      cluster.addresses()[0], grpc::InsecureChannelCredentials()));
  RegisterRank0(*stub, config, shard.plan());
  const proto::PushRequest whole =
      testing::WholePush(shard, config.job_id, 0, 0, 0.0f);
  // The second message is just over the limit.
  proto::PushRequest oversize;
  oversize.set_job_id(std::string(shard.max_message_bytes(), 'x'));
  // The race this guards against (the handler seeing the failed read as the
  // stream's end) did not show every time: try it several times.
  for (int attempt = 0; attempt < 8; ++attempt) {
    proto::PushResponse resp;
    grpc::ClientContext c;
    auto writer = stub->PushStream(&c, &resp);
    REQUIRE(writer->Write(whole));
    writer->Write(oversize);  // May fail once the server has given up.
    writer->WritesDone();
    const grpc::Status s = writer->Finish();
    INFO("attempt " << attempt << ": " << s.error_message());
    CHECK(s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
    proto::ShardStatus st;
    shard.GetStatus(&st);
    REQUIRE(st.version() == 0);
    REQUIRE(st.pushes() == 0);
  }
}

TEST_CASE(
    "a message far over the limit is refused before the server holds it all",
    "[integration][limits]") {
  JobConfig config = TinyJob(1);
  config.limits.transport_memory_mb = 16;
  LocalCluster cluster(config);
  Shard& shard = *cluster.server(0).shard();
  auto stub = proto::ParameterService::NewStub(grpc::CreateChannel(
      cluster.addresses()[0], grpc::InsecureChannelCredentials()));
  RegisterRank0(*stub, config, shard.plan());
  // Within the transport's bound but over the message limit: the handler's
  // own check names it. (First: after a call gRPC refused for the
  // transport's bound, its memory is released asynchronously, and a call
  // right after may be refused by the transport too.)
  proto::PushRequest big;
  big.set_job_id(std::string(5 << 20, 'x'));
  proto::PushResponse resp;
  grpc::ClientContext c2;
  const grpc::Status s2 = stub->Push(&c2, big, &resp);
  CHECK(s2.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK_THAT(s2.error_message(),
             Catch::StartsWith("Push: message of 524") &&
                 Catch::EndsWith("bytes is over this shard's limit of " +
                                 std::to_string(shard.max_message_bytes()) +
                                 " bytes"));
  // 64 MiB: over the message limit (4 MiB), and over what gRPC may hold
  // for the server's connections, so gRPC stops reading it.
  big.set_job_id(std::string(64 << 20, 'x'));
  grpc::ClientContext c;
  const grpc::Status s = stub->Push(&c, big, &resp);
  INFO(s.error_message());
  CHECK(s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  proto::ShardStatus st;
  shard.GetStatus(&st);
  CHECK(st.version() == 0);
  CHECK(st.pushes() == 0);
}

TEST_CASE(
    "unary replies held back by testing.delay_reply_ms still answer, once "
    "applied",
    "[integration][faults]") {
  JobConfig config = TinyJob(1);
  config.testing.delay_reply_ms = 20;  // On the call's alarm, no thread.
  LocalCluster cluster(config);
  Shard& shard = *cluster.server(0).shard();
  auto stub = proto::ParameterService::NewStub(grpc::CreateChannel(
      cluster.addresses()[0], grpc::InsecureChannelCredentials()));
  RegisterRank0(*stub, config, shard.plan());
  for (uint64_t clock = 0; clock < 3; ++clock) {
    proto::PushResponse pushed;
    grpc::ClientContext c;
    const grpc::Status s = stub->Push(
        &c, testing::WholePush(shard, config.job_id, 0, clock, 1.0f), &pushed);
    INFO(s.error_message());
    REQUIRE(s.ok());
    CHECK_FALSE(pushed.duplicate());
  }
  proto::PullRequest pull;
  pull.set_job_id(config.job_id);
  pull.set_rank(0);
  pull.set_clock(3);
  proto::PullResponse pulled;
  grpc::ClientContext c;
  REQUIRE(stub->Pull(&c, pull, &pulled).ok());
  CHECK(pulled.version() == 3);
}

TEST_CASE(
    "pushes whose replies are lost are applied once however often they are "
    "retried",
    "[integration][exactly-once]") {
  JobConfig config = TinyJob(2);
  config.testing.drop_reply_probability = 1;  // Every push and pull reply.
  LocalCluster cluster(config);
  Shard& shard = *cluster.server(0).shard();
  auto stub = proto::ParameterService::NewStub(grpc::CreateChannel(
      cluster.addresses()[0], grpc::InsecureChannelCredentials()));
  for (uint32_t rank : {0u, 1u}) {
    for (bool join : {false, true}) {
      proto::RegisterRequest reg;
      reg.set_job_id(config.job_id);
      reg.set_rank(rank);
      reg.set_plan_fingerprint(shard.plan().fingerprint());
      reg.set_join(join);
      proto::RegisterResponse resp;
      grpc::ClientContext c;
      REQUIRE(stub->Register(&c, reg, &resp).ok());
    }
  }
  auto push = [&](uint32_t rank, float value) {
    const proto::PushRequest m =
        testing::WholePush(shard, config.job_id, rank, 0, value);
    proto::PushResponse resp;
    grpc::ClientContext c;
    const grpc::Status s = stub->Push(&c, m, &resp);
    CHECK(s.error_code() == grpc::StatusCode::UNAVAILABLE);
    CHECK_THAT(s.error_message(),
               Catch::StartsWith("Push: reply dropped on purpose"));
  };
  auto params = [&] {
    std::vector<float> out;
    shard.store().Read([&](uint64_t, absl::Span<const std::vector<float>> c) {
      for (const auto& chunk : c)
        out.insert(out.end(), chunk.begin(), chunk.end());
    });
    return out;
  };
  const std::vector<float> initial = params();
  proto::ShardStatus st;
  for (int attempt = 0; attempt < 3; ++attempt) push(0, 1.0f);
  shard.GetStatus(&st);
  CHECK(st.pushes() == 1);
  CHECK(st.version() == 0);  // The round waits for rank 1.
  for (int attempt = 0; attempt < 3; ++attempt) push(1, 3.0f);
  for (int attempt = 0; attempt < 2; ++attempt) push(0, 1.0f);
  shard.GetStatus(&st);
  CHECK(st.pushes() == 2);
  CHECK(st.version() == 1);
  // One step of the mean (1 + 3) / 2 with the job's SGD: the retries
  // added nothing. With lr 0.05 and momentum 0.9 from zero velocity, the
  // first step moves each parameter by lr * mean.
  const std::vector<float> after = params();
  REQUIRE(after.size() == initial.size());
  for (size_t i = 0; i < after.size(); ++i) {
    CHECK(after[i] == Approx(initial[i] - 0.05f * 2.0f));
  }
}

TEST_CASE("a second server on a port in use fails at once, naming it",
          "[integration]") {
  JobOptions o;
  o.servers = {"127.0.0.1:0"};
  o.workers = 1;
  const JobConfig config = testing::MakeJob(o, testing::NewTempDir());
  LocalCluster cluster(config);
  const std::string address = cluster.addresses()[0];
  auto second = ParameterServer::Create(config, 0);
  REQUIRE(second.ok());
  const absl::StatusOr<int> port = (*second)->Start(address);
  CHECK(absl::IsUnavailable(port.status()));
  CHECK_THAT(std::string(port.status().message()),
             Catch::StartsWith("cannot listen on " + address + ": "));
  // The first server still answers, on its own state, over new connections
  // (a channel each, with its own subchannel pool, so none is reused).
  for (int i = 0; i < 3; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto stub = proto::StatusService::NewStub(grpc::CreateCustomChannel(
        address, grpc::InsecureChannelCredentials(), args));
    grpc::ClientContext ctx;
    proto::ShardStatus st;
    REQUIRE(stub->GetStatus(&ctx, proto::GetStatusRequest(), &st).ok());
    CHECK(st.uptime_seconds() >= 0);
    CHECK(st.version() == 0);
  }
}

TEST_CASE("requests that do not parse are INVALID_ARGUMENT naming them",
          "[integration]") {
  JobOptions o;
  o.servers = {"127.0.0.1:0"};
  o.workers = 1;
  const JobConfig config = testing::MakeJob(o, testing::NewTempDir());
  LocalCluster cluster(config);
  auto channel = grpc::CreateChannel(cluster.addresses()[0],
                                     grpc::InsecureChannelCredentials());
  grpc::GenericStub generic(channel);
  // A length-delimited field whose length runs past the end.
  const std::string garbage = "\x0a\x7f\x01";
  struct Case {
    const char* method;
    const char* says;
  };
  const Case cases[] = {
      {"/paramd.proto.ParameterService/Register",
       "Register: malformed RegisterRequest"},
      {"/paramd.proto.ParameterService/Heartbeat",
       "Heartbeat: malformed HeartbeatRequest"},
      {"/paramd.proto.ParameterService/ReportEpoch",
       "ReportEpoch: malformed ReportEpochRequest"},
      {"/paramd.proto.ParameterService/Pull", "Pull: malformed PullRequest"},
      {"/paramd.proto.ParameterService/Push", "Push: malformed message"},
      {"/paramd.proto.StatusService/GetStatus",
       "GetStatus: malformed GetStatusRequest"},
  };
  for (const Case& c : cases) {
    grpc::Slice slice(garbage.data(), garbage.size());
    grpc::ByteBuffer request(&slice, 1), response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    absl::Notification done;
    grpc::Status status;
    generic.UnaryCall(&context, c.method, grpc::StubOptions(), &request,
                      &response, [&](grpc::Status s) {
                        status = std::move(s);
                        done.Notify();
                      });
    done.WaitForNotification();
    INFO(c.method << ": " << status.error_message());
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(status.error_message(), Catch::StartsWith(c.says));
  }
  proto::ShardStatus st;
  cluster.server(0).shard()->GetStatus(&st);
  CHECK(st.version() == 0);
  CHECK_FALSE(st.workers(0).registered());
}

}  // namespace
}  // namespace paramd
