// data.augment: crops of a zero-padded image and left–right flips, each
// sample's drawn from (step seed, sample) alone, so that a step replays.
#include "worker/data/augment.h"

#include <catch2/catch.hpp>
#include <set>
#include <utility>
#include <vector>

namespace paramd {
namespace {

constexpr int kC = 2, kH = 5, kW = 7;
constexpr int kImage = kC * kH * kW;

// n images whose every pixel is distinct and non-zero.
std::vector<float> Images(int n) {
  std::vector<float> x(static_cast<size_t>(n) * kImage);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + 1);
  return x;
}

// The pixel (c, y, x) of image `img` of `batch`, 0 outside the image.
float At(const std::vector<float>& batch, int img, int c, int y, int x) {
  if (y < 0 || y >= kH || x < 0 || x >= kW) return 0;
  return batch[static_cast<size_t>(img) * kImage + (c * kH + y) * kW + x];
}

std::vector<float> Augmented(const AugmentConfig& config, uint64_t seed,
                             int n) {
  std::vector<float> x = Images(n);
  std::vector<float> scratch;
  AugmentBatch(config, seed, n, kC, kH, kW, x.data(), &scratch);
  return x;
}

TEST_CASE("no augmentation leaves the batch as it is", "[data][augment]") {
  const AugmentConfig none;
  CHECK_FALSE(none.enabled());
  CHECK(Augmented(none, 7, 4) == Images(4));
}

TEST_CASE("every sample is its image shifted, mirrored or both, as drawn",
          "[data][augment]") {
  AugmentConfig config;
  config.crop_padding = 2;
  config.flip = true;
  constexpr int n = 64;
  const std::vector<float> in = Images(n);
  const std::vector<float> out = Augmented(config, 12345, n);
  std::set<std::pair<int, int>> offsets;
  int flipped = 0;
  for (int i = 0; i < n; ++i) {
    const SampleAugment a = AugmentOf(config, 12345, i);
    REQUIRE(a.dy >= -2);
    REQUIRE(a.dy <= 2);
    REQUIRE(a.dx >= -2);
    REQUIRE(a.dx <= 2);
    offsets.insert({a.dy, a.dx});
    flipped += a.flip;
    for (int c = 0; c < kC; ++c) {
      for (int y = 0; y < kH; ++y) {
        for (int x = 0; x < kW; ++x) {
          const int sx = (a.flip ? kW - 1 - x : x) + a.dx;
          INFO("sample " << i << " c " << c << " y " << y << " x " << x);
          REQUIRE(At(out, i, c, y, x) == At(in, i, c, y + a.dy, sx));
        }
      }
    }
  }
  // The draws cover the choices: both flips and many of the 25 offsets.
  CHECK(flipped > 0);
  CHECK(flipped < n);
  CHECK(offsets.size() >= 15);
}

TEST_CASE("a flip alone mirrors each row; a crop alone never mirrors",
          "[data][augment]") {
  AugmentConfig flip;
  flip.flip = true;
  AugmentConfig crop;
  crop.crop_padding = 1;
  for (int i = 0; i < 32; ++i) {
    const SampleAugment f = AugmentOf(flip, 99, i);
    CHECK(f.dy == 0);
    CHECK(f.dx == 0);
    CHECK_FALSE(AugmentOf(crop, 99, i).flip);
  }
  // Sample 0 of some seed flipped: its first row is the image's reversed.
  uint64_t seed = 0;
  while (!AugmentOf(flip, seed, 0).flip) ++seed;
  const std::vector<float> out = Augmented(flip, seed, 1);
  for (int x = 0; x < kW; ++x) CHECK(out[x] == static_cast<float>(kW - x));
}

TEST_CASE("a step's augmentation replays; another step's differs",
          "[data][augment]") {
  AugmentConfig config;
  config.crop_padding = 3;
  config.flip = true;
  const std::vector<float> a = Augmented(config, 42, 16);
  CHECK(Augmented(config, 42, 16) == a);  // A retried step: the same batch.
  CHECK(Augmented(config, 43, 16) != a);
  // A sample's draw does not depend on the batch around it.
  const std::vector<float> head = Augmented(config, 42, 3);
  CHECK(std::vector<float>(a.begin(), a.begin() + 3 * kImage) == head);
}

}  // namespace
}  // namespace paramd
