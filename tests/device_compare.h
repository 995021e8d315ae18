// The device layers against the CPU's, for any device backend: the host
// one here (tests/worker/device_layers_test.cc) and CUDA where a GPU is
// (tests/worker/cuda_layers_test.cc). Each check runs both on the same random
// parameters, inputs and output gradients and requires the relative error
// (‖device − cpu‖ / ‖cpu‖) within a tolerance.
#ifndef PARAMD_TESTS_DEVICE_COMPARE_H_
#define PARAMD_TESTS_DEVICE_COMPARE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/job_config.h"
#include "worker/model/device_ops.h"
#include "worker/model/model.h"

namespace paramd::testing {

// Makes a fresh instance of the backend under test.
using OpsFactory = std::function<absl::StatusOr<std::unique_ptr<DeviceOps>>()>;

struct LayerCase {
  std::string what;
  ModelConfig model;
  int batch;
};

// Graphs that cover every layer kind: conv2d at strides 1 and 2, paddings
// 0, 1 and 2, odd and non-square sizes; max and mean pooling with windows
// larger than the stride; batch norm on images and on flat features;
// relu, dropout, flatten and dense; batches of 1 to 4.
std::vector<LayerCase> DeviceLayerCases();

// The main job's MLP (784-256-128-10) and a CNN with every layer kind.
ModelConfig MainMlp();
ModelConfig SmallCnn();

// ‖a − b‖ / ‖b‖ (‖a − b‖ when b is zero).
double RelativeError(const std::vector<float>& a, const std::vector<float>& b);

// Each layer of `c` alone, on the device and on the CPU: the forward output
// (training and evaluating), and from one output gradient the layer's
// parameter gradients and its input gradient, each within `tolerance`.
void CompareEachLayer(const LayerCase& c, const OpsFactory& ops,
                      double tolerance);

// A whole training step of `model` at `batch` on a DeviceSequential
// against CpuSequential: the loss, every gradient, the input gradient and
// the correct count (over 2·batch + 1 samples, so evaluation splits); and
// the overlapped step (StepHooks) against the plain one on the device,
// every gradient element handed on exactly once and no parameter read
// before it was awaited.
void CompareWholeStep(const ModelConfig& model, int batch,
                      const OpsFactory& ops, double tolerance);

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_DEVICE_COMPARE_H_
