#include "common/wire/wire_format.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/wire/wire_primitives.h"
#include "common/wire/wire_reader.h"

namespace paramd {
namespace {

using wire::IsUtf8;
using wire::kFixed32;
using wire::kLengthDelimited;
using wire::kVarint;
using wire::LengthDelimitedTag;
using wire::Malformed;
using wire::PutTag;
using wire::PutVarint;
using wire::PutVarintField;
using wire::SubmessageHeader;
using wire::VarintSize;

// Field numbers (proto/paramd.proto).
constexpr int kPushJobId = 1, kPushRank = 2, kPushClock = 3,
              kPushChunks = kPushChunksField, kPushLoss = 5, kPushPullDtype = 6,
              kPushRows = kPushRowsField, kPushMore = 8,
              kPushReplyMessageBytes = 9, kPushSegment = 10, kPushSlices = 11;
constexpr int kRowTable = 1, kRowIds = 2, kRowDtype = 3, kRowData = 4;
constexpr int kPullVersion = 1, kPullChunks = kPullChunksField;
constexpr int kChunkTensor = 1, kChunkIndex = 2, kChunkDtype = 3,
              kChunkData = 4, kChunkIndices = 5, kChunkSegmentOffset = 6,
              kChunkSegmentBytes = 7;

struct ChunkFields {
  uint32_t tensor_id = 0, chunk_index = 0;
  int dtype = 0;
  uint64_t data_bytes = 0;
  bool has_data = false;
  WireReader::Mark data;  // Where the (last) data field's bytes start.
  uint64_t index_bytes = 0;
  WireReader::Mark indices;  // The same for the indices field.
  uint64_t segment_offset = 0, segment_bytes = 0;
};

// Reads a TensorChunk of `length` bytes: its fields in any order, a field
// given twice counting as its last value, unknown fields skipped (as
// protobuf reads it). Leaves the reader at the chunk's end; `out->data`
// marks the data to come back to.
const char* ReadChunkFields(WireReader* in, uint64_t length, ChunkFields* out) {
  if (length > in->size() - in->position()) {
    return "a chunk runs past the message's end";
  }
  const uint64_t end = in->position() + length;
  while (in->position() < end) {
    int field = 0, type = 0;
    if (!in->ReadTag(&field, &type)) return "bad chunk field tag";
    uint64_t v = 0;
    if (field == kChunkData && type == kLengthDelimited) {
      if (!in->ReadVarint(&v) || v > end - in->position()) {
        return "chunk data overruns the chunk";
      }
      out->data_bytes = v;
      out->has_data = true;
      out->data = in->mark();
      in->Skip(v);
    } else if (field == kChunkIndices && type == kLengthDelimited) {
      if (!in->ReadVarint(&v) || v > end - in->position()) {
        return "chunk indices overrun the chunk";
      }
      out->index_bytes = v;
      out->indices = in->mark();
      in->Skip(v);
    } else if ((field == kChunkTensor || field == kChunkIndex ||
                field == kChunkDtype || field == kChunkSegmentOffset ||
                field == kChunkSegmentBytes) &&
               type == kVarint) {
      if (!in->ReadVarint(&v)) return "truncated chunk field";
      if (field == kChunkTensor) out->tensor_id = static_cast<uint32_t>(v);
      if (field == kChunkIndex) out->chunk_index = static_cast<uint32_t>(v);
      if (field == kChunkDtype) out->dtype = static_cast<int32_t>(v);
      if (field == kChunkSegmentOffset) out->segment_offset = v;
      if (field == kChunkSegmentBytes) out->segment_bytes = v;
    } else if (type == 4 || !in->SkipField(field, type)) {
      return "undecodable chunk field";
    }
    if (in->position() > end) return "a chunk's fields overrun it";
  }
  return nullptr;
}

struct RowFields {
  uint32_t table = 0;
  int dtype = 0;
  uint64_t id_bytes = 0, data_bytes = 0;
  WireReader::Mark ids, data;
};

// Reads a length-delimited RowBlock as ReadChunkFields reads a chunk.
absl::Status ReadRowBlock(WireReader* in, const char* what, RowFields* out) {
  uint64_t length = 0;
  if (!in->ReadVarint(&length) || length > in->size() - in->position()) {
    return Malformed(what, "a row block runs past the message's end");
  }
  const uint64_t end = in->position() + length;
  while (in->position() < end) {
    int field = 0, type = 0;
    if (!in->ReadTag(&field, &type)) return Malformed(what, "bad row field");
    uint64_t v = 0;
    if ((field == kRowIds || field == kRowData) && type == kLengthDelimited) {
      if (!in->ReadVarint(&v) || v > end - in->position()) {
        return Malformed(what, "row ids or data overrun the row block");
      }
      (field == kRowIds ? out->id_bytes : out->data_bytes) = v;
      (field == kRowIds ? out->ids : out->data) = in->mark();
      in->Skip(v);
    } else if ((field == kRowTable || field == kRowDtype) && type == kVarint) {
      if (!in->ReadVarint(&v)) return Malformed(what, "truncated row field");
      if (field == kRowTable) out->table = static_cast<uint32_t>(v);
      if (field == kRowDtype) out->dtype = static_cast<int32_t>(v);
    } else if (type == 4 || !in->SkipField(field, type)) {
      return Malformed(what, "undecodable row field");
    }
    if (in->position() > end) return Malformed(what, "a row block overruns");
  }
  return absl::OkStatus();
}

// Reads a length-delimited TensorChunk's length and fields.
absl::Status ReadChunk(WireReader* in, const char* what, ChunkFields* out) {
  uint64_t length = 0;
  if (!in->ReadVarint(&length)) {
    return Malformed(what, "truncated chunk length");
  }
  if (const char* error = ReadChunkFields(in, length, out)) {
    return Malformed(what, error);
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::pair<size_t, size_t>> GroupChunks(
    absl::Span<const int64_t> chunk_bytes, int64_t message_bytes) {
  message_bytes = std::max<int64_t>(message_bytes, 1);
  std::vector<std::pair<size_t, size_t>> groups;
  size_t begin = 0;
  int64_t bytes = 0;
  for (size_t i = 0; i < chunk_bytes.size(); ++i) {
    bytes += chunk_bytes[i];
    if (bytes >= message_bytes) {
      groups.emplace_back(begin, i + 1);
      begin = i + 1;
      bytes = 0;
    }
  }
  if (begin < chunk_bytes.size() || groups.empty()) {
    groups.emplace_back(begin, chunk_bytes.size());
  }
  return groups;
}

std::string EncodePushHeader(absl::string_view job_id, uint32_t rank,
                             uint64_t clock, float loss, int pull_dtype,
                             uint32_t reply_message_bytes,
                             absl::string_view segment, bool slices) {
  std::string out;
  for (auto [field, text] :
       {std::pair{kPushJobId, job_id}, std::pair{kPushSegment, segment}}) {
    if (text.empty()) continue;
    PutTag(&out, field, kLengthDelimited);
    PutVarint(&out, text.size());
    out.append(text.data(), text.size());
  }
  PutVarintField(&out, kPushRank, rank);
  PutVarintField(&out, kPushClock, clock);
  if (loss != 0) {
    PutTag(&out, kPushLoss, kFixed32);
    uint32_t bits;
    std::memcpy(&bits, &loss, 4);
    for (int i = 0; i < 4; ++i)
      out.push_back(static_cast<char>(bits >> (8 * i)));
  }
  PutVarintField(&out, kPushPullDtype, static_cast<uint64_t>(pull_dtype));
  PutVarintField(&out, kPushReplyMessageBytes, reply_message_bytes);
  if (slices) PutVarintField(&out, kPushSlices, 1);
  return out;
}

std::string EncodePushMore() {
  std::string out;
  PutVarintField(&out, kPushMore, 1);
  return out;
}

std::string EncodeChunkHeader(int field, uint32_t tensor_id,
                              uint32_t chunk_index, int dtype,
                              size_t data_bytes) {
  std::string inner;
  PutVarintField(&inner, kChunkTensor, tensor_id);
  PutVarintField(&inner, kChunkIndex, chunk_index);
  PutVarintField(&inner, kChunkDtype, static_cast<uint64_t>(dtype));
  const bool has_data = data_bytes > 0;
  size_t length = inner.size();
  if (has_data) {
    length += 1 + VarintSize(data_bytes) + data_bytes;
  }
  std::string out;
  PutTag(&out, field, kLengthDelimited);
  PutVarint(&out, length);
  out += inner;
  if (has_data) {
    PutTag(&out, kChunkData, kLengthDelimited);
    PutVarint(&out, data_bytes);
  }
  return out;
}

std::string EncodeSparseChunkHeader(int field, uint32_t tensor_id,
                                    uint32_t chunk_index, int dtype,
                                    size_t index_bytes, size_t data_bytes) {
  std::string inner;
  PutVarintField(&inner, kChunkTensor, tensor_id);
  PutVarintField(&inner, kChunkIndex, chunk_index);
  PutVarintField(&inner, kChunkDtype, static_cast<uint64_t>(dtype));
  return SubmessageHeader(field, inner, kChunkIndices, index_bytes, kChunkData,
                          data_bytes);
}

std::string EncodeChunkDataTag(size_t data_bytes) {
  return LengthDelimitedTag(kChunkData, data_bytes);
}

std::string EncodeSegmentChunk(int field, uint32_t tensor_id,
                               uint32_t chunk_index, int dtype, uint64_t offset,
                               uint64_t bytes) {
  std::string inner;
  PutVarintField(&inner, kChunkTensor, tensor_id);
  PutVarintField(&inner, kChunkIndex, chunk_index);
  PutVarintField(&inner, kChunkDtype, static_cast<uint64_t>(dtype));
  PutVarintField(&inner, kChunkSegmentOffset, offset);
  PutVarintField(&inner, kChunkSegmentBytes, bytes);
  std::string out;
  PutTag(&out, field, kLengthDelimited);
  PutVarint(&out, inner.size());
  return out + inner;
}

std::string EncodePullHeader(uint64_t version) {
  std::string out;
  PutVarintField(&out, kPullVersion, version);
  return out;
}

// The `bytes` at `start` of the chunk just read by `in` (its data or
// indices): where they lie when whole and 4-byte aligned in one segment,
// else copied to `*free_space` in `*storage` (allocated on first need; the
// message's size bounds it). Leaves `in` where it was, at the chunk's end.
absl::string_view ChunkBytes(WireReader* in, const WireReader::Mark& start,
                             uint64_t bytes, std::unique_ptr<float[]>* storage,
                             char** free_space) {
  if (bytes == 0) return absl::string_view();
  const WireReader::Mark chunk_end = in->mark();
  // Come back to the bytes, wherever in the chunk they were.
  in->Restore(start);
  absl::string_view data = in->Contiguous(bytes);
  if (data.empty() ||
      reinterpret_cast<uintptr_t>(data.data()) % alignof(float) != 0) {
    if (*free_space == nullptr) {
      storage->reset(new float[in->size() / sizeof(float) + 1]);
      *free_space = reinterpret_cast<char*>(storage->get());
    }
    if (data.empty()) {
      in->CopyTo(*free_space, bytes);
    } else {
      std::memcpy(*free_space, data.data(), data.size());
    }
    data = absl::string_view(*free_space, bytes);
    // Keep what comes next float-aligned.
    *free_space += (bytes + 3) / 4 * 4;
  }
  in->Restore(chunk_end);
  return data;
}

namespace {

// A string field `name` of at most `limit` bytes (`truncated` when it
// runs past the message or the limit): protobuf refuses a proto3 string
// that is not UTF-8, each time it occurs.
absl::Status ReadUtf8(WireReader* in, const char* what, const char* name,
                      uint64_t limit, const char* truncated, std::string* out) {
  uint64_t v = 0;
  if (!in->ReadVarint(&v) || v > in->size() - in->position() || v > limit) {
    return Malformed(what, truncated);
  }
  out->resize(v);
  in->CopyTo(out->data(), v);
  if (!IsUtf8(*out)) {
    return Malformed(what, absl::StrCat(name, " is not UTF-8").c_str());
  }
  return absl::OkStatus();
}

// One pushed chunk, its bytes where ChunkBytes puts them.
absl::Status ReadPushChunk(WireReader* in, const char* what,
                           std::unique_ptr<float[]>* storage, char** free_space,
                           ChunkView* chunk) {
  ChunkFields f;
  RETURN_IF_ERROR(ReadChunk(in, what, &f));
  chunk->tensor_id = f.tensor_id;
  chunk->chunk_index = f.chunk_index;
  chunk->dtype = f.dtype;
  chunk->data = ChunkBytes(in, f.data, f.data_bytes, storage, free_space);
  chunk->indices =
      ChunkBytes(in, f.indices, f.index_bytes, storage, free_space);
  // Whether both may be (and where the bytes then are) is the receiver's
  // to say: protobuf reads either.
  chunk->segment_offset = f.segment_offset;
  chunk->segment_bytes = f.segment_bytes;
  return absl::OkStatus();
}

}  // namespace

absl::Status DecodePush(absl::Span<const absl::string_view> segments,
                        PushView* out, std::unique_ptr<float[]>* storage) {
  constexpr char kWhat[] = "Push";
  WireReader in(segments);
  *out = PushView();
  // Chunk data not referenced in place goes to `storage` (ChunkData).
  char* free_space = nullptr;
  while (in.position() < in.size()) {
    int field = 0, type = 0;
    if (!in.ReadTag(&field, &type) || type == 4) {
      return Malformed(kWhat, "bad field tag");
    }
    uint64_t v = 0;
    if (field == kPushJobId && type == kLengthDelimited) {
      RETURN_IF_ERROR(ReadUtf8(&in, kWhat, "job_id", UINT64_MAX,
                               "truncated job_id", &out->job_id));
    } else if (field == kPushSegment && type == kLengthDelimited) {
      RETURN_IF_ERROR(ReadUtf8(&in, kWhat, "segment", 4096,
                               "truncated or overlong segment", &out->segment));
    } else if ((field == kPushRank || field == kPushClock ||
                field == kPushPullDtype || field == kPushMore ||
                field == kPushReplyMessageBytes || field == kPushSlices) &&
               type == kVarint) {
      if (!in.ReadVarint(&v)) return Malformed(kWhat, "truncated varint");
      if (field == kPushRank) out->rank = static_cast<uint32_t>(v);
      if (field == kPushClock) out->clock = v;
      if (field == kPushPullDtype) out->pull_dtype = static_cast<int32_t>(v);
      // As protobuf reads a bool (any non-zero varint) and a uint32 (the
      // low 32 bits).
      if (field == kPushMore) out->more = v != 0;
      if (field == kPushSlices) out->slices = v != 0;
      if (field == kPushReplyMessageBytes) {
        out->reply_message_bytes = static_cast<uint32_t>(v);
      }
    } else if (field == kPushLoss && type == kFixed32) {
      uint32_t bits = 0;
      if (!in.ReadFixed32(&bits)) return Malformed(kWhat, "truncated loss");
      std::memcpy(&out->loss, &bits, 4);
    } else if (field == kPushChunks && type == kLengthDelimited) {
      ChunkView chunk;
      RETURN_IF_ERROR(ReadPushChunk(&in, kWhat, storage, &free_space, &chunk));
      out->chunks.push_back(chunk);
    } else if (field == kPushRows && type == kLengthDelimited) {
      RowFields f;
      RETURN_IF_ERROR(ReadRowBlock(&in, kWhat, &f));
      RowView row;
      row.table = f.table;
      row.dtype = f.dtype;
      row.ids = ChunkBytes(&in, f.ids, f.id_bytes, storage, &free_space);
      row.data = ChunkBytes(&in, f.data, f.data_bytes, storage, &free_space);
      out->rows.push_back(row);
    } else if (!in.SkipField(field, type)) {
      return Malformed(kWhat, "undecodable field");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> DecodePull(
    absl::Span<const absl::string_view> segments,
    const std::function<PullChunkTarget(uint32_t, uint32_t, int, uint64_t)>&
        place,
    absl::string_view pull_area) {
  constexpr char kWhat[] = "Pull";
  WireReader in(segments);
  uint64_t version = 0;
  while (in.position() < in.size()) {
    int field = 0, type = 0;
    if (!in.ReadTag(&field, &type) || type == 4) {
      return Malformed(kWhat, "bad field tag");
    }
    if (field == kPullVersion && type == kVarint) {
      if (!in.ReadVarint(&version))
        return Malformed(kWhat, "truncated version");
    } else if (field == kPullChunks && type == kLengthDelimited) {
      ChunkFields f;
      RETURN_IF_ERROR(ReadChunk(&in, kWhat, &f));
      if (f.index_bytes > 0) {
        return Malformed(kWhat, "a pulled chunk has indices (pulls are dense)");
      }
      // Without a pull area the segment fields are not this reader's
      // (as protobuf's, any chunk reads by its data).
      const bool in_segment = f.segment_bytes > 0 && !pull_area.empty();
      if (in_segment) {
        if (f.data_bytes > 0) {
          return absl::DataLossError(
              "Pull: a chunk both in the segment and in the message");
        }
        if (f.segment_offset > pull_area.size() ||
            f.segment_bytes > pull_area.size() - f.segment_offset) {
          return Malformed(kWhat, "a chunk beyond the segment's pull area");
        }
      }
      const uint64_t bytes = in_segment ? f.segment_bytes : f.data_bytes;
      PullChunkTarget target =
          place(f.tensor_id, f.chunk_index, f.dtype, bytes);
      if (target.dest == nullptr) {
        return absl::DataLossError(absl::StrCat("Pull: ", target.error));
      }
      if (in_segment) {
        std::memcpy(target.dest, pull_area.data() + f.segment_offset, bytes);
        continue;
      }
      const WireReader::Mark chunk_end = in.mark();
      in.Restore(f.data);
      in.CopyTo(target.dest, f.data_bytes);
      in.Restore(chunk_end);
    } else if (!in.SkipField(field, type)) {
      return Malformed(kWhat, "undecodable field");
    }
  }
  return version;
}

}  // namespace paramd
