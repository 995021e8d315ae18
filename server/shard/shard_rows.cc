#include "server/shard/shard_rows.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/half.h"
#include "common/base/status_macros.h"
#include "common/model/rows.h"

namespace paramd {
namespace {

constexpr int kFloat32 = proto::DTYPE_FLOAT32;
constexpr int kFloat16 = proto::DTYPE_FLOAT16;

}  // namespace

ShardRows::ShardRows(int num_shards, int shard_id, const ShardStore* store)
    : num_shards_(num_shards), shard_id_(shard_id), store_(store) {}

absl::StatusOr<std::vector<std::unique_ptr<RowTable>>> ShardRows::MakeTables(
    const JobConfig& config, int shard_id) {
  std::vector<std::unique_ptr<RowTable>> tables;
  for (size_t t = 0; t < config.model.embeddings.size(); ++t) {
    const EmbeddingTableConfig& table = config.model.embeddings[t];
    ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer,
                     MakeRowOptimizer(table));
    tables.push_back(std::make_unique<RowTable>(
        table, static_cast<uint32_t>(t), config.seed, std::move(optimizer)));
    if (table.storage.enabled()) {
      RETURN_IF_ERROR(tables.back()->OpenStorage(absl::StrCat(
          table.storage.dir, "/shard-", shard_id, "/", table.name)));
    }
  }
  return tables;
}

absl::string_view RowsReply::bytes() const {
  return dtype == kFloat16
             ? absl::string_view(reinterpret_cast<const char*>(halves.data()),
                                 halves.size() * sizeof(uint16_t))
             : absl::string_view(reinterpret_cast<const char*>(values.data()),
                                 values.size() * sizeof(float));
}

absl::Status ShardRows::CheckIds(const char* rpc, uint32_t table,
                                 absl::string_view ids,
                                 std::vector<uint64_t>* out) const {
  if (table >= static_cast<uint32_t>(store_->num_tables())) {
    return absl::InvalidArgumentError(
        absl::StrCat(rpc, ": table ", table, " does not exist (the job has ",
                     store_->num_tables(), " embedding table(s))"));
  }
  const EmbeddingTableConfig& config = store_->table(table).config();
  const std::string what =
      absl::StrCat(rpc, ": rows of table '", config.name, "'");
  RETURN_IF_ERROR(DecodeRowIds(ids, config.rows, what, out));
  const int shards = num_shards_;
  for (size_t i = 0; i < out->size(); ++i) {
    const int owner = RowShard(table, (*out)[i], shards);
    if (owner != shard_id_) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": id ", (*out)[i], " at position ", i, " belongs to shard ",
          owner, ", not ", shard_id_, " (common/model/rows.h RowShard)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ShardRows::CheckPush(const PushView& request,
                                  PushRows* out) const {
  const size_t n = request.rows.size();
  out->ids.resize(n);
  out->values.resize(n);
  std::vector<bool> seen(store_->num_tables(), false);
  for (size_t b = 0; b < n; ++b) {
    const RowView& block = request.rows[b];
    RETURN_IF_ERROR(CheckIds("Push", block.table, block.ids, &out->ids[b]));
    const EmbeddingTableConfig& config = store_->table(block.table).config();
    const std::string what =
        absl::StrCat("Push: rows of table '", config.name, "'");
    if (seen[block.table]) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": a second row block for the table"));
    }
    seen[block.table] = true;
    if (block.dtype != kFloat32 && block.dtype != kFloat16) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": dtype ", block.dtype,
                       "; expected DTYPE_FLOAT32 or DTYPE_FLOAT16"));
    }
    const size_t width = block.dtype == kFloat16 ? 2 : 4;
    const size_t count = out->ids[b].size() * config.dim;
    if (block.data.size() != count * width) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": data holds ", block.data.size(), " bytes; ",
                       out->ids[b].size(), " ids × dim ", config.dim, " × ",
                       width, " bytes = ", count * width));
    }
    std::vector<float>& values = out->values[b];
    values.resize(count);
    if (width == 2) {
      std::vector<uint16_t> halves(count);
      std::memcpy(halves.data(), block.data.data(), block.data.size());
      HalvesToFloats(halves, absl::MakeSpan(values));
    } else {
      std::memcpy(values.data(), block.data.data(), block.data.size());
    }
    for (size_t i = 0; i < count; ++i) {
      if (!std::isfinite(values[i])) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": the gradient of id ", out->ids[b][i / config.dim],
            " is not finite (element ", i % config.dim, ")"));
      }
    }
    out->wire_bytes += block.ids.size() + block.data.size();
    out->float32_bytes += block.ids.size() + count * sizeof(float);
  }
  for (size_t b = 0; b < n; ++b) {
    if (out->ids[b].empty()) continue;
    out->grads.push_back(
        RowGrads{request.rows[b].table, out->ids[b], out->values[b]});
  }
  return absl::OkStatus();
}

absl::Status ShardRows::CheckReplySize(uint32_t table, size_t count,
                                       int dtype) const {
  const uint64_t reply_bytes = uint64_t{count} * store_->table(table).dim() *
                               (dtype == kFloat16 ? 2 : 4);
  if (reply_bytes > static_cast<uint64_t>(kMaxMessageBytes)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("PullRows: ", count, " rows of table '",
                     store_->table(table).config().name, "' make a reply of ",
                     reply_bytes, " bytes, over the limit of ",
                     kMaxMessageBytes, "; pull fewer rows per call"));
  }
  return absl::OkStatus();
}

void ShardRows::Read(uint32_t table_index, absl::Span<const uint64_t> ids,
                     int dtype, uint64_t version, RowsReply* reply) const {
  const RowTable& table = store_->table(table_index);
  reply->version = version;
  reply->values.resize(ids.size() * table.dim());
  table.Read(ids, reply->values.data());
  table.CountPulled(ids.size());
  reply->dtype = dtype == kFloat16 ? kFloat16 : kFloat32;
  if (reply->dtype == kFloat16) {
    reply->halves.resize(reply->values.size());
    FloatsToHalves(reply->values, absl::MakeSpan(reply->halves));
    reply->values = std::vector<float>();
  }
}

void ShardRows::FillStatus(proto::ShardStatus* status) const {
  for (int t = 0; t < store_->num_tables(); ++t) {
    const RowTable& table = store_->table(t);
    proto::TableStatus* out = status->add_tables();
    out->set_name(table.config().name);
    out->set_dim(table.dim());
    out->set_rows(table.rows());
    out->set_max_rows(table.config().max_rows);
    out->set_bytes(table.bytes());
    out->set_rows_pulled(table.rows_pulled());
    out->set_rows_pushed(table.rows_pushed());
    out->set_rows_not_admitted(table.rows_not_admitted());
    out->set_rows_evicted(table.rows_evicted());
    out->set_policy(table.config().async() ? "async" : status->policy());
    out->set_rows_on_disk(table.rows_on_disk());
    out->set_disk_bytes(table.disk_bytes());
    out->set_rows_moved_out(table.rows_moved_out());
    out->set_rows_read_back(table.rows_read_back());
  }
}

}  // namespace paramd
