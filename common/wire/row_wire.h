// A push's RowBlocks and PullRows's request and reply (proto/
// paramd.proto), encoded and decoded without protobuf objects, like the tensor
// payloads of common/wire/wire_format.h: row ids are referenced in place where
// they lie whole in one received segment, and a reply's values follow its
// framing on the wire straight from the shard's buffer.
#ifndef PARAMD_COMMON_WIRE_ROW_WIRE_H_
#define PARAMD_COMMON_WIRE_ROW_WIRE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace paramd {

// A RowBlock's framing (as PushRequest.rows): what precedes its
// `id_bytes` of ids, then (EncodeRowDataTag) what sits between them and
// its `data_bytes` of values.
std::string EncodeRowBlockHeader(uint32_t table, int dtype, size_t id_bytes,
                                 size_t data_bytes);
std::string EncodeRowDataTag(size_t data_bytes);
// A PullRowsRequest; `ids` points into the received segments or `storage`
// of DecodePullRows.
struct PullRowsView {
  std::string job_id;
  uint32_t rank = 0;
  uint64_t clock = 0;
  uint32_t table = 0;
  int dtype = 0;
  absl::string_view ids;
};

// Decodes a PullRowsRequest; ids that lie whole in one segment are
// referenced in place, others copied once into `*storage`.
absl::Status DecodePullRows(absl::Span<const absl::string_view> segments,
                            PullRowsView* out, std::string* storage);
// A PullRowsRequest's framing before its `id_bytes` of ids (which end it).
std::string EncodePullRowsRequestHeader(absl::string_view job_id, uint32_t rank,
                                        uint64_t clock, uint32_t table,
                                        int dtype, size_t id_bytes);
// Decodes a PullRowsResponse, copying its data once into `*data`.
struct PullRowsReplyView {
  uint64_t version = 0;
  int dtype = 0;
};
absl::Status DecodePullRowsReply(absl::Span<const absl::string_view> segments,
                                 PullRowsReplyView* out, std::string* data);
// The framing before a PullRowsResponse's `data_bytes` of row values.
std::string EncodePullRowsHeader(uint64_t version, int dtype,
                                 size_t data_bytes);

}  // namespace paramd

#endif  // PARAMD_COMMON_WIRE_ROW_WIRE_H_
