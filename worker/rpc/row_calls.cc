// GrpcParameterClient's embedding-table rows: PullRows to every shard that
// owns some of the ids, and the row gradients the next pushes carry.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/half.h"
#include "common/base/status_macros.h"
#include "common/model/rows.h"
#include "common/rpc/grpc_frames.h"
#include "common/rpc/grpc_status.h"
#include "common/wire/row_wire.h"
#include "common/wire/wire_format.h"
#include "proto/paramd.pb.h"
#include "worker/rpc/grpc_parameter_client.h"

namespace paramd {

void GrpcParameterClient::SetRowGradients(uint32_t table,
                                          absl::Span<const uint64_t> ids,
                                          absl::Span<const float> grads) {
  push_frames_.SetRows(table, config_.model.embeddings[table].dim, ids, grads);
  has_rows_ = true;
}

absl::Status GrpcParameterClient::PullRows(uint64_t clock, uint32_t table,
                                           absl::Span<const uint64_t> ids,
                                           absl::Span<float> out) {
  return Retrying("PullRows",
                  [&]() -> absl::StatusOr<uint64_t> {
                    RETURN_IF_ERROR(PullRowsOnce(clock, table, ids, out));
                    return 0;
                  })
      .status();
}

absl::Status GrpcParameterClient::PullRowsOnce(uint64_t clock, uint32_t table,
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
  const int n = static_cast<int>(shards_.size());
  const std::vector<std::vector<uint32_t>> positions =
      RowPositionsByShard(table, ids, n);
  const int dtype = pull_half_ ? proto::DTYPE_FLOAT16 : proto::DTYPE_FLOAT32;
  std::vector<grpc::ClientContext> contexts(n);
  return ForAllShards(n, "PullRows", [&](int s, auto done) {
    if (positions[s].empty()) {
      done(absl::OkStatus());
      return;
    }
    auto shard_ids = std::make_shared<std::vector<uint64_t>>();
    shard_ids->reserve(positions[s].size());
    for (uint32_t p : positions[s]) shard_ids->push_back(ids[p]);
    const size_t id_bytes = shard_ids->size() * sizeof(uint64_t);
    FrameBuilder frame(shard_ids);
    frame.AddCopy(EncodePullRowsRequestHeader(config_.job_id,
                                              static_cast<uint32_t>(rank_),
                                              clock, table, dtype, id_bytes));
    frame.AddReference(absl::string_view(
        reinterpret_cast<const char*>(shard_ids->data()), id_bytes));
    auto request = std::make_shared<grpc::ByteBuffer>(frame.Finish());
    auto response = std::make_shared<grpc::ByteBuffer>();
    contexts[s].set_deadline(
        absl::ToChronoTime(absl::Now() + options_.pull_timeout));
    const std::vector<uint32_t>* where = &positions[s];
    shards_[s].generic->UnaryCall(
        &contexts[s], pull_rows_method_, grpc::StubOptions(), request.get(),
        response.get(),
        [request, response, where, out, dim,
         done = std::move(done)](grpc::Status status) {
          absl::Status s = FromGrpcStatus(status);
          ReceivedFrame received;
          PullRowsReplyView reply;
          std::string data;
          if (s.ok()) s = received.Take(*response);
          if (s.ok())
            s = DecodePullRowsReply(received.segments(), &reply, &data);
          const size_t count = where->size() * dim;
          const size_t width = reply.dtype == proto::DTYPE_FLOAT16 ? 2 : 4;
          if (s.ok() && data.size() != count * width) {
            s = absl::InternalError(
                absl::StrCat("the reply holds ", data.size(),
                             " bytes of rows; expected ", count * width));
          }
          if (s.ok()) {
            std::vector<float> values(count);
            if (width == 2) {
              std::vector<uint16_t> halves(count);
              std::memcpy(halves.data(), data.data(), data.size());
              HalvesToFloats(halves, absl::MakeSpan(values));
            } else {
              std::memcpy(values.data(), data.data(), data.size());
            }
            for (size_t i = 0; i < where->size(); ++i) {
              std::memcpy(&out[(*where)[i] * dim], &values[i * dim],
                          dim * sizeof(float));
            }
          }
          done(std::move(s));
        });
  });
}

}  // namespace paramd
