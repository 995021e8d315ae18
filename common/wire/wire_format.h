// The hot RPCs' payloads, encoded and decoded without protobuf objects.
//
// PushRequest and PullResponse (proto/paramd.proto) carry megabytes of
// tensor data. Going through protobuf messages copies every byte twice on
// each side (into the message, then into the wire buffer, and back). This
// module writes and reads the same protobuf wire format directly: an
// encoder produces the small framing pieces around data the caller keeps
// in place, and a decoder walks a message held in several segments (the
// slices gRPC received) and copies each chunk's bytes once, to where they
// belong, or not at all where they already lie whole and aligned in one
// segment. What it writes parses as the protobuf message and what protobuf
// writes decodes here, so the .proto file stays the contract.
//
// No gRPC here; common/rpc/grpc_frames.h joins this to grpc::ByteBuffer.
#ifndef PARAMD_COMMON_WIRE_WIRE_FORMAT_H_
#define PARAMD_COMMON_WIRE_WIRE_FORMAT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace paramd {

// One TensorChunk: its data points into a received segment, a decoder's
// storage, or the sender's buffer.
struct ChunkView {
  uint32_t tensor_id = 0;
  uint32_t chunk_index = 0;
  int dtype = 0;  // proto::DType value.
  absl::string_view data;
  // A sparse chunk's positions within the chunk (little-endian uint32,
  // ascending); `data` then holds one value per position. Empty: dense.
  absl::string_view indices;
  // The receiver's own index for the chunk, set once the chunk passed the
  // receiver's checks (decoders leave it at -1).
  int checked_local = -1;
  // TensorChunk.segment_offset / segment_bytes: the chunk's bytes lie in
  // the stream's shared-memory segment (data stays empty until the
  // receiver resolves them there); segment_bytes 0: in `data`.
  uint64_t segment_offset = 0;
  uint64_t segment_bytes = 0;
};

// One RowBlock of a push: an embedding table's row ids and gradients.
struct RowView {
  uint32_t table = 0;
  int dtype = 0;           // proto::DType of data.
  absl::string_view ids;   // Little-endian uint64 each.
  absl::string_view data;  // dim values per id.
};

// A PushRequest whose chunk data lives elsewhere.
struct PushView {
  std::string job_id;
  uint32_t rank = 0;
  uint64_t clock = 0;
  float loss = 0;
  int pull_dtype = 0;  // proto::DType; PushPull only.
  bool more = false;   // PushRequest.more: another message follows.
  uint32_t reply_message_bytes = 0;  // StepStream only.
  std::string segment;               // PushRequest.segment: StepStream only.
  bool slices = false;               // PushRequest.slices: StepStream only.
  std::vector<ChunkView> chunks;
  std::vector<RowView> rows;
};

// Field numbers of the repeated TensorChunk in each message.
constexpr int kPushChunksField = 4;  // PushRequest.chunks
constexpr int kPullChunksField = 2;  // PullResponse.chunks
constexpr int kPushRowsField = 7;    // PushRequest.rows

// PushStream and PullStream carry consecutive chunks in messages of at
// least this many data bytes (the last may be smaller): large enough that
// per-message costs stay small, small enough that one end works on one
// message while the next is on the wire.
constexpr int64_t kStreamMessageBytes = 1 << 20;

// Splits chunks of the given sizes, in order, into [begin, end) ranges of
// consecutive chunks, each closed once it holds `message_bytes` (at least
// 1).
std::vector<std::pair<size_t, size_t>> GroupChunks(
    absl::Span<const int64_t> chunk_bytes,
    int64_t message_bytes = kStreamMessageBytes);

// The framing before a PushRequest's chunks (job id, rank, clock, loss,
// pull_dtype; fields at their default are left out, as proto3 does).
std::string EncodePushHeader(absl::string_view job_id, uint32_t rank,
                             uint64_t clock, float loss, int pull_dtype = 0,
                             uint32_t reply_message_bytes = 0,
                             absl::string_view segment = "",
                             bool slices = false);
// PushRequest.more set: appended to every message of a push but its last.
std::string EncodePushMore();
// The framing that precedes `data_bytes` of chunk data inside a message
// (a TensorChunk as field `field` of its parent: kPushChunksField or
// kPullChunksField). The data itself follows it on the wire.
std::string EncodeChunkHeader(int field, uint32_t tensor_id,
                              uint32_t chunk_index, int dtype,
                              size_t data_bytes);
// A sparse chunk's framing: what precedes its `index_bytes` of indices,
// then (EncodeChunkDataTag) what sits between them and its `data_bytes` of
// values.
std::string EncodeSparseChunkHeader(int field, uint32_t tensor_id,
                                    uint32_t chunk_index, int dtype,
                                    size_t index_bytes, size_t data_bytes);
std::string EncodeChunkDataTag(size_t data_bytes);
// A whole TensorChunk whose `bytes` lie in the stream's shared-memory
// segment at `offset` (TensorChunk.segment_offset / segment_bytes).
std::string EncodeSegmentChunk(int field, uint32_t tensor_id,
                               uint32_t chunk_index, int dtype, uint64_t offset,
                               uint64_t bytes);
// The framing before a PullResponse's chunks.
std::string EncodePullHeader(uint64_t version);

// Decodes a PushRequest. Chunk data and indices that lie whole and 4-byte
// aligned in one segment are referenced in place (so the segments must outlive
// `out`); the rest is copied once into `*storage`, which is (re)allocated as
// needed. Errors name what is malformed.
absl::Status DecodePush(absl::Span<const absl::string_view> segments,
                        PushView* out, std::unique_ptr<float[]>* storage);

// Decodes a PullResponse (dense chunks only), handing each chunk to
// `place`, which returns
// where its `bytes` go (or null to refuse it; then its message is the
// error). Each chunk's bytes are copied exactly once, straight there: from
// the message, or for a chunk in the stream's segment from `pull_area`
// (its offsets checked against it; without an area, the segment fields are
// ignored and a chunk reads by its data, as protobuf reads it).
struct PullChunkTarget {
  char* dest = nullptr;
  std::string error;
};
absl::StatusOr<uint64_t> DecodePull(
    absl::Span<const absl::string_view> segments,
    const std::function<PullChunkTarget(uint32_t tensor_id,
                                        uint32_t chunk_index, int dtype,
                                        uint64_t bytes)>& place,
    absl::string_view pull_area = absl::string_view());

}  // namespace paramd

#endif  // PARAMD_COMMON_WIRE_WIRE_FORMAT_H_
