// The model's named dense tensors, their shapes and their deterministic
// initial values.
//
// Servers and workers both derive the spec from the job file. Initial values
// are a pure function of (seed, tensor, element index), so a server can
// initialise any chunk of a tensor on its own and every process agrees.
#ifndef PARAMD_COMMON_MODEL_MODEL_SPEC_H_
#define PARAMD_COMMON_MODEL_MODEL_SPEC_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/config/job_config.h"
#include "common/config/layer_shapes.h"

namespace paramd {

// What the servers do with a tensor's pushes.
enum class TensorKind {
  // A gradient: the job's optimizer steps the tensor with it.
  kTrainable,
  // A statistic a layer keeps (batch norm's running mean and variance):
  // a push is the change the worker's batch asks for, and the servers add
  // it as it is (the round's mean under sync, each push under async and
  // ssp) with no optimizer, learning rate or weight decay.
  kStatistic,
};

struct TensorSpec {
  std::string name;            // e.g. "fc1.weight"
  std::vector<int64_t> shape;  // e.g. {784, 256}: [inputs, outputs]
  int64_t num_elements = 0;
  float init_bound = 0;        // Initial values are uniform in ±bound, or
  bool init_constant = false;  // all init_value when init_constant.
  float init_value = 0;
  TensorKind kind = TensorKind::kTrainable;
};

// An embedding table (model.embeddings): rows live on every shard, by
// row (common/model/rows.h), not in the partition plan's chunks.
struct TableSpec {
  std::string name;
  uint64_t rows = 0;
  int dim = 0;
};

struct ModelSpec {
  std::vector<TensorSpec> tensors;
  std::vector<TableSpec> tables;
  int64_t total_elements = 0;
};

// The tensors of `config`'s layer graph (common/config/layer_shapes.h), in
// layer order: each dense layer "fcK.weight" [in, out] then "fcK.bias"
// [out]; each conv2d "convK.weight" [out, in, kernel, kernel] then
// "convK.bias" [out] (K counts layers of the kind from 1). Both are
// initialised uniform in ±1/sqrt(fan_in). Each batch_norm "bnK.weight"
// [C] (ones), "bnK.bias" [C] (zeros), then the statistics
// "bnK.running_mean" [C] (zeros) and "bnK.running_var" [C] (ones). A graph
// that InferLayerGraph refuses yields no tensors (job files are checked
// when they load).
ModelSpec BuildModelSpec(const ModelConfig& config);

// Writes the initial values of elements [begin, begin + out.size()) of
// tensor `tensor_id` into `out`.
void InitTensorRange(const TensorSpec& tensor, uint64_t seed, int tensor_id,
                     int64_t begin, absl::Span<float> out);

// Where each tensor lies in a flat buffer of all of them, concatenated in
// spec order: how workers hold parameters and gradients.
struct FlatLayout {
  explicit FlatLayout(const ModelSpec& spec);
  std::vector<int64_t> offset;  // By tensor id.
  int64_t total = 0;
};

// The tensors of a layer graph alone, as BuildModelSpec lists them for a
// graph model: the one place that says which tensors a layer has and in
// what order.
ModelSpec GraphModelSpec(const LayerGraph& graph);

// Where one layer's tensors start in a FlatLayout's buffer, by what
// follows the layer's name: "weight", "bias", "running_mean",
// "running_var". A layer's kernels take their offsets from here, never
// from an order of their own.
class LayerTensors {
 public:
  // Every layer's of `graph`, in layer order; `spec` and `layout` are the
  // graph's (GraphModelSpec).
  static std::vector<LayerTensors> Of(const LayerGraph& graph,
                                      const ModelSpec& spec,
                                      const FlatLayout& layout);
  // The offset of the layer's tensor `what`; -1 when it has none.
  int64_t offset(absl::string_view what) const;

 private:
  std::vector<std::pair<std::string, int64_t>> offsets_;
};

}  // namespace paramd

#endif  // PARAMD_COMMON_MODEL_MODEL_SPEC_H_
