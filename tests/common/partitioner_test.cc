// The partition plan: chunks bounded by chunk_bytes, covering every tensor
// exactly, placed deterministically and balanced by bytes.
#include "common/model/partitioner.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "common/model/model_spec.h"

namespace paramd {
namespace {

ModelSpec UnevenModel() {
  // One huge tensor, a few mid-sized ones, many tiny ones.
  ModelSpec spec;
  auto add = [&](const std::string& name, int64_t n) {
    spec.tensors.push_back({name, {n}, n, 0.1f});
    spec.total_elements += n;
  };
  add("embedding", 3'000'000);
  add("big", 1'000'003);
  for (int i = 0; i < 5; ++i) add("mid" + std::to_string(i), 70'001 + i * 13);
  for (int i = 0; i < 40; ++i) add("tiny" + std::to_string(i), 1 + i * 7);
  return spec;
}

void CheckCoverage(const ModelSpec& spec, const PartitionPlan& plan,
                   int64_t chunk_bytes) {
  std::map<int, int64_t> covered;
  for (size_t i = 0; i < plan.chunks().size(); ++i) {
    const ChunkSpec& c = plan.chunks()[i];
    CHECK(c.length * kElementBytes <= chunk_bytes);
    CHECK(c.length > 0);
    // Chunks of a tensor are contiguous and in order.
    CHECK(c.offset == covered[c.tensor_id]);
    covered[c.tensor_id] += c.length;
    CHECK(plan.Find(c.tensor_id, c.chunk_index) == static_cast<int>(i));
    CHECK(c.shard >= 0);
    CHECK(c.shard < plan.num_shards());
  }
  for (size_t t = 0; t < spec.tensors.size(); ++t) {
    CHECK(covered[static_cast<int>(t)] == spec.tensors[t].num_elements);
  }
  int64_t total = 0;
  for (int s = 0; s < plan.num_shards(); ++s) total += plan.BytesOnShard(s);
  CHECK(total == spec.total_elements * kElementBytes);
}

TEST_CASE("chunks cover every tensor exactly and respect chunk_bytes",
          "[partitioner]") {
  const ModelSpec spec = UnevenModel();
  for (int64_t chunk_bytes : {4096, 65536, 1 << 20, 64 << 20}) {
    for (int shards : {1, 2, 3, 8}) {
      auto plan = PartitionPlan::Build(spec, chunk_bytes, shards);
      REQUIRE(plan.ok());
      CheckCoverage(spec, *plan, chunk_bytes);
    }
  }
  // The smallest chunk: one element each.
  ModelSpec small;
  small.tensors.push_back({"w", {10}, 10, 0.1f});
  small.tensors.push_back({"b", {3}, 3, 0.1f});
  small.total_elements = 13;
  auto plan = PartitionPlan::Build(small, 4, 1);
  REQUIRE(plan.ok());
  CHECK(plan->chunks().size() == 13);
  CheckCoverage(small, *plan, 4);
}

TEST_CASE("a single shard keeps chunks as large as chunk_bytes allows",
          "[partitioner]") {
  const ModelSpec spec = UnevenModel();
  auto plan = PartitionPlan::Build(spec, 1 << 20, 1);
  REQUIRE(plan.ok());
  // embedding: 12,000,000 bytes in 12 chunks of at most 1 MiB.
  CHECK(plan->Find(0, 11) >= 0);
  CHECK(plan->Find(0, 12) == -1);
}

TEST_CASE("bytes are balanced within 10% on a very uneven model",
          "[partitioner]") {
  const ModelSpec spec = UnevenModel();
  for (int shards : {2, 3, 4, 8, 16}) {
    auto plan = PartitionPlan::Build(spec, 1 << 20, shards);
    REQUIRE(plan.ok());
    int64_t lo = INT64_MAX, hi = 0;
    for (int s = 0; s < shards; ++s) {
      lo = std::min(lo, plan->BytesOnShard(s));
      hi = std::max(hi, plan->BytesOnShard(s));
    }
    INFO("shards " << shards << ": min " << lo << " max " << hi);
    CHECK(static_cast<double>(hi) / lo <= 1.10);
  }
}

TEST_CASE("large tensors spread over all shards, small ones stay whole",
          "[partitioner]") {
  const ModelSpec spec = UnevenModel();
  auto plan = PartitionPlan::Build(spec, 1 << 20, 4);
  REQUIRE(plan.ok());
  std::map<int, std::set<int>> shards_of;
  std::map<int, int> chunks_of;
  for (const ChunkSpec& c : plan->chunks()) {
    shards_of[c.tensor_id].insert(c.shard);
    ++chunks_of[c.tensor_id];
  }
  CHECK(shards_of[0].size() == 4);  // embedding: 12 MB over 4 shards
  for (int t = 7; t < static_cast<int>(spec.tensors.size()); ++t) {
    CHECK(chunks_of[t] == 1);
  }
}

TEST_CASE("the plan is deterministic and its fingerprint tells plans apart",
          "[partitioner]") {
  const ModelSpec spec = UnevenModel();
  auto a = PartitionPlan::Build(spec, 65536, 3);
  auto b = PartitionPlan::Build(spec, 65536, 3);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(a->chunks().size() == b->chunks().size());
  for (size_t i = 0; i < a->chunks().size(); ++i) {
    CHECK(a->chunks()[i].shard == b->chunks()[i].shard);
    CHECK(a->chunks()[i].offset == b->chunks()[i].offset);
  }
  CHECK(a->fingerprint() == b->fingerprint());
  CHECK(PartitionPlan::Build(spec, 65536, 2)->fingerprint() !=
        a->fingerprint());
  CHECK(PartitionPlan::Build(spec, 32768, 3)->fingerprint() !=
        a->fingerprint());
}

TEST_CASE("the MLP's plan for the main job", "[partitioner]") {
  ModelConfig mlp;
  mlp.layers = {784, 256, 128, 10};
  const ModelSpec spec = BuildModelSpec(mlp);
  REQUIRE(spec.tensors.size() == 6);
  CHECK(spec.tensors[0].name == "fc1.weight");
  CHECK(spec.tensors[0].shape == std::vector<int64_t>{784, 256});
  CHECK(spec.total_elements == 235146);
  auto plan = PartitionPlan::Build(spec, 65536, 2);
  REQUIRE(plan.ok());
  CheckCoverage(spec, *plan, 65536);
  const double ratio =
      static_cast<double>(plan->BytesOnShard(0)) / plan->BytesOnShard(1);
  CHECK(ratio == Approx(1.0).margin(0.15));
}

TEST_CASE("bad partition inputs are refused", "[partitioner]") {
  const ModelSpec spec = UnevenModel();
  CHECK_FALSE(PartitionPlan::Build(spec, 65536, 0).ok());
  CHECK_FALSE(PartitionPlan::Build(spec, 2, 2).ok());
  ModelSpec empty_tensor;
  empty_tensor.tensors.push_back({"empty", {0}, 0, 0.1f});
  CHECK_FALSE(PartitionPlan::Build(empty_tensor, 65536, 2).ok());
}

TEST_CASE("initial values do not depend on how a tensor is chunked",
          "[partitioner]") {
  const TensorSpec t{"w", {1000}, 1000, 0.5f};
  std::vector<float> whole(1000), parts(1000);
  InitTensorRange(t, 42, 3, 0, absl::MakeSpan(whole));
  InitTensorRange(t, 42, 3, 0, absl::MakeSpan(parts).subspan(0, 333));
  InitTensorRange(t, 42, 3, 333, absl::MakeSpan(parts).subspan(333));
  CHECK(whole == parts);
  for (float v : whole) {
    CHECK(v >= -0.5f);
    CHECK(v <= 0.5f);
  }
  std::vector<float> other_seed(1000);
  InitTensorRange(t, 43, 3, 0, absl::MakeSpan(other_seed));
  CHECK(other_seed != whole);
}

}  // namespace
}  // namespace paramd

namespace paramd {
namespace {

TEST_CASE("Find answers -1 for any id from the wire outside the plan",
          "[partitioner]") {
  ModelSpec spec;
  spec.tensors.push_back({"a", {100}, 100, 0.1f});
  spec.tensors.push_back({"b", {10}, 10, 0.1f});
  spec.total_elements = 110;
  const PartitionPlan plan = *PartitionPlan::Build(spec, 64, 2);
  for (int64_t id : {int64_t{-1}, int64_t{2}, int64_t{INT32_MAX},
                     int64_t{UINT32_MAX}, INT64_MAX, INT64_MIN}) {
    CHECK(plan.Find(id, 0) == -1);
  }
  for (int64_t index : {int64_t{-1}, int64_t{INT32_MAX}, int64_t{UINT32_MAX},
                        INT64_MAX, INT64_MIN}) {
    CHECK(plan.Find(0, index) == -1);
    CHECK(plan.Find(1, index) == -1);
  }
  CHECK(plan.Find(1, 0) >= 0);
}

}  // namespace
}  // namespace paramd
