#include "server/store/row_tier.h"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "server/store/state_bytes.h"
#include "spdlog/spdlog.h"

namespace paramd {
namespace {

constexpr char kMagic[4] = {'P', 'R', 'W', 'S'};

// A Snapshot of `spill` into `dir`, its parents made.
absl::Status Snapshot(const RowSpill& spill, const std::string& dir) {
  std::error_code e;
  std::filesystem::create_directories(std::filesystem::path(dir).parent_path(),
                                      e);
  if (e) {
    return absl::InternalError(
        absl::StrCat("storage: make the folder of ", dir, ": ", e.message()));
  }
  return spill.Snapshot(dir);
}

}  // namespace

RowSpill::Options RowTier::SpillOptions(size_t stride, uint64_t memory_bytes) {
  constexpr uint64_t kMiB = 1 << 20;
  RowSpill::Options o;
  o.stride = stride;
  o.cache_bytes = std::clamp(memory_bytes / 16, kMiB, 64 * kMiB);
  o.write_buffer_bytes = std::clamp(memory_bytes / 32, kMiB, 32 * kMiB);
  return o;
}

uint64_t RowTier::MemoryRows(uint64_t memory_bytes, size_t stride) {
  const RowSpill::Options o = SpillOptions(stride, memory_bytes);
  const uint64_t caches = o.cache_bytes + 2 * o.write_buffer_bytes;
  if (memory_bytes <= caches) return 64;
  const uint64_t budget = memory_bytes - caches;
  const uint64_t slab = RowSlots::SlabBytes(stride, /*meta=*/true);
  auto fits = [&](uint64_t rows) {
    const uint64_t slabs = (rows + kRowSlabRows - 1) / kRowSlabRows + 1;
    return slabs * slab + RowSlots::IndexBytes(IndexRows(rows)) <= budget;
  };
  // The most rows that fit: fits() holds below them and not above.
  uint64_t lo = 0, hi = budget / (stride * sizeof(float)) + 1;
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return std::max<uint64_t>(lo, 64);
}

absl::StatusOr<std::unique_ptr<RowTier>> RowTier::Open(const std::string& dir,
                                                       size_t stride,
                                                       uint64_t memory_bytes) {
  // A process bounded by its tables' memory gives freed memory back:
  // process_setup keeps up to 1 GiB for reuse, and RocksDB's compactions
  // allocate and free large blocks on threads (heap arenas) of their own.
  static std::once_flag bounded;
  std::call_once(bounded, [] {
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
    mallopt(M_TRIM_THRESHOLD, 16 << 20);
    mallopt(M_ARENA_MAX, 2);
  });
  std::error_code e;
  std::filesystem::remove_all(dir, e);
  if (!e) std::filesystem::create_directories(dir, e);
  if (e) {
    return absl::InternalError(absl::StrCat(
        "storage: make ", dir, " (what an earlier server left removed)", ": ",
        e.message()));
  }
  absl::StatusOr<std::unique_ptr<RowSpill>> spill =
      RowSpill::Open(dir + "/g0", SpillOptions(stride, memory_bytes));
  if (!spill.ok()) return spill.status();
  return std::unique_ptr<RowTier>(
      new RowTier(dir, SpillOptions(stride, memory_bytes), *std::move(spill)));
}

absl::StatusOr<std::unique_ptr<RowTier>> RowTier::OpenFrom(
    const std::string& snapshot, uint64_t rows) const {
  // Folders of their own: a restore may open several before it installs
  // one (a full checkpoint's, then its delta's).
  static std::atomic<int> generations{1};
  const int generation = generations++;
  absl::StatusOr<std::unique_ptr<RowSpill>> spill = RowSpill::OpenFrom(
      snapshot, absl::StrCat(dir_, "/g", generation), options_);
  if (!spill.ok()) return spill.status();
  std::unique_ptr<RowTier> tier(new RowTier(dir_, options_, *std::move(spill)));
  tier->rows_ = rows;
  return tier;
}

absl::Status RowTier::Write(absl::Span<const uint64_t> ids, const float* rows,
                            absl::Span<const RowMeta> meta, uint64_t added) {
  if (ids.empty()) return absl::OkStatus();
  absl::Status s = spill_->Put(ids, rows, meta);
  if (s.ok()) rows_ += added;
  return s;
}

void RowTier::Read(absl::Span<const uint64_t> ids, std::vector<float>* out,
                   std::vector<RowMeta>* meta, std::vector<bool>* found,
                   const std::string& name) const {
  out->resize(ids.size() * spill_->stride());
  meta->assign(ids.size(), RowMeta{});
  absl::Status s = spill_->Get(ids, out->data(), absl::MakeSpan(*meta), found);
  if (!s.ok()) {
    spdlog::critical(
        "table '{}': reading rows back from disk failed: {}; the server "
        "stops (its checkpoint restores it)",
        name, std::string(s.message()));
    std::abort();
  }
}

uint64_t RowTier::ReadBack(absl::Span<const uint64_t> ids, RowSlots* held,
                           const std::string& name) const {
  std::vector<uint64_t> missed;
  for (uint64_t id : ids) {
    if (!held->Contains(id)) missed.push_back(id);
  }
  if (missed.empty()) return 0;
  const size_t stride = spill_->stride();
  std::vector<float> rows;
  std::vector<RowMeta> meta;
  std::vector<bool> found;
  Read(missed, &rows, &meta, &found, name);
  uint64_t n = 0;
  for (size_t i = 0; i < missed.size(); ++i) {
    if (!found[i]) continue;
    const uint32_t slot = held->Add(missed[i]);
    std::memcpy(held->Row(slot), &rows[i * stride], stride * sizeof(float));
    RowMeta& m = held->meta(slot);
    m.last = meta[i].last;
    m.count = meta[i].count;
    m.disk = RowMeta::kSame;
    ++n;
  }
  return n;
}

void RowTier::Piece::Clear() {
  ids.clear();
  rows.clear();
  metas.clear();
  added = 0;
}

void RowTier::Piece::Take(const RowSlots& held, uint32_t slot) {
  const RowMeta& m = held.meta(slot);
  ids.push_back(m.id);
  rows.insert(rows.end(), held.Row(slot), held.Row(slot) + held.stride());
  metas.push_back(m);
  added += m.disk == RowMeta::kNone;
}

bool RowTier::Write(const Piece& piece, const std::string& name) {
  absl::Status s =
      Write(piece.ids, piece.rows.data(), piece.metas, piece.added);
  if (!s.ok()) {
    spdlog::error("table '{}': writing rows to disk: {}; they stay in memory",
                  name, std::string(s.message()));
  }
  return s.ok();
}

absl::Status RowTier::WriteChanged(RowSlots* held) {
  Piece piece;
  std::vector<uint32_t> slots;
  auto write = [&]() -> absl::Status {
    RETURN_IF_ERROR(
        Write(piece.ids, piece.rows.data(), piece.metas, piece.added));
    for (uint32_t slot : slots) held->meta(slot).disk = RowMeta::kSame;
    piece.Clear();
    slots.clear();
    return absl::OkStatus();
  };
  for (uint32_t slot = 0; slot < held->size(); ++slot) {
    if (held->meta(slot).disk == RowMeta::kSame) continue;
    piece.Take(*held, slot);
    slots.push_back(slot);
    if (piece.ids.size() == kWriteRows) RETURN_IF_ERROR(write());
  }
  return write();
}

absl::Status RowTier::Save(const RowFormat& format, int64_t steps,
                           int64_t clock, const std::string& snapshot_dir,
                           RowSlots* held, std::string* out) {
  RETURN_IF_ERROR(WriteChanged(held));
  RETURN_IF_ERROR(Snapshot(*spill_, snapshot_dir));
  PutRowsHeader(kMagic, format, steps, clock, out);
  PutBytes(out, rows());
  PutBytes(out, static_cast<uint32_t>(snapshot_dir.size()));
  out->append(snapshot_dir);
  return absl::OkStatus();
}

bool RowTier::IsSave(absl::string_view in) {
  return in.size() >= sizeof(kMagic) &&
         std::memcmp(in.data(), kMagic, sizeof(kMagic)) == 0;
}

absl::StatusOr<SavedRows> RowTier::Parse(const RowFormat& format,
                                         absl::string_view* in) const {
  const std::string what =
      absl::StrCat("RestoreState: table '", format.config->name, "'");
  ByteCursor cursor(*in);
  char magic[sizeof(kMagic)];
  uint32_t table = 0, stride = 0, path_bytes = 0;
  uint64_t count = 0;
  SavedRows saved;
  std::string snapshot;
  if (!cursor.Bytes(magic, sizeof(magic)) || !cursor.Get(&table) ||
      !cursor.Get(&stride) || !cursor.Get(&saved.steps) ||
      !cursor.Get(&saved.clock) || !cursor.Get(&count) ||
      !cursor.Get(&path_bytes) || path_bytes > 65536 ||
      !cursor.Bytes((snapshot.resize(path_bytes), snapshot.data()),
                    path_bytes)) {
    return absl::DataLossError(what + ": truncated");
  }
  RETURN_IF_ERROR(CheckRowsHeader(format, table, stride, what, "state is"));
  saved.rows = RowSlots(format.stride);
  saved.rows.KeepMeta(saved.clock);
  absl::StatusOr<std::unique_ptr<RowTier>> tier = OpenFrom(snapshot, count);
  if (!tier.ok()) {
    return absl::Status(tier.status().code(),
                        absl::StrCat(what, ": ", tier.status().message()));
  }
  saved.tier = *std::move(tier);
  *in = *cursor.rest();
  return saved;
}

}  // namespace paramd
