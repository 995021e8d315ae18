// The job file's typed layer graph: model.input and model.layers as a list
// of layers (docs/job-file.md, "Layers"), parsed and shape-checked.
#ifndef PARAMD_COMMON_CONFIG_LAYERS_SECTION_H_
#define PARAMD_COMMON_CONFIG_LAYERS_SECTION_H_

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "common/config/job_config.h"
#include "common/config/yaml_reader.h"

namespace paramd {

// Whether `layers` (model.layers) is the typed form: a list in which some
// element is not an integer width.
bool IsTypedLayerList(const YAML::Node& layers);

// Parses the typed model.layers into out->graph, each layer's fields
// checked; shapes are not inferred yet (a sparse front needs the tables).
absl::Status ParseLayerList(YamlReader& reader, const YAML::Node& model,
                            ModelConfig* out);

// Whether a layer kind is a sparse front (embedding_bag, embedding_concat).
bool IsSparseLayer(LayerKind kind);

// Parses model.input (not given when model.layers[0] is a sparse front)
// and, unless ParseLayerList did, the typed model.layers into out->input
// and out->graph, then infers every shape (model.embeddings already
// parsed); a refusal names the layer's index, its field and the shapes
// involved, at the line of the field.
absl::Status ParseLayerGraph(YamlReader& reader, const YAML::Node& model,
                             ModelConfig* out);

}  // namespace paramd

#endif  // PARAMD_COMMON_CONFIG_LAYERS_SECTION_H_
