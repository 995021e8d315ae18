// RowSpill (server/store/row_spill.h) on a real folder: rows written to
// RocksDB read back bit-identical with their optimizer slots and meta,
// replaced and removed; a scan gives every row in ascending id on a
// consistent view; a snapshot taken beside writes holds the rows of its
// moment; a spill left by another process is not this one's; bad
// arguments and folders are named.
#include "server/store/row_spill.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

constexpr size_t kStride = 6;  // dim 3 and Adagrad's one slot per value.

// Rows of distinct bit patterns (negative zero, subnormals and NaN
// payloads included: read back as the same bits, not merely equal).
std::vector<float> Rows(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> rows(n * kStride);
  for (float& v : rows) {
    const uint32_t bits = gen();
    std::memcpy(&v, &bits, sizeof(v));
  }
  return rows;
}

std::vector<RowMeta> Metas(const std::vector<uint64_t>& ids) {
  std::vector<RowMeta> meta(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    meta[i].last = static_cast<int64_t>(ids[i] * 3) - 7;
    meta[i].count = static_cast<uint32_t>(ids[i] % 1000);
  }
  return meta;
}

bool SameBits(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

std::unique_ptr<RowSpill> OpenIn(const std::string& dir) {
  RowSpill::Options o;
  o.stride = kStride;
  o.cache_bytes = 4 << 20;
  o.write_buffer_bytes = 1 << 20;  // Small: the rows reach SST files.
  absl::StatusOr<std::unique_ptr<RowSpill>> spill = RowSpill::Open(dir, o);
  INFO(spill.status().ToString());
  REQUIRE(spill.ok());
  return *std::move(spill);
}

TEST_CASE("spilled rows read back bit-identical with their slots and meta",
          "[row_spill]") {
  std::unique_ptr<RowSpill> spill = OpenIn(testing::NewTempDir() + "/spill");
  // 20,000 rows in batches: past the write buffer, into files on disk.
  std::map<uint64_t, std::pair<std::vector<float>, RowMeta>> model;
  std::mt19937_64 gen(3);
  for (int batch = 0; batch < 20; ++batch) {
    std::vector<uint64_t> ids;
    for (int i = 0; i < 1000; ++i) ids.push_back(gen() >> 24);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    std::shuffle(ids.begin(), ids.end(), gen);  // Any order.
    const std::vector<float> rows = Rows(ids.size(), batch);
    const std::vector<RowMeta> meta = Metas(ids);
    REQUIRE(spill->Put(ids, rows.data(), meta).ok());
    for (size_t i = 0; i < ids.size(); ++i) {
      model[ids[i]] = {std::vector<float>(rows.begin() + i * kStride,
                                          rows.begin() + (i + 1) * kStride),
                       meta[i]};
    }
  }
  // What the write buffers still hold goes to files too: every read below
  // is from disk (or its cache).
  REQUIRE(spill->Flush().ok());
  CHECK(spill->DiskBytes() > 20000 * kStride * sizeof(float) / 2);
  CHECK(spill->EstimatedRows() > model.size() / 2);

  // Every row, and ids never written, in one read.
  std::vector<uint64_t> ids;
  for (const auto& [id, unused] : model) ids.push_back(id);
  ids.push_back(1);  // Not held (the ids above are >= 2^24 or so).
  std::vector<float> out(ids.size() * kStride, 42.0f);
  std::vector<RowMeta> meta(ids.size());
  std::vector<bool> found;
  REQUIRE(spill->Get(ids, out.data(), absl::MakeSpan(meta), &found).ok());
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    INFO("id " << ids[i]);
    REQUIRE(found[i]);
    CHECK(SameBits(&out[i * kStride], model[ids[i]].first.data(), kStride));
    CHECK(meta[i].id == ids[i]);
    CHECK(meta[i].last == model[ids[i]].second.last);
    CHECK(meta[i].count == model[ids[i]].second.count);
  }
  CHECK_FALSE(found.back());
  CHECK(out.back() == 42.0f);  // Left as it was.

  // Replaced, then removed (with an id never held: no error).
  const std::vector<uint64_t> some = {ids[0], ids[5]};
  const std::vector<float> again = Rows(2, 99);
  REQUIRE(spill->Put(some, again.data(), Metas(some)).ok());
  REQUIRE(spill->Get(some, out.data(), absl::MakeSpan(meta), &found).ok());
  CHECK(SameBits(out.data(), again.data(), 2 * kStride));
  REQUIRE(spill->Remove({ids[0], 7}).ok());
  REQUIRE(spill->Get(some, out.data(), absl::MakeSpan(meta), &found).ok());
  CHECK(found == std::vector<bool>{false, true});
}

TEST_CASE("a scan gives every row in ascending id, as of its start",
          "[row_spill]") {
  std::unique_ptr<RowSpill> spill = OpenIn(testing::NewTempDir() + "/spill");
  // Ids whose byte orders differ from their numeric order in little
  // endian.
  const std::vector<uint64_t> ids = {
      0x0100, 0x00ff, 1ull << 40, 3, 0xffffffffffffull, 0x10000};
  const std::vector<float> rows = Rows(ids.size(), 5);
  REQUIRE(spill->Put(ids, rows.data(), Metas(ids)).ok());
  std::vector<uint64_t> seen;
  bool wrote = false;
  REQUIRE(spill
              ->ForEach([&](uint64_t id, const float* row, const RowMeta& m) {
                const size_t at = static_cast<size_t>(
                    std::find(ids.begin(), ids.end(), id) - ids.begin());
                REQUIRE(at < ids.size());
                CHECK(SameBits(row, &rows[at * kStride], kStride));
                CHECK(m.id == id);
                CHECK(m.last == static_cast<int64_t>(id * 3) - 7);
                seen.push_back(id);
                if (!wrote) {
                  // Written mid-scan: not part of it.
                  const std::vector<uint64_t> late = {2, 1ull << 50};
                  const std::vector<float> r = Rows(2, 6);
                  REQUIRE(spill->Put(late, r.data(), Metas(late)).ok());
                  wrote = true;
                }
              })
              .ok());
  std::vector<uint64_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  CHECK(seen == sorted);
}

TEST_CASE("a snapshot holds the rows of its moment while writes go on",
          "[row_spill]") {
  const std::string dir = testing::NewTempDir();
  std::unique_ptr<RowSpill> spill = OpenIn(dir + "/spill");
  std::vector<uint64_t> ids;
  for (uint64_t id = 0; id < 5000; ++id) ids.push_back(id * 7919);
  const std::vector<float> rows = Rows(ids.size(), 8);
  REQUIRE(spill->Put(ids, rows.data(), Metas(ids)).ok());
  REQUIRE(spill->Snapshot(dir + "/snap").ok());
  // After the snapshot: one row replaced, one removed, one added.
  const std::vector<float> other = Rows(2, 9);
  REQUIRE(spill->Put({ids[1], 3}, other.data(), Metas({ids[1], 3})).ok());
  REQUIRE(spill->Remove({ids[2]}).ok());
  std::map<uint64_t, std::vector<float>> snapped;
  REQUIRE(RowSpill::ReadSnapshot(
              dir + "/snap", kStride,
              [&](uint64_t id, const float* row, const RowMeta&) {
                snapped[id].assign(row, row + kStride);
              })
              .ok());
  REQUIRE(snapped.size() == ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    CHECK(SameBits(snapped[ids[i]].data(), &rows[i * kStride], kStride));
  }
  // A snapshot read with another stride is damage, named.
  const absl::Status wrong =
      RowSpill::ReadSnapshot(dir + "/snap", kStride + 1,
                             [](uint64_t, const float*, const RowMeta&) {});
  CHECK(absl::IsDataLoss(wrong));
  CHECK(absl::StrContains(wrong.message(), "not 8+"));
  CHECK_FALSE(
      RowSpill::ReadSnapshot(dir + "/none", kStride,
                             [](uint64_t, const float*, const RowMeta&) {})
          .ok());
}

TEST_CASE("a spill opens empty, and bad arguments and folders are named",
          "[row_spill]") {
  const std::string dir = testing::NewTempDir();
  {
    std::unique_ptr<RowSpill> first = OpenIn(dir + "/spill");
    const std::vector<uint64_t> ids = {1, 2};
    const std::vector<float> rows = Rows(2, 1);
    REQUIRE(first->Put(ids, rows.data(), Metas(ids)).ok());
  }
  // A spill left by an earlier process (its state is in the checkpoints).
  std::unique_ptr<RowSpill> second = OpenIn(dir + "/spill");
  int rows = 0;
  REQUIRE(
      second->ForEach([&](uint64_t, const float*, const RowMeta&) { ++rows; })
          .ok());
  CHECK(rows == 0);

  RowSpill::Options o;
  o.stride = 0;
  CHECK(absl::IsInvalidArgument(RowSpill::Open(dir + "/x", o).status()));
  o.stride = kStride;
  const std::string file = testing::WriteFile(dir + "/a-file", "x");
  const absl::Status blocked = RowSpill::Open(file + "/spill", o).status();
  CHECK_FALSE(blocked.ok());
  CHECK(absl::StrContains(blocked.message(), file + "/spill"));
  const std::vector<uint64_t> ids = {1, 2};
  const std::vector<float> two = Rows(2, 1);
  CHECK(absl::IsInvalidArgument(second->Put(ids, two.data(), Metas({1}))));
}

}  // namespace
}  // namespace paramd
