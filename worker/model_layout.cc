#include "worker/model.h"

namespace paramd {

FlatLayout::FlatLayout(const ModelSpec& spec) {
  for (const TensorSpec& t : spec.tensors) {
    offset.push_back(total);
    total += t.num_elements;
  }
}

}  // namespace paramd
