#include "server/store/row_changes.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "server/store/state_bytes.h"

namespace paramd {
namespace {

constexpr char kMagic[4] = {'P', 'R', 'W', '2'};
constexpr char kMagicBeforeClock[4] = {'P', 'R', 'O', 'W'};

// A row whole, as a changes section holds it.
void PutRow(const RowSlots& rows, uint32_t slot, std::string* out) {
  const RowMeta& m = rows.meta(slot);
  PutBytes(out, m.id);
  out->append(reinterpret_cast<const char*>(rows.Row(slot)),
              rows.stride() * sizeof(float));
  PutBytes(out, m.last);
  PutBytes(out, m.count);
}

}  // namespace

void DroppedRows::ForgetBefore(int64_t clock) {
  const auto end = std::lower_bound(rows_.begin(), rows_.end(), clock,
                                    [](const std::pair<int64_t, uint64_t>& r,
                                       int64_t c) { return r.first < c; });
  rows_.erase(rows_.begin(), end);
  if (rows_.capacity() > 2 * rows_.size() + 1024) rows_.shrink_to_fit();
}

void PutRowsHeader(const char (&magic)[4], const RowFormat& format,
                   int64_t steps, int64_t clock, std::string* out) {
  out->append(magic, sizeof(magic));
  PutBytes(out, format.table);
  PutBytes(out, static_cast<uint32_t>(format.stride));
  PutBytes(out, steps);
  PutBytes(out, clock);
}

absl::Status CheckRowsHeader(const RowFormat& format, uint32_t table,
                             uint32_t stride, const std::string& what,
                             const char* holds, bool fits) {
  if (fits && table == format.table && stride == format.stride) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      absl::StrCat(what, ": ", holds, " of table ", table, " with ", stride,
                   " floats per row; expected table ", format.table, " with ",
                   format.stride));
}

void SaveRows(const RowFormat& format, const RowSlots& rows, int64_t steps,
              int64_t clock, std::string* out) {
  PutRowsHeader(kMagic, format, steps, clock, out);
  PutBytes(out, static_cast<uint64_t>(rows.size()));
  const bool meta = rows.keeps_meta();
  PutBytes(out, static_cast<uint8_t>(meta));
  const std::vector<uint64_t> ids = rows.IdsBySlot();
  out->append(reinterpret_cast<const char*>(ids.data()), ids.size() * 8);
  for (uint32_t slot = 0; slot < rows.size(); ++slot) {
    out->append(reinterpret_cast<const char*>(rows.Row(slot)),
                format.stride * sizeof(float));
  }
  if (!meta) return;
  for (uint32_t slot = 0; slot < rows.size(); ++slot) {
    PutBytes(out, rows.meta(slot).last);
    PutBytes(out, rows.meta(slot).count);
  }
}

absl::StatusOr<SavedRows> ParseRows(const RowFormat& format,
                                    absl::string_view* in) {
  const std::string what =
      absl::StrCat("RestoreState: table '", format.config->name, "'");
  ByteCursor cursor(*in);
  char magic[sizeof(kMagic)];
  uint32_t table = 0, stride = 0;
  uint64_t count = 0;
  SavedRows saved;
  if (!cursor.Bytes(magic, sizeof(magic)) ||
      (std::memcmp(magic, kMagic, sizeof(magic)) != 0 &&
       std::memcmp(magic, kMagicBeforeClock, sizeof(magic)) != 0)) {
    return absl::DataLossError(what + ": no rows in the state");
  }
  const bool clocked = std::memcmp(magic, kMagic, sizeof(magic)) == 0;
  uint8_t has_meta = 0;
  if (!cursor.Get(&table) || !cursor.Get(&stride) ||
      !cursor.Get(&saved.steps) || (clocked && !cursor.Get(&saved.clock)) ||
      !cursor.Get(&count) || (clocked && !cursor.Get(&has_meta))) {
    return absl::DataLossError(what + ": truncated");
  }
  if (!clocked) saved.clock = saved.steps;
  if (has_meta > 1) return absl::DataLossError(what + ": damaged");
  RETURN_IF_ERROR(CheckRowsHeader(format, table, stride, what, "state is",
                                  /*fits=*/count < UINT32_MAX));
  absl::string_view& left = *cursor.rest();
  const uint64_t need = count * 8 + count * stride * sizeof(float) +
                        (has_meta != 0 ? count * kRowMetaBytes : 0);
  if (left.size() < need) {
    return absl::DataLossError(what + ": truncated rows");
  }
  saved.rows = RowSlots(format.stride);
  RowSlots& rows = saved.rows;
  // A row saved without meta was last pushed at the save, once.
  if (format.meta) rows.KeepMeta(saved.clock);
  const char* values = left.data() + count * 8;
  const char* meta = values + count * stride * sizeof(float);
  for (uint64_t slot = 0; slot < count; ++slot) {
    uint64_t id;
    std::memcpy(&id, left.data() + slot * 8, 8);
    if (id >= format.config->rows || rows.Contains(id)) {
      return absl::DataLossError(
          absl::StrCat(what, ": damaged (row id ", id, ")"));
    }
    const uint32_t s = rows.Add(id, saved.clock);
    std::memcpy(rows.Row(s), values + slot * stride * sizeof(float),
                stride * sizeof(float));
    if (!format.meta) continue;
    RowMeta& m = rows.meta(s);
    m.count = 1;
    if (has_meta == 0) continue;
    std::memcpy(&m.last, meta + slot * kRowMetaBytes, 8);
    std::memcpy(&m.count, meta + slot * kRowMetaBytes + 8, 4);
  }
  left.remove_prefix(need);
  *in = left;
  return saved;
}

void SaveRowChanges(const RowFormat& format, const RowSlots& rows,
                    const DroppedRows& dropped, int64_t steps, int64_t clock,
                    int64_t since, std::string* out) {
  PutRowsHeader(kRowChangesMagic, format, steps, clock, out);
  PutBytes(out, since);
  // The dropped ids (a row dropped and pushed again is in both lists: the
  // drop goes first).
  const size_t count_at = out->size();
  PutBytes(out, uint64_t{0});
  uint64_t count = 0;
  dropped.ForEachSince(since, [&](uint64_t id) {
    PutBytes(out, id);
    ++count;
  });
  std::memcpy(&(*out)[count_at], &count, sizeof(count));
  const size_t changed_at = out->size();
  PutBytes(out, uint64_t{0});
  uint64_t changed = 0;
  for (uint32_t slot = 0; slot < rows.size(); ++slot) {
    if (rows.meta(slot).last <= since) continue;
    PutRow(rows, slot, out);
    ++changed;
  }
  std::memcpy(&(*out)[changed_at], &changed, sizeof(changed));
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
  RETURN_IF_ERROR(CheckRowsHeader(format, table, stride, what, "changes are"));
  if (since != saved->clock || clock < since) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": changes from update ", since, " to ", clock,
                     " do not follow a state at update ", saved->clock));
  }
  // A table that saves changes keeps RowMeta (it tracks them), and so do
  // its saves read back.
  RowSlots& rows = saved->rows;
  if (!format.meta || !rows.keeps_meta()) {
    return absl::InternalError(what + ": the state's rows have no meta");
  }
  absl::string_view& left = *cursor.rest();
  if (left.size() / 8 < dropped) {
    return absl::DataLossError(what + ": truncated dropped rows");
  }
  for (uint64_t i = 0; i < dropped; ++i) {
    uint64_t id;
    std::memcpy(&id, left.data() + i * 8, 8);
    const uint32_t slot = rows.Find(id);
    if (slot != RowSlots::kNone) rows.Remove(slot);  // Else: created since.
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
    uint32_t slot = rows.Find(id);
    if (slot == RowSlots::kNone) {
      if (rows.size() == UINT32_MAX - 1) {
        return absl::DataLossError(what + ": too many rows");
      }
      slot = rows.Add(id);
    }
    std::memcpy(rows.Row(slot), p + 8, format.stride * sizeof(float));
    RowMeta& m = rows.meta(slot);
    std::memcpy(&m.last, p + 8 + format.stride * sizeof(float), 8);
    std::memcpy(&m.count, p + 16 + format.stride * sizeof(float), 4);
  }
  rows_cursor.rest()->remove_prefix(changed * row_bytes);
  saved->steps = steps;
  saved->clock = clock;
  *in = *rows_cursor.rest();
  return absl::OkStatus();
}

}  // namespace paramd
