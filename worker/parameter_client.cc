#include "worker/parameter_client.h"

#include <grpcpp/create_channel.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "common/grpc_status.h"

namespace paramd {
namespace {

std::chrono::system_clock::time_point DeadlineIn(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

// Runs `call(shard, done)` for every shard at once and waits for all; each
// call reports its grpc::Status through `done`. Returns the first failure,
// naming the shard and the RPC.
absl::Status ForAllShards(
    int num_shards, const char* rpc,
    const std::function<void(int, std::function<void(grpc::Status)>)>& call) {
  std::vector<grpc::Status> results(num_shards);
  absl::BlockingCounter pending(num_shards);
  for (int s = 0; s < num_shards; ++s) {
    call(s, [&results, &pending, s](grpc::Status status) {
      results[s] = std::move(status);
      pending.DecrementCount();
    });
  }
  pending.Wait();
  for (int s = 0; s < num_shards; ++s) {
    if (!results[s].ok()) {
      absl::Status st = FromGrpcStatus(results[s]);
      return absl::Status(st.code(), absl::StrCat(rpc, " to shard ", s, ": ",
                                                  st.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

ParameterClient::ParameterClient(const JobConfig& config,
                                 const PartitionPlan* plan,
                                 const FlatLayout* layout, int rank,
                                 std::vector<std::string> addresses,
                                 ClientOptions options)
    : config_(config),
      plan_(plan),
      layout_(layout),
      rank_(rank),
      options_(options),
      incarnation_((uint64_t{std::random_device{}()} << 32) ^
                   static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()))) {
  for (int s = 0; s < static_cast<int>(addresses.size()); ++s) {
    grpc::ChannelArguments args;
    const int64_t bytes = plan_->BytesOnShard(s);
    const int limit = static_cast<int>(
        std::min<int64_t>(INT32_MAX, std::max<int64_t>(4 << 20, bytes * 2 + (1 << 20))));
    args.SetMaxReceiveMessageSize(limit);
    args.SetMaxSendMessageSize(limit);
    // One connection per shard even when two shards share an address.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    ShardConn conn;
    conn.channel = grpc::CreateCustomChannel(
        addresses[s], grpc::InsecureChannelCredentials(), args);
    conn.stub = proto::ParameterService::NewStub(conn.channel);
    conn.push.set_job_id(config_.job_id);
    conn.push.set_rank(rank_);
    for (int global : plan_->ChunksOfShard(s)) {
      const ChunkSpec& c = plan_->chunks()[global];
      proto::TensorChunk* chunk = conn.push.add_chunks();
      chunk->set_tensor_id(c.tensor_id);
      chunk->set_chunk_index(c.chunk_index);
      chunk->set_dtype(proto::DTYPE_FLOAT32);
      chunk->mutable_data()->resize(c.length * kElementBytes);
    }
    shards_.push_back(std::move(conn));
  }
}

absl::StatusOr<uint64_t> ParameterClient::RegisterPhase(bool join,
                                                        uint64_t clock) {
  const int n = static_cast<int>(shards_.size());
  std::vector<grpc::ClientContext> contexts(n);
  std::vector<proto::RegisterRequest> requests(n);
  std::vector<proto::RegisterResponse> responses(n);
  absl::Status s = ForAllShards(n, "Register", [&](int i, auto done) {
    contexts[i].set_wait_for_ready(true);
    contexts[i].set_deadline(DeadlineIn(options_.connect_timeout));
    requests[i].set_job_id(config_.job_id);
    requests[i].set_rank(rank_);
    requests[i].set_plan_fingerprint(plan_->fingerprint());
    requests[i].set_join(join);
    requests[i].set_clock(clock);
    requests[i].set_incarnation(incarnation_);
    shards_[i].stub->async()->Register(&contexts[i], &requests[i],
                                       &responses[i], std::move(done));
  });
  if (!s.ok()) return s;
  uint64_t largest = 0;
  for (const auto& r : responses) largest = std::max<uint64_t>(largest, r.clock());
  return largest;
}

absl::StatusOr<uint64_t> ParameterClient::Register() {
  // Each shard may move on between the phases; a few tries always settle.
  constexpr int kAttempts = 20;
  absl::Status last;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    absl::StatusOr<uint64_t> proposed = RegisterPhase(false, 0);
    if (!proposed.ok()) return proposed.status();
    absl::StatusOr<uint64_t> joined = RegisterPhase(true, *proposed);
    if (joined.ok() || !absl::IsAborted(joined.status())) return joined;
    last = joined.status();
  }
  return last;
}

absl::StatusOr<uint64_t> ParameterClient::Pull(uint64_t clock,
                                               absl::Span<float> params) {
  const int n = static_cast<int>(shards_.size());
  std::vector<grpc::ClientContext> contexts(n);
  std::vector<proto::PullRequest> requests(n);
  std::vector<proto::PullResponse> responses(n);
  absl::Status s = ForAllShards(n, "Pull", [&](int i, auto done) {
    contexts[i].set_deadline(DeadlineIn(options_.pull_timeout));
    requests[i].set_job_id(config_.job_id);
    requests[i].set_rank(rank_);
    requests[i].set_clock(clock);
    shards_[i].stub->async()->Pull(&contexts[i], &requests[i], &responses[i],
                                   std::move(done));
  });
  if (!s.ok()) return s;
  return JoinPull(responses, params);
}

absl::StatusOr<uint64_t> ParameterClient::JoinPull(
    const std::vector<proto::PullResponse>& responses,
    absl::Span<float> params) const {
  uint64_t version = UINT64_MAX;
  for (int i = 0; i < static_cast<int>(responses.size()); ++i) {
    const proto::PullResponse& r = responses[i];
    version = std::min<uint64_t>(version, r.version());
    if (r.chunks_size() != static_cast<int>(plan_->ChunksOfShard(i).size())) {
      return absl::DataLossError(
          absl::StrCat("Pull from shard ", i, ": ", r.chunks_size(),
                       " chunks; the plan gives it ",
                       plan_->ChunksOfShard(i).size()));
    }
    for (const proto::TensorChunk& chunk : r.chunks()) {
      const int global = plan_->Find(chunk.tensor_id(), chunk.chunk_index());
      if (global < 0 || plan_->chunks()[global].shard != i ||
          static_cast<int64_t>(chunk.data().size()) !=
              plan_->chunks()[global].length * kElementBytes) {
        return absl::DataLossError(absl::StrCat(
            "Pull from shard ", i, ": chunk ", chunk.chunk_index(),
            " of tensor ", chunk.tensor_id(), " does not match the plan"));
      }
      const ChunkSpec& c = plan_->chunks()[global];
      std::memcpy(params.data() + layout_->offset[c.tensor_id] + c.offset,
                  chunk.data().data(), chunk.data().size());
    }
  }
  return version;
}

void ParameterClient::FillPush(uint64_t clock, absl::Span<const float> grads) {
  for (int i = 0; i < static_cast<int>(shards_.size()); ++i) {
    proto::PushRequest& req = shards_[i].push;
    req.set_clock(clock);
    const std::vector<int>& owned = plan_->ChunksOfShard(i);
    for (size_t k = 0; k < owned.size(); ++k) {
      const ChunkSpec& c = plan_->chunks()[owned[k]];
      std::memcpy(req.mutable_chunks(static_cast<int>(k))->mutable_data()->data(),
                  grads.data() + layout_->offset[c.tensor_id] + c.offset,
                  c.length * kElementBytes);
    }
  }
}

absl::StatusOr<uint64_t> ParameterClient::Push(
    uint64_t clock, absl::Span<const float> grads) {
  const int n = static_cast<int>(shards_.size());
  FillPush(clock, grads);
  std::vector<grpc::ClientContext> contexts(n);
  std::vector<proto::PushResponse> responses(n);
  absl::Status s = ForAllShards(n, "Push", [&](int i, auto done) {
    contexts[i].set_deadline(DeadlineIn(options_.push_timeout));
    shards_[i].stub->async()->Push(&contexts[i], &shards_[i].push,
                                   &responses[i], std::move(done));
  });
  if (!s.ok()) return s;
  uint64_t version = UINT64_MAX;
  for (const auto& r : responses) version = std::min<uint64_t>(version, r.version());
  return version;
}

absl::StatusOr<uint64_t> ParameterClient::PushPull(
    uint64_t clock, absl::Span<const float> grads, absl::Span<float> params) {
  const int n = static_cast<int>(shards_.size());
  FillPush(clock, grads);
  std::vector<grpc::ClientContext> push_contexts(n), pull_contexts(n);
  std::vector<proto::PushResponse> push_responses(n);
  std::vector<proto::PullRequest> pull_requests(n);
  std::vector<proto::PullResponse> pull_responses(n);
  std::vector<grpc::Status> push_status(n), pull_status(n);
  absl::BlockingCounter pending(2 * n);
  for (int i = 0; i < n; ++i) {
    pull_contexts[i].set_deadline(DeadlineIn(options_.pull_timeout));
    pull_requests[i].set_job_id(config_.job_id);
    pull_requests[i].set_rank(rank_);
    pull_requests[i].set_clock(clock + 1);
    shards_[i].stub->async()->Pull(
        &pull_contexts[i], &pull_requests[i], &pull_responses[i],
        [&, i](grpc::Status s) {
          pull_status[i] = std::move(s);
          pending.DecrementCount();
        });
  }
  for (int i = 0; i < n; ++i) {
    push_contexts[i].set_deadline(DeadlineIn(options_.push_timeout));
    shards_[i].stub->async()->Push(
        &push_contexts[i], &shards_[i].push, &push_responses[i],
        [&, i](grpc::Status s) {
          // A refused push means the pulls would wait in vain.
          if (!s.ok()) {
            for (auto& c : pull_contexts) c.TryCancel();
          }
          push_status[i] = std::move(s);
          pending.DecrementCount();
        });
  }
  pending.Wait();
  for (auto [statuses, rpc] : {std::pair{&push_status, "Push"},
                               std::pair{&pull_status, "Pull"}}) {
    for (int i = 0; i < n; ++i) {
      if (!(*statuses)[i].ok()) {
        absl::Status st = FromGrpcStatus((*statuses)[i]);
        return absl::Status(st.code(), absl::StrCat(rpc, " to shard ", i, ": ",
                                                    st.message()));
      }
    }
  }
  return JoinPull(pull_responses, params);
}

void ParameterClient::set_loss(float loss) {
  for (ShardConn& conn : shards_) conn.push.set_loss(loss);
}

void ParameterClient::Heartbeat(uint64_t clock, bool finished,
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
    shards_[i].stub->async()->Heartbeat(&contexts[i], &requests[i],
                                        &responses[i], std::move(done));
  });
}

absl::Status ParameterClient::ReportEpoch(
    const proto::ReportEpochRequest& report) {
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(options_.push_timeout));
  proto::ReportEpochResponse response;
  grpc::Status s = shards_[0].stub->ReportEpoch(&context, report, &response);
  if (!s.ok()) {
    absl::Status st = FromGrpcStatus(s);
    return absl::Status(st.code(),
                        absl::StrCat("ReportEpoch to shard 0: ", st.message()));
  }
  return absl::OkStatus();
}

}  // namespace paramd
