#include "common/model/model_spec.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/mix.h"
#include "common/config/layer_shapes.h"

namespace paramd {

namespace {

// The tensors a framework's model lists (model.type tensors), in order.
void AddListedTensors(const std::vector<TensorConfig>& tensors,
                      ModelSpec* spec) {
  for (const TensorConfig& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    TensorSpec s{t.name, t.shape, n, static_cast<float>(t.bound)};
    s.init_constant = t.constant;
    s.init_value = static_cast<float>(t.value);
    if (t.statistic) s.kind = TensorKind::kStatistic;
    spec->tensors.push_back(std::move(s));
  }
}

}  // namespace

// The tensors of paramd's own layer graph, in layer order.
void AddGraphTensors(const LayerGraph& graph, ModelSpec* spec) {
  for (const GraphLayer& l : graph.layers) {
    if (l.config.kind == LayerKind::kBatchNorm) {
      const int64_t c = l.in.c;
      auto constant = [&](const char* what, float value, TensorKind kind) {
        TensorSpec t{absl::StrCat(l.name, ".", what), {c}, c, 0};
        t.init_constant = true;
        t.init_value = value;
        t.kind = kind;
        spec->tensors.push_back(std::move(t));
      };
      constant("weight", 1, TensorKind::kTrainable);
      constant("bias", 0, TensorKind::kTrainable);
      constant("running_mean", 0, TensorKind::kStatistic);
      constant("running_var", 1, TensorKind::kStatistic);
      continue;
    }
    int64_t fan_in = 0;
    std::vector<int64_t> weight_shape;
    int64_t fan_out = l.out.c;
    if (l.config.kind == LayerKind::kDense) {
      fan_in = l.in.size();
      weight_shape = {fan_in, l.out.c};
    } else if (l.config.kind == LayerKind::kBottomDense) {
      // On the values after the passed-through rows.
      fan_in = l.in.size() - l.passthrough;
      fan_out = l.config.out;
      weight_shape = {fan_in, fan_out};
    } else if (l.config.kind == LayerKind::kConv2d) {
      const int64_t k = l.config.kernel;
      fan_in = int64_t{l.in.c} * k * k;
      weight_shape = {l.out.c, l.in.c, k, k};
    } else {
      continue;
    }
    const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
    spec->tensors.push_back({absl::StrCat(l.name, ".weight"), weight_shape,
                             fan_in * fan_out, bound});
    spec->tensors.push_back(
        {absl::StrCat(l.name, ".bias"), {fan_out}, fan_out, bound});
  }
}

ModelSpec BuildModelSpec(const ModelConfig& config) {
  ModelSpec spec;
  if (config.type == ModelType::kTensors) {
    AddListedTensors(config.tensors, &spec);
  } else if (absl::StatusOr<LayerGraph> graph = InferLayerGraph(config);
             graph.ok()) {
    AddGraphTensors(*graph, &spec);
  }
  for (const TensorSpec& t : spec.tensors)
    spec.total_elements += t.num_elements;
  for (const EmbeddingTableConfig& t : config.embeddings) {
    spec.tables.push_back({t.name, t.rows, t.dim});
  }
  return spec;
}

void InitTensorRange(const TensorSpec& tensor, uint64_t seed, int tensor_id,
                     int64_t begin, absl::Span<float> out) {
  if (tensor.init_constant) {
    std::fill(out.begin(), out.end(), tensor.init_value);
    return;
  }
  const uint64_t stream = Mix(seed ^ Mix(static_cast<uint64_t>(tensor_id) + 1));
  for (size_t i = 0; i < out.size(); ++i) {
    const uint64_t bits = Mix(stream + static_cast<uint64_t>(begin + i));
    // 24 random bits → [0, 1) exactly representable in float.
    const float unit = static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
    out[i] = (2.0f * unit - 1.0f) * tensor.init_bound;
  }
}

FlatLayout::FlatLayout(const ModelSpec& spec) {
  for (const TensorSpec& t : spec.tensors) {
    offset.push_back(total);
    total += t.num_elements;
  }
}

ModelSpec GraphModelSpec(const LayerGraph& graph) {
  ModelSpec spec;
  AddGraphTensors(graph, &spec);
  for (const TensorSpec& t : spec.tensors)
    spec.total_elements += t.num_elements;
  return spec;
}

std::vector<LayerTensors> LayerTensors::Of(const LayerGraph& graph,
                                           const ModelSpec& spec,
                                           const FlatLayout& layout) {
  std::vector<LayerTensors> out(graph.layers.size());
  for (size_t l = 0; l < graph.layers.size(); ++l) {
    const std::string& name = graph.layers[l].name;
    if (name.empty()) continue;
    const std::string prefix = absl::StrCat(name, ".");
    for (size_t t = 0; t < spec.tensors.size(); ++t) {
      const std::string& tensor = spec.tensors[t].name;
      if (absl::StartsWith(tensor, prefix)) {
        out[l].offsets_.emplace_back(tensor.substr(prefix.size()),
                                     layout.offset[t]);
      }
    }
  }
  return out;
}

int64_t LayerTensors::offset(absl::string_view what) const {
  for (const auto& [name, at] : offsets_) {
    if (name == what) return at;
  }
  return -1;
}

}  // namespace paramd
