#include "tests/row_pushes.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/model/rows.h"
#include "tests/test_files.h"
#include "tests/whole_push.h"

namespace paramd::testing {

JobConfig RowsJob(const std::string& policy, int servers,
                  const std::string& max_rows, const std::string& rows,
                  const std::string& table_extra) {
  JobOptions o;
  o.servers.assign(servers, "127.0.0.1:0");
  o.policy = policy;
  o.model_type = "embedding_bag";
  o.layers = "[4, 10]";
  o.model_extra = absl::StrCat(
      "  embeddings:\n"
      "    - name: emb\n"
      "      rows: ",
      rows,
      "\n"
      "      dim: 4\n"
      "      init_scale: 0.1\n"
      "      max_rows: ",
      max_rows,
      "\n"
      "      optimizer: {type: sgd, learning_rate: 0.5}\n",
      table_extra);
  return MakeJob(o, NewTempDir());
}

std::unique_ptr<Shard> RegisteredShard(const JobConfig& config, int shard_id) {
  std::unique_ptr<Shard> shard = *Shard::Create(config, shard_id);
  for (uint32_t rank : {0u, 1u}) {
    RegisterAtZero(*shard, config.job_id, rank);
  }
  return shard;
}

float RowGrad(uint32_t rank, uint64_t id, int element) {
  return static_cast<float>(rank + 1) * 0.25f + static_cast<float>(id % 7) -
         static_cast<float>(element) * 0.5f;
}

proto::PushRequest RowPush(const Shard& shard, const JobConfig& config,
                           uint32_t rank, uint64_t clock,
                           const std::vector<uint64_t>& ids) {
  proto::PushRequest r = WholePush(shard, config.job_id, rank, clock, 0.0f);
  proto::RowBlock* block = r.add_rows();
  block->set_table(0);
  block->set_dtype(proto::DTYPE_FLOAT32);
  block->set_ids(EncodeRowIds(ids));
  std::vector<float> values;
  for (uint64_t id : ids) {
    for (int e = 0; e < kRowDim; ++e) values.push_back(RowGrad(rank, id, e));
  }
  block->set_data(values.data(), values.size() * sizeof(float));
  return r;
}

absl::StatusOr<std::vector<float>> PullTableRows(
    Shard& shard, const JobConfig& config, uint32_t rank, uint64_t clock,
    const std::vector<uint64_t>& ids, absl::Time deadline) {
  proto::PullRowsRequest request;
  request.set_job_id(config.job_id);
  request.set_rank(rank);
  request.set_clock(clock);
  request.set_table(0);
  request.set_ids(EncodeRowIds(ids));
  proto::PullRowsResponse response;
  absl::Status s = PullRowsInto(shard, request, deadline, nullptr, &response);
  if (!s.ok()) return s;
  std::vector<float> out(response.data().size() / sizeof(float));
  std::memcpy(out.data(), response.data().data(), response.data().size());
  return out;
}

}  // namespace paramd::testing
