#include "common/config/layer_shapes.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace paramd {
namespace {

// One sample's activation may hold at most this many floats (64 MiB).
constexpr int64_t kMaxActivation = int64_t{1} << 24;

class Inference {
 public:
  explicit Inference(GraphError* where) : where_(where) {}

  absl::Status Refuse(int layer, const LayerConfig& c, std::string field,
                      const std::string& message) {
    std::string place =
        absl::StrCat("model.layers[", layer, "] (", LayerKindName(c.kind), ")");
    if (!field.empty()) absl::StrAppend(&place, ".", field);
    if (where_ != nullptr) *where_ = GraphError{layer, field, place, message};
    return absl::InvalidArgumentError(absl::StrCat(place, ": ", message));
  }

  absl::Status RefuseGraph(const std::string& field,
                           const std::string& message) {
    if (where_ != nullptr) *where_ = GraphError{-1, field, field, message};
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", message));
  }

  // The output shape of layer `i` on input `in`.
  absl::StatusOr<ActShape> Out(int i, const LayerConfig& c, const ActShape& in);
  // model.layers[0] as a sparse front.
  absl::StatusOr<SparseFront> Front(const LayerConfig& c,
                                    const ModelConfig& model);
  // Layer `i`, a bottom_dense, on input `in` after `g`'s layers so far:
  // its output, and the values it passes through.
  absl::StatusOr<ActShape> Bottom(int i, const LayerConfig& c,
                                  const ActShape& in, const LayerGraph& g,
                                  int* passthrough);

 private:
  absl::Status NeedImage(int i, const LayerConfig& c, const ActShape& in) {
    if (in.image) return absl::OkStatus();
    return Refuse(i, c, "",
                  absl::StrCat("needs an image input (channels, height, "
                               "width); its input is ",
                               in.ToString()));
  }
  absl::StatusOr<ActShape> Window(int i, const LayerConfig& c,
                                  const ActShape& in, int channels);

  GraphError* where_;
};

absl::StatusOr<ActShape> Inference::Window(int i, const LayerConfig& c,
                                           const ActShape& in, int channels) {
  if (absl::Status s = NeedImage(i, c, in); !s.ok()) return s;
  if (c.kernel < 1 || c.kernel > 1024) {
    return Refuse(i, c, "kernel",
                  absl::StrCat("must be in [1, 1024], not ", c.kernel));
  }
  if (c.stride < 1 || c.stride > 1024) {
    return Refuse(i, c, "stride",
                  absl::StrCat("must be in [1, 1024], not ", c.stride));
  }
  if (c.padding < 0 || c.padding >= c.kernel) {
    return Refuse(i, c, "padding",
                  absl::StrCat("must be in [0, kernel), [0, ", c.kernel,
                               "), not ", c.padding));
  }
  const int h = in.h + 2 * c.padding, w = in.w + 2 * c.padding;
  if (c.kernel > h || c.kernel > w) {
    return Refuse(
        i, c, "kernel",
        absl::StrCat(c.kernel, "×", c.kernel, " is larger than its input ",
                     in.ToString(),
                     c.padding > 0 ? absl::StrCat(" padded by ", c.padding)
                                   : std::string()));
  }
  return ActShape{channels, (h - c.kernel) / c.stride + 1,
                  (w - c.kernel) / c.stride + 1, true};
}

absl::StatusOr<ActShape> Inference::Out(int i, const LayerConfig& c,
                                        const ActShape& in) {
  switch (c.kind) {
    case LayerKind::kDense:
      if (in.image) {
        return Refuse(i, c, "",
                      absl::StrCat("its input is an image ", in.ToString(),
                                   "; put a flatten layer before it"));
      }
      if (c.out < 1 || c.out > (1 << 20)) {
        return Refuse(i, c, "out",
                      absl::StrCat("must be in [1, 1048576], not ", c.out));
      }
      return ActShape{c.out, 1, 1, false};
    case LayerKind::kConv2d:
      if (c.out < 1 || c.out > 4096) {
        return Refuse(i, c, "out",
                      absl::StrCat("output channels must be in [1, 4096], "
                                   "not ",
                                   c.out));
      }
      return Window(i, c, in, c.out);
    case LayerKind::kMaxPool2d:
    case LayerKind::kAvgPool2d:
      return Window(i, c, in, in.c);
    case LayerKind::kRelu:
      return in;
    case LayerKind::kDropout:
      if (!(c.p >= 0 && c.p < 1)) {
        return Refuse(i, c, "p", absl::StrCat("must be in [0, 1), not ", c.p));
      }
      return in;
    case LayerKind::kFlatten:
      return ActShape{static_cast<int>(in.size()), 1, 1, false};
    case LayerKind::kBatchNorm:
      if (!(c.momentum > 0 && c.momentum <= 1)) {
        return Refuse(i, c, "momentum",
                      absl::StrCat("must be in (0, 1], not ", c.momentum));
      }
      if (!(c.eps > 0 && c.eps < 1)) {
        return Refuse(i, c, "eps",
                      absl::StrCat("must be in (0, 1), not ", c.eps));
      }
      return in;
    case LayerKind::kEmbeddingBag:
    case LayerKind::kEmbeddingConcat:
      return Refuse(i, c, "",
                    "must be the first layer: it reads each sample's ids, "
                    "which only the data gives");
    case LayerKind::kBottomDense:
      break;  // Bottom(): it needs the graph before it.
  }
  return Refuse(i, c, "", "unknown layer kind");
}

absl::StatusOr<ActShape> Inference::Bottom(int i, const LayerConfig& c,
                                           const ActShape& in,
                                           const LayerGraph& g,
                                           int* passthrough) {
  const bool after_front = g.front.has_value() &&
                           g.front->kind == LayerKind::kEmbeddingConcat &&
                           g.front->dense > 0;
  bool after_bottoms = true;
  for (const GraphLayer& l : g.layers) {
    after_bottoms = after_bottoms && l.config.kind == LayerKind::kBottomDense;
  }
  if (!after_front || !after_bottoms) {
    return Refuse(i, c, "",
                  "reads the dense features an embedding_concat layer with "
                  "`dense` appends: it must follow that layer, or another "
                  "bottom_dense");
  }
  if (c.out < 1 || c.out > (1 << 20)) {
    return Refuse(i, c, "out",
                  absl::StrCat("must be in [1, 1048576], not ", c.out));
  }
  *passthrough = g.front->fields * g.front->dim;
  return ActShape{*passthrough + c.out, 1, 1, false};
}

absl::StatusOr<SparseFront> Inference::Front(const LayerConfig& c,
                                             const ModelConfig& model) {
  SparseFront f;
  f.kind = c.kind;
  std::vector<std::string> names;
  int table = -1;
  for (size_t t = 0; t < model.embeddings.size(); ++t) {
    names.push_back(model.embeddings[t].name);
    if (model.embeddings[t].name == c.table) table = static_cast<int>(t);
  }
  if (table < 0) {
    return Refuse(
        0, c, "table",
        absl::StrCat("no table '", c.table, "' in model.embeddings",
                     names.empty()
                         ? std::string(" (it declares none)")
                         : absl::StrCat(" (it declares ",
                                        absl::StrJoin(names, ", "), ")")));
  }
  f.table = table;
  f.dim = model.embeddings[table].dim;
  if (c.kind == LayerKind::kEmbeddingBag) {
    if (c.combiner != "mean" && c.combiner != "sum") {
      return Refuse(0, c, "combiner",
                    absl::StrCat("unknown combiner '", c.combiner,
                                 "' (expected: mean or sum)"));
    }
    f.mean = c.combiner == "mean";
    // Optional: a click log's tokens per line (images give their own ids).
    if (c.fields < 0 || c.fields > 1024) {
      return Refuse(0, c, "fields",
                    absl::StrCat("must be in [1, 1024], not ", c.fields));
    }
    f.fields = c.fields;
  } else {
    if (c.fields < 1 || c.fields > 1024) {
      return Refuse(0, c, "fields",
                    absl::StrCat("must be in [1, 1024], not ", c.fields));
    }
    f.fields = c.fields;
    if (c.dense < 0 || c.dense > 1024) {
      return Refuse(0, c, "dense",
                    absl::StrCat("must be in [0, 1024], not ", c.dense));
    }
    f.dense = c.dense;
    if (int64_t{f.fields} * f.dim > kMaxActivation) {
      return Refuse(0, c, "fields",
                    absl::StrCat(f.fields, " fields of dim ", f.dim,
                                 " give more than 2^24 values per sample"));
    }
  }
  return f;
}

// The front an embedding model's shorthand implies: embeddings[0] read by
// model.features' combiner or fields, feeding the stack's first width.
absl::StatusOr<SparseFront> ShorthandFront(const ModelConfig& model) {
  if (model.embeddings.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("model.embeddings: an ",
                                                   ModelTypeName(model.type),
                                                   " model needs a table"));
  }
  SparseFront f;
  f.dim = model.embeddings[0].dim;
  if (model.type == ModelType::kEmbeddingConcat) {
    f.kind = LayerKind::kEmbeddingConcat;
    f.fields = model.features.fields;
  } else {
    f.mean = model.features.combiner == "mean";
  }
  if (model.layers.empty() || model.layers[0] != f.width()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.layers[0]: an ", ModelTypeName(model.type),
                     " model's first width must be its front's, ", f.width()));
  }
  return f;
}

absl::StatusOr<LayerGraph> FromWidths(const std::vector<int>& widths) {
  LayerGraph g;
  if (widths.size() < 2) {
    return absl::InvalidArgumentError(
        "model.layers: expected at least two widths");
  }
  g.dense_stack = true;
  g.widths = widths;
  g.input = ActShape{widths[0], 1, 1, false};
  ActShape at = g.input;
  for (size_t l = 1; l < widths.size(); ++l) {
    GraphLayer dense;
    dense.config.kind = LayerKind::kDense;
    dense.config.out = widths[l];
    dense.in = at;
    dense.out = at = ActShape{widths[l], 1, 1, false};
    dense.name = absl::StrCat("fc", l);
    g.layers.push_back(dense);
    if (l + 1 < widths.size()) {
      GraphLayer relu;
      relu.config.kind = LayerKind::kRelu;
      relu.in = relu.out = at;
      g.layers.push_back(relu);
    }
  }
  return g;
}

}  // namespace

std::string ActShape::ToString() const {
  if (!image) return absl::StrCat("flat ", c);
  return absl::StrCat(c, "×", h, "×", w);
}

namespace {

// The graph's input: an embedding front's output (set in g->front) or
// model.input's shape, into g->input. Returns the first layer after it.
absl::StatusOr<size_t> GraphInput(const ModelConfig& model, Inference* inf,
                                  LayerGraph* g) {
  const LayerConfig& head = model.graph[0];
  if (head.kind == LayerKind::kEmbeddingBag ||
      head.kind == LayerKind::kEmbeddingConcat) {
    absl::StatusOr<SparseFront> front = inf->Front(head, model);
    if (!front.ok()) return front.status();
    g->front = *front;
    g->input = ActShape{front->width(), 1, 1, false};
    if (model.graph.size() < 2) {
      return inf->Refuse(0, head, "",
                         "needs dense layers after it that end in class "
                         "scores");
    }
    return 1;
  }
  const InputConfig& in = model.input;
  if (in.channels < 1 || in.height < 1 || in.width < 1 ||
      int64_t{in.channels} * in.height * in.width > kMaxActivation) {
    return inf->RefuseGraph(
        "model.input",
        absl::StrCat("needs a positive shape of at most 2^24 "
                     "elements, not ",
                     in.channels, "×", in.height, "×", in.width));
  }
  g->input = ActShape{in.channels, in.height, in.width, in.image};
  return 0;
}

}  // namespace

absl::StatusOr<LayerGraph> InferLayerGraph(const ModelConfig& model,
                                           GraphError* where) {
  const bool sparse_model = model.type == ModelType::kEmbeddingBag ||
                            model.type == ModelType::kEmbeddingConcat;
  if (model.graph.empty()) {
    absl::StatusOr<LayerGraph> g = FromWidths(model.layers);
    if (!g.ok() || !sparse_model) return g;
    absl::StatusOr<SparseFront> front = ShorthandFront(model);
    if (!front.ok()) return front.status();
    g->front = *front;
    return g;
  }
  Inference inf(where);
  LayerGraph g;
  absl::StatusOr<size_t> first = GraphInput(model, &inf, &g);
  if (!first.ok()) return first.status();
  ActShape at = g.input;
  int dense = 0, conv = 0, bn = 0, bottom = 0;
  bool trainable = g.front.has_value();  // The table is trained too.
  for (size_t i = *first; i < model.graph.size(); ++i) {
    const LayerConfig& c = model.graph[i];
    GraphLayer layer;
    layer.config = c;
    layer.in = at;
    absl::StatusOr<ActShape> out =
        c.kind == LayerKind::kBottomDense
            ? inf.Bottom(static_cast<int>(i), c, at, g, &layer.passthrough)
            : inf.Out(static_cast<int>(i), c, at);
    if (!out.ok()) return out.status();
    if (out->size() > kMaxActivation) {
      return inf.Refuse(static_cast<int>(i), c, "",
                        absl::StrCat("gives ", out->ToString(),
                                     ", more than 2^24 elements per sample"));
    }
    layer.out = at = *out;
    if (c.kind == LayerKind::kDense) layer.name = absl::StrCat("fc", ++dense);
    if (c.kind == LayerKind::kConv2d) {
      layer.name = absl::StrCat("conv", ++conv);
    }
    if (c.kind == LayerKind::kBottomDense) {
      layer.name = absl::StrCat("bottom", ++bottom);
    }
    trainable = trainable || !layer.name.empty();
    if (c.kind == LayerKind::kBatchNorm) layer.name = absl::StrCat("bn", ++bn);
    g.layers.push_back(std::move(layer));
  }
  const GraphLayer& last = g.layers.back();
  if (last.out.image || last.out.c < 2) {
    return inf.Refuse(static_cast<int>(model.graph.size() - 1), last.config, "",
                      absl::StrCat("the last layer must give a flat vector of "
                                   "at least 2 class scores (the loss is "
                                   "softmax cross-entropy); it gives ",
                                   last.out.ToString()));
  }
  if (!trainable) {
    return inf.RefuseGraph("model.layers",
                           "has no trainable layer (dense or conv2d)");
  }
  return g;
}

std::string DescribeGraph(const LayerGraph& graph) {
  std::string front;
  if (graph.front.has_value()) {
    const SparseFront& f = *graph.front;
    front = f.kind == LayerKind::kEmbeddingBag
                ? absl::StrCat("embedding_bag(table ", f.table, ", dim ", f.dim,
                               ", ", f.mean ? "mean" : "sum", ") ")
                : absl::StrCat(
                      "embedding_concat(table ", f.table, ", ", f.fields,
                      " fields × dim ", f.dim,
                      f.dense > 0 ? absl::StrCat(" + ", f.dense, " dense") : "",
                      ") ");
  }
  if (graph.dense_stack) {
    return absl::StrCat(front, absl::StrJoin(graph.widths, "-"));
  }
  std::vector<std::string> parts = {graph.front.has_value()
                                        ? front + graph.input.ToString()
                                        : graph.input.ToString()};
  for (const GraphLayer& l : graph.layers) {
    const LayerConfig& c = l.config;
    switch (c.kind) {
      case LayerKind::kDense:
        parts.push_back(absl::StrCat("dense(", c.out, ")"));
        break;
      case LayerKind::kBottomDense:
        parts.push_back(absl::StrCat("bottom_dense(", c.out, ")"));
        break;
      case LayerKind::kConv2d:
        parts.push_back(absl::StrCat("conv2d(", c.out, ", k", c.kernel, ", s",
                                     c.stride, ", p", c.padding, ")"));
        break;
      case LayerKind::kMaxPool2d:
      case LayerKind::kAvgPool2d:
        parts.push_back(absl::StrCat(LayerKindName(c.kind), "(k", c.kernel,
                                     ", s", c.stride, ")"));
        break;
      case LayerKind::kDropout:
        parts.push_back(absl::StrCat("dropout(", c.p, ")"));
        break;
      case LayerKind::kBatchNorm:
        parts.push_back(absl::StrCat("batch_norm(", c.momentum, ")"));
        break;
      default:
        parts.push_back(LayerKindName(c.kind));
    }
  }
  return absl::StrJoin(parts, " ");
}

}  // namespace paramd
