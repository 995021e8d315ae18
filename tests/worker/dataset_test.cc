// IDX files written by the test, read back (gzip and plain); damaged files
// refused; rank partitions disjoint, covering, equal in steps, reshuffled per
// epoch reproducibly.
#include "worker/data/dataset.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>

#include "tests/test_files.h"
#include "worker/data/idx_reader.h"

namespace paramd {
namespace {

using testing::NewTempDir;
using testing::WriteIdx;

// n images of 2×3 pixels: image i is filled with i; label i % 4.
void WriteTinySet(const std::string& dir, int n, bool gzip) {
  std::vector<uint8_t> pixels, labels;
  for (int i = 0; i < n; ++i) {
    for (int p = 0; p < 6; ++p) pixels.push_back(static_cast<uint8_t>(i));
    labels.push_back(static_cast<uint8_t>(i % 4));
  }
  WriteIdx(dir + "/images", {n, 2, 3}, pixels, gzip);
  WriteIdx(dir + "/labels", {n}, labels, gzip);
}

TEST_CASE("IDX files read back, gzip or plain", "[data][idx]") {
  for (bool gzip : {true, false}) {
    const std::string dir = NewTempDir();
    WriteTinySet(dir, 5, gzip);
    auto images = ReadIdxFile(dir + "/images");
    INFO(images.status().ToString());
    REQUIRE(images.ok());
    CHECK(images->dims == std::vector<int64_t>{5, 2, 3});
    REQUIRE(images->data.size() == 30);
    CHECK(images->data[6 * 4 + 5] == 4);
    auto labels = ReadIdxFile(dir + "/labels");
    REQUIRE(labels.ok());
    CHECK(labels->data == std::vector<uint8_t>{0, 1, 2, 3, 0});
  }
}

TEST_CASE("damaged IDX files are refused with the file named", "[data][idx]") {
  const std::string dir = NewTempDir();
  auto missing = ReadIdxFile(dir + "/none.gz");
  CHECK(absl::IsNotFound(missing.status()));
  CHECK(std::string(missing.status().message()).find("none.gz") !=
        std::string::npos);

  testing::WriteFile(dir + "/magic",
                     std::string("\x01\x02\x08\x01\0\0\0\x01x", 9));
  CHECK(std::string(ReadIdxFile(dir + "/magic").status().message())
            .find("bad magic") != std::string::npos);

  testing::WriteFile(dir + "/float", std::string("\0\0\x0d\x01\0\0\0\x01", 8));
  CHECK(std::string(ReadIdxFile(dir + "/float").status().message())
            .find("not supported") != std::string::npos);

  WriteIdx(dir + "/short", {10, 2}, std::vector<uint8_t>(15, 1), true);
  auto truncated = ReadIdxFile(dir + "/short");
  CHECK(absl::IsDataLoss(truncated.status()));
  CHECK(std::string(truncated.status().message()).find("truncated") !=
        std::string::npos);
}

TEST_CASE("a dataset pairs images with labels and honours the limit",
          "[data]") {
  const std::string dir = NewTempDir();
  WriteTinySet(dir, 9, true);
  auto d = LoadDataset(dir + "/images", dir + "/labels", 7);
  REQUIRE(d.ok());
  CHECK(d->size == 7);
  CHECK(d->dim == 6);
  CHECK(d->num_classes == 4);
  std::vector<float> x(2 * 6);
  std::vector<int32_t> y(2);
  const int64_t idx[] = {3, 6};
  d->Gather(idx, 2, x.data(), y.data());
  CHECK(x[0] == Approx(3.0f / 255));
  CHECK(x[11] == Approx(6.0f / 255));
  CHECK(y == std::vector<int32_t>{3, 2});

  WriteIdx(dir + "/labels3", {3}, {0, 1, 2}, true);
  auto mismatch = LoadDataset(dir + "/images", dir + "/labels3", 0);
  REQUIRE_FALSE(mismatch.ok());
  CHECK(std::string(mismatch.status().message()).find("9 images but") !=
        std::string::npos);
}

TEST_CASE("rank partitions are disjoint, cover the data and take equal steps",
          "[data][partition]") {
  const std::string dir = NewTempDir();
  WriteTinySet(dir, 23, true);
  auto d = LoadDataset(dir + "/images", dir + "/labels", 0);
  REQUIRE(d.ok());
  std::multiset<int> seen;
  for (int rank = 0; rank < 3; ++rank) {
    auto part = DataPartition::Create(&*d, rank, 3, 4);
    REQUIRE(part.ok());
    CHECK(part->steps_per_epoch() == 2);  // 23 / 3 = 7 samples → 2 batches
    part->StartEpoch(1, 0, false);
    std::vector<float> x(part->max_batch() * 6);
    std::vector<int32_t> y(part->max_batch());
    int total = 0;
    for (int64_t step = 0; step < part->steps_per_epoch(); ++step) {
      const int n = part->Batch(step, x.data(), y.data());
      for (int i = 0; i < n; ++i) {
        const int sample = static_cast<int>(std::lround(x[i * 6] * 255));
        CHECK(sample % 3 == rank);
        seen.insert(sample);
      }
      total += n;
    }
    CHECK(total == part->size());
  }
  CHECK(seen.size() == 23);
  CHECK(std::set<int>(seen.begin(), seen.end()).size() == 23);
  CHECK_FALSE(DataPartition::Create(&*d, 0, 24, 4).ok());
}

TEST_CASE("each epoch reshuffles reproducibly from the seed",
          "[data][partition]") {
  const std::string dir = NewTempDir();
  WriteTinySet(dir, 200, true);
  auto d = LoadDataset(dir + "/images", dir + "/labels", 0);
  REQUIRE(d.ok());
  auto order = [&](uint64_t seed, int epoch, bool shuffle) {
    auto part = DataPartition::Create(&*d, 1, 2, 100);
    part->StartEpoch(seed, epoch, shuffle);
    std::vector<float> x(100 * 6);
    std::vector<int32_t> y(100);
    part->Batch(0, x.data(), y.data());
    std::vector<int> out;
    for (int i = 0; i < 100; ++i) out.push_back(std::lround(x[i * 6] * 255));
    return out;
  };
  const auto natural = order(5, 0, false);
  CHECK(std::is_sorted(natural.begin(), natural.end()));
  const auto e0 = order(5, 0, true);
  CHECK(e0 == order(5, 0, true));
  CHECK(e0 != natural);
  CHECK(e0 != order(5, 1, true));
  CHECK(e0 != order(6, 0, true));
  auto sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == natural);  // a permutation of the same samples
}

TEST_CASE("a rank's share loads alone and batches as the whole split's share",
          "[data][partition]") {
  const std::string dir = NewTempDir();
  WriteTinySet(dir, 23, true);
  auto whole = LoadDataset(dir + "/images", dir + "/labels", 20);
  REQUIRE(whole.ok());
  for (int rank = 0; rank < 3; ++rank) {
    auto share = LoadDataset(dir + "/images", dir + "/labels", 20, rank, 3);
    INFO(share.status().ToString());
    REQUIRE(share.ok());
    CHECK(share->full_size == 20);
    CHECK(share->size == (20 - rank + 2) / 3);  // 7, 7, 6
    CHECK(share->pixels.size() == static_cast<size_t>(share->size) * 6);
    CHECK(share->num_classes == 4);  // The split's classes, not the share's.
    CHECK(share->height == 2);
    CHECK(share->width == 3);
    for (int64_t i = 0; i < share->size; ++i) {
      CHECK(share->pixels[i * 6] == rank + 3 * i);
      CHECK(share->labels[i] == (rank + 3 * i) % 4);
    }
    // Shuffled batches of the share equal those of the whole split's share.
    auto a = DataPartition::Create(&*whole, rank, 3, 4);
    auto b = DataPartition::Create(&*share, rank, 3, 4);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK(a->steps_per_epoch() == b->steps_per_epoch());
    CHECK(a->size() == b->size());
    a->StartEpoch(9, 2, true);
    b->StartEpoch(9, 2, true);
    std::vector<float> xa(a->max_batch() * 6), xb(b->max_batch() * 6);
    std::vector<int32_t> ya(a->max_batch()), yb(b->max_batch());
    for (int64_t step = 0; step < a->steps_per_epoch(); ++step) {
      CHECK(a->Batch(step, xa.data(), ya.data()) ==
            b->Batch(step, xb.data(), yb.data()));
      CHECK(xa == xb);
      CHECK(ya == yb);
    }
    // A share is another rank's only by mistake.
    CHECK_FALSE(DataPartition::Create(&*share, (rank + 1) % 3, 3, 4).ok());
  }
  CHECK_FALSE(LoadDataset(dir + "/images", dir + "/labels", 0, 3, 3).ok());
}

}  // namespace
}  // namespace paramd
