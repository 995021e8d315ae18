// The model's layer graph with every layer's shapes inferred and checked:
// what the job file's parser refuses a bad layer with, what the model spec
// derives its tensors from (common/model/model_spec.h), and what the
// worker's layers are built from (worker/model/sequential.h).
//
// A graph is a chain: model.input's shape, then each layer's output in
// turn, ending in a flat vector of class scores that a softmax
// cross-entropy loss reads. The width shorthand (model.layers: [784, 256,
// 10]) is the graph dense 256, relu, dense 10 on a flat input of 784.
#ifndef PARAMD_COMMON_CONFIG_LAYER_SHAPES_H_
#define PARAMD_COMMON_CONFIG_LAYER_SHAPES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/job_config.h"

namespace paramd {

// One sample's activation: channels × height × width, or a flat vector of
// `c` features (h = w = 1, image false).
struct ActShape {
  int c = 0, h = 1, w = 1;
  bool image = false;
  int64_t size() const { return int64_t{c} * h * w; }
  std::string ToString() const;  // "32×14×14" or "flat 784"
};

struct GraphLayer {
  LayerConfig config;
  ActShape in, out;
  // Layers with tensors (dense, conv2d, batch_norm, bottom_dense): the
  // prefix of their tensors' names, e.g. "fc2", "conv1", "bn1", "bottom1"
  // (numbered per kind from 1); empty otherwise.
  std::string name;
  // bottom_dense: the leading values of each sample it passes through as
  // they are (the fields' rows); it transforms the rest.
  int passthrough = 0;
};

// A sparse front: each sample's ids (hashed image features, or a click
// log's fields) select rows of an embedding table, and the rows combined
// are the flat input of the dense layers after it. From model.layers[0]
// (embedding_bag, embedding_concat) or from an embedding model's
// shorthand (model.type embedding_bag / embedding_concat, model.features).
struct SparseFront {
  LayerKind kind = LayerKind::kEmbeddingBag;
  int table = 0;     // Index in model.embeddings.
  int dim = 0;       // The table's.
  bool mean = true;  // embedding_bag: the rows' mean (false: their sum).
  // Ids per sample from a click log (embedding_concat always; an
  // embedding_bag only with data.format clicks, else 0: an image's
  // features).
  int fields = 0;
  // embedding_concat: a click log's dense features per sample, after the
  // fields' rows in the front's output.
  int dense = 0;
  // The dense layers' input: dim (bag) or fields × dim + dense (concat).
  int width() const {
    return kind == LayerKind::kEmbeddingConcat ? fields * dim + dense : dim;
  }
};

struct LayerGraph {
  // The dense layers' input: model.input, the shorthand's first width, or
  // the sparse front's width.
  ActShape input;
  // The dense layers (the sparse front is not among them).
  std::vector<GraphLayer> layers;
  std::optional<SparseFront> front;
  int classes() const { return layers.back().out.c; }
  // Whether the graph is the width shorthand's dense/ReLU stack.
  bool dense_stack = false;
  std::vector<int> widths;  // The stack's widths, when dense_stack.
};

// Where a graph is refused: the layer's index in model.layers (-1: the
// graph as a whole or model.input) and the field ("kernel", "out", or
// empty for the layer itself).
struct GraphError {
  int layer = -1;
  std::string field;
  std::string place;    // e.g. "model.layers[3] (conv2d).kernel"
  std::string message;  // What is wrong, without the place.
};

// The graph of `model`: its typed layers, or the shorthand's. An error
// names the layer ("model.layers[3] (conv2d).kernel: ..."), its field and
// the shapes involved; `where`, when given, receives the same place.
absl::StatusOr<LayerGraph> InferLayerGraph(const ModelConfig& model,
                                           GraphError* where = nullptr);

// One line for logs and paramctl: "784-256-128-10" for the shorthand,
// else e.g. "1×28×28 conv2d(16, k3, s1, p1) relu max_pool2d(k2, s2) ...".
std::string DescribeGraph(const LayerGraph& graph);

}  // namespace paramd

#endif  // PARAMD_COMMON_CONFIG_LAYER_SHAPES_H_
