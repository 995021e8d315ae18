#include "tests/whole_push.h"

#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/shard/proto_convert.h"

namespace paramd::testing {

void RegisterAtZero(Shard& shard, const std::string& job_id, uint32_t rank) {
  for (bool join : {false, true}) {
    proto::RegisterRequest r;
    r.set_job_id(job_id);
    r.set_rank(rank);
    r.set_plan_fingerprint(shard.plan().fingerprint());
    r.set_join(join);
    proto::RegisterResponse response;
    REQUIRE(shard.Register(r, &response).ok());
  }
}

proto::PushRequest WholePush(const Shard& shard, const std::string& job_id,
                             uint32_t rank, uint64_t clock, float value) {
  proto::PushRequest r;
  r.set_job_id(job_id);
  r.set_rank(rank);
  r.set_clock(clock);
  for (int i = 0; i < shard.store().num_chunks(); ++i) {
    const ChunkSpec& c = shard.store().chunk_spec(i);
    proto::TensorChunk* chunk = r.add_chunks();
    chunk->set_tensor_id(c.tensor_id);
    chunk->set_chunk_index(c.chunk_index);
    chunk->set_dtype(proto::DTYPE_FLOAT32);
    std::vector<float> values(c.length, value);
    chunk->set_data(values.data(), values.size() * sizeof(float));
  }
  return r;
}

proto::PullRequest PullAt(const std::string& job_id, uint32_t rank,
                          uint64_t clock) {
  proto::PullRequest r;
  r.set_job_id(job_id);
  r.set_rank(rank);
  r.set_clock(clock);
  return r;
}

absl::Status PullInto(Shard& shard, const proto::PullRequest& request,
                      absl::Time deadline, Cancellation* cancel,
                      proto::PullResponse* response) {
  std::shared_ptr<const ParamSnapshot> snapshot;
  absl::Status s = shard.Pull(request, deadline, cancel, &snapshot);
  if (!s.ok()) return s;
  FillPullResponse(*snapshot, shard.store(),
                   request.dtype() == proto::DTYPE_FLOAT16, response);
  return absl::OkStatus();
}

absl::Status PullRowsInto(Shard& shard, const proto::PullRowsRequest& request,
                          absl::Time deadline, Cancellation* cancel,
                          proto::PullRowsResponse* response) {
  Shard::RowsReply reply;
  absl::Status s =
      shard.PullRows(ToPullRowsView(request), deadline, cancel, &reply);
  if (!s.ok()) return s;
  FillPullRowsResponse(reply, response);
  return absl::OkStatus();
}

std::string DenseState(const Shard& shard) {
  std::string out;
  shard.store().Read(
      [&](uint64_t version, absl::Span<const std::vector<float>> chunks) {
        out = absl::StrCat(version, ":");
        for (const std::vector<float>& c : chunks) {
          out.append(reinterpret_cast<const char*>(c.data()),
                     c.size() * sizeof(float));
        }
      });
  return out;
}

}  // namespace paramd::testing
