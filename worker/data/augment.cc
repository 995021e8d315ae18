#include "worker/data/augment.h"

#include <algorithm>

#include "common/base/mix.h"

namespace paramd {

SampleAugment AugmentOf(const AugmentConfig& config, uint64_t seed,
                        int sample) {
  // A stream of its own, apart from dropout's masks under the same seed.
  const uint64_t bits =
      Mix(Mix(seed ^ 0x6175676d656e74ULL) + static_cast<uint64_t>(sample));
  SampleAugment a;
  a.flip = config.flip && (bits & 1) != 0;
  if (config.crop_padding > 0) {
    const uint64_t span = 2 * static_cast<uint64_t>(config.crop_padding) + 1;
    a.dy = static_cast<int>((bits >> 8) % span) - config.crop_padding;
    a.dx = static_cast<int>((bits >> 32) % span) - config.crop_padding;
  }
  return a;
}

void AugmentBatch(const AugmentConfig& config, uint64_t seed, int n,
                  int channels, int height, int width, float* x,
                  std::vector<float>* scratch) {
  if (!config.enabled()) return;
  const int64_t plane = int64_t{height} * width;
  const int64_t image = plane * channels;
  scratch->resize(static_cast<size_t>(image));
  for (int i = 0; i < n; ++i) {
    const SampleAugment a = AugmentOf(config, seed, i);
    if (a.dy == 0 && a.dx == 0 && !a.flip) continue;
    float* img = x + i * image;
    std::copy(img, img + image, scratch->begin());
    for (int c = 0; c < channels; ++c) {
      const float* in = scratch->data() + c * plane;
      float* out = img + c * plane;
      for (int y = 0; y < height; ++y) {
        const int sy = y + a.dy;
        float* row = out + int64_t{y} * width;
        if (sy < 0 || sy >= height) {
          std::fill(row, row + width, 0.0f);
          continue;
        }
        const float* src = in + int64_t{sy} * width;
        for (int col = 0; col < width; ++col) {
          const int sx = (a.flip ? width - 1 - col : col) + a.dx;
          row[col] = sx >= 0 && sx < width ? src[sx] : 0.0f;
        }
      }
    }
  }
}

}  // namespace paramd
