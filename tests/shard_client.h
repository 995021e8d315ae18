// ShardClient: a plain protobuf client of shard 0 of a LocalCluster over
// real gRPC, for tests written against proto/paramd.proto alone, and what
// such tests share: a one-shard job of many chunks, a push cut into
// messages, a reply's chunks by name.
#ifndef PARAMD_TESTS_SHARD_CLIENT_H_
#define PARAMD_TESTS_SHARD_CLIENT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/config/job_config.h"
#include "proto/paramd.grpc.pb.h"
#include "tests/local_cluster.h"

namespace paramd::testing {

struct ShardClient {
  ShardClient(const JobConfig& config, LocalCluster& cluster);

  // Rank `rank`'s PullRequest at `clock`.
  proto::PullRequest PullAt(uint32_t rank, uint64_t clock) const;
  // Its pull (fails the test on error).
  proto::PullResponse Pull(uint32_t rank, uint64_t clock);
  // A push of every chunk the shard owns: element values `value` + `step`
  // × the chunk's place among them.
  proto::PushRequest Gradient(uint32_t rank, uint64_t clock, float value,
                              float step = 0) const;
  grpc::Status PushPull(const proto::PushRequest& push,
                        proto::PullResponse* out);
  proto::ShardStatus Status();
  // Registers `rank` (RegisterOverGrpc).
  void Register(uint32_t rank);

  const JobConfig& config;
  Shard& shard;
  std::unique_ptr<proto::ParameterService::Stub> stub;
};

// A job of one server (model `layers`, 16 KiB chunks: the default's
// 784×64 weight is 13 of them) for `workers`; `held_replies`: every reply
// held back up to 2 ms by the testing faults (testing.delay_reply_ms), on
// the same serving path.
JobConfig OneShardJob(int workers, bool held_replies = false,
                      const std::string& layers = "[784, 64, 10]");

// `push` cut into `n` messages of consecutive chunks: the first keeps the
// header fields; with `more`, every one but the last sets
// PushRequest.more.
std::vector<proto::PushRequest> SplitPush(const proto::PushRequest& push, int n,
                                          bool more);

// Chunk data by (tensor_id, chunk_index).
using ChunkBytes = std::map<std::pair<uint32_t, uint32_t>, std::string>;
// Adds `reply`'s chunks to `out`; fails the test on a chunk already there.
void AddChunks(const proto::PullResponse& reply, ChunkBytes* out);
ChunkBytes ByChunk(const proto::PullResponse& reply);

// A StepStream reply's chunks, read message by message until `chunks`
// came; every message's version appended to `versions`.
ChunkBytes ReadReply(
    grpc::ClientReaderWriter<proto::PushRequest, proto::PullResponse>* stream,
    size_t chunks, std::vector<uint64_t>* versions);

// Half-closes a StepStream and expects it to end OK.
void CloseStep(
    grpc::ClientReaderWriter<proto::PushRequest, proto::PullResponse>* stream);

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_SHARD_CLIENT_H_
