// Data augmentation for training batches (data.augment): a random crop of
// a zero-padded image and a left–right flip. What each sample gets is a
// pure function of the step's seed and the sample's place in the batch, so
// a retried or restored step trains on exactly the same batch.
#ifndef PARAMD_WORKER_DATA_AUGMENT_H_
#define PARAMD_WORKER_DATA_AUGMENT_H_

#include <cstdint>
#include <vector>

#include "common/config/job_config.h"

namespace paramd {

// What sample `sample` of a step seeded `seed` gets: the crop's offset
// (dy, dx in [-crop_padding, crop_padding]) and whether it is mirrored.
struct SampleAugment {
  int dy = 0, dx = 0;
  bool flip = false;
};
SampleAugment AugmentOf(const AugmentConfig& config, uint64_t seed, int sample);

// Changes the n images in `x` (each channels × height × width floats) in
// place: out(c, y, x) = in(c, y + dy, x' + dx), x' = width − 1 − x when
// mirrored, else x; 0 where that falls outside the image. `scratch` holds
// one image. Not thread-safe on one `scratch`.
void AugmentBatch(const AugmentConfig& config, uint64_t seed, int n,
                  int channels, int height, int width, float* x,
                  std::vector<float>* scratch);

}  // namespace paramd

#endif  // PARAMD_WORKER_DATA_AUGMENT_H_
