// Sparse pushes (compression topk) on a shard: each applies exactly as the
// dense push of the same scattered gradient would, under every optimizer
// and policy, entries not sent included; malformed sparse chunks are
// refused, named, and change nothing.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/half.h"
#include "server/shard/shard.h"
#include "tests/test_files.h"
#include "tests/whole_push.h"

namespace paramd {
namespace {

JobConfig Job(const std::string& optimizer, PolicyType policy) {
  testing::JobOptions o;
  o.servers = {"127.0.0.1:0"};
  o.layers = "[784, 16, 10]";
  o.chunk_bytes = 8192;
  JobConfig config = testing::MakeJob(o, testing::NewTempDir());
  OptimizerConfig& opt = config.optimizer;
  opt = OptimizerConfig();
  opt.type = optimizer;
  opt.learning_rate = 0.01;
  opt.weight_decay = 0.001;  // Moves unsent entries too: part of the check.
  if (optimizer == "sgd") opt.momentum = 0.9;
  if (optimizer == "rmsprop") opt.momentum = 0.5;
  opt.eps = optimizer == "adagrad" ? 1e-10 : 1e-8;
  config.policy.type = policy;
  config.policy.staleness = policy == PolicyType::kSsp ? 2 : 0;
  return config;
}

std::unique_ptr<Shard> Registered(const JobConfig& config) {
  std::unique_ptr<Shard> shard = *Shard::Create(config, 0);
  for (uint32_t rank : {0u, 1u}) {
    testing::RegisterAtZero(*shard, config.job_id, rank);
  }
  return shard;
}

// A gradient pattern with few non-zero entries (a sparse chunk lists at
// least one): element p of a chunk is non-zero where
// (p + clock + rank) % 5 == 0.
float Entry(int64_t p, uint64_t clock, uint32_t rank) {
  if ((p + static_cast<int64_t>(clock) + rank) % 5 != 0) return 0;
  return static_cast<float>((p % 11) - 5) * 0.125f + 0.0625f;
}

// The push of that pattern: dense (every element) or sparse (only the
// non-zero entries, as (index, value) pairs), float32 or float16 values.
proto::PushRequest PatternPush(const Shard& shard, const JobConfig& config,
                               uint32_t rank, uint64_t clock, bool sparse,
                               bool half = false) {
  proto::PushRequest r =
      testing::WholePush(shard, config.job_id, rank, clock, 0.0f);
  for (int i = 0; i < shard.store().num_chunks(); ++i) {
    const ChunkSpec& c = shard.store().chunk_spec(i);
    proto::TensorChunk* chunk = r.mutable_chunks(i);
    chunk->set_dtype(half ? proto::DTYPE_FLOAT16 : proto::DTYPE_FLOAT32);
    std::vector<uint32_t> indices;
    std::vector<float> values;
    for (int64_t p = 0; p < c.length; ++p) {
      const float v = Entry(p, clock, rank);
      if (sparse && v == 0) continue;
      if (sparse) indices.push_back(static_cast<uint32_t>(p));
      values.push_back(v);
    }
    if (half) {
      std::vector<uint16_t> halves(values.size());
      FloatsToHalves(values, absl::MakeSpan(halves));
      chunk->set_data(halves.data(), halves.size() * 2);
    } else {
      chunk->set_data(values.data(), values.size() * sizeof(float));
    }
    if (sparse) chunk->set_indices(indices.data(), indices.size() * 4);
  }
  return r;
}

TEST_CASE("a sparse push applies as the dense push of its scattered gradient",
          "[sparse][topk]") {
  for (const char* optimizer : {"sgd", "adam", "adamw", "rmsprop", "adagrad"}) {
    for (PolicyType policy :
         {PolicyType::kSync, PolicyType::kAsync, PolicyType::kSsp}) {
      for (bool half : {false, true}) {
        INFO(optimizer << " " << PolicyName(policy) << (half ? " fp16" : ""));
        const JobConfig config = Job(optimizer, policy);
        std::unique_ptr<Shard> dense = Registered(config);
        std::unique_ptr<Shard> sparse = Registered(config);
        const std::string initial = testing::DenseState(*dense);
        REQUIRE(testing::DenseState(*sparse) == initial);
        for (uint64_t clock = 0; clock < 4; ++clock) {
          for (uint32_t rank : {0u, 1u}) {
            proto::PushResponse r;
            // Dense float32 pushes of exactly the values the sparse (maybe
            // float16) ones carry: the pattern is exact in half.
            REQUIRE(
                dense->Push(PatternPush(*dense, config, rank, clock, false), &r)
                    .ok());
            const absl::Status s = sparse->Push(
                PatternPush(*sparse, config, rank, clock, true, half), &r);
            INFO(s.ToString());
            REQUIRE(s.ok());
          }
        }
        const std::string after = testing::DenseState(*sparse);
        CHECK(after != initial);
        CHECK(after == testing::DenseState(*dense));
        proto::ShardStatus d, s;
        dense->GetStatus(&d);
        sparse->GetStatus(&s);
        CHECK(s.bytes_in_float32() == d.bytes_in());
        CHECK(s.bytes_in() * 2 < d.bytes_in());  // 1 in 5 entries sent.
      }
    }
  }
}

TEST_CASE("malformed sparse chunks are refused, named, and change nothing",
          "[sparse][topk]") {
  const JobConfig config = Job("sgd", PolicyType::kAsync);
  std::unique_ptr<Shard> shard = Registered(config);
  const std::string before = testing::DenseState(*shard);
  const proto::PushRequest good = PatternPush(*shard, config, 0, 0, true);
  auto indices_of = [](proto::PushRequest* p) {
    return reinterpret_cast<uint32_t*>(
        p->mutable_chunks(1)->mutable_indices()->data());
  };
  struct Case {
    const char* what;
    std::function<void(proto::PushRequest*)> spoil;
    const char* error;
  };
  const std::vector<Case> cases = {
      {"unsorted",
       [&](proto::PushRequest* p) {
         std::swap(indices_of(p)[0], indices_of(p)[1]);
       },
       "not strictly ascending"},
      {"repeated",
       [&](proto::PushRequest* p) { indices_of(p)[1] = indices_of(p)[0]; },
       "not strictly ascending"},
      {"out of range",
       [&](proto::PushRequest* p) {
         const int n = p->chunks(1).indices().size() / 4;
         indices_of(p)[n - 1] = 1u << 30;
       },
       "outside the chunk"},
      {"a value short",
       [](proto::PushRequest* p) {
         std::string* d = p->mutable_chunks(1)->mutable_data();
         d->resize(d->size() - 4);
       },
       "one value per index"},
      {"ragged indices",
       [](proto::PushRequest* p) {
         p->mutable_chunks(1)->mutable_indices()->push_back('\0');
       },
       "4 per index"},
      {"not finite",
       [](proto::PushRequest* p) {
         const float inf = INFINITY;
         std::memcpy(p->mutable_chunks(1)->mutable_data()->data() + 4, &inf, 4);
       },
       "is not finite"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    proto::PushRequest bad = good;
    c.spoil(&bad);
    proto::PushResponse r;
    const absl::Status s = shard->Push(bad, &r);
    INFO(s.ToString());
    CHECK(absl::IsInvalidArgument(s));
    CHECK(absl::StrContains(s.message(), c.error));
    CHECK(absl::StrContains(s.message(), "chunk 1 of tensor"));
    CHECK(testing::DenseState(*shard) == before);
  }
  // The untouched push still goes through afterwards.
  proto::PushResponse r;
  CHECK(shard->Push(good, &r).ok());
  CHECK(testing::DenseState(*shard) != before);
}

}  // namespace
}  // namespace paramd
