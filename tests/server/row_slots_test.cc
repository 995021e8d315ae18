// RowSlots (server/store/row_slots.h): rows and their meta by slot across
// slab boundaries as rows come and go, against a reference map; the index
// size RowTier's memory budget counts is absl's own; a reserved table
// keeps its slabs and index through sweeps, an unreserved one frees them;
// RowTier::MemoryRows' rows fit in memory_bytes.
#include "server/store/row_slots.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "server/store/row_tier.h"

namespace paramd {
namespace {

constexpr size_t kStride = 4;

// Row `id`'s floats, written and read back.
float Value(uint64_t id, size_t i) { return static_cast<float>(id * 10 + i); }

TEST_CASE("rows and meta follow their ids as rows come and go",
          "[store][slots]") {
  RowSlots slots(kStride);
  slots.KeepMeta(0);
  std::map<uint64_t, int64_t> reference;  // id -> last
  std::mt19937_64 random(7);
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < 5000; ++i) {  // Over a slab of 4096 each round.
      const uint64_t id = random() % 1000000;
      if (reference.count(id)) continue;
      const uint32_t slot = slots.Add(id, round);
      for (size_t k = 0; k < kStride; ++k) slots.Row(slot)[k] = Value(id, k);
      slots.meta(slot).count = static_cast<uint32_t>(id % 97);
      reference[id] = round;
    }
    for (auto it = reference.begin(); it != reference.end();) {
      if (random() % 3 != 0) {
        ++it;
        continue;
      }
      const uint32_t slot = slots.Find(it->first);
      REQUIRE(slot != RowSlots::kNone);
      slots.Remove(slot);
      it = reference.erase(it);
    }
    slots.Shrink();
    REQUIRE(slots.size() == reference.size());
    const std::vector<uint64_t> ids = slots.IdsBySlot();
    for (const auto& [id, last] : reference) {
      const uint32_t slot = slots.Find(id);
      REQUIRE(slot != RowSlots::kNone);
      CHECK(ids[slot] == id);
      const RowMeta& m = slots.meta(slot);
      CHECK(m.id == id);
      CHECK(m.last == last);
      CHECK(m.count == id % 97);
      for (size_t k = 0; k < kStride; ++k) {
        CHECK(slots.Row(slot)[k] == Value(id, k));
      }
    }
  }
}

TEST_CASE("meta kept after rows were added holds every row", "[store][slots]") {
  RowSlots slots(kStride);
  for (uint64_t id = 0; id < 9000; ++id) slots.Add(id * 3);
  slots.KeepMeta(12);
  for (uint64_t id = 0; id < 9000; ++id) {
    const RowMeta& m = slots.meta(slots.Find(id * 3));
    CHECK(m.id == id * 3);
    CHECK(m.last == 12);
    CHECK(m.count == 1);
  }
  const uint32_t added = slots.Add(5);  // Not a multiple of 3.
  CHECK(slots.meta(added).id == 5);
  CHECK(slots.meta(added).count == 0);
}

TEST_CASE("the index bytes counted are absl's for those rows",
          "[store][slots]") {
  for (uint64_t rows : {1, 2, 7, 8, 14, 15, 100, 1000, 4096, 10000, 50000,
                        114687, 114688, 300001}) {
    absl::flat_hash_map<uint64_t, uint32_t> index;
    index.reserve(rows);
    INFO(rows << " rows");
    CHECK(RowSlots::IndexBytes(rows) ==
          index.capacity() * (sizeof(std::pair<const uint64_t, uint32_t>) + 1));
  }
  CHECK(RowSlots::IndexBytes(0) == 0);
}

TEST_CASE("a reserved table keeps its slabs and index through sweeps",
          "[store][slots]") {
  const uint64_t rows = 3 * kRowSlabRows;
  RowSlots reserved(kStride), plain(kStride);
  reserved.KeepMeta(0);
  plain.KeepMeta(0);
  reserved.Reserve(rows, rows + rows / 8);
  const uint64_t index_bytes = RowSlots::IndexBytes(rows + rows / 8);
  CHECK(reserved.bytes() == index_bytes);
  for (uint64_t id = 0; id < rows; ++id) {
    reserved.Add(id);
    plain.Add(id);
  }
  const uint64_t slab =
      kRowSlabRows * (kStride * sizeof(float) + sizeof(RowMeta));
  CHECK(reserved.bytes() == 3 * slab + index_bytes);
  // The index made for the eighth more did not grow as the rows came.
  for (uint64_t id = rows; id < rows + rows / 8; ++id) reserved.Add(id);
  CHECK(reserved.bytes() == 4 * slab + index_bytes);
  for (RowSlots* s : {&reserved, &plain}) {
    while (s->size() > 10) s->Remove(0);
    s->Shrink();
  }
  CHECK(reserved.bytes() == 3 * slab + index_bytes);  // Reserve's slabs.
  // One slab and a spare, and an index shrunk to a few hundred bytes.
  CHECK(plain.bytes() < 2 * slab + 1024);
}

TEST_CASE("MemoryRows' rows and the disk's caches fit memory_bytes",
          "[store][slots]") {
  const size_t stride = 32;  // dim 16 under Adagrad.
  for (uint64_t memory_bytes : {uint64_t{1} << 16, uint64_t{64} << 20,
                                uint64_t{1} << 30, uint64_t{48} << 30}) {
    INFO(memory_bytes << " bytes");
    const uint64_t rows = RowTier::MemoryRows(memory_bytes, stride);
    const RowSpill::Options o = RowTier::SpillOptions(stride, memory_bytes);
    const uint64_t slab =
        kRowSlabRows * (stride * sizeof(float) + sizeof(RowMeta));
    const uint64_t held =
        ((rows + kRowSlabRows - 1) / kRowSlabRows + 1) * slab +
        RowSlots::IndexBytes(RowTier::IndexRows(rows));
    const uint64_t caches = o.cache_bytes + 2 * o.write_buffer_bytes;
    if (memory_bytes <= caches) {
      CHECK(rows == 64);  // The least a table holds.
      continue;
    }
    CHECK(held + caches <= memory_bytes);
    // And not far below: the next slab's rows would not fit, or the
    // index would double.
    const uint64_t more = rows + kRowSlabRows;
    CHECK(((more + kRowSlabRows - 1) / kRowSlabRows + 1) * slab +
              RowSlots::IndexBytes(RowTier::IndexRows(more)) + caches >
          memory_bytes);
  }
  CHECK(RowTier::MemoryRows(uint64_t{1} << 30, stride) > 5000000);
}

}  // namespace
}  // namespace paramd
