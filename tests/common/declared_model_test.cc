// A framework job's model declared by its workers (WithDeclaredModel,
// SameDeclaredModel): a job file without a tensor list or optimizer
// section takes them from a declaration, every bad declaration is refused
// naming its line and field, and a later declaration is compared with the
// one taken.
#include <catch2/catch.hpp>
#include <string>

#include "common/config/job_file.h"
#include "common/model/model_spec.h"

namespace paramd {
namespace {

using Catch::Matchers::Contains;

// A tensors job with `model_extra` in its model section and `optimizer`
// (a whole section, or nothing).
JobConfig Job(const std::string& model_extra, const std::string& optimizer,
              const std::string& more = "") {
  const std::string text =
      "job: {id: declared, seed: 1}\n"
      "cluster: {servers: [\"127.0.0.1:0\"], workers: 2}\n"
      "model:\n  type: tensors\n" +
      model_extra +
      "training: {epochs: 1, batch_size: 8}\n"
      "policy: {type: sync}\n" +
      optimizer + more;
  absl::StatusOr<JobConfig> c = ParseJobConfig(text, "job.yaml");
  INFO(text);
  REQUIRE(c.ok());
  return *c;
}

constexpr char kTensors[] =
    "tensors:\n"
    "  - {name: fc.weight, shape: [4, 3], init: uniform, bound: 0.5}\n"
    "  - {name: bn.running_mean, shape: [4], init: constant, value: 0, "
    "kind: statistic}\n";
constexpr char kAdam[] =
    "optimizer: {type: adam, learning_rate: 0.001, weight_decay: 0.01}\n";

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST_CASE("a job without tensors or optimizer takes them from a declaration",
          "[config][declared]") {
  const JobConfig job = Job("", "");
  CHECK(job.model.tensors_declared);
  CHECK(job.optimizer_declared);
  CHECK(job.awaits_declaration());
  CHECK(job.model.tensors.empty());
  absl::StatusOr<JobConfig> declared =
      WithDeclaredModel(job, std::string(kTensors) + kAdam);
  REQUIRE(declared.ok());
  CHECK_FALSE(declared->awaits_declaration());
  REQUIRE(declared->model.tensors.size() == 2);
  CHECK(declared->model.tensors[1].statistic);
  CHECK(declared->optimizer.type == "adam");
  CHECK(declared->optimizer.weight_decay == 0.01);
  const ModelSpec spec = BuildModelSpec(declared->model);
  CHECK(spec.total_elements == 16);
  CHECK(spec.tensors[1].kind == TensorKind::kStatistic);
  // The same declaration again is the same model; another is not.
  absl::StatusOr<JobConfig> again =
      WithDeclaredModel(*declared, std::string(kTensors) + kAdam);
  REQUIRE(again.ok());
  CHECK(SameDeclaredModel(*declared, *again).ok());
  absl::StatusOr<JobConfig> wider = WithDeclaredModel(
      *declared,
      "tensors:\n  - {name: fc.weight, shape: [5, 3], bound: 0.5}\n" +
          std::string(kAdam));
  REQUIRE(wider.ok());
  CHECK_THAT(Message(SameDeclaredModel(*declared, *wider)),
             Contains("the declared model's tensor 0 is 'fc.weight' [5, 3] "
                      "but the job's is 'fc.weight' [4, 3]"));
  absl::StatusOr<JobConfig> sgd = WithDeclaredModel(
      *declared,
      std::string(kTensors) + "optimizer: {type: sgd, learning_rate: 0.1}\n");
  REQUIRE(sgd.ok());
  CHECK_THAT(Message(SameDeclaredModel(*declared, *sgd)),
             Contains("the declared optimizer {type: sgd, learning_rate: 0.1} "
                      "is not the job's {type: adam, learning_rate: 0.001, "
                      "weight_decay: 0.01}"));
}

TEST_CASE("a job file's own tensors and optimizer are compared, not replaced",
          "[config][declared]") {
  const std::string listed =
      "  tensors:\n    - {name: fc.weight, shape: [4, 3], bound: 0.5}\n"
      "    - {name: bn.running_mean, shape: [4], init: constant, value: 0, "
      "kind: statistic}\n";
  const JobConfig job = Job(listed, kAdam);
  CHECK_FALSE(job.awaits_declaration());
  CHECK(WithDeclaredModel(job, kTensors).ok());
  CHECK_THAT(Message(WithDeclaredModel(
                         job,
                         "tensors:\n  - {name: fc.weight, shape: [4, 3], "
                         "bound: 0.5}\n")
                         .status()),
             Contains("the declared model has 1 tensors and the job's 2: the "
                      "job's 'bn.running_mean' [4] (statistic) is not in the "
                      "declared model"));
  CHECK_THAT(
      Message(WithDeclaredModel(job, std::string(kTensors) + kAdam).status()),
      Contains("the declared model:4: optimizer: the servers run the "
               "optimizer section of job.yaml"));
  // Tensors listed, optimizer left to the workers.
  const JobConfig no_optimizer = Job(listed, "");
  CHECK(no_optimizer.awaits_declaration());
  CHECK_THAT(Message(WithDeclaredModel(no_optimizer, kTensors).status()),
             Contains("optimizer: job.yaml has no optimizer section: the "
                      "workers declare it"));
  CHECK(WithDeclaredModel(no_optimizer, std::string(kTensors) + kAdam).ok());
}

TEST_CASE("bad declarations are refused naming the line and field",
          "[config][declared]") {
  const JobConfig job = Job("", "");
  struct Case {
    std::string declaration;
    std::string expected;
  };
  const Case cases[] = {
      {"", "the declared model:1: (document): expected a mapping"},
      {"tensors: [\n", "the declared model:2: (syntax)"},
      {std::string(kAdam), "the declared model:1: tensors: missing required"},
      {std::string("tensors:\n  - {name: w, shape: [0], bound: 1}\n") + kAdam,
       "the declared model:2: tensors[0].shape[0]: expected a positive "
       "integer dimension"},
      {std::string(kTensors) + "optimizer: {type: lion, learning_rate: 1}\n",
       "the declared model:4: optimizer.type: unknown optimizer 'lion'"},
      {std::string(kTensors) + kAdam + "layers: [3]\n",
       "the declared model:5: layers: unknown key"},
  };
  for (const Case& c : cases) {
    INFO(c.declaration);
    CHECK_THAT(Message(WithDeclaredModel(job, c.declaration).status()),
               Contains(c.expected));
  }
  // The job's own checks hold for a declared optimizer.
  const JobConfig compressed =
      Job("", "", "compression: {type: topk, ratio: 0.1, momentum: 0.9}\n");
  CHECK_THAT(
      Message(WithDeclaredModel(compressed, std::string(kTensors) + kAdam)
                  .status()),
      Contains("compression.momentum moves SGD's momentum"));
}

TEST_CASE("a declared model cannot be replicated, and others take none",
          "[config][declared]") {
  absl::StatusOr<JobConfig> replicated = ParseJobConfig(
      "job: {id: r}\ncluster: {servers: [\"127.0.0.1:0\"], workers: 1}\n"
      "model: {type: tensors}\ntraining: {epochs: 1, batch_size: 8}\n"
      "policy: {type: sync}\n"
      "replication: {factor: 2, backups: [\"127.0.0.1:0\"]}\n",
      "r.yaml");
  REQUIRE_FALSE(replicated.ok());
  CHECK_THAT(Message(replicated.status()),
             Contains("replication.factor: a replicated shard needs its "
                      "model in the job file"));
  absl::StatusOr<JobConfig> mlp = ParseJobConfig(
      "job: {id: m}\ncluster: {servers: [\"127.0.0.1:0\"], workers: 1}\n"
      "model: {layers: [784, 10]}\ntraining: {epochs: 1, batch_size: 8}\n"
      "policy: {type: sync}\n",
      "m.yaml");
  REQUIRE_FALSE(mlp.ok());
  CHECK_THAT(Message(mlp.status()), Contains("optimizer: missing required"));
}

}  // namespace
}  // namespace paramd
