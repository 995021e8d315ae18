#include "worker/rpc/shard_links.h"

#include <grpcpp/create_channel.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_frames.h"
#include "common/rpc/grpc_status.h"
#include "common/wire/wire_format.h"
#include "spdlog/spdlog.h"
#include "worker/retry.h"

namespace paramd {
namespace {

std::string MethodName(const char* rpc) {
  return absl::StrCat("/", proto::ParameterService::service_full_name(), "/",
                      rpc);
}

ShardLinks::Methods AllMethods() {
  return {MethodName("Push"),       MethodName("Pull"),
          MethodName("PushStream"), MethodName("PullStream"),
          MethodName("PullRows"),   MethodName("StepStream")};
}

// The largest message a shard's calls carry: its whole share twice (a
// PushPull's push and the slack of frames) and, with embedding tables, the
// rows a step carries (at most 64 MiB, server/shard/shard.h
// kMaxRowMessageBytes); never under 4 MiB.
int MessageLimit(const ClientSetup& setup, int shard) {
  const int64_t bytes = setup.plan->BytesOnShard(shard);
  const int64_t rows =
      setup.config->model.embeddings.empty() ? 0 : int64_t{64} << 20;
  return static_cast<int>(std::min<int64_t>(
      INT32_MAX, std::max<int64_t>(4 << 20, bytes * 2 + (1 << 20) + rows)));
}

// The first of calls' failures, one call per shard, naming the RPC and the
// shard; these calls never cancel each other.
absl::Status FirstFailure(const std::vector<absl::Status>& results,
                          const char* rpc) {
  const std::string what = absl::StrCat(rpc, " to shard ");
  for (int s = 0; s < static_cast<int>(results.size()); ++s) {
    if (!results[s].ok()) {
      return PrefixStatus(CancelledByServer(results[s]), what.c_str(), s);
    }
  }
  return absl::OkStatus();
}

}  // namespace

ShardLinks::ShardLinks(const ClientSetup& setup,
                       const std::vector<std::string>& addresses,
                       const JobSecurity& security, Options options)
    : job_id_(setup.config->job_id),
      rank_(setup.rank),
      pull_half_(setup.config->compression.pull_fp16()),
      options_(options),
      methods_(AllMethods()),
      choice_(
          std::vector<int>(addresses.size(), options.backups.empty() ? 1 : 2),
          options.hung_after, options.clock),
      security_(security) {
  const PartitionPlan& plan = *setup.plan;
  for (int s = 0; s < static_cast<int>(addresses.size()); ++s) {
    grpc::ChannelArguments args;
    const int limit = MessageLimit(setup, s);
    args.SetMaxReceiveMessageSize(limit);
    args.SetMaxSendMessageSize(limit);
    // One connection per shard even when two shards share an address.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    // No transparent retries of gRPC's own: the client retries whole
    // steps itself (worker/retry.h), and with gRPC 1.51's retry filter a
    // StepStream cancelled on the async API while its first read waited
    // (a step of another shard failed) sometimes never ended its read:
    // the round hung (integration_test's dropped-reply case, about 1 run
    // in 10; none in 40 with this off).
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
    // limits.stream_window_kb: the streams start with the job's window
    // (the servers fix theirs; this side keeps gRPC's probing).
    if (const int64_t kb = setup.config->limits.stream_window_kb; kb > 0) {
      args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES,
                  static_cast<int>(kb * 1024));
    }
    channel_args_.push_back(args);
    Link link;
    std::vector<std::string> replicas = {addresses[s]};
    if (!options.backups.empty()) replicas.push_back(options.backups[s]);
    for (const std::string& address : replicas) {
      link.replicas.push_back(Connect(s, address));
    }
    // Pulls carry float32 (or halves) whatever pushes carry.
    std::vector<int64_t> pull_bytes;
    size_t push_area = 0, pull_area = 0;
    const size_t push_element =
        setup.config->compression.fp16() ? 2 : kElementBytes;
    for (int global : plan.ChunksOfShard(s)) {
      const int64_t length = plan.chunks()[global].length;
      pull_bytes.push_back(length * (pull_half_ ? 2 : kElementBytes));
      // Each chunk starts float-aligned in an area.
      push_area += (length * push_element + 3) / 4 * 4;
      pull_area += (pull_bytes.back() + 3) / 4 * 4;
    }
    link.pull_streams = GroupChunks(pull_bytes).size() > 1;
    link.no_segments = std::make_unique<std::atomic<bool>>(
        !options.shared_memory || setup.config->compression.topk());
    segment_bytes_.emplace_back(push_area, pull_area);
    shards_.push_back(std::move(link));
  }
}

std::unique_ptr<const ShardLinks::Conn> ShardLinks::Connect(
    int shard, const std::string& address) const {
  auto conn = std::make_unique<Conn>();
  conn->address = address;
  conn->channel = CreateJobChannel(address, security_, channel_args_[shard]);
  conn->stub = proto::ParameterService::NewStub(conn->channel);
  conn->generic = std::make_unique<grpc::GenericStub>(conn->channel);
  return conn;
}

const ShardLinks::Conn& ShardLinks::Current(int shard) const {
  absl::ReaderMutexLock lock(&conns_mu_);
  return *shards_[shard].replicas[choice_.current(shard)];
}

proto::PullRequest ShardLinks::MakePullRequest(uint64_t clock,
                                               uint32_t message_bytes) const {
  proto::PullRequest request;
  request.set_job_id(job_id_);
  request.set_rank(rank_);
  request.set_clock(clock);
  if (pull_half_) request.set_dtype(proto::DTYPE_FLOAT16);
  request.set_stream_message_bytes(message_bytes);
  return request;
}

std::unique_ptr<QueuedStream> ShardLinks::StartPull(
    int shard, uint64_t clock, grpc::ClientContext* context, PullSink* sink,
    StepQueue* queue, std::function<void(absl::Status)> done) {
  context->set_deadline(DeadlineIn(options_.pull_timeout));
  std::vector<grpc::ByteBuffer> request;
  request.push_back(SerializeMessage(MakePullRequest(clock, 0)));
  // One message's worth: the unary method, which costs the server less.
  return std::make_unique<QueuedStream>(
      generic(shard), context,
      shards_[shard].pull_streams ? methods_.pull_stream : methods_.pull,
      std::move(request),
      [sink](const grpc::ByteBuffer& m) { return sink->Consume(m); },
      Noting(shard, std::move(done)), queue);
}

std::unique_ptr<QueuedStream> ShardLinks::StartPush(
    int shard, std::vector<grpc::ByteBuffer> messages,
    grpc::ClientContext* context, grpc::ByteBuffer* response, StepQueue* queue,
    std::function<void(absl::Status)> done) {
  context->set_deadline(DeadlineIn(options_.push_timeout));
  const std::string& method =
      messages.size() > 1 ? methods_.push_stream : methods_.push;
  return std::make_unique<QueuedStream>(
      generic(shard), context, method, std::move(messages),
      [response](const grpc::ByteBuffer& m) {
        *response = m;
        return absl::OkStatus();
      },
      Noting(shard, std::move(done)), queue);
}

void ShardLinks::StartPushPull(int shard,
                               std::vector<grpc::ByteBuffer> messages,
                               PullSink* sink,
                               std::function<void(absl::Status)> done,
                               absl::Time* written) {
  done = Noting(shard, std::move(done));
  Link& link = shards_[shard];
  if (link.segment != nullptr) {
    const absl::Span<char> area = link.segment->pull_area();
    sink->SetPullArea(absl::string_view(area.data(), area.size()));
  }
  link.steps->Step(std::move(messages), sink, std::move(done), written);
}

void ShardLinks::OpenStepStreams() {
  queue_.Drain();
  for (int shard = 0; shard < size(); ++shard) OpenStepStream(shard);
}

void ShardLinks::OpenStepStream(int shard) {
  Link& link = shards_[shard];
  if (link.steps != nullptr && !link.steps->over()) return;
  // The old stream is done with its segment once it is gone.
  link.steps.reset();
  link.segment.reset();
  if (!link.no_segments->load()) {
    absl::StatusOr<std::unique_ptr<SharedSegment>> segment =
        SharedSegment::Create(segment_bytes_[shard].first,
                              segment_bytes_[shard].second);
    if (segment.ok()) {
      link.segment = *std::move(segment);
    } else {
      spdlog::warn("rank {}: shard {}'s steps go by the socket: {}", rank_,
                   shard, std::string(segment.status().message()));
      link.no_segments->store(true);
    }
  }
  link.steps = std::make_unique<StepStream>(
      generic(shard), methods_.step_stream,
      std::make_unique<grpc::ClientContext>(), &queue_);
}

void ShardLinks::RefuseSegment(int shard) {
  if (!shards_[shard].no_segments->exchange(true)) {
    spdlog::info(
        "rank {}: shard {}'s server at {} cannot map this worker's shared "
        "memory (another host?): its steps go by the socket",
        rank_, shard, address(shard));
  }
  refused_.store(true);
}

void ShardLinks::CancelStep(int shard) {
  if (shards_[shard].steps != nullptr) shards_[shard].steps->Cancel();
}

std::function<void(absl::Status)> ShardLinks::Noting(
    int shard, std::function<void(absl::Status)> done) {
  return [this, shard, done = std::move(done)](absl::Status s) {
    choice_.Note(shard, s);
    done(std::move(s));
  };
}

bool ShardLinks::FailOver() {
  const std::vector<int> moved = choice_.FailOver();
  for (int s : moved) {
    Link& link = shards_[s];
    const int to = choice_.current(s);
    link.steps.reset();  // Its stream was to the other replica.
    spdlog::warn(
        "rank {}: shard {}: {} did not serve the last call; trying "
        "its {} at {}",
        rank_, s, link.replicas[1 - to]->address,
        to == 1 ? "backup" : "primary", link.replicas[to]->address);
  }
  const bool followed = options_.find_servers && FollowServers();
  return !moved.empty() || followed;
}

bool ShardLinks::FollowServers() {
  absl::StatusOr<std::vector<std::string>> found = options_.find_servers();
  if (!found.ok() || found->size() != shards_.size()) {
    // Not all registered (one is starting again), or etcd out of reach:
    // the call is tried again where it was.
    if (!found.ok()) {
      spdlog::info("rank {}: where the servers are now: {}", rank_,
                   std::string(found.status().message()));
    }
    return false;
  }
  bool moved = false;
  for (int s = 0; s < size(); ++s) {
    const std::string& now = (*found)[s];
    Link& link = shards_[s];
    if (now.empty() || now == link.replicas[0]->address) continue;
    std::unique_ptr<const Conn> conn = Connect(s, now);
    spdlog::warn(
        "rank {}: shard {}: its server moved from {} to {} (registered in "
        "coordination.etcd): calling it there",
        rank_, s, link.replicas[0]->address, now);
    {
      absl::MutexLock lock(&conns_mu_);
      retired_.push_back(std::move(link.replicas[0]));
      link.replicas[0] = std::move(conn);
    }
    link.steps.reset();  // Its stream was to the old address.
    moved = true;
  }
  return moved;
}

std::chrono::system_clock::time_point DeadlineIn(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

absl::Status QueuedStreamsForAllShards(
    int num_shards, const char* rpc,
    const std::function<std::unique_ptr<QueuedStream>(
        int, StepQueue*, std::function<void(absl::Status)>)>& start) {
  std::vector<absl::Status> results(num_shards);
  int left = num_shards;
  // The queue outlives the calls, which it polls until they are over.
  StepQueue queue;
  std::vector<std::unique_ptr<QueuedStream>> calls;
  for (int s = 0; s < num_shards; ++s) {
    calls.push_back(start(s, &queue, [&results, &left, s](absl::Status st) {
      results[s] = std::move(st);
      --left;
    }));
  }
  while (left > 0) queue.Poll(absl::InfiniteFuture());
  calls.clear();
  return FirstFailure(results, rpc);
}

absl::Status QueuedForAllShards(
    int num_shards, const char* rpc,
    const std::function<void(int, grpc::CompletionQueue*, grpc::Status*,
                             void*)>& start,
    const std::function<absl::Status(int, absl::Status)>& ended) {
  grpc::CompletionQueue cq;
  std::vector<grpc::Status> statuses(num_shards);
  std::vector<absl::Status> results(num_shards);
  // A call's tag is its shard + 1.
  for (int s = 0; s < num_shards; ++s) {
    start(s, &cq, &statuses[s],
          reinterpret_cast<void*>(static_cast<intptr_t>(s) + 1));
  }
  void* tag;
  bool ok;
  for (int left = num_shards; left > 0 && cq.Next(&tag, &ok); --left) {
    const int s = static_cast<int>(reinterpret_cast<intptr_t>(tag)) - 1;
    results[s] = ended(s, FromGrpcStatus(statuses[s]));
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return FirstFailure(results, rpc);
}

}  // namespace paramd
