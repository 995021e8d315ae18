// The typed layer graph of the job file: shapes inferred, tensors named,
// the shorthand's meaning kept, and every bad layer refused naming its
// index, its field, the shapes involved and the line.
#include <catch2/catch.hpp>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/config/job_file.h"
#include "common/config/layer_shapes.h"
#include "common/model/model_spec.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

using testing::JobOptions;
using testing::JobYaml;
using testing::JobYamlError;
using testing::NewTempDir;
using testing::WriteFile;

constexpr char kImage[] = "  input: {channels: 1, height: 28, width: 28}\n";
// One embedding table, for the sparse fronts.
constexpr char kTable[] =
    "  embeddings:\n    - {name: pixels, rows: 100000, dim: 32}\n";

// A job whose model.layers is `layers` (YAML list items, one per line) on
// `input` (a line of the model section, or empty).
std::string GraphJob(const std::string& layers,
                     const std::string& input = kImage) {
  JobOptions o;
  o.layers = "\n" + layers;
  o.model_extra = input;
  return JobYaml(o);
}

absl::StatusOr<JobConfig> Load(const std::string& yaml) {
  return LoadJobConfig(WriteFile(NewTempDir() + "/job.yaml", yaml));
}

constexpr char kCnn[] =
    "    - conv2d: {out: 8, kernel: 3, padding: 1}\n"
    "    - relu\n"
    "    - max_pool2d: {kernel: 2}\n"
    "    - conv2d: {out: 16, kernel: 3, stride: 2}\n"
    "    - batch_norm: {momentum: 0.2}\n"
    "    - avg_pool2d: {kernel: 2, stride: 1}\n"
    "    - flatten\n"
    "    - dropout: {p: 0.25}\n"
    "    - dense: {out: 10}\n";

TEST_CASE("a CNN's shapes are inferred layer by layer", "[config][layers]") {
  absl::StatusOr<JobConfig> c = Load(GraphJob(kCnn));
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  absl::StatusOr<LayerGraph> g = InferLayerGraph(c->model);
  REQUIRE(g.ok());
  REQUIRE(g->layers.size() == 9);
  CHECK_FALSE(g->dense_stack);
  CHECK(g->input.ToString() == "1×28×28");
  CHECK(g->layers[0].out.ToString() == "8×28×28");  // padding 1 keeps 28
  CHECK(g->layers[2].out.ToString() == "8×14×14");  // pool: stride = kernel
  CHECK(g->layers[3].out.ToString() == "16×6×6");   // (14 - 3) / 2 + 1
  CHECK(g->layers[4].out.ToString() == "16×6×6");   // batch norm
  CHECK(g->layers[4].config.momentum == 0.2);
  CHECK(g->layers[4].config.eps == 1e-5);
  CHECK(g->layers[5].out.ToString() == "16×5×5");
  CHECK(g->layers[6].out.ToString() == "flat 400");
  CHECK(g->layers[7].config.p == 0.25);
  CHECK(g->classes() == 10);
  CHECK(g->layers[0].name == "conv1");
  CHECK(g->layers[3].name == "conv2");
  CHECK(g->layers[4].name == "bn1");
  CHECK(g->layers[8].name == "fc1");
  CHECK(g->layers[1].name.empty());
  CHECK(DescribeGraph(*g) ==
        "1×28×28 conv2d(8, k3, s1, p1) relu max_pool2d(k2, s2) "
        "conv2d(16, k3, s2, p0) batch_norm(0.2) avg_pool2d(k2, s1) flatten "
        "dropout(0.25) dense(10)");
}

TEST_CASE("a graph's tensors are named and shaped per layer",
          "[config][layers]") {
  absl::StatusOr<JobConfig> c = Load(GraphJob(kCnn));
  REQUIRE(c.ok());
  const ModelSpec spec = BuildModelSpec(c->model);
  REQUIRE(spec.tensors.size() == 10);
  CHECK(spec.tensors[0].name == "conv1.weight");
  CHECK(spec.tensors[0].shape == std::vector<int64_t>{8, 1, 3, 3});
  CHECK(spec.tensors[0].init_bound == Approx(1 / 3.0));
  CHECK(spec.tensors[1].name == "conv1.bias");
  CHECK(spec.tensors[2].name == "conv2.weight");
  CHECK(spec.tensors[2].shape == std::vector<int64_t>{16, 8, 3, 3});
  const char* bn[] = {"bn1.weight", "bn1.bias", "bn1.running_mean",
                      "bn1.running_var"};
  const float init[] = {1, 0, 0, 1};
  for (int i = 0; i < 4; ++i) {
    const TensorSpec& t = spec.tensors[4 + i];
    CHECK(t.name == bn[i]);
    CHECK(t.shape == std::vector<int64_t>{16});
    CHECK(t.init_constant);
    CHECK(t.init_value == init[i]);
    CHECK((t.kind == TensorKind::kStatistic) == (i >= 2));
  }
  CHECK(spec.tensors[8].name == "fc1.weight");
  CHECK(spec.tensors[8].shape == std::vector<int64_t>{400, 10});
  CHECK(spec.tensors[9].shape == std::vector<int64_t>{10});
  CHECK(spec.total_elements == 8 * 9 + 8 + 16 * 72 + 16 + 4 * 16 + 4000 + 10);
}

TEST_CASE("each layer finds its tensors in the flat buffer by name",
          "[config][layers]") {
  absl::StatusOr<JobConfig> c = Load(GraphJob(kCnn));
  REQUIRE(c.ok());
  absl::StatusOr<LayerGraph> graph = InferLayerGraph(c->model);
  REQUIRE(graph.ok());
  const ModelSpec spec = GraphModelSpec(*graph);
  // The graph's own spec is the job's.
  const ModelSpec job = BuildModelSpec(c->model);
  REQUIRE(spec.tensors.size() == job.tensors.size());
  for (size_t t = 0; t < spec.tensors.size(); ++t) {
    CHECK(spec.tensors[t].name == job.tensors[t].name);
  }
  CHECK(spec.total_elements == job.total_elements);
  const FlatLayout layout(spec);
  const std::vector<LayerTensors> tensors =
      LayerTensors::Of(*graph, spec, layout);
  REQUIRE(tensors.size() == graph->layers.size());
  int with_tensors = 0;
  for (size_t l = 0; l < graph->layers.size(); ++l) {
    const GraphLayer& layer = graph->layers[l];
    INFO("layer " << l << " " << layer.name);
    if (layer.name.empty()) {
      CHECK(tensors[l].offset("weight") == -1);
      continue;
    }
    ++with_tensors;
    for (size_t t = 0; t < spec.tensors.size(); ++t) {
      const std::string& name = spec.tensors[t].name;
      if (name.rfind(layer.name + ".", 0) != 0) continue;
      CHECK(tensors[l].offset(name.substr(layer.name.size() + 1)) ==
            layout.offset[t]);
    }
    CHECK(tensors[l].offset("no_such_tensor") == -1);
  }
  CHECK(with_tensors == 4);  // conv1, conv2, bn1, fc1
  CHECK(tensors[0].offset("bias") == 8 * 9);
}

TEST_CASE("the width shorthand keeps its meaning", "[config][layers]") {
  JobOptions o;
  o.layers = "[784, 64, 10]";
  absl::StatusOr<JobConfig> c = Load(JobYaml(o));
  REQUIRE(c.ok());
  absl::StatusOr<LayerGraph> g = InferLayerGraph(c->model);
  REQUIRE(g.ok());
  CHECK(g->dense_stack);
  CHECK(DescribeGraph(*g) == "784-64-10");
  REQUIRE(g->layers.size() == 3);
  CHECK(g->layers[1].config.kind == LayerKind::kRelu);
  // The same tensors as the typed graph dense 64, relu, dense 10.
  absl::StatusOr<JobConfig> typed = Load(
      GraphJob("    - dense: {out: 64}\n    - relu\n    - dense: {out: 10}\n",
               "  input: 784\n"));
  INFO(typed.status().ToString());
  REQUIRE(typed.ok());
  const ModelSpec a = BuildModelSpec(c->model);
  const ModelSpec b = BuildModelSpec(typed->model);
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    CHECK(a.tensors[i].name == b.tensors[i].name);
    CHECK(a.tensors[i].shape == b.tensors[i].shape);
    CHECK(a.tensors[i].init_bound == b.tensors[i].init_bound);
  }
}

TEST_CASE("every bad layer is refused naming its index, field and shapes",
          "[config][layers]") {
  struct Case {
    std::string layers, input, expect;
  };
  const std::string flat = "    - flatten\n    - dense: {out: 10}\n";
  const Case cases[] = {
      {"    - conv2d: {out: 4, kernel: 30}\n" + flat, kImage,
       "model.layers[0] (conv2d).kernel: 30×30 is larger than its input "
       "1×28×28"},
      {"    - conv2d: {out: 4, kernel: 29, padding: 0}\n" + flat, kImage,
       "larger than its input 1×28×28"},
      {"    - conv2d: {out: 4, kernel: 3, padding: 3}\n" + flat, kImage,
       "model.layers[0] (conv2d).padding: must be in [0, kernel), [0, 3), "
       "not 3"},
      {"    - conv2d: {out: 4, kernel: 3, stride: 0}\n" + flat, kImage,
       "model.layers[0] (conv2d).stride: must be in [1, 1024], not 0"},
      {"    - conv2d: {out: 0, kernel: 3}\n" + flat, kImage,
       "model.layers[0] (conv2d).out: output channels must be in [1, 4096]"},
      {"    - conv2d: {out: 4, kernel: 3}\n    - dense: {out: 10}\n", kImage,
       "model.layers[1] (dense): its input is an image 4×26×26; put a "
       "flatten layer before it"},
      {"    - dense: {out: 10}\n", "  input: 784\n", ""},
      {"    - conv2d: {out: 4, kernel: 3}\n" + flat, "  input: 784\n",
       "model.layers[0] (conv2d): needs an image input (channels, height, "
       "width); its input is flat 784"},
      {"    - max_pool2d: {kernel: 2}\n    - max_pool2d: {kernel: 16}\n" + flat,
       kImage,
       "model.layers[1] (max_pool2d).kernel: 16×16 is larger than "
       "its input 1×14×14"},
      {"    - flatten\n    - dropout: {p: 1.5}\n    - dense: {out: 10}\n",
       kImage, "model.layers[1] (dropout).p: must be in [0, 1), not 1.5"},
      {"    - conv2d: {out: 4, kernel: 3}\n", kImage,
       "model.layers[0] (conv2d): the last layer must give a flat vector of "
       "at least 2 class scores (the loss is softmax cross-entropy); it "
       "gives 4×26×26"},
      {"    - flatten\n    - relu\n", kImage,
       "model.layers: has no trainable layer (dense or conv2d)"},
      {"    - conv3d: {out: 4}\n" + flat, kImage,
       "model.layers[0]: unknown layer kind 'conv3d' (expected: dense, "
       "conv2d, max_pool2d, avg_pool2d, relu, dropout, flatten, "
       "batch_norm, bottom_dense, embedding_bag or embedding_concat)"},
      {"    - flatten\n    - embedding_bag: {table: t}\n    - dense: {out: "
       "10}\n",
       kImage,
       "model.layers[1] (embedding_bag): must be the first layer: it reads "
       "each sample's ids"},
      {"    - batch_norm: {momentum: 0}\n" + flat, kImage,
       "model.layers[0] (batch_norm).momentum: must be in (0, 1], not 0"},
      {"    - batch_norm: {eps: 2}\n" + flat, kImage,
       "model.layers[0] (batch_norm).eps: must be in (0, 1), not 2"},
      {"    - batch_norm\n" + flat, kImage, ""},
      {"    - dense: {out: 10, kernel: 3}\n", "  input: 784\n",
       "model.layers[0].dense.kernel: unknown key (allowed here: out)"},
      {"    - dense\n", "  input: 784\n",
       "model.layers[0].dense: missing required field out"},
      {"    - conv2d: {out: 4}\n" + flat, kImage,
       "model.layers[0].conv2d.kernel: missing required field"},
      {"    - {dense: {out: 4}, relu: null}\n" + flat, kImage,
       "model.layers[0]: expected a layer: a kind"},
      {flat, "", "model.input: a typed model.layers needs the input's shape"},
      {flat, "  input: {channels: 1, height: 0, width: 28}\n",
       "model.input.height: must be in [1, 65536]"},
  };
  for (const Case& c : cases) {
    const std::string yaml = GraphJob(c.layers, c.input);
    INFO(yaml);
    const std::string error = JobYamlError(yaml);
    if (c.expect.empty()) {
      CHECK(error.empty());
      continue;
    }
    CHECK_THAT(error, Catch::Contains(c.expect));
  }
}

TEST_CASE("a refusal points at the line of the layer's field",
          "[config][layers]") {
  const std::string yaml = GraphJob(
      "    - conv2d: {out: 4, kernel: 3}\n"
      "    - max_pool2d:\n"
      "        kernel: 40\n"
      "    - flatten\n    - dense: {out: 10}\n");
  const std::string error = JobYamlError(yaml);
  int line = 1;
  for (size_t i = 0; i < yaml.find("kernel: 40"); ++i) line += yaml[i] == '\n';
  CHECK_THAT(error, Catch::Contains(absl::StrCat(":", line,
                                                 ": model.layers[1] "
                                                 "(max_pool2d).kernel")));
}

TEST_CASE(
    "model.input is for typed layers only; an embedding model's typed layers "
    "start with its front",
    "[config][layers]") {
  JobOptions o;
  o.model_extra = "  input: 784\n";
  CHECK_THAT(JobYamlError(JobYaml(o)),
             Catch::Contains("model.input: applies to a typed model.layers "
                             "only"));
  JobOptions bag;
  bag.model_type = "embedding_bag";
  bag.layers = "\n    - dense: {out: 10}\n";
  bag.model_extra = kTable;
  CHECK_THAT(JobYamlError(JobYaml(bag)),
             Catch::Contains("a embedding_bag model's typed layers start with "
                             "its sparse front: model.layers[0] must be "
                             "embedding_bag"));
}

// A sparse front as model.layers[0]: the dense layers after it read its
// width; the table and combiner come from the layer.
TEST_CASE("embedding_bag and embedding_concat are the graph's sparse front",
          "[config][layers]") {
  JobOptions o;
  o.model_type = "embedding_bag";
  o.model_extra =
      std::string(kTable) + "  features: {levels: 4, pairs: true}\n";
  o.layers =
      "\n    - embedding_bag: {table: pixels, combiner: sum}\n"
      "    - dense: {out: 64}\n    - relu\n    - dense: {out: 10}\n";
  absl::StatusOr<JobConfig> c = Load(JobYaml(o));
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  absl::StatusOr<LayerGraph> g = InferLayerGraph(c->model);
  REQUIRE(g.ok());
  REQUIRE(g->front.has_value());
  CHECK(g->front->kind == LayerKind::kEmbeddingBag);
  CHECK(g->front->table == 0);
  CHECK(g->front->dim == 32);
  CHECK_FALSE(g->front->mean);
  CHECK(g->input.ToString() == "flat 32");
  REQUIRE(g->layers.size() == 3);  // The dense layers only.
  CHECK(DescribeGraph(*g) ==
        "embedding_bag(table 0, dim 32, sum) flat 32 dense(64) relu "
        "dense(10)");
  // The same tensors, table and front as the shorthand's (combiner sum).
  JobOptions shorthand = o;
  shorthand.layers = "[32, 64, 10]";
  shorthand.model_extra =
      std::string(kTable) +
      "  features: {levels: 4, pairs: true, combiner: sum}\n";
  absl::StatusOr<JobConfig> s = Load(JobYaml(shorthand));
  INFO(s.status().ToString());
  REQUIRE(s.ok());
  absl::StatusOr<LayerGraph> sg = InferLayerGraph(s->model);
  REQUIRE(sg.ok());
  REQUIRE(sg->front.has_value());
  CHECK(sg->front->mean == g->front->mean);
  CHECK(sg->front->dim == g->front->dim);
  const ModelSpec a = BuildModelSpec(c->model), b = BuildModelSpec(s->model);
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    CHECK(a.tensors[i].name == b.tensors[i].name);
    CHECK(a.tensors[i].shape == b.tensors[i].shape);
  }
  REQUIRE(a.tables.size() == 1);
  CHECK(a.tables[0].name == "pixels");
  CHECK(a.tables[0].rows == b.tables[0].rows);

  // Refusals, each naming the layer and its field, or the section.
  struct Case {
    std::string type, layers, extra, expect;
  };
  const std::string dense = "    - dense: {out: 10}\n";
  const Case cases[] = {
      {"embedding_bag", "    - embedding_bag: {table: words}\n" + dense, kTable,
       "model.layers[0] (embedding_bag).table: no table 'words' in "
       "model.embeddings (it declares pixels)"},
      {"embedding_bag",
       "    - embedding_bag: {table: pixels, combiner: max}\n" + dense, kTable,
       "model.layers[0] (embedding_bag).combiner: unknown combiner 'max' "
       "(expected: mean or sum)"},
      {"embedding_bag", "    - embedding_bag: {combiner: sum}\n" + dense,
       kTable, "model.layers[0].embedding_bag.table: missing required field"},
      {"embedding_bag", "    - embedding_bag: {table: pixels}\n", kTable,
       "model.layers[0] (embedding_bag): needs dense layers after it"},
      {"embedding_concat", "    - embedding_concat: {table: pixels}\n" + dense,
       kTable, "model.layers[0].embedding_concat.fields: missing required"},
      {"embedding_concat",
       "    - embedding_concat: {table: pixels, fields: 0}\n" + dense, kTable,
       "model.layers[0] (embedding_concat).fields: must be in [1, 1024], not "
       "0"},
      {"embedding_concat", "    - embedding_bag: {table: pixels}\n" + dense,
       kTable,
       "model.type: embedding_concat, but model.layers[0] is embedding_bag, "
       "which makes the model embedding_bag"},
      {"mlp", "    - embedding_bag: {table: pixels}\n" + dense, kTable,
       "model.type: mlp, but model.layers[0] is embedding_bag"},
      {"embedding_bag", "    - embedding_bag: {table: pixels}\n" + dense,
       std::string(kTable) + "  input: 784\n",
       "model.input: does not apply when model.layers[0] is embedding_bag"},
      {"embedding_bag", "    - embedding_bag: {table: pixels}\n" + dense,
       std::string(kTable) + "  features: {combiner: sum}\n",
       "model.features.combiner: with typed layers the embedding_bag layer "
       "says it"},
      {"embedding_bag", "    - embedding_bag: {table: pixels}\n" + dense, "",
       "model.embeddings: an embedding_bag model needs one table"},
      {"embedding_bag",
       "    - embedding_bag: {table: pixels, fields: 26}\n" + dense, kTable,
       "model.layers[0].embedding_bag.fields: applies to data.format clicks "
       "only"},
      {"embedding_concat",
       "    - embedding_concat: {table: pixels, fields: 26}\n" + dense, kTable,
       "data.format: an embedding_concat model reads a click log's fields"},
      {"embedding_concat",
       "    - embedding_concat: {table: pixels, fields: 3, dense: 1025}\n" +
           dense,
       kTable,
       "model.layers[0] (embedding_concat).dense: must be in [0, 1024], not "
       "1025"},
      {"embedding_bag",
       "    - embedding_bag: {table: pixels, dense: 13}\n" + dense, kTable,
       "model.layers[0].embedding_bag"},
  };
  for (const Case& k : cases) {
    JobOptions j;
    j.model_type = k.type;
    j.layers = "\n" + k.layers;
    j.model_extra = k.extra;
    const std::string yaml = JobYaml(j);
    INFO(yaml);
    CHECK_THAT(JobYamlError(yaml), Catch::Contains(k.expect));
  }
}

TEST_CASE("the shipped CNN jobs validate", "[config][layers]") {
  const std::pair<const char*, PolicyType> jobs[] = {
      {"configs/fashion_mnist_cnn.yaml", PolicyType::kSync},
      {"configs/fashion_mnist_cnn_async.yaml", PolicyType::kAsync},
      {"configs/fashion_mnist_cnn_ssp.yaml", PolicyType::kSsp},
  };
  for (const auto& [path, policy] : jobs) {
    absl::StatusOr<JobConfig> c = LoadJobConfig(path);
    INFO(path << ": " << c.status().ToString());
    REQUIRE(c.ok());
    CHECK(c->policy.type == policy);
    absl::StatusOr<LayerGraph> g = InferLayerGraph(c->model);
    REQUIRE(g.ok());
    CHECK(g->input.ToString() == "1×28×28");
    CHECK(g->classes() == 10);
    CHECK(BuildModelSpec(c->model).total_elements == 421642);
  }
}

}  // namespace
}  // namespace paramd
