// ImageFeatures: how an embedding_bag model sees an image (model.features):
// each image becomes hashed feature ids, rows of the model's table.
//
// Features of a side × side image with pixels in [0, 1], each intensity
// quantised to q = min(levels - 1, ⌊v · levels⌋): one id per pixel
// (position, q), and with `pairs` one per horizontal and per vertical
// neighbour pair (position, q₁, q₂), each hashed into [0, rows). The ids
// then go to the sparse front (worker/model/embedding_front.h), which
// de-duplicates them and combines their rows. Thread-compatible.
#ifndef PARAMD_WORKER_MODEL_IMAGE_FEATURES_H_
#define PARAMD_WORKER_MODEL_IMAGE_FEATURES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/job_config.h"

namespace paramd {

class ImageFeatures {
 public:
  // For images of `pixels` values (a square of side √pixels; without a
  // square, no pairs) hashed into a table of `rows`.
  static absl::StatusOr<ImageFeatures> Create(const FeaturesConfig& features,
                                              uint64_t rows, int64_t pixels);

  // The ids one image gives.
  int ids_per_sample() const { return ids_per_sample_; }

  // The ids of images x [n × pixels] into ids [n × ids_per_sample].
  void Featurize(const float* x, int n, std::vector<uint64_t>* ids);

  // The hashed id of feature (kind, position, value) in a table of `rows`.
  static uint64_t FeatureId(uint32_t kind, uint32_t position, uint32_t value,
                            uint64_t rows);

 private:
  ImageFeatures(const FeaturesConfig& features, uint64_t rows, int64_t pixels);

  const uint64_t rows_count_;
  const int levels_;
  const int side_;  // 0: not square, no pairs.
  const int64_t pixels_;
  const int ids_per_sample_;
  std::vector<uint8_t> levels_of_;  // Scratch: a sample's quantised pixels.
};

}  // namespace paramd

#endif  // PARAMD_WORKER_MODEL_IMAGE_FEATURES_H_
