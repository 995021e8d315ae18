#include "worker/rpc/grpc_parameter_client.h"

#include <grpcpp/create_channel.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "common/base/half.h"
#include "common/base/status_macros.h"
#include "common/rpc/credentials.h"
#include "common/rpc/grpc_frames.h"
#include "common/rpc/grpc_status.h"
#include "common/wire/wire_format.h"
#include "spdlog/spdlog.h"
#include "worker/retry.h"
#include "worker/rpc/proto_convert.h"
#include "worker/rpc/pull_sink.h"
#include "worker/rpc/push_frames.h"
#include "worker/rpc/stream_call.h"

namespace paramd {
namespace {

// A generated stub's completion callback that reports to `done`.
std::function<void(grpc::Status)> Reporting(
    std::function<void(absl::Status)> done) {
  return [done = std::move(done)](grpc::Status s) { done(FromGrpcStatus(s)); };
}

std::string MethodName(const char* rpc) {
  return absl::StrCat("/", proto::ParameterService::service_full_name(), "/",
                      rpc);
}

}  // namespace

std::chrono::system_clock::time_point GrpcParameterClient::DeadlineIn(
    absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

absl::Status PrefixStatus(const absl::Status& s, const char* what, int shard) {
  return absl::Status(s.code(), absl::StrCat(what, shard, ": ", s.message()));
}

GrpcParameterClient::GrpcParameterClient(const ClientSetup& setup,
                                         std::vector<std::string> addresses,
                                         GrpcClientOptions options,
                                         const JobSecurity& security)
    : config_(*setup.config),
      plan_(setup.plan),
      layout_(setup.layout),
      rank_(setup.rank),
      pull_half_(setup.config->compression.pull_fp16()),
      options_(options),
      incarnation_((uint64_t{std::random_device{}()} << 32) ^
                   static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()))),
      push_method_(MethodName("Push")),
      pull_method_(MethodName("Pull")),
      push_stream_method_(MethodName("PushStream")),
      pull_stream_method_(MethodName("PullStream")),
      push_pull_method_(MethodName("PushPull")),
      pull_rows_method_(MethodName("PullRows")),
      step_stream_method_(MethodName("StepStream")),
      push_frames_(*setup.config, *setup.plan, *setup.layout, setup.rank),
      gradients_(std::make_shared<std::vector<float>>(setup.layout->total)) {
  for (int s = 0; s < static_cast<int>(addresses.size()); ++s) {
    grpc::ChannelArguments args;
    const int64_t bytes = plan_->BytesOnShard(s);
    // With embedding tables a step's rows ride along (at most 64 MiB,
    // server/shard/shard.h kMaxRowMessageBytes).
    const int64_t rows =
        setup.config->model.embeddings.empty() ? 0 : int64_t{64} << 20;
    const int limit = static_cast<int>(std::min<int64_t>(
        INT32_MAX, std::max<int64_t>(4 << 20, bytes * 2 + (1 << 20) + rows)));
    args.SetMaxReceiveMessageSize(limit);
    args.SetMaxSendMessageSize(limit);
    // One connection per shard even when two shards share an address.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    ShardConn conn;
    conn.channel = CreateJobChannel(addresses[s], security, args);
    conn.stub = proto::ParameterService::NewStub(conn.channel);
    conn.generic = std::make_unique<grpc::GenericStub>(conn.channel);
    // Pulls carry float32 (or halves) whatever pushes carry: they stream
    // when the shard's chunks fill several messages.
    std::vector<int64_t> pull_bytes;
    for (int global : plan_->ChunksOfShard(s)) {
      pull_bytes.push_back(plan_->chunks()[global].length *
                           (pull_half_ ? 2 : kElementBytes));
    }
    conn.pull_streams = GroupChunks(pull_bytes).size() > 1;
    shards_.push_back(std::move(conn));
  }
}

absl::StatusOr<uint64_t> GrpcParameterClient::RegisterPhase(bool join,
                                                            uint64_t clock) {
  const int n = static_cast<int>(shards_.size());
  std::vector<grpc::ClientContext> contexts(n);
  const proto::RegisterRequest request =
      MakeRegisterRequest(ClientSetup{&config_, plan_, layout_, rank_}, join,
                          clock, incarnation_, options_.launch);
  std::vector<proto::RegisterResponse> responses(n);
  absl::Status s = ForAllShards(n, "Register", [&](int i, auto done) {
    contexts[i].set_wait_for_ready(true);
    contexts[i].set_deadline(DeadlineIn(options_.connect_timeout));
    shards_[i].stub->async()->Register(&contexts[i], &request, &responses[i],
                                       Reporting(std::move(done)));
  });
  if (!s.ok()) return s;
  uint64_t largest = 0;
  for (const auto& r : responses)
    largest = std::max<uint64_t>(largest, r.clock());
  return largest;
}

absl::StatusOr<uint64_t> GrpcParameterClient::Register() {
  return RegisterInTwoPhases(
      [this](bool join, uint64_t clock) { return RegisterPhase(join, clock); });
}

grpc::ByteBuffer GrpcParameterClient::PullFrame(uint64_t clock) const {
  return SerializeMessage(MakePullRequest(clock, 0));
}

proto::PullRequest GrpcParameterClient::MakePullRequest(
    uint64_t clock, uint32_t message_bytes) const {
  proto::PullRequest request;
  request.set_job_id(config_.job_id);
  request.set_rank(rank_);
  request.set_clock(clock);
  if (pull_half_) request.set_dtype(proto::DTYPE_FLOAT16);
  request.set_stream_message_bytes(message_bytes);
  return request;
}

void GrpcParameterClient::StartPull(int shard, uint64_t clock,
                                    grpc::ClientContext* context,
                                    PullSink* sink,
                                    std::function<void(absl::Status)> done) {
  context->set_deadline(DeadlineIn(options_.pull_timeout));
  ShardConn& conn = shards_[shard];
  if (conn.pull_streams) {
    StreamCall::Start(
        conn.generic.get(), context, pull_stream_method_, {PullFrame(clock)},
        [sink](const grpc::ByteBuffer& m) { return sink->Consume(m); },
        std::move(done));
    return;
  }
  // One message's worth: a unary call has less overhead than a stream.
  UnaryIntoSink(shard, pull_method_, PullFrame(clock), context, sink,
                std::move(done));
}

void GrpcParameterClient::UnaryIntoSink(
    int shard, const std::string& method, grpc::ByteBuffer message,
    grpc::ClientContext* context, PullSink* sink,
    std::function<void(absl::Status)> done) {
  auto request = std::make_shared<grpc::ByteBuffer>(std::move(message));
  auto response = std::make_shared<grpc::ByteBuffer>();
  shards_[shard].generic->UnaryCall(
      context, method, grpc::StubOptions(), request.get(), response.get(),
      [request, response, sink, done = std::move(done)](grpc::Status s) {
        absl::Status status = FromGrpcStatus(s);
        if (status.ok()) status = sink->Consume(*response);
        done(std::move(status));
      });
}

void GrpcParameterClient::StartPush(int shard,
                                    std::vector<grpc::ByteBuffer> messages,
                                    grpc::ClientContext* context,
                                    grpc::ByteBuffer* response,
                                    std::function<void(absl::Status)> done) {
  context->set_deadline(DeadlineIn(options_.push_timeout));
  ShardConn& conn = shards_[shard];
  if (messages.size() > 1) {
    StreamCall::Start(
        conn.generic.get(), context, push_stream_method_, std::move(messages),
        [response](const grpc::ByteBuffer& m) {
          *response = m;
          return absl::OkStatus();
        },
        std::move(done));
    return;
  }
  auto request = std::make_shared<grpc::ByteBuffer>(std::move(messages[0]));
  conn.generic->UnaryCall(context, push_method_, grpc::StubOptions(),
                          request.get(), response,
                          [request, done = std::move(done)](grpc::Status s) {
                            done(FromGrpcStatus(s));
                          });
}

absl::StatusOr<uint64_t> GrpcParameterClient::Retrying(
    const char* what,
    const std::function<absl::StatusOr<uint64_t>()>& attempt) {
  RetryOptions retry;
  retry.give_up = options_.give_up;
  retry.clock = options_.clock;
  retry.who = absl::StrCat("rank ", rank_);
  return Retry(what, retry, attempt);
}

absl::StatusOr<uint64_t> GrpcParameterClient::Pull(uint64_t clock,
                                                   absl::Span<float> params) {
  return Retrying("Pull", [&] { return PullOnce(clock, params); });
}

absl::StatusOr<uint64_t> GrpcParameterClient::Push(
    uint64_t clock, absl::Span<const float> grads, float loss) {
  return Retrying("Push", [&] { return PushOnce(clock, grads, loss); });
}

absl::StatusOr<uint64_t> GrpcParameterClient::PushPull(
    uint64_t clock, absl::Span<const float> grads, float loss,
    absl::Span<float> params) {
  return Retrying("PushPull",
                  [&] { return PushPullOnce(clock, grads, loss, params); });
}

absl::StatusOr<uint64_t> GrpcParameterClient::PullOnce(
    uint64_t clock, absl::Span<float> params) {
  const int n = static_cast<int>(shards_.size());
  std::vector<grpc::ClientContext> contexts(n);
  std::vector<PullSink> sinks;
  for (int i = 0; i < n; ++i)
    sinks.emplace_back(*plan_, *layout_, i, pull_half_, params);
  absl::Status s = ForAllShards(n, "Pull", [&](int i, auto done) {
    StartPull(i, clock, &contexts[i], &sinks[i], std::move(done));
  });
  if (!s.ok()) return s;
  return PulledVersion(sinks);
}

absl::StatusOr<uint64_t> GrpcParameterClient::PulledVersion(
    const std::vector<PullSink>& sinks) {
  uint64_t version = UINT64_MAX;
  for (const PullSink& sink : sinks) {
    ASSIGN_OR_RETURN(uint64_t v, sink.Finish());
    version = std::min(version, v);
  }
  return version;
}

absl::Span<float> GrpcParameterClient::GradientBuffer() {
  // Only this client hands out references, so a count of 1 means gRPC has
  // released every slice of earlier pushes.
  if (gradients_.use_count() > 1) {
    std::swap(gradients_, spare_);
    if (gradients_ == nullptr || gradients_.use_count() > 1) {
      gradients_ = std::make_shared<std::vector<float>>(layout_->total);
    }
  }
  return absl::MakeSpan(*gradients_);
}

std::vector<std::vector<grpc::ByteBuffer>> GrpcParameterClient::PushMessages(
    uint64_t clock, absl::Span<const float> grads, float loss) {
  if (grads.data() != gradients_->data()) {
    absl::Span<float> buffer = GradientBuffer();
    std::memcpy(buffer.data(), grads.data(),
                std::min(buffer.size(), grads.size()) * sizeof(float));
  }
  return push_frames_.Build(clock, loss, gradients_);
}

absl::StatusOr<uint64_t> GrpcParameterClient::PushOnce(
    uint64_t clock, absl::Span<const float> grads, float loss) {
  const int n = static_cast<int>(shards_.size());
  std::vector<std::vector<grpc::ByteBuffer>> messages =
      PushMessages(clock, grads, loss);
  std::vector<grpc::ClientContext> contexts(n);
  std::vector<grpc::ByteBuffer> responses(n);
  absl::Status s = ForAllShards(n, "Push", [&](int i, auto done) {
    StartPush(i, std::move(messages[i]), &contexts[i], &responses[i],
              std::move(done));
  });
  if (!s.ok()) return s;
  uint64_t version = UINT64_MAX;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<uint64_t> v = PushedVersion(responses[i]);
    if (!v.ok()) return PrefixStatus(v.status(), "Push to shard ", i);
    version = std::min(version, *v);
  }
  return version;
}

void GrpcParameterClient::Heartbeat(uint64_t clock, bool finished,
                                    absl::Duration timeout) {
  const int n = static_cast<int>(shards_.size());
  std::vector<grpc::ClientContext> contexts(n);
  std::vector<proto::HeartbeatRequest> requests(n);
  std::vector<proto::HeartbeatResponse> responses(n);
  // Best effort: a shard that does not answer in time is retried by the
  // next heartbeat, and its lease tells the rest.
  (void)ForAllShards(n, "Heartbeat", [&](int i, auto done) {
    contexts[i].set_deadline(DeadlineIn(timeout));
    requests[i].set_job_id(config_.job_id);
    requests[i].set_rank(rank_);
    requests[i].set_clock(clock);
    requests[i].set_finished(finished);
    shards_[i].stub->async()->Heartbeat(
        &contexts[i], &requests[i], &responses[i], Reporting(std::move(done)));
  });
}

absl::Status GrpcParameterClient::ReportEpoch(const EpochReport& epoch) {
  const proto::ReportEpochRequest report =
      ToReportEpochRequest(epoch, config_.job_id, rank_);
  return Retrying("ReportEpoch",
                  [&]() -> absl::StatusOr<uint64_t> {
                    grpc::ClientContext context;
                    context.set_deadline(DeadlineIn(options_.push_timeout));
                    proto::ReportEpochResponse response;
                    grpc::Status s = shards_[0].stub->ReportEpoch(
                        &context, report, &response);
                    if (!s.ok()) {
                      absl::Status st = FromGrpcStatus(s);
                      return absl::Status(
                          st.code(), absl::StrCat("ReportEpoch to shard 0: ",
                                                  st.message()));
                    }
                    return 0;
                  })
      .status();
}

absl::Status ForAllShards(
    int num_shards, const char* rpc,
    const std::function<void(int, std::function<void(absl::Status)>)>& call) {
  std::vector<absl::Status> results(num_shards);
  absl::BlockingCounter pending(num_shards);
  for (int s = 0; s < num_shards; ++s) {
    call(s, [&results, &pending, s](absl::Status status) {
      results[s] = std::move(status);
      pending.DecrementCount();
    });
  }
  pending.Wait();
  const std::string what = absl::StrCat(rpc, " to shard ");
  for (int s = 0; s < num_shards; ++s) {
    if (!results[s].ok()) return PrefixStatus(results[s], what.c_str(), s);
  }
  return absl::OkStatus();
}

ParameterClientFactory GrpcParameterClientFactory(
    std::vector<std::string> servers, GrpcClientOptions options) {
  return [servers = std::move(servers), options](const ClientSetup& setup)
             -> absl::StatusOr<std::unique_ptr<ParameterClient>> {
    const JobConfig& config = *setup.config;
    std::vector<std::string> addresses =
        servers.empty() ? config.servers : servers;
    if (static_cast<int>(addresses.size()) != config.num_shards()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--servers: ", addresses.size(), " addresses for the job's ",
          config.num_shards(), " shards"));
    }
    ASSIGN_OR_RETURN(JobSecurity security, LoadSecurity(config.security));
    GrpcClientOptions with_config = options;
    with_config.give_up = absl::Seconds(config.liveness.give_up_seconds);
    return std::make_unique<GrpcParameterClient>(setup, std::move(addresses),
                                                 with_config, security);
  };
}

}  // namespace paramd
