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

struct GrpcParameterClient::StepRound {
  StepRound(const GrpcParameterClient& client,
            const std::vector<std::vector<grpc::ByteBuffer>>& messages,
            absl::Span<float> params)
      : n(static_cast<int>(messages.size())),
        push_contexts(n),
        pull_contexts(n),
        push_responses(n),
        push_status(n),
        pull_status(n),
        combined(n) {
    for (int i = 0; i < n; ++i) {
      sinks.emplace_back(*client.plan_, *client.layout_, i, client.pull_half_,
                         params);
      // A shard whose push and pull each fit one message takes both in one
      // PushPull call; the others a push and a pull side by side.
      combined[i] = messages[i].size() == 1 && !client.shards_[i].pull_streams;
      pending += combined[i] ? 1 : 2;
    }
  }

  void Ended() {
    absl::MutexLock lock(&mu);
    --pending;
  }

  // Waits until every call ended. When `limit` passes first, runs `cancel`
  // and waits for the rest: false then.
  bool AwaitAll(absl::Duration limit, const std::function<void()>& cancel) {
    const absl::Condition all_ended(
        +[](int* p) { return *p == 0; }, &pending);
    absl::MutexLock lock(&mu);
    if (mu.AwaitWithDeadline(all_ended, absl::Now() + limit)) return true;
    mu.Unlock();
    cancel();
    mu.Lock();
    mu.Await(all_ended);
    return false;
  }

  // The failure to report: a push's before a pull's, and one that was not
  // the cancellation a failure caused in the other calls; then a push reply
  // that does not read.
  absl::Status Failure() const {
    absl::Status failure;
    auto consider = [&failure](const absl::Status& s, const char* rpc, int i) {
      if (s.ok()) return;
      if (failure.ok() ||
          (absl::IsCancelled(failure) && !absl::IsCancelled(s))) {
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
    return absl::OkStatus();
  }

  const int n;
  std::vector<grpc::ClientContext> push_contexts, pull_contexts;
  std::vector<grpc::ByteBuffer> push_responses;
  std::vector<PullSink> sinks;
  // Each written by its call's callback before it ends, read after all
  // ended.
  std::vector<absl::Status> push_status, pull_status;
  std::vector<bool> combined;
  absl::Mutex mu;
  int pending ABSL_GUARDED_BY(mu) = 0;
};

void GrpcParameterClient::CancelStepPulls(StepRound* round) {
  for (auto& c : round->pull_contexts) c.TryCancel();
  for (int i = 0; i < round->n; ++i) {
    if (round->combined[i] && options_.step_stream) shards_[i].steps->Cancel();
  }
}

void GrpcParameterClient::StartStep(
    uint64_t clock, std::vector<std::vector<grpc::ByteBuffer>> messages,
    StepRound* round) {
  const int n = round->n;
  // Every stream the step takes is open before any call can fail and
  // cancel them.
  for (int i = 0; i < n; ++i) {
    if (round->combined[i] && options_.step_stream) OpenStepStream(i);
  }
  for (int i = 0; i < n; ++i) {
    if (round->combined[i]) continue;
    StartPull(i, clock + 1, &round->pull_contexts[i], &round->sinks[i],
              [round, i](absl::Status s) {
                round->pull_status[i] = std::move(s);
                round->Ended();
              });
  }
  for (int i = 0; i < n; ++i) {
    auto pushed = [this, round, i](absl::Status* status) {
      return [this, round, i, status](absl::Status s) {
        if (!s.ok()) CancelStepPulls(round);
        *status = std::move(s);
        round->Ended();
      };
    };
    if (round->combined[i]) {
      StartPushPull(i, std::move(messages[i][0]), &round->sinks[i],
                    pushed(&round->pull_status[i]));
    } else {
      StartPush(i, std::move(messages[i]), &round->push_contexts[i],
                &round->push_responses[i], pushed(&round->push_status[i]));
    }
  }
}

absl::StatusOr<uint64_t> GrpcParameterClient::PushPullOnce(
    uint64_t clock, absl::Span<const float> grads, float loss,
    absl::Span<float> params) {
  std::vector<std::vector<grpc::ByteBuffer>> messages =
      PushMessages(clock, grads, loss);
  StepRound round(*this, messages, params);
  StartStep(clock, std::move(messages), &round);
  // The unary calls have deadlines; the streams' steps are bounded here.
  const absl::Duration limit =
      std::max(options_.push_timeout, options_.pull_timeout);
  if (!round.AwaitAll(limit, [&] { CancelStepPulls(&round); })) {
    return absl::DeadlineExceededError(
        absl::StrCat("PushPull at clock ", clock, ": no reply within ",
                     absl::FormatDuration(limit)));
  }
  RETURN_IF_ERROR(round.Failure());
  return PulledVersion(round.sinks);
}

}  // namespace paramd
