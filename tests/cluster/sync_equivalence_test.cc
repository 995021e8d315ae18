// Sync semantics: with one worker and no shuffle, the parameters after k
// steps through 2 servers over loopback gRPC equal SGD with momentum
// computed in a single process (relative difference <= 1e-6).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>

#include "common/model/model_spec.h"
#include "tests/local_cluster.h"
#include "tests/test_files.h"
#include "worker/data/dataset.h"
#include "worker/model/blas.h"
#include "worker/model/sequential.h"
#include "worker/rpc/grpc_parameter_client.h"
#include "worker/trainer.h"

namespace paramd {
namespace {

TEST_CASE("one sync worker equals single-process SGD", "[integration][sync]") {
  testing::JobOptions o;
  o.workers = 1;
  o.shuffle = false;
  o.layers = "[784, 32, 16, 10]";
  o.batch_size = 50;
  o.train_limit = 1000;  // 20 steps per epoch
  o.test_limit = 100;
  o.epochs = 2;
  o.learning_rate = 0.05;
  o.momentum = 0.9;
  o.chunk_bytes = 4096;  // many chunks over both shards
  const JobConfig config = testing::MakeJob(o, testing::NewTempDir());
  const int k = 27;  // crosses an epoch boundary

  // Distributed: 2 servers, 1 worker.
  testing::LocalCluster cluster(config);
  TrainerOptions t;
  t.max_steps = k;
  auto trainer = Trainer::Create(
      config, 0, std::move(t), GrpcParameterClientFactory(cluster.addresses()));
  REQUIRE(trainer.ok());
  absl::Status run = (*trainer)->Run();
  INFO(run.ToString());
  REQUIRE(run.ok());
  const std::vector<float>& distributed = (*trainer)->params();

  // Reference: the same initial values, batches and gradients, and the SGD
  // update written out here: v = mu * v + g; p -= lr * v.
  const ModelSpec spec = BuildModelSpec(config.model);
  std::vector<float> p;
  for (size_t tid = 0; tid < spec.tensors.size(); ++tid) {
    std::vector<float> values(spec.tensors[tid].num_elements);
    InitTensorRange(spec.tensors[tid], config.seed, static_cast<int>(tid), 0,
                    absl::MakeSpan(values));
    p.insert(p.end(), values.begin(), values.end());
  }
  const std::vector<float> initial = p;
  std::vector<float> v(p.size(), 0.0f), g(p.size());
  auto data = LoadDataset(config.data.train_images, config.data.train_labels,
                          config.data.train_limit);
  REQUIRE(data.ok());
  auto part = DataPartition::Create(&*data, 0, 1, config.training.batch_size);
  REQUIRE(part.ok());
  auto mlp_model = CpuSequential::Mlp(config.model.layers, 1024, 1,
                                      *LoadBlas(config.worker.blas_core));
  REQUIRE(mlp_model.ok());
  CpuSequential& mlp = **mlp_model;
  std::vector<float> x(part->max_batch() * data->dim);
  std::vector<int32_t> y(part->max_batch());
  const float lr = 0.05f, mu = 0.9f;
  for (int step = 0; step < k; ++step) {
    const int64_t in_epoch = step % part->steps_per_epoch();
    if (in_epoch == 0) part->StartEpoch(config.seed, step / 20, false);
    const int n = part->Batch(in_epoch, x.data(), y.data());
    REQUIRE(
        mlp.ComputeGradients(p, x.data(), y.data(), n, absl::MakeSpan(g)).ok());
    for (size_t i = 0; i < p.size(); ++i) {
      v[i] = mu * v[i] + g[i];
      p[i] -= lr * v[i];
    }
  }

  REQUIRE(distributed.size() == p.size());
  double diff = 0, norm = 0, moved = 0, start = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    diff += (distributed[i] - p[i]) * double(distributed[i] - p[i]);
    norm += p[i] * double(p[i]);
  }
  // The run really trained: the parameters moved well away from their start.
  for (size_t i = 0; i < p.size(); ++i) {
    moved +=
        (distributed[i] - initial[i]) * double(distributed[i] - initial[i]);
    start += initial[i] * double(initial[i]);
  }
  CHECK(std::sqrt(moved / start) > 0.05);
  const double relative = std::sqrt(diff / norm);
  std::printf("relative difference after %d steps: %.3g (moved %.3g)\n", k,
              relative, std::sqrt(moved / start));
  CHECK(relative <= 1e-6);
}

}  // namespace
}  // namespace paramd
