#include "worker/rpc/row_calls.h"

#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/half.h"
#include "common/model/rows.h"
#include "common/rpc/grpc_frames.h"
#include "common/rpc/grpc_status.h"
#include "common/wire/row_wire.h"
#include "common/wire/wire_format.h"
#include "proto/paramd.pb.h"

namespace paramd {
namespace {

// One shard's PullRows request for `ids` (which it keeps alive until sent).
grpc::ByteBuffer RowRequest(const std::string& job_id, int rank, uint64_t clock,
                            uint32_t table, int dtype,
                            std::shared_ptr<std::vector<uint64_t>> ids) {
  const size_t id_bytes = ids->size() * sizeof(uint64_t);
  const char* bytes = reinterpret_cast<const char*>(ids->data());
  FrameBuilder frame(std::move(ids));
  frame.AddCopy(EncodePullRowsRequestHeader(job_id, static_cast<uint32_t>(rank),
                                            clock, table, dtype, id_bytes));
  frame.AddReference(absl::string_view(bytes, id_bytes));
  return frame.Finish();
}

// Copies the rows of `response` (one per position in `where`, `dim` floats
// each) to `out` at those positions.
absl::Status CopyRows(const grpc::ByteBuffer& response,
                      const std::vector<uint32_t>& where, size_t dim,
                      absl::Span<float> out) {
  ReceivedFrame received;
  PullRowsReplyView reply;
  std::string data;
  absl::Status s = received.Take(response);
  if (s.ok()) s = DecodePullRowsReply(received.segments(), &reply, &data);
  if (!s.ok()) return s;
  const size_t count = where.size() * dim;
  const size_t width = reply.dtype == proto::DTYPE_FLOAT16 ? 2 : 4;
  if (data.size() != count * width) {
    return absl::InternalError(absl::StrCat("the reply holds ", data.size(),
                                            " bytes of rows; expected ",
                                            count * width));
  }
  std::vector<float> values(count);
  if (width == 2) {
    std::vector<uint16_t> halves(count);
    std::memcpy(halves.data(), data.data(), data.size());
    HalvesToFloats(halves, absl::MakeSpan(values));
  } else {
    std::memcpy(values.data(), data.data(), data.size());
  }
  for (size_t i = 0; i < where.size(); ++i) {
    std::memcpy(&out[where[i] * dim], &values[i * dim], dim * sizeof(float));
  }
  return absl::OkStatus();
}

}  // namespace

RowCalls::RowCalls(const ClientSetup& setup, ShardLinks* links)
    : config_(*setup.config),
      rank_(setup.rank),
      pull_half_(setup.config->compression.pull_fp16()),
      links_(links) {}

absl::Status RowCalls::Pull(uint64_t clock, uint32_t table,
                            absl::Span<const uint64_t> ids,
                            absl::Span<float> out) {
  if (table >= config_.model.embeddings.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PullRows: table ", table, " does not exist"));
  }
  const size_t dim = config_.model.embeddings[table].dim;
  if (out.size() != ids.size() * dim) {
    return absl::InvalidArgumentError(absl::StrCat("PullRows: ", out.size(),
                                                   " floats for ", ids.size(),
                                                   " rows of dim ", dim));
  }
  const int n = links_->size();
  const std::vector<std::vector<uint32_t>> positions =
      RowPositionsByShard(table, ids, n);
  const int dtype = pull_half_ ? proto::DTYPE_FLOAT16 : proto::DTYPE_FLOAT32;
  std::vector<grpc::ClientContext> contexts(n);
  return QueuedStreamsForAllShards(
      n, "PullRows",
      [&](int s, StepQueue* queue, auto done) -> std::unique_ptr<QueuedStream> {
        if (positions[s].empty()) {
          done(absl::OkStatus());
          return nullptr;
        }
        auto shard_ids = std::make_shared<std::vector<uint64_t>>();
        shard_ids->reserve(positions[s].size());
        for (uint32_t p : positions[s]) shard_ids->push_back(ids[p]);
        std::vector<grpc::ByteBuffer> request;
        request.push_back(RowRequest(config_.job_id, rank_, clock, table, dtype,
                                     std::move(shard_ids)));
        contexts[s].set_deadline(DeadlineIn(links_->options().pull_timeout));
        const std::vector<uint32_t>* where = &positions[s];
        return std::make_unique<QueuedStream>(
            links_->generic(s), &contexts[s], links_->methods().pull_rows,
            std::move(request),
            [where, out, dim](const grpc::ByteBuffer& reply) {
              return CopyRows(reply, *where, dim, out);
            },
            links_->Noting(s, std::move(done)), queue);
      });
}

}  // namespace paramd
