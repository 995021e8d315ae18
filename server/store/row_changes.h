// A table's saved forms and how they read back: a full save of the rows in
// memory (SaveRows, ParseRows), the log of rows eviction dropped since the
// last full save (DroppedRows), and an incremental save — the changes
// since an update (SaveRowChanges) — with ApplyRowChanges, which brings
// a full save read back to the later state. RowTable calls them under its
// lock; a table with storage saves its disk's snapshot instead
// (row_table.h).
//
// A full save: "PRW2", table (u32), floats per row (u32), steps and clock
// (i64 each), rows (u64), whether meta follows (u8), then by slot the ids
// (u64 each), the rows (floats), and with meta each row's last update
// (i64) and count (u32). "PROW", the format before, has no clock and no
// meta.
//
// A changes section: "PRWD", table (u32), floats per row (u32), steps,
// clock and since (i64 each), the count of dropped ids (u64) and the ids
// (u64 each), the count of changed rows (u64) and each row whole: id (u64),
// values and optimizer slots (floats), last update (i64), count (u32).
// Host byte order, as the rest of a shard's state (state_bytes.h).
#ifndef PARAMD_SERVER_STORE_ROW_CHANGES_H_
#define PARAMD_SERVER_STORE_ROW_CHANGES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/config/table_config.h"
#include "server/store/row_eviction.h"
#include "server/store/row_slots.h"

namespace paramd {

class RowTier;

constexpr char kRowChangesMagic[4] = {'P', 'R', 'W', 'D'};
// A RowMeta as saved: last update, count.
constexpr size_t kRowMetaBytes = sizeof(int64_t) + sizeof(uint32_t);

// A table's rows read back from a save, checked, not yet installed.
struct SavedRows {
  RowSlots rows;
  int64_t steps = 0;
  int64_t clock = 0;
  // A table with storage: the disk the restored table will have.
  std::shared_ptr<RowTier> tier;
};

// The rows a table's sweeps dropped, with the table's clock then, oldest
// first. Not thread-safe: the table's lock guards it.
class DroppedRows {
 public:
  void Add(int64_t clock, uint64_t id) { rows_.emplace_back(clock, id); }
  // Forgets the rows dropped before `clock`.
  void ForgetBefore(int64_t clock);
  void Clear() { rows_.clear(); }
  // Calls `f(id)` for each row dropped at `clock` or later.
  template <typename F>
  void ForEachSince(int64_t clock, F f) const {
    for (const auto& [when, id] : rows_) {
      if (when >= clock) f(id);
    }
  }
  uint64_t size() const { return rows_.size(); }
  uint64_t bytes() const { return rows_.capacity() * sizeof(rows_[0]); }

 private:
  std::vector<std::pair<int64_t, uint64_t>> rows_;
};

// What a save is checked against: the table it is for.
struct RowFormat {
  const EmbeddingTableConfig* config;
  uint32_t table;
  size_t stride;  // Floats per row: values and optimizer slots.
  bool meta;      // Whether the table keeps RowMeta (saved has one a row).
};

// Appends what every save of a table begins with: its four-byte `magic`,
// the table (u32), floats per row (u32), steps and clock (i64 each).
void PutRowsHeader(const char (&magic)[4], const RowFormat& format,
                   int64_t steps, int64_t clock, std::string* out);
// FailedPrecondition, naming `what` and what it holds ("state is",
// "changes are"), when a save's header is of another table or row width
// than `format`'s.
// `fits`: whether the rows it counts fit a table's slots (refused with
// the same words when not).
absl::Status CheckRowsHeader(const RowFormat& format, uint32_t table,
                             uint32_t stride, const std::string& what,
                             const char* holds, bool fits = true);
// Appends a full save of `rows` (with its meta when it keeps any).
void SaveRows(const RowFormat& format, const RowSlots& rows, int64_t steps,
              int64_t clock, std::string* out);
// Reads a full save (PRW2 or PROW) from the front of `*in` (which moves past
// it). DataLoss when damaged, FailedPrecondition when of another table.
absl::StatusOr<SavedRows> ParseRows(const RowFormat& format,
                                    absl::string_view* in);
// Appends the changes after update `since`: the ids `dropped` holds from
// `since` on, then every row of `rows` (which keeps meta) pushed or created
// after it, whole, with the steps and the clock now.
void SaveRowChanges(const RowFormat& format, const RowSlots& rows,
                    const DroppedRows& dropped, int64_t steps, int64_t clock,
                    int64_t since, std::string* out);
// Reads a changes section from the front of `*in` (which moves past it)
// onto `saved`, a save of the same table at the section's `since`: the
// dropped rows leave (the last slot's row moving into each hole, as the
// table does), the changed ones are replaced or added. FailedPrecondition
// when `saved` is at another update or of another table; DataLoss when
// the section is damaged; on any error `saved` may be part-way.
absl::Status ApplyRowChanges(const RowFormat& format, absl::string_view* in,
                             SavedRows* saved);

}  // namespace paramd

#endif  // PARAMD_SERVER_STORE_ROW_CHANGES_H_
