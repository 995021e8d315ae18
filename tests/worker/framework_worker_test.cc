// FrameworkWorker, the native half of paramd.torch, against in-process
// shards: which jobs it takes, the model check that names the first tensor
// that differs, and steps that land in the caller's flat buffers.
#include "python/native/framework_worker.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/config/job_file.h"
#include "common/model/model_spec.h"
#include "tests/in_process_client.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

using Catch::Matchers::Contains;
using testing::InProcessCluster;
using testing::JobOptions;
using testing::JobYaml;
using testing::NewTempDir;
using testing::WriteFile;

constexpr char kTensors[] =
    "  tensors:\n"
    "    - {name: fc.weight, shape: [4, 3], init: uniform, bound: 0.5}\n"
    "    - {name: fc.bias, shape: [4], init: constant, value: 0.25}\n";

std::string TensorsJob(int workers, const std::string& policy = "sync") {
  JobOptions o;
  o.model_type = "tensors";
  o.layers = "";
  o.model_extra = kTensors;
  o.workers = workers;
  o.policy = policy;
  o.learning_rate = 0.5;
  o.momentum = 0;
  return WriteFile(NewTempDir() + "/job.yaml", JobYaml(o));
}

TEST_CASE("a framework worker takes tensors jobs and ranks inside the job",
          "[framework_worker]") {
  JobOptions mlp;
  const std::string mlp_job =
      WriteFile(NewTempDir() + "/job.yaml", JobYaml(mlp));
  absl::StatusOr<std::unique_ptr<FrameworkWorker>> w =
      FrameworkWorker::Create({mlp_job, 0, {}, ""});
  REQUIRE_FALSE(w.ok());
  CHECK_THAT(std::string(w.status().message()),
             Contains("model.type is mlp; a framework worker trains "
                      "model.type tensors jobs"));
  w = FrameworkWorker::Create({TensorsJob(2), 2, {}, ""});
  REQUIRE_FALSE(w.ok());
  CHECK_THAT(std::string(w.status().message()),
             Contains("rank: 2 is outside [0, 2)"));
}

TEST_CASE("the model check names the first tensor that differs",
          "[framework_worker]") {
  absl::StatusOr<std::unique_ptr<FrameworkWorker>> w =
      FrameworkWorker::Create({TensorsJob(1), 0, {}, ""});
  REQUIRE(w.ok());
  CHECK((*w)->layout().total == 16);
  CHECK((*w)->CheckTensors({{"fc.weight", {4, 3}}, {"fc.bias", {4}}}).ok());
  absl::Status s =
      (*w)->CheckTensors({{"fc.weight", {4, 3}}, {"fc.bias", {5}}});
  CHECK_THAT(std::string(s.message()),
             Contains("the model's tensor 1 is 'fc.bias' [5] but the job's "
                      "model.tensors[1] is 'fc.bias' [4]"));
  s = (*w)->CheckTensors({{"weight", {4, 3}}, {"fc.bias", {4}}});
  CHECK_THAT(std::string(s.message()),
             Contains("tensor 0 is 'weight' [4, 3] but the job's "
                      "model.tensors[0] is 'fc.weight' [4, 3]"));
  s = (*w)->CheckTensors({{"fc.weight", {4, 3}}});
  CHECK_THAT(std::string(s.message()),
             Contains("the model has 1 tensors and the job 2: the job's "
                      "'fc.bias' is not in the model"));
  s = (*w)->CheckTensors(
      {{"fc.weight", {4, 3}}, {"fc.bias", {4}}, {"extra", {1}}});
  CHECK_THAT(std::string(s.message()),
             Contains("the model's 'extra' is not in the job's "
                      "model.tensors"));
  // A buffer (a statistic) where the job trains a tensor.
  s = (*w)->CheckTensors({{"fc.weight", {4, 3}}, {"fc.bias", {4}, true}});
  CHECK_THAT(std::string(s.message()),
             Contains("the model's tensor 1 is 'fc.bias' [4] (statistic) but "
                      "the job's model.tensors[1] is 'fc.bias' [4] ("));
}

TEST_CASE("start pulls the servers' state and a step lands in the buffers",
          "[framework_worker]") {
  const std::string job = TensorsJob(1);
  absl::StatusOr<JobConfig> config = LoadJobConfig(job);
  REQUIRE(config.ok());
  InProcessCluster cluster(*config);
  absl::StatusOr<std::unique_ptr<FrameworkWorker>> made =
      FrameworkWorker::Create({job, 0, {}, ""}, cluster.ClientFactory());
  REQUIRE(made.ok());
  FrameworkWorker& w = **made;
  std::vector<float> params(16, -7), grads(16, 0);
  CHECK_FALSE(w.Start(absl::MakeSpan(params.data(), 15)).ok());
  absl::StatusOr<uint64_t> clock = w.Start(absl::MakeSpan(params));
  REQUIRE(clock.ok());
  CHECK(*clock == 0);
  const ModelSpec& spec = w.spec();
  std::vector<float> weight(12);
  InitTensorRange(spec.tensors[0], config->seed, 0, 0, absl::MakeSpan(weight));
  CHECK(std::vector<float>(params.begin(), params.begin() + 12) == weight);
  CHECK(std::vector<float>(params.begin() + 12, params.end()) ==
        std::vector<float>(4, 0.25f));
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = 0.1f * i;
  const std::vector<float> before = params;
  clock = w.Step(grads, 1.5f, absl::MakeSpan(params));
  REQUIRE(clock.ok());
  CHECK(*clock == 1);
  CHECK(w.clock() == 1);
  for (size_t i = 0; i < params.size(); ++i) {
    // Plain SGD at lr 0.5 on the one worker's gradient.
    CHECK(params[i] == Approx(before[i] - 0.5f * grads[i]).margin(1e-6));
  }
  CHECK(cluster.calls().pushes == 1);
  CHECK_FALSE(
      w.Step(absl::MakeSpan(grads.data(), 3), 0, absl::MakeSpan(params)).ok());
  EpochReport report;
  report.epoch = 1;
  report.train_samples = 32;
  report.test_total = 10;
  REQUIRE(w.ReportEpoch(report).ok());
  CHECK(cluster.calls().epoch_reports == 1);
  w.Finish();
  w.Finish();
}

TEST_CASE("rows of a table are checked, pulled and pushed with the step",
          "[framework_worker]") {
  JobOptions o;
  o.model_type = "tensors";
  o.layers = "";
  o.workers = 1;
  o.model_extra = std::string(kTensors) +
                  "  embeddings:\n"
                  "    - {name: words, rows: 10, dim: 2, init: zeros, "
                  "optimizer: {type: sgd, learning_rate: 1}}\n";
  const std::string job = WriteFile(NewTempDir() + "/job.yaml", JobYaml(o));
  absl::StatusOr<JobConfig> config = LoadJobConfig(job);
  REQUIRE(config.ok());
  InProcessCluster cluster(*config);
  absl::StatusOr<std::unique_ptr<FrameworkWorker>> made =
      FrameworkWorker::Create({job, 0, {}, ""}, cluster.ClientFactory());
  REQUIRE(made.ok());
  FrameworkWorker& w = **made;
  std::vector<float> params(16), grads(16, 0), rows(4, -1);
  REQUIRE(w.Start(absl::MakeSpan(params)).ok());
  const std::vector<uint64_t> ids = {3, 7};
  CHECK_THAT(std::string(w.PullRows(1, ids, absl::MakeSpan(rows)).message()),
             Contains("table 1 is not in the job's 1 model.embeddings"));
  const std::vector<uint64_t> unsorted = {7, 3};
  CHECK_THAT(
      std::string(w.PullRows(0, unsorted, absl::MakeSpan(rows)).message()),
      Contains("must be sorted, distinct and below its 10 rows; id 1 is 3"));
  CHECK_THAT(
      std::string(
          w.SetRowGradients(0, ids, absl::MakeSpan(grads.data(), 3)).message()),
      Contains("3 floats for 2 rows of table 'words' (dim 2)"));
  REQUIRE(w.PullRows(0, ids, absl::MakeSpan(rows)).ok());
  CHECK(rows == std::vector<float>(4, 0.0f));
  const std::vector<float> row_grads = {1, 2, 3, 4};
  REQUIRE(w.SetRowGradients(0, ids, row_grads).ok());
  REQUIRE(w.Step(grads, 0, absl::MakeSpan(params)).ok());
  REQUIRE(w.PullRows(0, ids, absl::MakeSpan(rows)).ok());
  // The table's SGD at lr 1 on the one worker's row gradients.
  CHECK(rows == std::vector<float>{-1, -2, -3, -4});
  w.Finish();
}

}  // namespace
}  // namespace paramd
