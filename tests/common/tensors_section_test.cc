// model.type tensors: a framework's model listed tensor by tensor, inline
// or in a tensors file, becomes the spec the servers plan; every bad entry
// is refused naming its field, the tensor and the line (of the file it is
// in).
#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/config/job_file.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

using Catch::Matchers::Contains;
using testing::JobOptions;
using testing::JobYaml;
using testing::JobYamlError;
using testing::NewTempDir;
using testing::WriteFile;

// A job whose model section is type tensors plus `model_lines`.
std::string TensorsJob(const std::string& model_lines) {
  JobOptions o;
  o.model_type = "tensors";
  o.layers = "";
  o.model_extra = model_lines;
  return JobYaml(o);
}

constexpr char kTwoTensors[] =
    "  tensors:\n"
    "    - {name: conv1.weight, shape: [8, 1, 3, 3], init: uniform, bound: "
    "0.25}\n"
    "    - {name: bn1.weight, shape: [8], init: constant, value: 1}\n"
    "    - {name: scale, shape: [], init: constant, value: 0.5}\n";

TEST_CASE("an inline tensor list becomes the spec, in order",
          "[config][tensors]") {
  const std::string dir = NewTempDir();
  absl::StatusOr<JobConfig> c =
      LoadJobConfig(WriteFile(dir + "/job.yaml", TensorsJob(kTwoTensors)));
  REQUIRE(c.ok());
  CHECK(c->model.type == ModelType::kTensors);
  const ModelSpec spec = BuildModelSpec(c->model);
  REQUIRE(spec.tensors.size() == 3);
  CHECK(spec.tensors[0].name == "conv1.weight");
  CHECK(spec.tensors[0].shape == std::vector<int64_t>{8, 1, 3, 3});
  CHECK(spec.tensors[0].num_elements == 72);
  CHECK(spec.tensors[0].init_bound == 0.25f);
  CHECK_FALSE(spec.tensors[0].init_constant);
  CHECK(spec.tensors[1].init_constant);
  CHECK(spec.tensors[1].init_value == 1.0f);
  CHECK(spec.tensors[2].num_elements == 1);
  CHECK(spec.total_elements == 81);
  CHECK(spec.tables.empty());
  std::vector<float> values(8);
  InitTensorRange(spec.tensors[1], 7, 1, 0, absl::MakeSpan(values));
  CHECK(values == std::vector<float>(8, 1.0f));
  InitTensorRange(spec.tensors[0], 7, 0, 0, absl::MakeSpan(values));
  for (float v : values) CHECK(std::abs(v) <= 0.25f);
  absl::StatusOr<PartitionPlan> plan =
      PartitionPlan::Build(spec, c->chunk_bytes, c->num_shards());
  REQUIRE(plan.ok());
}

TEST_CASE("a tensor of kind statistic is a statistic of the spec and plan",
          "[config][tensors]") {
  const std::string dir = NewTempDir();
  auto tensors = [](const char* kind) {
    return TensorsJob(absl::StrCat(
        "  tensors:\n"
        "    - {name: bn.weight, shape: [8], init: constant, value: 1}\n"
        "    - {name: bn.running_var, shape: [8], init: constant, value: 1, "
        "kind: ",
        kind, "}\n"));
  };
  absl::StatusOr<JobConfig> statistic =
      LoadJobConfig(WriteFile(dir + "/a.yaml", tensors("statistic")));
  absl::StatusOr<JobConfig> trainable =
      LoadJobConfig(WriteFile(dir + "/b.yaml", tensors("trainable")));
  REQUIRE(statistic.ok());
  REQUIRE(trainable.ok());
  const ModelSpec a = BuildModelSpec(statistic->model);
  const ModelSpec b = BuildModelSpec(trainable->model);
  CHECK(a.tensors[0].kind == TensorKind::kTrainable);
  CHECK(a.tensors[1].kind == TensorKind::kStatistic);
  CHECK(b.tensors[1].kind == TensorKind::kTrainable);
  // Workers and servers that disagree on a kind disagree on the plan.
  absl::StatusOr<PartitionPlan> pa = PartitionPlan::Build(a, 1024, 2);
  absl::StatusOr<PartitionPlan> pb = PartitionPlan::Build(b, 1024, 2);
  REQUIRE(pa.ok());
  REQUIRE(pb.ok());
  CHECK(pa->fingerprint() != pb->fingerprint());
}

TEST_CASE("a tensors file beside the job gives the same spec",
          "[config][tensors]") {
  const std::string dir = NewTempDir();
  WriteFile(dir + "/model.tensors.yaml",
            std::string("# written by python3 -m paramd.torch.spec\n") +
                "tensors:\n" +
                "  - {name: conv1.weight, shape: [8, 1, 3, 3], init: "
                "uniform, bound: 0.25}\n"
                "  - {name: bn1.weight, shape: [8], init: constant, value: "
                "1}\n"
                "  - {name: scale, shape: [], init: constant, value: 0.5}\n");
  absl::StatusOr<JobConfig> from_file = LoadJobConfig(WriteFile(
      dir + "/job.yaml", TensorsJob("  tensors_file: model.tensors.yaml\n")));
  REQUIRE(from_file.ok());
  absl::StatusOr<JobConfig> inline_list = LoadJobConfig(
      WriteFile(NewTempDir() + "/job.yaml", TensorsJob(kTwoTensors)));
  REQUIRE(inline_list.ok());
  const ModelSpec a = BuildModelSpec(from_file->model);
  const ModelSpec b = BuildModelSpec(inline_list->model);
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    CHECK(a.tensors[i].name == b.tensors[i].name);
    CHECK(a.tensors[i].shape == b.tensors[i].shape);
  }
  const PartitionPlan pa = *PartitionPlan::Build(a, from_file->chunk_bytes, 2);
  const PartitionPlan pb =
      *PartitionPlan::Build(b, inline_list->chunk_bytes, 2);
  CHECK(pa.fingerprint() == pb.fingerprint());
}

TEST_CASE("a framework's model may read embedding tables by row",
          "[config][tensors]") {
  const std::string dir = NewTempDir();
  absl::StatusOr<JobConfig> c = LoadJobConfig(WriteFile(
      dir + "/job.yaml",
      TensorsJob(std::string(kTwoTensors) +
                 "  embeddings:\n"
                 "    - {name: words, rows: 1000, dim: 8}\n"
                 "    - {name: tags, rows: 50, dim: 4, optimizer: {type: "
                 "sgd, learning_rate: 0.1}}\n")));
  REQUIRE(c.ok());
  const ModelSpec spec = BuildModelSpec(c->model);
  REQUIRE(spec.tables.size() == 2);
  CHECK(spec.tables[1].name == "tags");
  CHECK(spec.tables[1].dim == 4);
  CHECK(spec.tensors.size() == 3);
  CHECK_THAT(JobYamlError(
                 TensorsJob(std::string(kTwoTensors) +
                            "  embeddings:\n    - {name: w, rows: 10, dim: 2}\n"
                            "    - {name: w, rows: 10, dim: 2}\n")),
             Contains("model.embeddings[1].name: table 'w' is declared "
                      "twice"));
}

TEST_CASE("bad tensor lists are refused naming the field and tensor",
          "[config][tensors]") {
  struct Case {
    std::string model_lines;
    std::string expected;
  };
  const Case cases[] = {
      {"  tensors: []\n", "model.tensors: expected a non-empty list"},
      {"  tensors:\n    - {shape: [3]}\n",
       "model.tensors[0].name: missing required field"},
      {"  tensors:\n    - {name: w}\n",
       "model.tensors[0].shape: missing required field"},
      {"  tensors:\n    - {name: w, shape: [3, 0], bound: 1}\n",
       "model.tensors[0].shape[1]: expected a positive integer dimension"},
      {"  tensors:\n    - {name: w, shape: 3, bound: 1}\n",
       "model.tensors[0].shape: expected a list of dimensions"},
      {"  tensors:\n    - {name: w, shape: [3], bound: 1}\n"
       "    - {name: w, shape: [4], bound: 1}\n",
       "model.tensors[1].name: tensor 'w' is listed twice"},
      {"  tensors:\n    - {name: w, shape: [3], init: normal}\n",
       "model.tensors[0].init: unknown initialiser 'normal' (expected: "
       "uniform or constant)"},
      {"  tensors:\n    - {name: w, shape: [3], init: constant, bound: 1}\n",
       "model.tensors[0].bound: does not apply to init constant"},
      {"  tensors:\n    - {name: w, shape: [3]}\n",
       "model.tensors[0].bound: missing required field"},
      {"  tensors:\n    - {name: w, shape: [3], bound: -1}\n",
       "model.tensors[0].bound: must be in [0, 1e6)"},
      {"  tensors:\n    - {name: w, shape: [65536, 65536], bound: 1}\n",
       "model.tensors[0].shape: tensor 'w' has more than 2147483647 "
       "elements"},
      {"  tensors:\n    - {name: w, shape: [3], bound: 1, stride: 2}\n",
       "model.tensors[0].stride: unknown key"},
      {"  tensors:\n    - {name: w, shape: [3], bound: 1, kind: buffer}\n",
       "model.tensors[0].kind: unknown kind 'buffer' (expected: trainable or "
       "statistic)"},
      {"  layers: [784, 10]\n  tensors:\n    - {name: w, shape: [3], bound: "
       "1}\n",
       "model.layers: does not apply to model.type tensors"},
      {"  tensors_file: nowhere.yaml\n", "model.tensors_file: cannot read '"},
      {"  tensors_file: a.yaml\n  tensors:\n    - {name: w, shape: [3], "
       "bound: 1}\n",
       "model.tensors_file: give model.tensors or model.tensors_file, not "
       "both"},
  };
  for (const Case& c : cases) {
    INFO(c.model_lines);
    CHECK_THAT(JobYamlError(TensorsJob(c.model_lines)), Contains(c.expected));
  }
  JobOptions mlp;
  mlp.model_extra = "  tensors:\n    - {name: w, shape: [3], bound: 1}\n";
  CHECK_THAT(JobYamlError(JobYaml(mlp)),
             Contains("model.tensors: applies to model.type tensors only"));
  mlp.model_extra = "  initial_values: rank0\n";
  CHECK_THAT(
      JobYamlError(JobYaml(mlp)),
      Contains("model.initial_values: applies to model.type tensors only"));
  CHECK_THAT(JobYamlError(TensorsJob(
                 "  initial_values: worker\n  tensors:\n    - {name: w, "
                 "shape: [3], bound: 1}\n")),
             Contains("model.initial_values: unknown source 'worker' "
                      "(expected: servers or rank0)"));
  const std::string dir = NewTempDir();
  absl::StatusOr<JobConfig> rank0 = LoadJobConfig(WriteFile(
      dir + "/job.yaml",
      TensorsJob("  initial_values: rank0\n" + std::string(kTwoTensors))));
  REQUIRE(rank0.ok());
  CHECK(rank0->model.initial_values_from_rank0);
}

TEST_CASE("an error in a tensors file names that file and its line",
          "[config][tensors]") {
  const std::string dir = NewTempDir();
  const std::string file =
      WriteFile(dir + "/model.tensors.yaml",
                "tensors:\n  - {name: w, shape: [3], bound: 1}\n"
                "  - {name: v, shape: [2, -4], bound: 1}\n");
  const std::string job = WriteFile(
      dir + "/job.yaml", TensorsJob("  tensors_file: model.tensors.yaml\n"));
  absl::StatusOr<JobConfig> c = LoadJobConfig(job);
  REQUIRE_FALSE(c.ok());
  CHECK_THAT(std::string(c.status().message()),
             Contains(file + ":3: tensors[1].shape[1]: expected a positive "
                             "integer dimension"));
  WriteFile(file, "tensors: [\n");
  c = LoadJobConfig(job);
  REQUIRE_FALSE(c.ok());
  CHECK_THAT(std::string(c.status().message()),
             Contains(file + ":") && Contains("malformed YAML"));
  WriteFile(file, "layers: [3]\n");
  c = LoadJobConfig(job);
  REQUIRE_FALSE(c.ok());
  CHECK_THAT(std::string(c.status().message()),
             Contains("layers: unknown key"));
}

}  // namespace
}  // namespace paramd
