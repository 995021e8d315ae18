#include "tests/shard_client.h"

#include <grpcpp/create_channel.h>

#include <catch2/catch.hpp>

#include "tests/test_files.h"

namespace paramd::testing {

ShardClient::ShardClient(const JobConfig& config, LocalCluster& cluster)
    : config(config),
      shard(*cluster.server(0).shard()),
      stub(proto::ParameterService::NewStub(grpc::CreateChannel(
          cluster.addresses()[0], grpc::InsecureChannelCredentials()))) {}

proto::PullRequest ShardClient::PullAt(uint32_t rank, uint64_t clock) const {
  proto::PullRequest req;
  req.set_job_id(config.job_id);
  req.set_rank(rank);
  req.set_clock(clock);
  return req;
}

proto::PullResponse ShardClient::Pull(uint32_t rank, uint64_t clock) {
  proto::PullResponse resp;
  grpc::ClientContext c;
  const grpc::Status s = stub->Pull(&c, PullAt(rank, clock), &resp);
  INFO(s.error_message());
  REQUIRE(s.ok());
  return resp;
}

proto::PushRequest ShardClient::Gradient(uint32_t rank, uint64_t clock,
                                         float value, float step) const {
  proto::PushRequest push;
  push.set_job_id(config.job_id);
  push.set_rank(rank);
  push.set_clock(clock);
  int k = 0;
  for (const int global : shard.plan().ChunksOfShard(0)) {
    const ChunkSpec& spec = shard.plan().chunks()[global];
    proto::TensorChunk* g = push.add_chunks();
    g->set_tensor_id(spec.tensor_id);
    g->set_chunk_index(spec.chunk_index);
    g->set_dtype(proto::DTYPE_FLOAT32);
    std::vector<float> v(spec.length, value + step * static_cast<float>(k++));
    g->set_data(v.data(), v.size() * sizeof(float));
  }
  return push;
}

grpc::Status ShardClient::PushPull(const proto::PushRequest& push,
                                   proto::PullResponse* out) {
  grpc::ClientContext c;
  return stub->PushPull(&c, push, out);
}

proto::ShardStatus ShardClient::Status() {
  proto::ShardStatus st;
  shard.GetStatus(&st);
  return st;
}

void ShardClient::Register(uint32_t rank) {
  RegisterOverGrpc(*stub, config, shard.plan(), rank);
}

JobConfig OneShardJob(int workers, bool held_replies,
                      const std::string& layers) {
  JobOptions o;
  o.servers = {"127.0.0.1:0"};
  o.workers = workers;
  o.layers = layers;
  JobConfig config = MakeJob(o, NewTempDir());
  if (held_replies) config.testing.delay_reply_ms = 2;
  return config;
}

std::vector<proto::PushRequest> SplitPush(const proto::PushRequest& push, int n,
                                          bool more) {
  std::vector<proto::PushRequest> pieces(n);
  pieces[0] = push;
  pieces[0].clear_chunks();
  for (int k = 0; k < push.chunks_size(); ++k) {
    *pieces[static_cast<size_t>(k) * n / push.chunks_size()].add_chunks() =
        push.chunks(k);
  }
  for (int i = 0; more && i + 1 < n; ++i) pieces[i].set_more(true);
  return pieces;
}

void AddChunks(const proto::PullResponse& reply, ChunkBytes* out) {
  for (const proto::TensorChunk& c : reply.chunks()) {
    INFO("tensor " << c.tensor_id() << " chunk " << c.chunk_index());
    CHECK(out->emplace(std::make_pair(c.tensor_id(), c.chunk_index()), c.data())
              .second);
  }
}

ChunkBytes ByChunk(const proto::PullResponse& reply) {
  ChunkBytes out;
  AddChunks(reply, &out);
  return out;
}

ChunkBytes ReadReply(
    grpc::ClientReaderWriter<proto::PushRequest, proto::PullResponse>* stream,
    size_t chunks, std::vector<uint64_t>* versions) {
  ChunkBytes out;
  while (out.size() < chunks) {
    proto::PullResponse part;
    REQUIRE(stream->Read(&part));
    versions->push_back(part.version());
    AddChunks(part, &out);
  }
  return out;
}

void CloseStep(
    grpc::ClientReaderWriter<proto::PushRequest, proto::PullResponse>* stream) {
  stream->WritesDone();
  const grpc::Status s = stream->Finish();
  INFO(s.error_message());
  CHECK(s.ok());
}

}  // namespace paramd::testing
