#include "common/wire/row_wire.h"

#include "common/wire/wire_format.h"
#include "common/wire/wire_primitives.h"
#include "common/wire/wire_reader.h"

namespace paramd {

namespace {

using wire::IsUtf8;
using wire::kLengthDelimited;
using wire::kVarint;
using wire::Malformed;
using wire::PutTag;
using wire::PutVarint;
using wire::PutVarintField;

using wire::LengthDelimitedTag;
using wire::SubmessageHeader;

constexpr int kRowTable = 1, kRowIds = 2, kRowDtype = 3, kRowData = 4;

}  // namespace

std::string EncodeRowBlockHeader(uint32_t table, int dtype, size_t id_bytes,
                                 size_t data_bytes) {
  std::string inner;
  PutVarintField(&inner, kRowTable, table);
  PutVarintField(&inner, kRowDtype, static_cast<uint64_t>(dtype));
  return SubmessageHeader(kPushRowsField, inner, kRowIds, id_bytes, kRowData,
                          data_bytes);
}

std::string EncodeRowDataTag(size_t data_bytes) {
  return LengthDelimitedTag(kRowData, data_bytes);
}

absl::Status DecodePullRows(absl::Span<const absl::string_view> segments,
                            PullRowsView* out, std::string* storage) {
  constexpr char kWhat[] = "PullRows";
  constexpr int kJob = 1, kRank = 2, kClock = 3, kTable = 4, kIds = 5,
                kDtype = 6;
  WireReader in(segments);
  *out = PullRowsView();
  while (in.position() < in.size()) {
    int field = 0, type = 0;
    if (!in.ReadTag(&field, &type) || type == 4) {
      return Malformed(kWhat, "bad field tag");
    }
    uint64_t v = 0;
    if ((field == kJob || field == kIds) && type == kLengthDelimited) {
      if (!in.ReadVarint(&v) || v > in.size() - in.position()) {
        return Malformed(kWhat,
                         field == kJob ? "truncated job_id" : "truncated ids");
      }
      if (field == kJob) {
        out->job_id.resize(v);
        in.CopyTo(out->job_id.data(), v);
        if (!IsUtf8(out->job_id)) {
          return Malformed(kWhat, "job_id is not UTF-8");
        }
        continue;
      }
      out->ids = in.Contiguous(v);
      if (out->ids.size() != v) {
        storage->resize(v);
        in.CopyTo(storage->data(), v);
        out->ids = *storage;
      }
    } else if ((field == kRank || field == kClock || field == kTable ||
                field == kDtype) &&
               type == kVarint) {
      if (!in.ReadVarint(&v)) return Malformed(kWhat, "truncated varint");
      if (field == kRank) out->rank = static_cast<uint32_t>(v);
      if (field == kClock) out->clock = v;
      if (field == kTable) out->table = static_cast<uint32_t>(v);
      if (field == kDtype) out->dtype = static_cast<int32_t>(v);
    } else if (!in.SkipField(field, type)) {
      return Malformed(kWhat, "undecodable field");
    }
  }
  return absl::OkStatus();
}

std::string EncodePullRowsRequestHeader(absl::string_view job_id, uint32_t rank,
                                        uint64_t clock, uint32_t table,
                                        int dtype, size_t id_bytes) {
  std::string out;
  if (!job_id.empty()) {
    PutTag(&out, 1, kLengthDelimited);
    PutVarint(&out, job_id.size());
    out.append(job_id.data(), job_id.size());
  }
  PutVarintField(&out, 2, rank);
  PutVarintField(&out, 3, clock);
  PutVarintField(&out, 4, table);
  PutVarintField(&out, 6, static_cast<uint64_t>(dtype));
  if (id_bytes > 0) {
    PutTag(&out, 5, kLengthDelimited);
    PutVarint(&out, id_bytes);
  }
  return out;
}

absl::Status DecodePullRowsReply(absl::Span<const absl::string_view> segments,
                                 PullRowsReplyView* out, std::string* data) {
  constexpr char kWhat[] = "PullRows reply";
  WireReader in(segments);
  *out = PullRowsReplyView();
  data->clear();
  while (in.position() < in.size()) {
    int field = 0, type = 0;
    if (!in.ReadTag(&field, &type) || type == 4) {
      return Malformed(kWhat, "bad field tag");
    }
    uint64_t v = 0;
    if ((field == 1 || field == 2) && type == kVarint) {
      if (!in.ReadVarint(&v)) return Malformed(kWhat, "truncated varint");
      if (field == 1) out->version = v;
      if (field == 2) out->dtype = static_cast<int32_t>(v);
    } else if (field == 3 && type == kLengthDelimited) {
      if (!in.ReadVarint(&v) || v > in.size() - in.position()) {
        return Malformed(kWhat, "truncated data");
      }
      data->resize(v);
      in.CopyTo(data->data(), v);
    } else if (!in.SkipField(field, type)) {
      return Malformed(kWhat, "undecodable field");
    }
  }
  return absl::OkStatus();
}

std::string EncodePullRowsHeader(uint64_t version, int dtype,
                                 size_t data_bytes) {
  constexpr int kVersion = 1, kDtype = 2, kData = 3;
  std::string out;
  PutVarintField(&out, kVersion, version);
  PutVarintField(&out, kDtype, static_cast<uint64_t>(dtype));
  if (data_bytes > 0) {
    PutTag(&out, kData, kLengthDelimited);
    PutVarint(&out, data_bytes);
  }
  return out;
}

}  // namespace paramd
