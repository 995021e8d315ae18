// EmbeddingBag (worker/model/embedding_bag.h): an image's hashed features, the
// batch's de-duplicated ids, and the bag's forward and backward passes
// against a reference written out from the definition.
#include "worker/model/embedding_bag.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <vector>

namespace paramd {
namespace {

ModelConfig Model(const std::string& combiner, bool pairs) {
  ModelConfig m;
  m.type = ModelType::kEmbeddingBag;
  m.layers = {3, 10};
  EmbeddingTableConfig t;
  t.name = "pixels";
  t.rows = 5000;
  t.dim = 3;
  m.embeddings.push_back(t);
  m.features.levels = 4;
  m.features.pairs = pairs;
  m.features.combiner = combiner;
  return m;
}

// The ids of one side × side image, from the definition.
std::vector<uint64_t> ReferenceIds(const float* image, int side, bool pairs,
                                   uint64_t rows) {
  auto level = [](float v) { return std::min(3, static_cast<int>(v * 4)); };
  std::vector<uint64_t> ids;
  for (int p = 0; p < side * side; ++p) {
    ids.push_back(EmbeddingBag::FeatureId(0, p, level(image[p]), rows));
  }
  if (!pairs) return ids;
  for (int r = 0; r < side; ++r) {
    for (int c = 0; c < side; ++c) {
      const int p = r * side + c;
      if (c + 1 < side) {
        ids.push_back(EmbeddingBag::FeatureId(
            1, p, level(image[p]) * 4 + level(image[p + 1]), rows));
      }
      if (r + 1 < side) {
        ids.push_back(EmbeddingBag::FeatureId(
            2, p, level(image[p]) * 4 + level(image[p + side]), rows));
      }
    }
  }
  return ids;
}

TEST_CASE("a batch's bag equals the combined rows of its features",
          "[embedding_bag]") {
  for (const std::string combiner : {"mean", "sum"}) {
    for (bool pairs : {true, false}) {
      const ModelConfig model = Model(combiner, pairs);
      constexpr int kSide = 6, kN = 5;
      EmbeddingBag bag = *EmbeddingBag::Create(model, kSide * kSide);
      const int per = kSide * kSide + (pairs ? 2 * kSide * (kSide - 1) : 0);
      REQUIRE(bag.ids_per_sample() == per);
      std::mt19937 random(3);
      std::vector<float> x(kN * kSide * kSide);
      // Levels 0-3, including the edges 0 and 1.
      for (float& v : x) v = static_cast<float>(random() % 5) / 4.0f;
      bag.Featurize(x.data(), kN);
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
      bag.Forward(h.data());
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

TEST_CASE("Fashion-MNIST's images give 2296 features each", "[embedding_bag]") {
  EmbeddingBag bag = *EmbeddingBag::Create(Model("mean", true), 784);
  CHECK(bag.ids_per_sample() == 784 + 2 * 28 * 27);
  // Not a square: pixels only.
  EmbeddingBag flat = *EmbeddingBag::Create(Model("mean", true), 10);
  CHECK(flat.ids_per_sample() == 10);
  // A blank batch touches one row per (kind, position) at most.
  std::vector<float> x(2 * 784, 0.0f);
  bag.Featurize(x.data(), 2);
  std::vector<uint64_t> blank = ReferenceIds(x.data(), 28, true, 5000);
  std::sort(blank.begin(), blank.end());
  blank.erase(std::unique(blank.begin(), blank.end()), blank.end());
  CHECK(bag.unique_ids().size() == blank.size());
  CHECK(std::vector<uint64_t>(bag.unique_ids().begin(),
                              bag.unique_ids().end()) == blank);
  ModelConfig mlp = Model("mean", true);
  mlp.type = ModelType::kMlp;
  CHECK(!EmbeddingBag::Create(mlp, 784).ok());
}

}  // namespace
}  // namespace paramd
