#include "tests/wire_differential.h"

#include <google/protobuf/stubs/logging.h>

#include <cstring>
#include <map>
#include <memory>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/wire/wire_format.h"
#include "proto/paramd.pb.h"

namespace paramd::testing {
namespace {

// `bytes` as segments cut at `cuts`.
std::vector<absl::string_view> Segments(absl::string_view bytes,
                                        const std::vector<size_t>& cuts) {
  std::vector<absl::string_view> out;
  size_t from = 0;
  for (size_t cut : cuts) {
    if (cut <= from || cut >= bytes.size()) continue;
    out.push_back(bytes.substr(from, cut - from));
    from = cut;
  }
  out.push_back(bytes.substr(from));
  return out;
}

std::string Describe(absl::string_view bytes) {
  return absl::StrCat(bytes.size(),
                      " bytes: ", absl::BytesToHexString(bytes.substr(0, 96)));
}

std::string CompareChunk(size_t i, uint32_t tensor_id, uint32_t chunk_index,
                         int dtype, absl::string_view data,
                         const proto::TensorChunk& want) {
  if (tensor_id != want.tensor_id() || chunk_index != want.chunk_index() ||
      dtype != static_cast<int>(want.dtype()) || data != want.data()) {
    return absl::StrCat("chunk ", i, ": decoder read (", tensor_id, ", ",
                        chunk_index, ", dtype ", dtype, ", ", data.size(),
                        " bytes), protobuf (", want.tensor_id(), ", ",
                        want.chunk_index(), ", dtype ", want.dtype(), ", ",
                        want.data().size(), " bytes)");
  }
  return "";
}

}  // namespace

std::string ComparePush(absl::string_view bytes,
                        const std::vector<size_t>& cuts) {
  // protobuf logs every string that is not UTF-8; the result says enough.
  google::protobuf::LogSilencer quiet;
  proto::PushRequest want;
  const bool pb_ok =
      want.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  // A copy, so that the segments do not alias storage protobuf keeps.
  const std::string copy(bytes);
  const std::vector<absl::string_view> segments = Segments(copy, cuts);
  PushView got;
  std::unique_ptr<float[]> storage;
  const absl::Status s = DecodePush(segments, &got, &storage);
  if (s.ok() != pb_ok) {
    return absl::StrCat(
        "Push: protobuf ", pb_ok ? "accepts" : "refuses", ", the decoder ",
        s.ok() ? "accepts" : absl::StrCat("refuses (", s.message(), ")"), "; ",
        Describe(bytes));
  }
  if (!pb_ok) return "";
  uint32_t loss_bits, want_bits;
  const float want_loss = want.loss();
  std::memcpy(&loss_bits, &got.loss, 4);
  std::memcpy(&want_bits, &want_loss, 4);
  if (got.job_id != want.job_id() || got.rank != want.rank() ||
      got.clock != want.clock() || loss_bits != want_bits ||
      got.pull_dtype != static_cast<int>(want.pull_dtype()) ||
      got.chunks.size() != static_cast<size_t>(want.chunks_size())) {
    return absl::StrCat("Push: header or chunk count differs (decoder ",
                        got.chunks.size(), " chunks, protobuf ",
                        want.chunks_size(), "); ", Describe(bytes));
  }
  for (size_t i = 0; i < got.chunks.size(); ++i) {
    const ChunkView& c = got.chunks[i];
    std::string d = CompareChunk(i, c.tensor_id, c.chunk_index, c.dtype, c.data,
                                 want.chunks(static_cast<int>(i)));
    if (d.empty() && c.indices != want.chunks(static_cast<int>(i)).indices()) {
      d = absl::StrCat("chunk ", i, ": the indices differ (decoder ",
                       c.indices.size(), " bytes, protobuf ",
                       want.chunks(static_cast<int>(i)).indices().size(), ")");
    }
    if (!d.empty()) return absl::StrCat("Push: ", d, "; ", Describe(bytes));
  }
  return "";
}

std::string ComparePull(absl::string_view bytes,
                        const std::vector<size_t>& cuts) {
  proto::PullResponse want;
  const bool pb_ok =
      want.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  const std::string copy(bytes);
  const std::vector<absl::string_view> segments = Segments(copy, cuts);
  struct Got {
    uint32_t tensor_id, chunk_index;
    int dtype;
    std::unique_ptr<std::string> data;
  };
  std::vector<Got> got;
  absl::StatusOr<uint64_t> version = DecodePull(
      segments,
      [&](uint32_t tensor_id, uint32_t chunk_index, int dtype, uint64_t size) {
        PullChunkTarget target;
        if (size > bytes.size()) {
          target.error = "larger than the message";
          return target;
        }
        got.push_back({tensor_id, chunk_index, dtype,
                       std::make_unique<std::string>(size, '\0')});
        target.dest = got.back().data->data();
        if (size == 0) target.dest = reinterpret_cast<char*>(&got);
        return target;
      });
  // Pulls are dense: a chunk with indices is refused by design.
  bool sparse = false;
  for (const proto::TensorChunk& c : want.chunks()) {
    sparse = sparse || !c.indices().empty();
  }
  if (pb_ok && sparse) {
    if (version.ok()) {
      return absl::StrCat("Pull: a chunk with indices was accepted; ",
                          Describe(bytes));
    }
    return "";
  }
  if (version.ok() != pb_ok) {
    return absl::StrCat(
        "Pull: protobuf ", pb_ok ? "accepts" : "refuses", ", the decoder ",
        version.ok()
            ? "accepts"
            : absl::StrCat("refuses (", version.status().message(), ")"),
        "; ", Describe(bytes));
  }
  if (!pb_ok) return "";
  if (*version != want.version() ||
      got.size() != static_cast<size_t>(want.chunks_size())) {
    return absl::StrCat("Pull: version or chunk count differs; ",
                        Describe(bytes));
  }
  for (size_t i = 0; i < got.size(); ++i) {
    std::string d =
        CompareChunk(i, got[i].tensor_id, got[i].chunk_index, got[i].dtype,
                     *got[i].data, want.chunks(static_cast<int>(i)));
    if (!d.empty()) return absl::StrCat("Pull: ", d, "; ", Describe(bytes));
  }
  return "";
}

}  // namespace paramd::testing
