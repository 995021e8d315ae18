// OverlapExchange: GrpcParameterClient's StepExchange (worker.overlap,
// worker/parameter_client.h).
//
// Per shard, two calls start at once: a PushStream whose messages leave as
// the backward pass makes the shard's chunks final (each GradientReady
// sends the chunks it completed; the first message carries the push
// header, the last half-closes), and a PullStream of clock + 1 that asks
// for one chunk per message (PullRequest.stream_message_bytes = 1). The
// shard answers the pull once this rank's push is applied (under every
// policy a pull waits for the rank's own push), chunk by chunk, and
// AwaitParams returns as soon as the chunks under a range are in place.
// A failed call cancels the others; Finish then does the step again with
// the client's Step, which retries (exactly once: a push the shard
// applied is acknowledged as a duplicate).
//
// GradientReady, AwaitParams and Finish are called from one thread; gRPC's
// threads deliver the replies.
#ifndef PARAMD_WORKER_RPC_OVERLAP_EXCHANGE_H_
#define PARAMD_WORKER_RPC_OVERLAP_EXCHANGE_H_

#include <grpcpp/client_context.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "worker/parameter_client.h"
#include "worker/rpc/pull_sink.h"
#include "worker/rpc/push_frames.h"
#include "worker/rpc/stream_call.h"

namespace paramd {

// How an exchange finds chunks, from the plan: built once per client.
struct OverlapIndex {
  OverlapIndex(const PartitionPlan& plan, const FlatLayout& layout);
  std::vector<int64_t> begin;  // By global chunk: flat offset, ascending.
  std::vector<size_t> local;   // By global chunk: index in its shard's list.
};

// The calls an exchange makes, from its client.
struct OverlapCalls {
  std::vector<grpc::GenericStub*> stubs;  // By shard.
  std::string push_stream_method, pull_stream_method;
  absl::Duration push_timeout, pull_timeout;
  bool pull_half = false;  // compression.pull: fp16
  // The PullRequest of clock + 1, asking for one chunk per message.
  grpc::ByteBuffer pull_request;
  // The whole step again (the client's Step), for a failed exchange.
  std::function<absl::StatusOr<uint64_t>()> redo;
};

class OverlapExchange final : public StepExchange {
 public:
  // `plan`, `layout`, `index` (of them) and `frames` outlive the exchange;
  // `grads` is the buffer the gradient is computed into, `params` where
  // clock + 1 goes.
  OverlapExchange(const PartitionPlan& plan, const FlatLayout& layout,
                  const OverlapIndex& index, PushFrames* frames, uint64_t clock,
                  float loss, std::shared_ptr<const std::vector<float>> grads,
                  absl::Span<float> params, OverlapCalls calls);
  // Cancels whatever still runs and waits for it to end.
  ~OverlapExchange() override;

  void GradientReady(int64_t begin, int64_t end) override;
  absl::Status AwaitParams(int64_t begin, int64_t end) override;
  absl::StatusOr<uint64_t> Finish() override;

 private:
  // Sends shard `shard`'s owned chunks `owned` (indices into its list).
  void Send(int shard, const std::vector<size_t>& owned);
  // A call ended; the first failure cancels the rest.
  void CallDone(absl::Status s) ABSL_LOCKS_EXCLUDED(mu_);
  void CancelAll();
  // Global chunks overlapping flat [begin, end).
  std::pair<size_t, size_t> ChunksOver(int64_t begin, int64_t end) const;
  // Ends the pushes still open (abandoned) and waits for every call.
  void Drain();
  absl::StatusOr<uint64_t> Collect();

  const PartitionPlan& plan_;
  const FlatLayout& layout_;
  const OverlapIndex& index_;
  PushFrames* const frames_;
  const uint64_t clock_;
  const float loss_;
  const std::shared_ptr<const std::vector<float>> grads_;
  std::shared_ptr<std::vector<uint16_t>> halves_;  // compression fp16
  OverlapCalls calls_;
  const int num_shards_;

  // The caller's thread only.
  std::vector<int64_t> unready_;     // By global chunk: floats not yet final.
  std::vector<size_t> unsent_;       // By shard: owned chunks unsent.
  std::vector<char> started_;        // By shard: header sent.
  std::vector<OpenStream*> pushes_;  // By shard; null once closed.
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts_;
  std::optional<absl::StatusOr<uint64_t>> result_;

  absl::Mutex mu_;
  std::vector<PullSink> sinks_ ABSL_GUARDED_BY(mu_);  // By shard.
  std::vector<grpc::ByteBuffer> push_replies_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  int pulls_running_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
};

}  // namespace paramd

#endif  // PARAMD_WORKER_RPC_OVERLAP_EXCHANGE_H_
