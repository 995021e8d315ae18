// Top-k selection and error feedback (worker/topk.h).
#include "worker/topk.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace paramd {
namespace {

// The reference: sort every position by (magnitude desc, position asc),
// keep k, sort ascending.
std::vector<uint32_t> SlowTopK(const std::vector<float>& v, int64_t k) {
  std::vector<uint32_t> order(v.size());
  std::iota(order.begin(), order.end(), 0u);
  auto mag = [&](uint32_t i) {
    return std::isnan(v[i]) ? INFINITY : std::fabs(v[i]);
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return mag(a) > mag(b); });
  order.resize(static_cast<size_t>(std::min<int64_t>(k, v.size())));
  std::sort(order.begin(), order.end());
  return order;
}

TEST_CASE("top-k picks the largest magnitudes, ties to the lower position",
          "[topk]") {
  std::mt19937 random(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(random() % 3000);
    std::vector<float> v(n);
    // Few distinct magnitudes, both signs: many ties.
    std::uniform_int_distribution<int> level(-6, 6);
    for (float& x : v) x = static_cast<float>(level(random)) * 0.5f;
    const int64_t k = 1 + static_cast<int64_t>(random() % n);
    std::vector<uint32_t> got;
    SelectTopK(v, k, &got);
    INFO("n " << n << " k " << k);
    REQUIRE(got == SlowTopK(v, k));
  }
  // Large chunks with small k (the ranked-candidates path), including
  // magnitudes sorted ascending and all equal.
  for (int shape = 0; shape < 4; ++shape) {
    const int n = 40000;
    std::vector<float> v(n);
    std::normal_distribution<float> normal;
    for (int i = 0; i < n; ++i) {
      v[i] = shape == 0   ? normal(random)
             : shape == 1 ? static_cast<float>(i) * (i % 2 ? 1 : -1)
             : shape == 2 ? 0.5f
                          : static_cast<float>(n - i);
    }
    for (int64_t k : {1, 7, 400, 9999}) {
      std::vector<uint32_t> got;
      SelectTopK(v, k, &got);
      INFO("shape " << shape << " k " << k);
      REQUIRE(got == SlowTopK(v, k));
    }
  }
  std::vector<uint32_t> got;
  SelectTopK({1.0f, -3.0f, 2.0f, -3.0f}, 2, &got);
  CHECK(got == std::vector<uint32_t>{1, 3});
  SelectTopK({1.0f, -3.0f, 2.0f, 3.0f}, 9, &got);  // k beyond n: all.
  CHECK(got == std::vector<uint32_t>{0, 1, 2, 3});
  SelectTopK({1.0f, -3.0f}, 0, &got);
  CHECK(got.empty());
  // NaN and infinities are picked first: the server refuses them.
  SelectTopK({1.0f, NAN, 2.0f, -INFINITY, 5.0f}, 2, &got);
  CHECK(got == std::vector<uint32_t>{1, 3});
}

TEST_CASE("top-k counts: ceil(ratio * length), at least one", "[topk]") {
  CHECK(TopKCount(16384, 0.01) == 164);
  CHECK(TopKCount(100, 0.01) == 1);
  CHECK(TopKCount(10, 0.01) == 1);
  CHECK(TopKCount(10, 1.0) == 10);
  CHECK(TopKCount(1000, 0.25) == 250);
}

// Scatters a compressor's output for chunks laid out at `chunks` into a
// flat vector of `total` zeros.
std::vector<float> Scatter(
    const std::vector<std::pair<int64_t, int64_t>>& chunks,
    const std::vector<TopKCompressor::Chunk>& sent, size_t total) {
  std::vector<float> flat(total, 0.0f);
  for (size_t c = 0; c < chunks.size(); ++c) {
    REQUIRE(sent[c].indices.size() == sent[c].values.size());
    for (size_t j = 0; j < sent[c].indices.size(); ++j) {
      REQUIRE(sent[c].indices[j] < chunks[c].second);
      flat[chunks[c].first + sent[c].indices[j]] = sent[c].values[j];
    }
  }
  return flat;
}

TEST_CASE("error feedback keeps exactly what was not sent", "[topk]") {
  const std::vector<std::pair<int64_t, int64_t>> chunks = {
      {0, 1000}, {1000, 37}, {1037, 500}};
  const size_t total = 1537;
  TopKCompressor compressor(chunks, 0.05, /*error_feedback=*/true);
  std::mt19937 random(5);
  std::normal_distribution<float> normal;
  std::vector<float> previous(total, 0.0f);
  std::vector<double> pushed(total, 0.0), sent_total(total, 0.0);
  for (int step = 0; step < 30; ++step) {
    std::vector<float> g(total);
    for (float& x : g) x = normal(random);
    std::vector<TopKCompressor::Chunk> sent;
    compressor.Compress(g, &sent);
    CHECK(sent[0].indices.size() == 50);
    CHECK(sent[1].indices.size() == 2);
    CHECK(sent[2].indices.size() == 25);
    const std::vector<float> flat = Scatter(chunks, sent, total);
    const absl::Span<const float> residual = compressor.residual();
    for (size_t i = 0; i < total; ++i) {
      // Every entry of gradient + old residual went exactly one way.
      const float due = g[i] + previous[i];
      INFO("step " << step << " element " << i);
      REQUIRE((flat[i] == 0.0f || residual[i] == 0.0f));
      REQUIRE(flat[i] + residual[i] == due);
      pushed[i] += g[i];
      sent_total[i] += flat[i];
    }
    // What was sent is the largest of what was due, chunk by chunk.
    for (size_t c = 0; c < chunks.size(); ++c) {
      std::vector<float> due(chunks[c].second);
      for (int64_t p = 0; p < chunks[c].second; ++p) {
        due[p] = g[chunks[c].first + p] + previous[chunks[c].first + p];
      }
      CHECK(sent[c].indices == SlowTopK(due, sent[c].indices.size()));
    }
    previous.assign(residual.begin(), residual.end());
  }
  // Nothing lost: sent so far + residual = everything pushed (up to the
  // rounding of the float sums).
  for (size_t i = 0; i < total; ++i) {
    REQUIRE(sent_total[i] + previous[i] == Approx(pushed[i]).margin(1e-4));
  }
}

TEST_CASE("momentum correction: the worker's velocity, restarted where sent",
          "[topk]") {
  const std::vector<std::pair<int64_t, int64_t>> chunks = {{0, 700},
                                                           {700, 300}};
  const size_t total = 1000;
  const float m = 0.9f;
  TopKCompressor compressor(chunks, 0.02, /*error_feedback=*/true, m);
  // The reference: the same float operations, written out.
  std::vector<float> velocity(total, 0.0f), residual(total, 0.0f);
  std::mt19937 random(9);
  std::normal_distribution<float> normal;
  for (int step = 0; step < 25; ++step) {
    std::vector<float> g(total);
    for (float& x : g) x = normal(random);
    std::vector<float> due(total);
    for (size_t i = 0; i < total; ++i) {
      velocity[i] = m * velocity[i] + g[i];
      due[i] = velocity[i] + residual[i];
    }
    std::vector<TopKCompressor::Chunk> sent;
    compressor.Compress(g, &sent);
    const std::vector<float> flat = Scatter(chunks, sent, total);
    for (size_t c = 0; c < chunks.size(); ++c) {
      std::vector<float> part(due.begin() + chunks[c].first,
                              due.begin() + chunks[c].first + chunks[c].second);
      REQUIRE(sent[c].indices == SlowTopK(part, sent[c].indices.size()));
      for (uint32_t p : sent[c].indices) {
        velocity[chunks[c].first + p] = 0.0f;  // Masked: starts over.
        due[chunks[c].first + p] = 0.0f;
      }
    }
    for (size_t i = 0; i < total; ++i) {
      INFO("step " << step << " element " << i);
      REQUIRE(compressor.residual()[i] == due[i]);
      if (flat[i] != 0.0f) REQUIRE(velocity[i] == 0.0f);
    }
    residual = due;
  }
}

TEST_CASE("without error feedback the rest is dropped", "[topk]") {
  TopKCompressor compressor({{0, 100}}, 0.1, /*error_feedback=*/false);
  std::vector<float> g(100);
  std::iota(g.begin(), g.end(), -50.0f);
  std::vector<TopKCompressor::Chunk> sent;
  compressor.Compress(g, &sent);
  // |-50| .. |-46|, 49 .. 46, then of the tie at 45 the lower position.
  CHECK(sent[0].indices ==
        std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 96, 97, 98, 99});
  CHECK(sent[0].values[0] == -50.0f);
  for (float r : compressor.residual()) CHECK(r == 0.0f);
  // The same gradient again selects the same entries: nothing carried over.
  compressor.Compress(g, &sent);
  CHECK(sent[0].indices[6] == 96);
}

}  // namespace
}  // namespace paramd
