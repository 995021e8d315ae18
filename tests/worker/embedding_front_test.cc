// The sparse front (worker/model/embedding_front.h) and an image's hashed
// features (worker/model/image_features.h): the features against a
// reference written out from the definition, the batch's de-duplicated
// ids, and embedding_bag's and embedding_concat's forward and backward
// passes against their definitions.
#include "worker/model/embedding_front.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <vector>

#include "worker/model/image_features.h"

namespace paramd {
namespace {

FeaturesConfig Features(bool pairs) {
  FeaturesConfig f;
  f.levels = 4;
  f.pairs = pairs;
  return f;
}

SparseFront Bag(const std::string& combiner) {
  SparseFront f;
  f.kind = LayerKind::kEmbeddingBag;
  f.dim = 3;
  f.mean = combiner == "mean";
  return f;
}

// The ids of one side × side image, from the definition.
std::vector<uint64_t> ReferenceIds(const float* image, int side, bool pairs,
                                   uint64_t rows) {
  auto level = [](float v) { return std::min(3, static_cast<int>(v * 4)); };
  std::vector<uint64_t> ids;
  for (int p = 0; p < side * side; ++p) {
    ids.push_back(ImageFeatures::FeatureId(0, p, level(image[p]), rows));
  }
  if (!pairs) return ids;
  for (int r = 0; r < side; ++r) {
    for (int c = 0; c < side; ++c) {
      const int p = r * side + c;
      if (c + 1 < side) {
        ids.push_back(ImageFeatures::FeatureId(
            1, p, level(image[p]) * 4 + level(image[p + 1]), rows));
      }
      if (r + 1 < side) {
        ids.push_back(ImageFeatures::FeatureId(
            2, p, level(image[p]) * 4 + level(image[p + side]), rows));
      }
    }
  }
  return ids;
}

TEST_CASE("a batch's bag equals the combined rows of its features",
          "[embedding_bag][embedding]") {
  for (const std::string combiner : {"mean", "sum"}) {
    for (bool pairs : {true, false}) {
      constexpr int kSide = 6, kN = 5;
      ImageFeatures features =
          *ImageFeatures::Create(Features(pairs), 5000, kSide * kSide);
      const int per = kSide * kSide + (pairs ? 2 * kSide * (kSide - 1) : 0);
      REQUIRE(features.ids_per_sample() == per);
      std::mt19937 random(3);
      std::vector<float> x(kN * kSide * kSide);
      // Levels 0-3, including the edges 0 and 1.
      for (float& v : x) v = static_cast<float>(random() % 5) / 4.0f;
      std::vector<uint64_t> batch_ids;
      features.Featurize(x.data(), kN, &batch_ids);
      EmbeddingFront bag(Bag(combiner));
      REQUIRE(bag.SetIds(batch_ids, kN, per).ok());
      // Distinct ascending ids, covering every sample's features.
      const auto unique = bag.unique_ids();
      for (size_t i = 1; i < unique.size(); ++i) {
        REQUIRE(unique[i] > unique[i - 1]);
      }
      std::map<uint64_t, size_t> at;
      for (size_t i = 0; i < unique.size(); ++i) at[unique[i]] = i;
      std::vector<std::vector<uint64_t>> ids(kN);
      for (int s = 0; s < kN; ++s) {
        ids[s] = ReferenceIds(&x[s * kSide * kSide], kSide, pairs, 5000);
        for (uint64_t id : ids[s]) REQUIRE(at.count(id) == 1);
      }
      size_t distinct = 0;
      {
        std::map<uint64_t, int> all;
        for (const auto& v : ids)
          for (uint64_t id : v) all[id]++;
        distinct = all.size();
      }
      CHECK(unique.size() == distinct);
      // Rows: row i = (i, -i, 0.5 i) / 100.
      absl::Span<float> rows = bag.rows();
      for (size_t i = 0; i < unique.size(); ++i) {
        rows[i * 3] = i / 100.0f;
        rows[i * 3 + 1] = -(i / 100.0f);
        rows[i * 3 + 2] = 0.5f * i / 100.0f;
      }
      std::vector<float> h(kN * 3);
      bag.Forward(nullptr, h.data());
      const float scale = combiner == "mean" ? 1.0f / per : 1.0f;
      for (int s = 0; s < kN; ++s) {
        for (int d = 0; d < 3; ++d) {
          float want = 0;
          for (uint64_t id : ids[s]) want += rows[at[id] * 3 + d];
          CHECK(h[s * 3 + d] == Approx(want * scale).epsilon(1e-5));
        }
      }
      // Backward: each row's gradient sums dL/dh of every occurrence.
      std::vector<float> dh(kN * 3);
      for (size_t i = 0; i < dh.size(); ++i) dh[i] = 0.1f * (i % 7) - 0.3f;
      std::vector<float> grads(unique.size() * 3, 99.0f);
      bag.Backward(dh.data(), absl::MakeSpan(grads));
      std::vector<double> want(unique.size() * 3, 0.0);
      for (int s = 0; s < kN; ++s) {
        for (uint64_t id : ids[s]) {
          for (int d = 0; d < 3; ++d) {
            want[at[id] * 3 + d] += dh[s * 3 + d] * scale;
          }
        }
      }
      for (size_t i = 0; i < want.size(); ++i) {
        CHECK(grads[i] == Approx(want[i]).margin(1e-6));
      }
    }
  }
}

TEST_CASE("Fashion-MNIST's images give 2296 features each",
          "[embedding_bag][embedding]") {
  ImageFeatures features = *ImageFeatures::Create(Features(true), 5000, 784);
  CHECK(features.ids_per_sample() == 784 + 2 * 28 * 27);
  // Not a square: pixels only.
  CHECK(ImageFeatures::Create(Features(true), 5000, 10)->ids_per_sample() ==
        10);
  // A blank batch touches one row per (kind, position) at most.
  std::vector<float> x(2 * 784, 0.0f);
  std::vector<uint64_t> ids;
  features.Featurize(x.data(), 2, &ids);
  EmbeddingFront bag(Bag("mean"));
  REQUIRE(bag.SetIds(ids, 2, features.ids_per_sample()).ok());
  std::vector<uint64_t> blank = ReferenceIds(x.data(), 28, true, 5000);
  std::sort(blank.begin(), blank.end());
  blank.erase(std::unique(blank.begin(), blank.end()), blank.end());
  CHECK(std::vector<uint64_t>(bag.unique_ids().begin(),
                              bag.unique_ids().end()) == blank);
  CHECK_FALSE(ImageFeatures::Create(Features(true), 0, 784).ok());
  CHECK_FALSE(ImageFeatures::Create(Features(true), 5000, 0).ok());
}

TEST_CASE("embedding_concat puts a sample's field rows side by side",
          "[embedding]") {
  SparseFront spec;
  spec.kind = LayerKind::kEmbeddingConcat;
  spec.dim = 2;
  spec.fields = 3;
  EmbeddingFront concat(spec);
  CHECK(concat.width() == 6);
  // Two samples; id 7 stands in both, twice in the second.
  const std::vector<uint64_t> ids = {7, 3, 9, 5, 7, 7};
  REQUIRE(concat.SetIds(ids, 2, 3).ok());
  REQUIRE(std::vector<uint64_t>(concat.unique_ids().begin(),
                                concat.unique_ids().end()) ==
          std::vector<uint64_t>{3, 5, 7, 9});
  // Row of id i: (i, -i).
  absl::Span<float> rows = concat.rows();
  for (size_t u = 0; u < 4; ++u) {
    rows[2 * u] = static_cast<float>(concat.unique_ids()[u]);
    rows[2 * u + 1] = -static_cast<float>(concat.unique_ids()[u]);
  }
  std::vector<float> h(12);
  concat.Forward(nullptr, h.data());
  CHECK(h == std::vector<float>{7, -7, 3, -3, 9, -9, 5, -5, 7, -7, 7, -7});
  // Each row's gradient sums its places' slices of dh.
  std::vector<float> dh(12);
  for (size_t i = 0; i < dh.size(); ++i) dh[i] = static_cast<float>(i);
  std::vector<float> grads(8, 99.0f);
  concat.Backward(dh.data(), absl::MakeSpan(grads));
  CHECK(grads == std::vector<float>{2, 3,                    // id 3
                                    6, 7,                    // id 5
                                    0 + 8 + 10, 1 + 9 + 11,  // id 7
                                    4, 5});                  // id 9
  CHECK_FALSE(concat.SetIds(ids, 3, 2).ok());  // 2 ids, not 3 fields.
  CHECK_FALSE(concat.SetIds(ids, 3, 3).ok());  // 6 ids for 3 × 3.
}

TEST_CASE("embedding_concat's dense features follow each sample's rows",
          "[embedding][dense]") {
  SparseFront spec;
  spec.kind = LayerKind::kEmbeddingConcat;
  spec.dim = 2;
  spec.fields = 2;
  spec.dense = 3;
  EmbeddingFront concat(spec);
  CHECK(concat.width() == 7);
  const std::vector<uint64_t> ids = {4, 1, 1, 4};
  REQUIRE(concat.SetIds(ids, 2, 2).ok());
  absl::Span<float> rows = concat.rows();  // Ids 1 and 4: (i, 10 i).
  rows[0] = 1, rows[1] = 10, rows[2] = 4, rows[3] = 40;
  const std::vector<float> dense = {0.5f, 1.5f, 2.5f, -1, -2, -3};
  std::vector<float> h(14, 99.0f);
  concat.Forward(dense.data(), h.data());
  CHECK(h == std::vector<float>{4, 40, 1, 10, 0.5f, 1.5f, 2.5f,  //
                                1, 10, 4, 40, -1, -2, -3});
  // The rows' gradients read their slices of dh only, never the dense
  // features' part.
  std::vector<float> dh(14);
  for (size_t i = 0; i < dh.size(); ++i) dh[i] = static_cast<float>(i);
  std::vector<float> grads(4, 99.0f);
  concat.Backward(dh.data(), absl::MakeSpan(grads));
  CHECK(grads == std::vector<float>{2 + 7, 3 + 8,     // id 1
                                    0 + 9, 1 + 10});  // id 4
}

}  // namespace
}  // namespace paramd
