// The job file's typed layer graph: model.input and model.layers as a list of
// layers (docs/job-file.md, "Layers"), parsed and shape-checked. Declared in
// common/config/job_sections.h, called by the job-file parser.

#include <map>
#include <set>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/config/job_sections.h"
#include "common/config/layer_shapes.h"

namespace paramd {
namespace {

struct KindInfo {
  LayerKind kind;
  std::set<std::string> fields;
  std::set<std::string> required;
};

const std::map<std::string, KindInfo>& Kinds() {
  static const auto* kinds = new std::map<std::string, KindInfo>{
      {"dense", {LayerKind::kDense, {"out"}, {"out"}}},
      {"conv2d",
       {LayerKind::kConv2d,
        {"out", "kernel", "stride", "padding"},
        {"out", "kernel"}}},
      {"max_pool2d", {LayerKind::kMaxPool2d, {"kernel", "stride"}, {"kernel"}}},
      {"avg_pool2d", {LayerKind::kAvgPool2d, {"kernel", "stride"}, {"kernel"}}},
      {"relu", {LayerKind::kRelu, {}, {}}},
      {"dropout", {LayerKind::kDropout, {"p"}, {}}},
      {"flatten", {LayerKind::kFlatten, {}, {}}},
      {"batch_norm", {LayerKind::kBatchNorm, {"momentum", "eps"}, {}}},
      {"bottom_dense", {LayerKind::kBottomDense, {"out"}, {"out"}}},
      {"embedding_bag",
       {LayerKind::kEmbeddingBag, {"table", "combiner", "fields"}, {"table"}}},
      {"embedding_concat",
       {LayerKind::kEmbeddingConcat,
        {"table", "fields", "dense"},
        {"table", "fields"}}},
  };
  return *kinds;
}

constexpr char kKindList[] =
    "dense, conv2d, max_pool2d, avg_pool2d, relu, dropout, flatten, "
    "batch_norm, bottom_dense, embedding_bag or embedding_concat";

absl::Status ParseInput(YamlReader& r, const YAML::Node& model,
                        InputConfig* in) {
  const YAML::Node node = model["input"];
  const std::string f = "model.input";
  if (!node.IsDefined() || node.IsNull()) {
    return r.MissingError(model, "model", f,
                          "a typed model.layers needs the input's shape: "
                          "{channels, height, width} or a flat width");
  }
  if (node.IsScalar()) {
    if (!absl::SimpleAtoi(node.Scalar(), &in->channels) || in->channels < 1) {
      return r.Error(node, f,
                     "expected a positive flat width or {channels, height, "
                     "width}");
    }
    in->image = false;
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(r.CheckMapping(node, f, {"channels", "height", "width"}));
  for (auto [key, out] :
       {std::pair{"channels", &in->channels}, std::pair{"height", &in->height},
        std::pair{"width", &in->width}}) {
    RETURN_IF_ERROR(r.Get(node, f, key, true, out));
    if (*out < 1 || *out > 65536) {
      return r.Error(node[key], absl::StrCat(f, ".", key),
                     "must be in [1, 65536]");
    }
  }
  in->image = true;
  return absl::OkStatus();
}

absl::Status ParseLayer(YamlReader& r, const YAML::Node& node,
                        const std::string& f, LayerConfig* out) {
  std::string kind;
  YAML::Node fields;
  if (node.IsScalar()) {
    kind = node.Scalar();
  } else if (node.IsMap() && node.size() == 1) {
    kind = node.begin()->first.as<std::string>();
    fields = node.begin()->second;
  } else {
    return r.Error(
        node, f,
        absl::StrCat("expected a layer: a kind (relu, flatten, "
                     "dropout, batch_norm) or a mapping of one kind to its "
                     "fields, e.g. {conv2d: {out: 32, kernel: "
                     "3}}; got a ",
                     YamlReader::KindName(node)));
  }
  const auto it = Kinds().find(kind);
  if (it == Kinds().end()) {
    return r.Error(node, f,
                   absl::StrCat("unknown layer kind '", kind,
                                "' (expected: ", kKindList, ")"));
  }
  const KindInfo& info = it->second;
  out->kind = info.kind;
  if (info.kind == LayerKind::kDropout) out->p = 0.5;
  const std::string ff = absl::StrCat(f, ".", kind);
  if (!fields.IsDefined() || fields.IsNull()) {
    if (!info.required.empty()) {
      return r.Error(
          node, ff,
          absl::StrCat("missing required field ", *info.required.begin()));
    }
  } else {
    RETURN_IF_ERROR(r.CheckMapping(fields, ff, info.fields));
    for (auto [key, dst] :
         {std::pair{"out", &out->out}, std::pair{"kernel", &out->kernel},
          std::pair{"stride", &out->stride},
          std::pair{"padding", &out->padding}}) {
      if (!info.fields.count(key)) continue;
      RETURN_IF_ERROR(
          r.Get(fields, ff, key, info.required.count(key) > 0, dst));
    }
    if (info.kind == LayerKind::kDropout) {
      RETURN_IF_ERROR(r.Get(fields, ff, "p", false, &out->p));
    }
    if (info.kind == LayerKind::kBatchNorm) {
      RETURN_IF_ERROR(r.Get(fields, ff, "momentum", false, &out->momentum));
      RETURN_IF_ERROR(r.Get(fields, ff, "eps", false, &out->eps));
    }
    if (info.fields.count("table")) {
      RETURN_IF_ERROR(r.Get(fields, ff, "table", true, &out->table));
    }
    if (info.kind == LayerKind::kEmbeddingBag) {
      RETURN_IF_ERROR(r.Get(fields, ff, "combiner", false, &out->combiner));
    }
    if (info.fields.count("fields")) {
      RETURN_IF_ERROR(r.Get(fields, ff, "fields",
                            info.required.count("fields") > 0, &out->fields));
    }
    if (info.fields.count("dense")) {
      RETURN_IF_ERROR(r.Get(fields, ff, "dense", false, &out->dense));
    }
  }
  const bool pool =
      info.kind == LayerKind::kMaxPool2d || info.kind == LayerKind::kAvgPool2d;
  if (pool && !(fields.IsMap() && fields["stride"].IsDefined())) {
    out->stride = out->kernel;
  }
  return absl::OkStatus();
}

}  // namespace

bool IsTypedLayerList(const YAML::Node& layers) {
  if (!layers.IsSequence()) return false;
  for (const YAML::Node& l : layers) {
    int width = 0;
    if (!l.IsScalar() || !absl::SimpleAtoi(l.Scalar(), &width)) return true;
  }
  return false;
}

bool IsSparseLayer(LayerKind kind) {
  return kind == LayerKind::kEmbeddingBag ||
         kind == LayerKind::kEmbeddingConcat;
}

absl::Status ParseLayerList(YamlReader& r, const YAML::Node& model,
                            ModelConfig* out) {
  const YAML::Node layers = model["layers"];
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerConfig layer;
    RETURN_IF_ERROR(ParseLayer(r, layers[i],
                               absl::StrCat("model.layers[", i, "]"), &layer));
    out->graph.push_back(layer);
  }
  return absl::OkStatus();
}

absl::Status ParseLayerGraph(YamlReader& r, const YAML::Node& model,
                             ModelConfig* out) {
  const YAML::Node layers = model["layers"];
  if (out->graph.empty()) RETURN_IF_ERROR(ParseLayerList(r, model, out));
  if (!out->graph.empty() && IsSparseLayer(out->graph[0].kind)) {
    // The front's input is each sample's ids, which the data gives.
    if (model["input"].IsDefined()) {
      return r.Error(model["input"], "model.input",
                     absl::StrCat("does not apply when model.layers[0] is ",
                                  LayerKindName(out->graph[0].kind),
                                  ": its input is each sample's ids, from "
                                  "the data"));
    }
  } else {
    RETURN_IF_ERROR(ParseInput(r, model, &out->input));
  }
  GraphError where;
  absl::StatusOr<LayerGraph> graph = InferLayerGraph(*out, &where);
  if (graph.ok()) return absl::OkStatus();
  YAML::Node at = model["input"].IsDefined() ? model["input"] : layers;
  if (where.layer >= 0) {
    const YAML::Node layer = layers[where.layer];
    at = layer;
    if (layer.IsMap()) {
      const YAML::Node fields = layer.begin()->second;
      if (!where.field.empty() && fields.IsMap() &&
          fields[where.field].IsDefined()) {
        at = fields[where.field];
      }
    }
  } else if (where.field == "model.layers") {
    at = layers;
  }
  return r.Error(at, where.place, where.message);
}

}  // namespace paramd
