// Layer configs for tests of the layer graph's backends, written the way a
// job file would (tests/worker/layers_test.cc, tests/device_compare.cc).
#ifndef PARAMD_TESTS_LAYER_CONFIGS_H_
#define PARAMD_TESTS_LAYER_CONFIGS_H_

#include <utility>
#include <vector>

#include "common/config/job_config.h"

namespace paramd::testing {

inline LayerConfig Conv(int out, int kernel, int stride, int padding) {
  LayerConfig c;
  c.kind = LayerKind::kConv2d;
  c.out = out;
  c.kernel = kernel;
  c.stride = stride;
  c.padding = padding;
  return c;
}

inline LayerConfig Pool(LayerKind kind, int kernel, int stride) {
  LayerConfig c;
  c.kind = kind;
  c.kernel = kernel;
  c.stride = stride;
  return c;
}

inline LayerConfig Dense(int out) {
  LayerConfig c;
  c.kind = LayerKind::kDense;
  c.out = out;
  return c;
}

// A layer with no fields of its own but dropout's `p`.
inline LayerConfig Kind(LayerKind kind, double p = 0) {
  LayerConfig c;
  c.kind = kind;
  c.p = p;
  return c;
}

// A typed graph on a c × h × w image.
inline ModelConfig Graph(int c, int h, int w, std::vector<LayerConfig> layers) {
  ModelConfig m;
  m.input = InputConfig{c, h, w, true};
  m.graph = std::move(layers);
  return m;
}

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_LAYER_CONFIGS_H_
