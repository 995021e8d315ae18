#include "server/store/row_changes.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/store/state_bytes.h"

namespace paramd {

void DroppedRows::ForgetBefore(int64_t clock) {
  const auto end = std::lower_bound(rows_.begin(), rows_.end(), clock,
                                    [](const std::pair<int64_t, uint64_t>& r,
                                       int64_t c) { return r.first < c; });
  rows_.erase(rows_.begin(), end);
  if (rows_.capacity() > 2 * rows_.size() + 1024) rows_.shrink_to_fit();
}

absl::Status ApplyRowChanges(const RowFormat& format, absl::string_view* in,
                             SavedRows* saved) {
  const std::string what = absl::StrCat("RestoreState: table '",
                                        format.config->name, "' (incremental)");
  ByteCursor cursor(*in);
  char magic[sizeof(kRowChangesMagic)];
  uint32_t table = 0, stride = 0;
  int64_t steps = 0, clock = 0, since = 0;
  uint64_t dropped = 0;
  if (!cursor.Bytes(magic, sizeof(magic)) ||
      std::memcmp(magic, kRowChangesMagic, sizeof(magic)) != 0) {
    return absl::DataLossError(what + ": no changed rows in the state");
  }
  if (!cursor.Get(&table) || !cursor.Get(&stride) || !cursor.Get(&steps) ||
      !cursor.Get(&clock) || !cursor.Get(&since) || !cursor.Get(&dropped)) {
    return absl::DataLossError(what + ": truncated");
  }
  if (table != format.table || stride != format.stride) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": changes are of table ", table, " with ", stride,
                     " floats per row; expected table ", format.table, " with ",
                     format.stride));
  }
  if (since != saved->clock || clock < since) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": changes from update ", since, " to ", clock,
                     " do not follow a state at update ", saved->clock));
  }
  // Parse keeps one RowMeta per row exactly when this table keeps them.
  const bool with_meta = format.meta;
  if (with_meta && saved->meta.size() != saved->size) {
    return absl::InternalError(what + ": the state's rows have no meta");
  }
  // Ids by slot, to move the last row into a dropped row's slot.
  std::vector<uint64_t> ids(saved->size);
  for (const auto& [id, slot] : saved->index) ids[slot] = id;
  auto row_at = [&](uint32_t slot) {
    return saved->slabs[slot / kRowSlabRows].get() +
           (slot % kRowSlabRows) * format.stride;
  };
  absl::string_view& left = *cursor.rest();
  if (left.size() / 8 < dropped) {
    return absl::DataLossError(what + ": truncated dropped rows");
  }
  for (uint64_t i = 0; i < dropped; ++i) {
    uint64_t id;
    std::memcpy(&id, left.data() + i * 8, 8);
    auto it = saved->index.find(id);
    if (it == saved->index.end()) continue;  // Created and dropped since.
    const uint32_t slot = it->second, last = saved->size - 1;
    saved->index.erase(it);
    if (slot != last) {
      std::memcpy(row_at(slot), row_at(last), format.stride * sizeof(float));
      if (with_meta) saved->meta[slot] = saved->meta[last];
      ids[slot] = ids[last];
      saved->index[ids[slot]] = slot;
    }
    if (with_meta) saved->meta.pop_back();
    ids.pop_back();
    --saved->size;
  }
  left.remove_prefix(dropped * 8);
  ByteCursor rows_cursor(left);
  uint64_t changed = 0;
  const size_t row_bytes = 8 + format.stride * sizeof(float) + kRowMetaBytes;
  if (!rows_cursor.Get(&changed) ||
      rows_cursor.rest()->size() / row_bytes < changed) {
    return absl::DataLossError(what + ": truncated changed rows");
  }
  const char* p = rows_cursor.rest()->data();
  for (uint64_t i = 0; i < changed; ++i, p += row_bytes) {
    uint64_t id;
    std::memcpy(&id, p, 8);
    if (id >= format.config->rows) {
      return absl::DataLossError(
          absl::StrCat(what, ": damaged (row id ", id, ")"));
    }
    auto [it, added] = saved->index.emplace(id, saved->size);
    if (added) {
      if (saved->size == UINT32_MAX - 1) {
        return absl::DataLossError(what + ": too many rows");
      }
      if (saved->size / kRowSlabRows >= saved->slabs.size()) {
        saved->slabs.push_back(
            std::make_unique<float[]>(kRowSlabRows * format.stride));
      }
      if (with_meta) saved->meta.emplace_back();
      ++saved->size;
    }
    std::memcpy(row_at(it->second), p + 8, format.stride * sizeof(float));
    if (with_meta) {
      RowMeta& m = saved->meta[it->second];
      m.id = id;
      std::memcpy(&m.last, p + 8 + format.stride * sizeof(float), 8);
      std::memcpy(&m.count, p + 16 + format.stride * sizeof(float), 4);
    }
  }
  rows_cursor.rest()->remove_prefix(changed * row_bytes);
  saved->steps = steps;
  saved->clock = clock;
  *in = *rows_cursor.rest();
  return absl::OkStatus();
}

}  // namespace paramd
