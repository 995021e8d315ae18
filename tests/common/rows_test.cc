// Embedding-table rows (common/model/rows.h): placement on shards is a pure
// function of (table, row) and balanced; a row's initial values are a pure
// function of (seed, table, row) and have the declared distribution; id
// lists are checked for order, duplicates and range.
#include "common/model/rows.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/match.h"

namespace paramd {
namespace {

TEST_CASE("rows are placed deterministically and within 5% of even", "[rows]") {
  std::mt19937_64 random(12345);
  for (int shards : {2, 3, 7, 16}) {
    std::vector<int64_t> count(shards, 0);
    constexpr int kIds = 1000000;
    for (int i = 0; i < kIds; ++i) {
      // Random ids over 2^40, and a dense run: both must balance.
      const uint64_t id =
          i % 2 == 0 ? random() >> 24 : static_cast<uint64_t>(i);
      const int s = RowShard(3, id, shards);
      REQUIRE(s >= 0);
      REQUIRE(s < shards);
      ++count[s];
    }
    const double even = static_cast<double>(kIds) / shards;
    for (int s = 0; s < shards; ++s) {
      INFO("shards " << shards << ", shard " << s << ": " << count[s]);
      CHECK(std::abs(count[s] - even) < 0.05 * even);
    }
  }
  // Another table places the same id independently.
  int same = 0;
  for (uint64_t id = 0; id < 10000; ++id) {
    same += RowShard(0, id, 2) == RowShard(1, id, 2);
  }
  CHECK(same > 4500);
  CHECK(same < 5500);
}

TEST_CASE("a row's initial values depend on seed, table and row only",
          "[rows]") {
  EmbeddingTableConfig normal;
  normal.rows = uint64_t{1} << 40;
  normal.dim = 16;
  normal.init = "normal";
  normal.init_scale = 0.5;
  std::vector<float> a(16), b(16), c(16);
  InitRow(normal, 42, 0, 123456789, absl::MakeSpan(a));
  InitRow(normal, 42, 0, 123456789, absl::MakeSpan(b));
  CHECK(std::memcmp(a.data(), b.data(), 64) == 0);
  for (auto [seed, table, row] :
       {std::tuple{43, 0, 123456789}, std::tuple{42, 1, 123456789},
        std::tuple{42, 0, 123456790}}) {
    InitRow(normal, seed, table, row, absl::MakeSpan(c));
    CHECK(std::memcmp(a.data(), c.data(), 64) != 0);
  }
  // The distribution: normal(0, 0.5) and uniform(±0.5) over many rows.
  EmbeddingTableConfig uniform = normal;
  uniform.init = "uniform";
  double sum = 0, squares = 0;
  double usum = 0, usquares = 0, umax = 0;
  constexpr int kRows = 20000;
  for (int r = 0; r < kRows; ++r) {
    InitRow(normal, 7, 2, r, absl::MakeSpan(a));
    InitRow(uniform, 7, 2, r, absl::MakeSpan(b));
    for (int i = 0; i < 16; ++i) {
      sum += a[i];
      squares += a[i] * a[i];
      usum += b[i];
      usquares += b[i] * b[i];
      umax = std::max<double>(umax, std::abs(b[i]));
    }
  }
  const double n = kRows * 16.0;
  CHECK(std::abs(sum / n) < 0.005);
  CHECK(std::abs(std::sqrt(squares / n) - 0.5) < 0.005);
  CHECK(std::abs(usum / n) < 0.005);
  // Uniform in ±0.5: variance 0.25 / 3.
  CHECK(std::abs(usquares / n - 0.25 / 3) < 0.002);
  CHECK(umax <= 0.5);
  EmbeddingTableConfig zeros = normal;
  zeros.init = "zeros";
  InitRow(zeros, 7, 2, 5, absl::MakeSpan(a));
  for (float v : a) CHECK(v == 0.0f);
}

TEST_CASE("initial values and placement are pinned to the bit", "[rows]") {
  // Workers and servers are separate processes, maybe of separate builds:
  // they agree only while the definition does not move. These are its
  // values (seed 1, table 0, row 0, dim 4, scale 1).
  EmbeddingTableConfig config;
  config.rows = 1000;
  config.dim = 4;
  config.init_scale = 1.0;
  const std::vector<std::pair<std::string, std::vector<uint32_t>>> pinned = {
      {"uniform", {0x3E92DD84, 0xBED27E28, 0x3F2F11EC, 0xBDD58910}},
      {"normal", {0x3F683F54, 0xBF896BB9, 0x3EDDE6FD, 0x3FA1E3F5}}};
  for (const auto& [init, bits] : pinned) {
    config.init = init;
    std::vector<float> row(4);
    InitRow(config, 1, 0, 0, absl::MakeSpan(row));
    for (int i = 0; i < 4; ++i) {
      uint32_t got;
      std::memcpy(&got, &row[i], 4);
      INFO(init << " element " << i);
      CHECK(got == bits[i]);
    }
  }
  CHECK(RowShard(0, 0, 2) == 1);
  CHECK(RowShard(0, 1, 7) == 4);
  CHECK(RowShard(5, 123456789, 16) == 1);
}

TEST_CASE("row id lists must be sorted, distinct and in range", "[rows]") {
  std::vector<uint64_t> ids;
  REQUIRE(DecodeRowIds(EncodeRowIds({1, 5, 9}), 10, "Push: rows", &ids).ok());
  CHECK(ids == std::vector<uint64_t>{1, 5, 9});
  REQUIRE(DecodeRowIds("", 10, "Push: rows", &ids).ok());
  CHECK(ids.empty());
  struct Bad {
    std::string bytes;
    const char* says;
  };
  for (const Bad& bad : {Bad{EncodeRowIds({1, 5, 5}), "duplicate id 5"},
                         Bad{EncodeRowIds({5, 1}), "unsorted id 1"},
                         Bad{EncodeRowIds({1, 10}),
                             "id 10 at position 1 is "
                             "out of range"},
                         Bad{std::string(12, '\0'), "not a whole number"}}) {
    const absl::Status s = DecodeRowIds(bad.bytes, 10, "Push: rows", &ids);
    INFO(s.message());
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(absl::StrContains(s.message(), "Push: rows"));
    CHECK(absl::StrContains(s.message(), bad.says));
  }
  // Positions by shard cover every id once, in order.
  const std::vector<uint64_t> many = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const auto positions = RowPositionsByShard(0, many, 3);
  size_t total = 0;
  for (int s = 0; s < 3; ++s) {
    for (size_t i = 0; i < positions[s].size(); ++i) {
      CHECK(RowShard(0, many[positions[s][i]], 3) == s);
      if (i > 0) CHECK(positions[s][i] > positions[s][i - 1]);
    }
    total += positions[s].size();
  }
  CHECK(total == many.size());
}

}  // namespace
}  // namespace paramd
