// PushFrames: a worker's pushes as gRPC messages, without copying the
// gradients. Built once from the plan: for each shard, the framing before
// every chunk it owns and the groups of chunks one message carries
// (GroupChunks over the bytes that travel). Per push, Build frames the
// gradient buffer itself (float32) or, under compression fp16, its halves
// (common/half.h; the first push with values beyond half's range logs how
// many were sent as ±65504).
#ifndef PARAMD_WORKER_RPC_PUSH_FRAMES_H_
#define PARAMD_WORKER_RPC_PUSH_FRAMES_H_

#include <grpcpp/support/byte_buffer.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/job_config.h"
#include "common/model_spec.h"
#include "common/partitioner.h"

namespace paramd {

class PushFrames {
 public:
  // `plan` and `layout` must outlive this.
  PushFrames(const JobConfig& config, const PartitionPlan& plan,
             const FlatLayout& layout, int rank);

  // Each shard's messages for the flat `gradients` computed at `clock`
  // (one: a unary Push; several: a PushStream). The messages keep the
  // bytes they reference alive until gRPC releases them.
  std::vector<std::vector<grpc::ByteBuffer>> Build(
      uint64_t clock, float loss,
      std::shared_ptr<const std::vector<float>> gradients);

 private:
  struct ShardFrames {
    // The framing before each owned chunk (never changes).
    std::vector<std::string> chunk_headers;
    // Owned chunks [begin, end) sent together in one message.
    std::vector<std::pair<size_t, size_t>> groups;
  };

  const std::string job_id_;
  const PartitionPlan& plan_;
  const FlatLayout& layout_;
  const int rank_;
  const bool fp16_;
  std::vector<ShardFrames> shards_;
  bool warned_saturation_ = false;  // fp16: logged once.
};

}  // namespace paramd

#endif  // PARAMD_WORKER_RPC_PUSH_FRAMES_H_
