#include "worker/rpc/grpc_parameter_client.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/rpc/credentials.h"
#include "common/rpc/grpc_frames.h"
#include "common/rpc/grpc_status.h"
#include "worker/retry.h"
#include "worker/rpc/proto_convert.h"
#include "worker/rpc/pull_sink.h"

namespace paramd {
namespace {

ShardLinks::Options LinkOptions(const GrpcClientOptions& options,
                                const JobConfig& config) {
  ShardLinks::Options links;
  links.hung_after = absl::Seconds(config.liveness.lease_seconds);
  links.push_timeout = options.push_timeout;
  links.pull_timeout = options.pull_timeout;
  links.shared_memory = config.worker.shared_memory;
  links.clock = options.clock;
  links.backups = options.backups;
  links.find_servers = options.find_servers;
  return links;
}

StepDriver::Options DriverOptions(const GrpcClientOptions& options, int rank) {
  StepDriver::Options driver;
  driver.limit = std::max(options.push_timeout, options.pull_timeout);
  driver.retry.give_up = options.give_up;
  driver.retry.who = absl::StrCat("rank ", rank);
  driver.retry.clock = options.clock;
  return driver;
}

}  // namespace

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
      links_(setup, addresses, security, LinkOptions(options, *setup.config)),
      steps_(DriverOptions(options, setup.rank), &links_.replicas()),
      rows_(setup, &links_),
      push_frames_(*setup.config, *setup.plan, *setup.layout, setup.rank),
      gradients_(std::make_shared<std::vector<float>>(setup.layout->total)),
      on_trace_(setup.on_trace) {}

absl::StatusOr<uint64_t> GrpcParameterClient::RegisterPhase(bool join,
                                                            uint64_t clock) {
  const int n = links_.size();
  std::vector<grpc::ClientContext> contexts(n);
  const proto::RegisterRequest request =
      MakeRegisterRequest(ClientSetup{&config_, plan_, layout_, rank_}, join,
                          clock, incarnation_, options_.launch);
  std::vector<proto::RegisterResponse> responses(n);
  std::vector<
      std::unique_ptr<grpc::ClientAsyncResponseReader<proto::RegisterResponse>>>
      calls(n);
  absl::Status s = QueuedForAllShards(
      n, "Register",
      [&](int i, grpc::CompletionQueue* cq, grpc::Status* status, void* tag) {
        contexts[i].set_wait_for_ready(true);
        contexts[i].set_deadline(DeadlineIn(options_.connect_timeout));
        calls[i] = links_.stub(i)->AsyncRegister(&contexts[i], request, cq);
        calls[i]->Finish(&responses[i], status, tag);
      },
      [&](int i, absl::Status status) {
        links_.replicas().Note(i, status);
        return status;
      });
  if (!s.ok()) return s;
  uint64_t largest = 0;
  for (const auto& r : responses)
    largest = std::max<uint64_t>(largest, r.clock());
  return largest;
}

absl::StatusOr<uint64_t> GrpcParameterClient::Register() {
  // A server that answers it was replaced (or does not answer) moves its
  // shard to the other replica, and the registration goes there: a rank
  // told to register again just as its primary learns it was replaced
  // exited with that primary's UNAVAILABLE (replica_wake_test under ASan,
  // 2026-12-05). Bounded: each try moves at least one shard.
  absl::StatusOr<uint64_t> registered;
  for (int tries = 0; tries <= 2 * links_.size(); ++tries) {
    registered = RegisterInTwoPhases([this](bool join, uint64_t clock) {
      return RegisterPhase(join, clock);
    });
    if (registered.ok() || !absl::IsUnavailable(registered.status()) ||
        !links_.FailOver()) {
      break;
    }
  }
  return registered;
}

absl::StatusOr<uint64_t> GrpcParameterClient::Retrying(
    const char* what,
    const std::function<absl::StatusOr<uint64_t>()>& attempt) {
  // The step's retries, failing over on this client's links.
  RetryOptions retry = steps_.options().retry;
  retry.fail_over = [this] { return links_.FailOver(); };
  return Retry(what, retry, attempt);
}

absl::Status GrpcParameterClient::Ended(int shard, const grpc::Status& s,
                                        const char* what) {
  // This worker cancels none of these calls: a CANCELLED is its server's
  // (one stopping), retried as no answer is.
  const absl::Status status = CancelledByServer(FromGrpcStatus(s));
  links_.replicas().Note(shard, status);
  return status.ok() ? status : PrefixStatus(status, what, shard);
}

absl::StatusOr<uint64_t> GrpcParameterClient::Pull(uint64_t clock,
                                                   absl::Span<float> params) {
  return Retrying("Pull", [&] { return PullOnce(clock, params); });
}

absl::StatusOr<StepReport> GrpcParameterClient::Step(StepRequest request) {
  // The rows ride with this step's push (a retry sends them again) and no
  // later one.
  push_frames_.ClearRows();
  for (const RowGradients& rows : request.rows) {
    push_frames_.SetRows(rows.table, config_.model.embeddings[rows.table].dim,
                         rows.ids, rows.grads);
  }
  const uint64_t clock = request.clock;
  const absl::Span<const float> grads = request.grads;
  const float loss = request.loss;
  StepReport report;
  if (request.push_only) {
    ASSIGN_OR_RETURN(report.version, Retrying("Push", [&] {
                       return PushOnce(clock, grads, loss);
                     }));
    return report;
  }
  const StepCalls::Messages messages =
      [&](absl::Span<SharedSegment* const> segments) {
        return PushMessages(clock, grads, loss, segments);
      };
  StepCalls calls(ClientSetup{&config_, plan_, layout_, rank_}, &links_,
                  messages, request.params);
  ASSIGN_OR_RETURN(report.version,
                   steps_.Step(&calls, clock, std::move(request.while_waiting),
                               request.timed ? &report.times : nullptr));
  return report;
}

std::unique_ptr<StepExchange> GrpcParameterClient::StartPushPull(
    uint64_t clock, absl::Span<const float> grads, float loss,
    absl::Span<float> params) {
  // Its pieces carry no rows.
  push_frames_.ClearRows();
  if (grads.data() != gradients_->data() || config_.compression.topk()) {
    return ParameterClient::StartPushPull(clock, grads, loss, params);
  }
  OverlapCalls calls;
  calls.links = &links_;
  calls.limit = steps_.options().limit;
  calls.pull_half = pull_half_;
  std::shared_ptr<const std::vector<float>> held = gradients_;
  calls.redo = [this, clock, held, loss, params] {
    return StepVersion(*this, {clock, *held, loss, params});
  };
  if (overlap_index_ == nullptr) {
    overlap_index_ = std::make_unique<OverlapIndex>(*plan_, *layout_);
  }
  return std::make_unique<OverlapExchange>(
      *plan_, *layout_, *overlap_index_, &push_frames_, clock, loss,
      std::move(held), params, std::move(calls));
}

absl::Status GrpcParameterClient::PullRows(uint64_t clock, uint32_t table,
                                           absl::Span<const uint64_t> ids,
                                           absl::Span<float> out) {
  return Retrying("PullRows",
                  [&]() -> absl::StatusOr<uint64_t> {
                    RETURN_IF_ERROR(rows_.Pull(clock, table, ids, out));
                    return 0;
                  })
      .status();
}

absl::StatusOr<uint64_t> GrpcParameterClient::PullOnce(
    uint64_t clock, absl::Span<float> params) {
  const int n = links_.size();
  std::vector<grpc::ClientContext> contexts(n);
  std::vector<PullSink> sinks;
  for (int i = 0; i < n; ++i)
    sinks.emplace_back(*plan_, *layout_, i, pull_half_, params);
  bool streams = false;
  for (int i = 0; i < n; ++i) streams = streams || links_.pull_streams(i);
  absl::Status s;
  if (streams) {
    // A shard's pull in several messages: a PullStream, on a queue this
    // thread polls (ShardLinks::StartPull).
    s = QueuedStreamsForAllShards(
        n, "Pull", [&](int i, StepQueue* queue, auto done) {
          return links_.StartPull(i, clock, &contexts[i], &sinks[i], queue,
                                  std::move(done));
        });
  } else {
    // One message each: unary calls this thread polls, each one batch of
    // operations on the queue (a QueuedStream's start, write, reads and
    // finish are five).
    std::vector<grpc::ByteBuffer> replies(n);
    std::vector<std::unique_ptr<grpc::GenericClientAsyncResponseReader>> calls(
        n);
    const grpc::ByteBuffer request =
        SerializeMessage(links_.MakePullRequest(clock, 0));
    s = QueuedForAllShards(
        n, "Pull",
        [&](int i, grpc::CompletionQueue* cq, grpc::Status* status, void* tag) {
          contexts[i].set_deadline(DeadlineIn(options_.pull_timeout));
          calls[i] = links_.generic(i)->PrepareUnaryCall(
              &contexts[i], links_.methods().pull, request, cq);
          calls[i]->StartCall();
          calls[i]->Finish(&replies[i], status, tag);
        },
        [&](int i, absl::Status status) {
          if (status.ok()) status = sinks[i].Consume(replies[i]);
          links_.replicas().Note(i, status);
          return status;
        });
  }
  if (!s.ok()) return s;
  return PulledVersion(sinks);
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
    uint64_t clock, absl::Span<const float> grads, float loss,
    absl::Span<SharedSegment* const> segments) {
  if (grads.data() != gradients_->data()) {
    absl::Span<float> buffer = GradientBuffer();
    std::memcpy(buffer.data(), grads.data(),
                std::min(buffer.size(), grads.size()) * sizeof(float));
  }
  return push_frames_.Build(clock, loss, gradients_, segments);
}

absl::StatusOr<uint64_t> GrpcParameterClient::PushOnce(
    uint64_t clock, absl::Span<const float> grads, float loss) {
  const int n = links_.size();
  std::vector<std::vector<grpc::ByteBuffer>> messages =
      PushMessages(clock, grads, loss);
  std::vector<grpc::ClientContext> contexts(n);
  std::vector<grpc::ByteBuffer> responses(n);
  absl::Status s = QueuedStreamsForAllShards(
      n, "Push", [&](int i, StepQueue* queue, auto done) {
        return links_.StartPush(i, std::move(messages[i]), &contexts[i],
                                &responses[i], queue, std::move(done));
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
  const int n = links_.size();
  std::vector<grpc::ClientContext> contexts(n);
  std::vector<proto::HeartbeatRequest> requests(n);
  std::vector<proto::HeartbeatResponse> responses(n);
  std::vector<std::unique_ptr<
      grpc::ClientAsyncResponseReader<proto::HeartbeatResponse>>>
      calls(n);
  // Best effort: a shard that does not answer in time is retried by the
  // next heartbeat, and its lease tells the rest.
  (void)QueuedForAllShards(
      n, "Heartbeat",
      [&](int i, grpc::CompletionQueue* cq, grpc::Status* status, void* tag) {
        contexts[i].set_deadline(DeadlineIn(timeout));
        requests[i].set_job_id(config_.job_id);
        requests[i].set_rank(rank_);
        requests[i].set_clock(clock);
        requests[i].set_finished(finished);
        calls[i] =
            links_.stub(i)->AsyncHeartbeat(&contexts[i], requests[i], cq);
        calls[i]->Finish(&responses[i], status, tag);
      },
      // Not noted for FailOver: a heartbeat's short deadline passes under
      // load, and the training calls decide where a shard is reached.
      // An answer is what tells a hung server (ReplicaChoice::Hung) from one
      // that waits for other ranks.
      [&](int i, absl::Status status) {
        links_.replicas().Heard(i,
                                status);  // An unregistered rank's refusal too.
        return status;
      });
  if (!on_trace_) return;
  for (const proto::HeartbeatResponse& r : responses) {
    if (!r.has_trace()) continue;
    TracingConfig window;
    window.dir = r.trace().dir();
    window.from_step = static_cast<int64_t>(r.trace().from_step());
    window.steps = static_cast<int64_t>(r.trace().steps());
    on_trace_(window);
  }
}

absl::Status GrpcParameterClient::DeclareModel(const std::string& declaration) {
  proto::DeclareModelRequest request;
  request.set_job_id(config_.job_id);
  request.set_rank(rank_);
  request.set_launch(options_.launch);
  request.set_declaration(declaration);
  for (int i = 0; i < links_.size(); ++i) {
    proto::DeclareModelResponse response;
    RETURN_IF_ERROR(
        Retrying("DeclareModel", [&]() -> absl::StatusOr<uint64_t> {
          grpc::ClientContext context;
          // Servers may be starting: wait for them as Register does.
          context.set_wait_for_ready(true);
          context.set_deadline(DeadlineIn(options_.connect_timeout));
          RETURN_IF_ERROR(Ended(
              i, links_.stub(i)->DeclareModel(&context, request, &response),
              "DeclareModel to shard "));
          return 0;
        }).status());
    if (response.plan_fingerprint() != plan_->fingerprint()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "DeclareModel: shard ", i,
          " plans the model differently (plan "
          "fingerprint ",
          response.plan_fingerprint(), ", this worker's ", plan_->fingerprint(),
          "): the worker and server read different "
          "job files"));
    }
  }
  return absl::OkStatus();
}

absl::Status GrpcParameterClient::Initialize(absl::Span<const float> params) {
  if (static_cast<int64_t>(params.size()) != layout_->total) {
    return absl::InvalidArgumentError(
        absl::StrCat("Initialize: ", params.size(), " floats for the job's ",
                     layout_->total));
  }
  for (int i = 0; i < links_.size(); ++i) {
    proto::PushRequest request;
    request.set_job_id(config_.job_id);
    request.set_rank(rank_);
    for (int c : plan_->ChunksOfShard(i)) {
      const ChunkSpec& spec = plan_->chunks()[c];
      proto::TensorChunk* chunk = request.add_chunks();
      chunk->set_tensor_id(spec.tensor_id);
      chunk->set_chunk_index(spec.chunk_index);
      chunk->set_dtype(proto::DTYPE_FLOAT32);
      chunk->set_data(params.data() + FlatOffset(*layout_, spec),
                      spec.length * kElementBytes);
    }
    RETURN_IF_ERROR(
        Retrying("Initialize", [&]() -> absl::StatusOr<uint64_t> {
          grpc::ClientContext context;
          context.set_deadline(DeadlineIn(options_.push_timeout));
          proto::PushResponse response;
          RETURN_IF_ERROR(
              Ended(i, links_.stub(i)->Initialize(&context, request, &response),
                    "Initialize to shard "));
          return response.version();
        }).status());
  }
  return absl::OkStatus();
}

absl::Status GrpcParameterClient::ReportEpoch(const EpochReport& epoch) {
  const proto::ReportEpochRequest report =
      ToReportEpochRequest(epoch, config_.job_id, rank_);
  return Retrying(
             "ReportEpoch",
             [&]() -> absl::StatusOr<uint64_t> {
               grpc::ClientContext context;
               context.set_deadline(DeadlineIn(options_.push_timeout));
               proto::ReportEpochResponse response;
               RETURN_IF_ERROR(Ended(
                   0, links_.stub(0)->ReportEpoch(&context, report, &response),
                   "ReportEpoch to shard "));
               return 0;
             })
      .status();
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
    if (with_config.backups.empty()) {
      with_config.backups = config.replication.backups;
    }
    for (const std::string& b : with_config.backups) {
      if (b.empty()) {
        // Placed by the Slurm rule, which --servers skipped.
        return absl::InvalidArgumentError(
            "--backups: the job's backups come from the Slurm job, which "
            "--servers bypasses; give --backups too");
      }
    }
    if (!with_config.backups.empty() &&
        with_config.backups.size() != addresses.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--backups: ", with_config.backups.size(),
          " addresses for the job's ", addresses.size(), " shards"));
    }
    return std::make_unique<GrpcParameterClient>(setup, std::move(addresses),
                                                 with_config, security);
  };
}

}  // namespace paramd
