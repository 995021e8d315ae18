#include "server/shard/shard_exports.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/model/rows.h"

namespace paramd {
namespace {

// Sorts a table's exported rows by id (their values along).
void SortById(int dim, RowTable::Exported* rows) {
  std::vector<size_t> order(rows->ids.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return rows->ids[a] < rows->ids[b]; });
  std::vector<uint64_t> ids(order.size());
  std::vector<float> values(rows->values.size());
  for (size_t i = 0; i < order.size(); ++i) {
    ids[i] = rows->ids[order[i]];
    std::copy_n(&rows->values[order[i] * dim], dim, &values[i * dim]);
  }
  rows->ids = std::move(ids);
  rows->values = std::move(values);
  std::sort(rows->dropped.begin(), rows->dropped.end());
  rows->dropped.erase(std::unique(rows->dropped.begin(), rows->dropped.end()),
                      rows->dropped.end());
}

}  // namespace

ShardExports::ShardExports(std::string job_id, ShardStore* store, Clock* clock)
    : job_id_(std::move(job_id)), store_(store), clock_(clock) {}

absl::StatusOr<proto::ExportResponse> ShardExports::Export(
    const proto::ExportRequest& request) {
  if (request.job_id() != job_id_) {
    return absl::FailedPreconditionError(
        absl::StrCat("Export: job_id '", request.job_id(),
                     "' does not match this shard's job '", job_id_, "'"));
  }
  if (request.page_rows() > kMaxPageRows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Export: page_rows ", request.page_rows(), " is above ", kMaxPageRows));
  }
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  if (held_ && now - held_->used > kIdle) held_.reset();
  proto::ExportResponse out;
  if (request.export_id() == 0) {
    if (request.page() != 0) {
      return absl::InvalidArgumentError(
          "Export: page without export_id (a new export starts at page 0)");
    }
    RETURN_IF_ERROR(Start(request));
    FillPage(0, &out);
    return out;
  }
  if (request.incremental() || request.since_version() != 0) {
    return absl::InvalidArgumentError(
        "Export: incremental and since_version go with a new export only "
        "(export_id 0)");
  }
  if (!held_ || held_->id != request.export_id()) {
    return absl::NotFoundError(absl::StrCat(
        "Export: export ", request.export_id(),
        " is not held (replaced by a newer export, or idle too long)"));
  }
  if (request.page() >= held_->pages) {
    return absl::InvalidArgumentError(
        absl::StrCat("Export: page ", request.page(), " of an export with ",
                     held_->pages, " pages"));
  }
  held_->used = now;
  FillPage(request.page(), &out);
  return out;
}

absl::Status ShardExports::Start(const proto::ExportRequest& request) {
  std::vector<int64_t> since;
  if (request.incremental()) {
    auto it = std::find_if(remembered_.begin(), remembered_.end(),
                           [&](const Remembered& r) {
                             return r.version == request.since_version();
                           });
    if (it == remembered_.end()) {
      std::vector<uint64_t> versions;
      for (const Remembered& r : remembered_) versions.push_back(r.version);
      return absl::FailedPreconditionError(absl::StrCat(
          "Export: since_version ", request.since_version(),
          " is not an export this shard remembers (",
          versions.empty()
              ? "none since it started"
              : absl::StrCat("versions ", absl::StrJoin(versions, ", ")),
          "): export whole"));
    }
    since = it->table_clocks;
  } else if (request.since_version() != 0) {
    return absl::InvalidArgumentError(
        "Export: since_version without incremental");
  }
  held_.reset();  // Its memory goes before the new capture's comes.
  store_->TrackChanges();
  Held held;
  held.id = next_id_++;
  held.used = clock_->Now();
  held.page_rows =
      request.page_rows() == 0 ? kDefaultPageRows : request.page_rows();
  // A page's rows fit in kPageBytes (a reply also holds page 0's chunks).
  size_t row_bytes = 8;
  for (int t = 0; t < store_->num_tables(); ++t) {
    row_bytes = std::max<size_t>(row_bytes, 8 + 4 * store_->table(t).dim());
  }
  held.page_rows = static_cast<uint32_t>(std::max<size_t>(
      1, std::min<size_t>(held.page_rows, kPageBytes / row_bytes)));
  held.state = store_->Export(since);
  if (!held.state.status.ok()) {
    return absl::Status(held.state.status.code(),
                        absl::StrCat("Export: ", held.state.status.message()));
  }
  uint64_t rows = 0;
  for (int t = 0; t < store_->num_tables(); ++t) {
    SortById(store_->table(t).dim(), &held.state.tables[t]);
    rows += held.state.tables[t].ids.size();
  }
  held.pages =
      std::max<uint64_t>(1, (rows + held.page_rows - 1) / held.page_rows);
  remembered_.push_back(
      Remembered{held.state.version, held.state.table_clocks});
  while (remembered_.size() > kRemembered) remembered_.pop_front();
  store_->HoldDropped(ShardStore::kExportHolder,
                      remembered_.front().table_clocks);
  held_ = std::move(held);
  return absl::OkStatus();
}

void ShardExports::FillPage(uint64_t page, proto::ExportResponse* out) const {
  const Held& h = *held_;
  out->set_export_id(h.id);
  out->set_version(h.state.version);
  out->set_pages(h.pages);
  if (page == 0) {
    for (int i = 0; i < store_->num_chunks(); ++i) {
      const ChunkSpec& spec = store_->chunk_spec(i);
      const std::vector<float>& values = h.state.dense->params[i];
      proto::TensorChunk* chunk = out->add_chunks();
      chunk->set_tensor_id(static_cast<uint32_t>(spec.tensor_id));
      chunk->set_chunk_index(static_cast<uint32_t>(spec.chunk_index));
      chunk->set_dtype(proto::DTYPE_FLOAT32);
      chunk->set_data(values.data(), values.size() * sizeof(float));
    }
    for (size_t t = 0; t < h.state.tables.size(); ++t) {
      if (h.state.tables[t].dropped.empty()) continue;
      proto::RowBlock* dropped = out->add_dropped();
      dropped->set_table(static_cast<uint32_t>(t));
      dropped->set_ids(EncodeRowIds(h.state.tables[t].dropped));
    }
  }
  // Rows [begin, end) of all tables' rows, in table order.
  const uint64_t begin = page * h.page_rows, end = begin + h.page_rows;
  uint64_t first = 0;  // The table's first row in that order.
  for (size_t t = 0; t < h.state.tables.size(); ++t) {
    const RowTable::Exported& rows = h.state.tables[t];
    const uint64_t n = rows.ids.size();
    const uint64_t from = std::max(begin, first), to = std::min(end, first + n);
    if (from < to) {
      const size_t dim = store_->table(static_cast<int>(t)).dim();
      proto::RowBlock* block = out->add_rows();
      block->set_table(static_cast<uint32_t>(t));
      block->set_dtype(proto::DTYPE_FLOAT32);
      block->set_ids(EncodeRowIds(
          absl::MakeConstSpan(rows.ids).subspan(from - first, to - from)));
      block->set_data(&rows.values[(from - first) * dim],
                      (to - from) * dim * sizeof(float));
    }
    first += n;
  }
}

std::vector<uint64_t> ShardExports::remembered_versions() const {
  absl::MutexLock lock(&mu_);
  std::vector<uint64_t> out;
  for (const Remembered& r : remembered_) out.push_back(r.version);
  return out;
}

}  // namespace paramd
