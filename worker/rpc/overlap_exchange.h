// OverlapExchange: GrpcParameterClient's StepExchange (worker.overlap,
// worker/parameter_client.h).
//
// Per shard, one step of its StepStream — the same call plain steps take
// (ShardLinks::StartPushPull) — whose push leaves as the backward pass
// makes the shard's chunks final: each GradientReady sends the chunks it
// completed as the push's next piece (the first carries the push header,
// the last leaves PushRequest.more unset), and the reply comes a chunk per
// message. The shard answers once this rank's push is applied — or, for
// a push in slices (PushRequest.slices), each piece's chunks as soon as
// their round commits — and AwaitParams returns as soon as the chunks
// under a range are in place. A failed step cancels the others; Finish
// then does the step again with the client's Step, which retries (exactly
// once: a push the shard applied is acknowledged as a duplicate).
//
// The streams' events run on the caller's thread (the StepQueue of
// ShardLinks): GradientReady runs those ready now, so that the push's
// next pieces go out and the replies are read between layers, and
// AwaitParams and Finish poll until what they wait for came. No gRPC
// thread runs a reaction.
//
// Thread-compatible: one thread calls every method.
#ifndef PARAMD_WORKER_RPC_OVERLAP_EXCHANGE_H_
#define PARAMD_WORKER_RPC_OVERLAP_EXCHANGE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "worker/parameter_client.h"
#include "worker/rpc/pull_sink.h"
#include "worker/rpc/push_frames.h"
#include "worker/rpc/shard_links.h"

namespace paramd {

// How an exchange finds chunks, from the plan: built once per client.
struct OverlapIndex {
  OverlapIndex(const PartitionPlan& plan, const FlatLayout& layout);
  std::vector<int64_t> begin;  // By global chunk: flat offset, ascending.
  std::vector<size_t> local;   // By global chunk: index in its shard's list.
};

// What an exchange calls, from its client.
struct OverlapCalls {
  ShardLinks* links = nullptr;  // Outlives the exchange.
  // What the exchange may take, from its start (the longer of the push
  // and pull timeouts, as a plain step's attempt), on the links' clock.
  absl::Duration limit = absl::Minutes(10);
  bool pull_half = false;  // compression.pull: fp16
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
  // Sends shard `shard`'s owned chunks `owned` (indices into its list):
  // the first piece starts its step.
  void Send(int shard, const std::vector<size_t>& owned);
  // A shard's step ended; the first failure cancels the rest.
  void StepDone(int shard, absl::Status s);
  void CancelAll();
  // Runs the streams' events until `settled` holds, every step ended, or
  // the limit passed (which fails the exchange and waits for the cancelled
  // steps to end).
  void PollUntil(const std::function<bool()>& settled);
  // Global chunks overlapping flat [begin, end).
  std::pair<size_t, size_t> ChunksOver(int64_t begin, int64_t end) const;
  absl::StatusOr<uint64_t> Collect() const;

  const PartitionPlan& plan_;
  const FlatLayout& layout_;
  const OverlapIndex& index_;
  PushFrames* const frames_;
  const uint64_t clock_;
  const float loss_;
  const std::shared_ptr<const std::vector<float>> grads_;
  std::shared_ptr<std::vector<uint16_t>> halves_;  // compression fp16
  OverlapCalls calls_;
  ShardLinks* const links_;
  const int num_shards_;
  const absl::Time deadline_;

  std::vector<int64_t> unready_;  // By global chunk: floats not yet final.
  std::vector<size_t> unsent_;    // By shard: owned chunks unsent.
  std::vector<char> started_;     // By shard: its step started.
  std::vector<char> ended_;       // By shard: its step ended.
  std::vector<PullSink> sinks_;   // By shard.
  int running_ = 0;               // Steps started and not ended.
  absl::Status failure_;
  std::optional<absl::StatusOr<uint64_t>> result_;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_RPC_OVERLAP_EXCHANGE_H_
