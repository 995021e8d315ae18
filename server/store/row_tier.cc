#include "server/store/row_tier.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

namespace paramd {

uint64_t RowTier::MemoryRows(uint64_t memory_bytes, size_t stride) {
  const uint64_t per_row = stride * sizeof(float) + sizeof(RowMeta) +
                           (sizeof(uint64_t) + sizeof(uint32_t) + 1) * 16 / 7;
  return std::max<uint64_t>(memory_bytes / per_row, 64);
}

RowSpill::Options RowTier::SpillOptions(size_t stride) {
  RowSpill::Options o;
  o.stride = stride;
  return o;
}

absl::StatusOr<std::unique_ptr<RowTier>> RowTier::Open(const std::string& dir,
                                                       size_t stride) {
  std::error_code e;
  std::filesystem::remove_all(dir, e);
  if (!e) std::filesystem::create_directories(dir, e);
  if (e) {
    return absl::InternalError(absl::StrCat(
        "storage: make ", dir, " (what an earlier server left removed)", ": ",
        e.message()));
  }
  absl::StatusOr<std::unique_ptr<RowSpill>> spill =
      RowSpill::Open(dir + "/g0", SpillOptions(stride));
  if (!spill.ok()) return spill.status();
  return std::unique_ptr<RowTier>(new RowTier(dir, *std::move(spill)));
}

absl::StatusOr<std::unique_ptr<RowTier>> RowTier::OpenFrom(
    const std::string& snapshot, uint64_t rows) const {
  // Folders of their own: a restore may open several before it installs
  // one (a full checkpoint's, then its delta's).
  static std::atomic<int> generations{1};
  const int generation = generations++;
  absl::StatusOr<std::unique_ptr<RowSpill>> spill =
      RowSpill::OpenFrom(snapshot, absl::StrCat(dir_, "/g", generation),
                         SpillOptions(spill_->stride()));
  if (!spill.ok()) return spill.status();
  std::unique_ptr<RowTier> tier(new RowTier(dir_, *std::move(spill)));
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

absl::Status RowTier::Snapshot(const std::string& dir) const {
  std::error_code e;
  std::filesystem::create_directories(std::filesystem::path(dir).parent_path(),
                                      e);
  if (e) {
    return absl::InternalError(
        absl::StrCat("storage: make the folder of ", dir, ": ", e.message()));
  }
  return spill_->Snapshot(dir);
}

}  // namespace paramd
