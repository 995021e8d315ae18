// GrpcParameterClient's steps: PushPull to every shard (as steps of each
// shard's StepStream, or a push and a pull side by side for shards of
// several messages) and the overlapped exchange of worker.overlap.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/status_macros.h"
#include "common/rpc/grpc_frames.h"
#include "worker/rpc/grpc_parameter_client.h"
#include "worker/rpc/overlap_exchange.h"

namespace paramd {

std::unique_ptr<StepExchange> GrpcParameterClient::StartPushPull(
    uint64_t clock, absl::Span<const float> grads, float loss,
    absl::Span<float> params) {
  if (has_rows_ || grads.data() != gradients_->data() ||
      config_.compression.topk()) {
    return ParameterClient::StartPushPull(clock, grads, loss, params);
  }
  OverlapCalls calls;
  for (ShardConn& conn : shards_) calls.stubs.push_back(conn.generic.get());
  calls.push_stream_method = push_stream_method_;
  calls.pull_stream_method = pull_stream_method_;
  calls.push_timeout = options_.push_timeout;
  calls.pull_timeout = options_.pull_timeout;
  calls.pull_half = pull_half_;
  // One chunk per message: the forward pass starts on the first ones.
  calls.pull_request = SerializeMessage(MakePullRequest(clock + 1, 1));
  std::shared_ptr<const std::vector<float>> held = gradients_;
  calls.redo = [this, clock, held, loss, params] {
    return PushPull(clock, *held, loss, params);
  };
  if (overlap_index_ == nullptr) {
    overlap_index_ = std::make_unique<OverlapIndex>(*plan_, *layout_);
  }
  return std::make_unique<OverlapExchange>(
      *plan_, *layout_, *overlap_index_, &push_frames_, clock, loss,
      std::move(held), params, std::move(calls));
}

void GrpcParameterClient::OpenStepStream(int shard) {
  ShardConn& conn = shards_[shard];
  if (conn.steps != nullptr && !conn.steps->over()) return;
  conn.steps.reset();
  conn.steps =
      std::make_unique<StepStream>(conn.generic.get(), step_stream_method_,
                                   std::make_unique<grpc::ClientContext>());
}

void GrpcParameterClient::StartPushPull(
    int shard, grpc::ByteBuffer message, PullSink* sink,
    std::function<void(absl::Status)> done) {
  if (!options_.step_stream) {
    // A unary PushPull; its context lives until the call ends.
    auto context = std::make_shared<grpc::ClientContext>();
    context->set_deadline(
        DeadlineIn(std::max(options_.push_timeout, options_.pull_timeout)));
    UnaryIntoSink(shard, push_pull_method_, std::move(message), context.get(),
                  sink, [context, done = std::move(done)](absl::Status s) {
                    done(std::move(s));
                  });
    return;
  }
  // The message's header carries pull_dtype (PushFrames).
  shards_[shard].steps->Step(std::move(message), sink, std::move(done));
}

absl::StatusOr<uint64_t> GrpcParameterClient::PushPullOnce(
    uint64_t clock, absl::Span<const float> grads, float loss,
    absl::Span<float> params) {
  const int n = static_cast<int>(shards_.size());
  std::vector<std::vector<grpc::ByteBuffer>> messages =
      PushMessages(clock, grads, loss);
  std::vector<grpc::ClientContext> push_contexts(n), pull_contexts(n);
  std::vector<grpc::ByteBuffer> push_responses(n);
  std::vector<PullSink> sinks;
  for (int i = 0; i < n; ++i)
    sinks.emplace_back(*plan_, *layout_, i, pull_half_, params);
  std::vector<absl::Status> push_status(n), pull_status(n);
  // A shard whose push and pull each fit one message takes both in one
  // PushPull call; the others a push and a pull side by side.
  std::vector<bool> combined(n);
  int calls = 0;
  for (int i = 0; i < n; ++i) {
    combined[i] = messages[i].size() == 1 && !shards_[i].pull_streams;
    calls += combined[i] ? 1 : 2;
  }
  // Every stream the step takes is open before any call can fail and
  // cancel them.
  for (int i = 0; i < n; ++i) {
    if (combined[i] && options_.step_stream) OpenStepStream(i);
  }
  absl::Mutex mu;
  int pending = calls;
  auto finish_call = [&] {
    absl::MutexLock lock(&mu);
    --pending;
  };
  // A refused push means the pulls would wait in vain.
  auto cancel_pulls = [&] {
    for (auto& c : pull_contexts) c.TryCancel();
    for (int i = 0; i < n; ++i) {
      if (combined[i] && options_.step_stream) shards_[i].steps->Cancel();
    }
  };
  for (int i = 0; i < n; ++i) {
    if (combined[i]) continue;
    StartPull(i, clock + 1, &pull_contexts[i], &sinks[i],
              [&, i](absl::Status s) {
                pull_status[i] = std::move(s);
                finish_call();
              });
  }
  for (int i = 0; i < n; ++i) {
    if (combined[i]) {
      StartPushPull(i, std::move(messages[i][0]), &sinks[i],
                    [&, i](absl::Status s) {
                      if (!s.ok()) cancel_pulls();
                      pull_status[i] = std::move(s);
                      finish_call();
                    });
      continue;
    }
    StartPush(i, std::move(messages[i]), &push_contexts[i], &push_responses[i],
              [&, i](absl::Status s) {
                if (!s.ok()) cancel_pulls();
                push_status[i] = std::move(s);
                finish_call();
              });
  }
  // The unary calls have deadlines; the streams' steps are bounded here.
  const absl::Duration limit =
      std::max(options_.push_timeout, options_.pull_timeout);
  const absl::Condition all_ended(
      +[](int* p) { return *p == 0; }, &pending);
  bool timed_out = false;
  mu.Lock();
  if (!mu.AwaitWithDeadline(all_ended, absl::Now() + limit)) {
    timed_out = true;
    mu.Unlock();
    cancel_pulls();
    mu.Lock();
    mu.Await(all_ended);
  }
  mu.Unlock();
  if (timed_out) {
    return absl::DeadlineExceededError(
        absl::StrCat("PushPull at clock ", clock, ": no reply within ",
                     absl::FormatDuration(limit)));
  }
  // The failure to report: a push's before a pull's, and one that was not
  // the cancellation a failure caused in the other calls.
  absl::Status failure;
  auto consider = [&failure](const absl::Status& s, const char* rpc, int i) {
    if (s.ok()) return;
    if (failure.ok() || (absl::IsCancelled(failure) && !absl::IsCancelled(s))) {
      failure = PrefixStatus(s, rpc, i);
    }
  };
  for (int i = 0; i < n; ++i) consider(push_status[i], "Push to shard ", i);
  for (int i = 0; i < n; ++i) {
    consider(pull_status[i],
             combined[i] ? "PushPull to shard " : "Pull to shard ", i);
  }
  if (!failure.ok()) return failure;
  for (int i = 0; i < n; ++i) {
    if (combined[i]) continue;
    if (absl::StatusOr<uint64_t> v = PushedVersion(push_responses[i]);
        !v.ok()) {
      return PrefixStatus(v.status(), "Push to shard ", i);
    }
  }
  return PulledVersion(sinks);
}

}  // namespace paramd
