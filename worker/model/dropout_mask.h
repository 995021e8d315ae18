// Dropout's mask, one definition for the CPU's layers and the device's
// kernels: whether element `i` of sample `sample` is kept is a pure
// function of (the step's seed, sample, element), so that a retried or
// restored step drops the same elements, on either backend.
#ifndef PARAMD_WORKER_MODEL_DROPOUT_MASK_H_
#define PARAMD_WORKER_MODEL_DROPOUT_MASK_H_

#include <cstdint>

#include "common/base/host_device.h"
#include "common/base/mix.h"

namespace paramd {

PARAMD_HOST_DEVICE inline bool DropoutKeeps(uint64_t seed, int sample,
                                            int64_t i, double p) {
  const uint64_t bits = Mix(seed ^ Mix((static_cast<uint64_t>(sample) << 32) ^
                                       static_cast<uint64_t>(i)));
  const double unit = static_cast<double>(bits >> 40) / 16777216.0;
  return unit >= p;
}

}  // namespace paramd

#endif  // PARAMD_WORKER_MODEL_DROPOUT_MASK_H_
