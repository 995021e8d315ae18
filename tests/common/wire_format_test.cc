// The hand-written wire format of Push and Pull: what it writes is the
// protobuf message, what protobuf writes decodes here, however the bytes
// are split into segments, and damaged messages are refused, not misread.
#include "common/wire/wire_format.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/wire/row_wire.h"
#include "proto/paramd.pb.h"

namespace paramd {
namespace {

std::string Floats(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()),
                     v.size() * sizeof(float));
}

proto::PushRequest SamplePush() {
  proto::PushRequest r;
  r.set_job_id("job-7");
  r.set_rank(3);
  r.set_clock(300);  // Two-byte varint.
  r.set_loss(0.25f);
  for (int c = 0; c < 3; ++c) {
    proto::TensorChunk* chunk = r.add_chunks();
    chunk->set_tensor_id(c == 2 ? 1 : 0);
    chunk->set_chunk_index(c == 2 ? 0 : c);
    chunk->set_dtype(proto::DTYPE_FLOAT32);
    std::vector<float> v(100 + 37 * c);
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5f * i - c;
    chunk->set_data(Floats(v));
  }
  return r;
}

// `bytes` cut at the given offsets, each piece copied to its own buffer
// starting at `misalign` bytes into it (as received slices may lie).
struct Segmented {
  Segmented(const std::string& bytes, std::vector<size_t> cuts, int misalign) {
    cuts.push_back(bytes.size());
    size_t from = 0;
    for (size_t to : cuts) {
      if (to < from) continue;
      storage.push_back(std::string(misalign, 'x') +
                        bytes.substr(from, to - from));
      from = to;
    }
    for (const std::string& s : storage) {
      views.push_back(absl::string_view(s).substr(misalign));
    }
  }
  std::vector<std::string> storage;
  std::vector<absl::string_view> views;
};

void CheckSame(const PushView& view, const proto::PushRequest& want) {
  CHECK(view.job_id == want.job_id());
  CHECK(view.rank == want.rank());
  CHECK(view.clock == want.clock());
  CHECK(view.loss == want.loss());
  REQUIRE(view.chunks.size() == static_cast<size_t>(want.chunks_size()));
  for (size_t c = 0; c < view.chunks.size(); ++c) {
    CHECK(view.chunks[c].tensor_id == want.chunks(c).tensor_id());
    CHECK(view.chunks[c].chunk_index == want.chunks(c).chunk_index());
    CHECK(view.chunks[c].dtype == want.chunks(c).dtype());
    CHECK(std::string(view.chunks[c].data) == want.chunks(c).data());
    CHECK(std::string(view.chunks[c].indices) == want.chunks(c).indices());
    CHECK(reinterpret_cast<uintptr_t>(view.chunks[c].data.data()) %
              alignof(float) ==
          0);
  }
}

TEST_CASE("protobuf's PushRequest decodes however it is segmented", "[wire]") {
  const proto::PushRequest want = SamplePush();
  const std::string bytes = want.SerializeAsString();
  std::mt19937 gen(5);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<size_t> cuts;
    const int pieces = trial == 0 ? 0 : 1 + trial % 7;
    for (int k = 0; k < pieces; ++k) {
      cuts.push_back(
          std::uniform_int_distribution<size_t>(0, bytes.size())(gen));
    }
    std::sort(cuts.begin(), cuts.end());
    Segmented seg(bytes, cuts, trial % 4);
    PushView view;
    std::unique_ptr<float[]> storage;
    INFO("trial " << trial);
    REQUIRE(DecodePush(seg.views, &view, &storage).ok());
    CheckSame(view, want);
  }
}

TEST_CASE("a chunk lying whole and aligned in one segment is not copied",
          "[wire]") {
  const std::string bytes = SamplePush().SerializeAsString();
  // One aligned segment: every chunk whose data starts 4-aligned within it
  // is referenced in place.
  std::vector<float> aligned_buffer(bytes.size() / 4 + 1);
  std::memcpy(aligned_buffer.data(), bytes.data(), bytes.size());
  const absl::string_view whole(
      reinterpret_cast<const char*>(aligned_buffer.data()), bytes.size());
  PushView view;
  std::unique_ptr<float[]> storage;
  REQUIRE(DecodePush({whole}, &view, &storage).ok());
  int in_place = 0;
  for (const ChunkView& c : view.chunks) {
    const bool inside =
        c.data.data() >= whole.data() &&
        c.data.data() + c.data.size() <= whole.data() + whole.size();
    const bool aligned =
        reinterpret_cast<uintptr_t>(c.data.data()) % alignof(float) == 0;
    CHECK(aligned);
    if (inside) ++in_place;
  }
  // The chunks' offsets in the message differ by their framing; at least
  // one lands aligned, and those are used where they lie.
  CHECK(in_place >= 1);
  CheckSame(view, SamplePush());
}

TEST_CASE("what the encoder writes parses as protobuf's PushRequest",
          "[wire]") {
  proto::PushRequest want = SamplePush();
  want.set_pull_dtype(proto::DTYPE_FLOAT16);
  want.set_reply_message_bytes(1 << 20);
  std::string bytes =
      EncodePushHeader(want.job_id(), want.rank(), want.clock(), want.loss(),
                       want.pull_dtype(), want.reply_message_bytes());
  for (const proto::TensorChunk& c : want.chunks()) {
    bytes += EncodeChunkHeader(kPushChunksField, c.tensor_id(), c.chunk_index(),
                               c.dtype(), c.data().size());
    bytes += c.data();
  }
  // A piece of a push with more to come: `more` after the chunks.
  const bool more = GENERATE(false, true);
  want.set_more(more);
  if (more) bytes += EncodePushMore();
  proto::PushRequest got;
  REQUIRE(got.ParseFromString(bytes));
  CHECK(got.SerializeAsString() == want.SerializeAsString());
  PushView view;
  std::unique_ptr<float[]> storage;
  REQUIRE(DecodePush({absl::string_view(bytes)}, &view, &storage).ok());
  CHECK(view.pull_dtype == proto::DTYPE_FLOAT16);
  CHECK(view.reply_message_bytes == (1u << 20));
  CHECK(view.more == more);
  // As protobuf would decode them: `more` from protobuf's own encoding.
  REQUIRE(
      DecodePush({absl::string_view(want.SerializeAsString())}, &view, &storage)
          .ok());
  CHECK(view.more == more);
  CHECK(view.reply_message_bytes == (1u << 20));
}

// SamplePush with its last two chunks sparse: indices and their values.
proto::PushRequest SampleSparsePush() {
  proto::PushRequest r = SamplePush();
  for (int c = 1; c < 3; ++c) {
    proto::TensorChunk* chunk = r.mutable_chunks(c);
    std::vector<uint32_t> indices = {0, 5, 6, 90 + static_cast<uint32_t>(c)};
    chunk->set_indices(indices.data(), indices.size() * 4);
    chunk->set_data(Floats({1.5f, -2.0f, 0.25f, 8.0f}));
  }
  return r;
}

TEST_CASE("sparse chunks: encoder, decoder and protobuf agree", "[wire]") {
  const proto::PushRequest want = SampleSparsePush();
  std::string bytes =
      EncodePushHeader(want.job_id(), want.rank(), want.clock(), want.loss());
  for (const proto::TensorChunk& c : want.chunks()) {
    if (c.indices().empty()) {
      bytes += EncodeChunkHeader(kPushChunksField, c.tensor_id(),
                                 c.chunk_index(), c.dtype(), c.data().size());
    } else {
      bytes += EncodeSparseChunkHeader(kPushChunksField, c.tensor_id(),
                                       c.chunk_index(), c.dtype(),
                                       c.indices().size(), c.data().size());
      bytes += c.indices();
      bytes += EncodeChunkDataTag(c.data().size());
    }
    bytes += c.data();
  }
  proto::PushRequest parsed;
  REQUIRE(parsed.ParseFromString(bytes));
  // Field order differs (indices before data); the content does not.
  CHECK(parsed.DebugString() == want.DebugString());
  // Decoded from what protobuf writes and from what the encoder writes,
  // however segmented.
  for (const std::string& message : {want.SerializeAsString(), bytes}) {
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<size_t> cuts;
      for (int k = 0; k < trial % 5; ++k) {
        cuts.push_back((message.size() * (k + 1) * 7 / 37 + trial) %
                       message.size());
      }
      std::sort(cuts.begin(), cuts.end());
      Segmented seg(message, cuts, trial % 4);
      PushView view;
      std::unique_ptr<float[]> storage;
      INFO("trial " << trial);
      REQUIRE(DecodePush(seg.views, &view, &storage).ok());
      CheckSame(view, want);
      for (const ChunkView& c : view.chunks) {
        CHECK(reinterpret_cast<uintptr_t>(c.indices.data()) % 4 == 0);
      }
    }
  }
}

TEST_CASE("a pulled chunk with indices is refused: pulls are dense", "[wire]") {
  proto::PullResponse r;
  r.set_version(3);
  proto::TensorChunk* chunk = r.add_chunks();
  chunk->set_dtype(proto::DTYPE_FLOAT32);
  chunk->set_data(Floats({1.0f}));
  const uint32_t index = 0;
  chunk->set_indices(&index, 4);
  const std::string bytes = r.SerializeAsString();
  char sink[4];
  absl::StatusOr<uint64_t> v = DecodePull(
      {absl::string_view(bytes)}, [&](uint32_t, uint32_t, int, uint64_t) {
        return PullChunkTarget{sink, ""};
      });
  CHECK(absl::IsInvalidArgument(v.status()));
  CHECK(absl::StrContains(v.status().message(), "pulls are dense"));
}

TEST_CASE("PullResponse: encoder and decoder agree with protobuf", "[wire]") {
  proto::PullResponse want;
  want.set_version(1234567);
  std::vector<std::vector<float>> data = {{1, 2, 3}, {}, {4.5f, -6}};
  for (size_t c = 0; c < data.size(); ++c) {
    proto::TensorChunk* chunk = want.add_chunks();
    chunk->set_tensor_id(static_cast<uint32_t>(c));
    chunk->set_chunk_index(7);
    chunk->set_dtype(proto::DTYPE_FLOAT32);
    chunk->set_data(Floats(data[c]));
  }
  std::string ours = EncodePullHeader(want.version());
  for (size_t c = 0; c < data.size(); ++c) {
    ours += EncodeChunkHeader(kPullChunksField, static_cast<uint32_t>(c), 7,
                              proto::DTYPE_FLOAT32, data[c].size() * 4);
    ours += Floats(data[c]);
  }
  proto::PullResponse parsed;
  REQUIRE(parsed.ParseFromString(ours));
  CHECK(parsed.SerializeAsString() == want.SerializeAsString());

  const std::string bytes = want.SerializeAsString();
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    Segmented seg(bytes, {cut}, static_cast<int>(cut % 3));
    std::vector<std::vector<float>> got(data.size());
    absl::StatusOr<uint64_t> version = DecodePull(
        seg.views, [&](uint32_t tensor, uint32_t index, int dtype, uint64_t n) {
          CHECK(index == 7);
          CHECK(dtype == proto::DTYPE_FLOAT32);
          got[tensor].resize(n / 4);
          PullChunkTarget t;
          t.dest = reinterpret_cast<char*>(got[tensor].data());
          if (n == 0) t.dest = reinterpret_cast<char*>(&got);  // Anywhere.
          return t;
        });
    INFO("cut at " << cut);
    REQUIRE(version.ok());
    CHECK(*version == want.version());
    CHECK(got == data);
  }
}

TEST_CASE("fields the decoder does not know are skipped", "[wire]") {
  // Field 15 of each wire type, as a newer sender might add.
  std::string extra;
  extra += static_cast<char>((15 << 3) | 0);  // varint
  extra += "\x96\x01";
  extra += static_cast<char>((15 << 3) | 1);  // fixed64
  extra += std::string(8, '\x01');
  extra += static_cast<char>((15 << 3) | 2);  // length-delimited
  extra +=
      "\x03"
      "abc";
  extra += static_cast<char>((15 << 3) | 5);  // fixed32
  extra += std::string(4, '\x02');
  const proto::PushRequest want = SamplePush();
  const std::string bytes = extra + want.SerializeAsString() + extra;
  PushView view;
  std::unique_ptr<float[]> storage;
  REQUIRE(DecodePush({absl::string_view(bytes)}, &view, &storage).ok());
  CheckSame(view, want);
}

TEST_CASE("damaged messages are refused with a reason, never misread",
          "[wire]") {
  const std::string push = SamplePush().SerializeAsString();
  // Every strict prefix that ends inside a field is malformed; a prefix
  // ending exactly between top-level fields is a shorter valid message.
  int refused = 0;
  for (size_t n = 0; n < push.size(); ++n) {
    PushView view;
    std::unique_ptr<float[]> storage;
    const absl::Status s =
        DecodePush({absl::string_view(push).substr(0, n)}, &view, &storage);
    if (!s.ok()) {
      ++refused;
      CHECK(s.code() == absl::StatusCode::kInvalidArgument);
      CHECK_THAT(std::string(s.message()),
                 Catch::Contains("Push: malformed message"));
    } else {
      // Only whole chunks were taken.
      for (const ChunkView& c : view.chunks) CHECK(c.data.size() % 4 == 0);
    }
  }
  CHECK(refused > static_cast<int>(push.size()) - 10);

  // Data that is not the chunk's last field: read as protobuf reads it.
  proto::PushRequest r;
  r.set_rank(1);
  std::string chunk;
  chunk += static_cast<char>((4 << 3) | 2);
  chunk += '\x04';
  chunk += "abcd";
  chunk += static_cast<char>((1 << 3) | 0);
  chunk += '\x02';
  std::string bytes = r.SerializeAsString();
  bytes += static_cast<char>((4 << 3) | 2);
  bytes += static_cast<char>(chunk.size());
  bytes += chunk;
  PushView view;
  std::unique_ptr<float[]> storage;
  const absl::Status s =
      DecodePush({absl::string_view(bytes)}, &view, &storage);
  REQUIRE(s.ok());
  REQUIRE(view.chunks.size() == 1);
  CHECK(view.chunks[0].tensor_id == 2);
  CHECK(view.chunks[0].data == "abcd");

  // A chunk the receiver refuses stops the decode with its reason.
  proto::PullResponse pull;
  pull.add_chunks()->set_data("abcd");
  const std::string pbytes = pull.SerializeAsString();
  absl::StatusOr<uint64_t> v = DecodePull(
      {absl::string_view(pbytes)}, [](uint32_t, uint32_t, int, uint64_t) {
        PullChunkTarget t;
        t.error = "not in the plan";
        return t;
      });
  CHECK(v.status().code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(v.status().message()),
             Catch::Contains("not in the plan"));
}

// Cuts `message` in a few places that move with `trial`.
std::vector<size_t> CutsFor(const std::string& message, int trial) {
  std::vector<size_t> cuts;
  for (int k = 0; k < trial % 5; ++k) {
    cuts.push_back((message.size() * (k + 1) * 7 / 37 + trial) %
                   (message.size() + 1));
  }
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

TEST_CASE("row blocks: encoder, decoder and protobuf agree", "[wire]") {
  proto::PushRequest want = SamplePush();
  for (uint32_t table : {0u, 2u}) {
    proto::RowBlock* block = want.add_rows();
    block->set_table(table);
    block->set_dtype(table == 0 ? proto::DTYPE_FLOAT32 : proto::DTYPE_FLOAT16);
    std::vector<uint64_t> ids = {1, 7, uint64_t{1} << 39};
    block->set_ids(
        std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 8));
    block->set_data(std::string(ids.size() * (table == 0 ? 16 : 8), 'v'));
  }
  std::string bytes =
      EncodePushHeader(want.job_id(), want.rank(), want.clock(), want.loss());
  for (const proto::RowBlock& b : want.rows()) {
    bytes += EncodeRowBlockHeader(b.table(), b.dtype(), b.ids().size(),
                                  b.data().size());
    bytes += b.ids();
    bytes += EncodeRowDataTag(b.data().size());
    bytes += b.data();
  }
  for (const proto::TensorChunk& c : want.chunks()) {
    bytes += EncodeChunkHeader(kPushChunksField, c.tensor_id(), c.chunk_index(),
                               c.dtype(), c.data().size());
    bytes += c.data();
  }
  proto::PushRequest parsed;
  REQUIRE(parsed.ParseFromString(bytes));
  CHECK(parsed.DebugString() == want.DebugString());
  for (const std::string& message : {want.SerializeAsString(), bytes}) {
    for (int trial = 0; trial < 50; ++trial) {
      Segmented seg(message, CutsFor(message, trial), trial % 4);
      PushView view;
      std::unique_ptr<float[]> storage;
      INFO("trial " << trial);
      REQUIRE(DecodePush(seg.views, &view, &storage).ok());
      CheckSame(view, want);
      REQUIRE(view.rows.size() == 2);
      for (int b = 0; b < 2; ++b) {
        CHECK(view.rows[b].table == want.rows(b).table());
        CHECK(view.rows[b].dtype == want.rows(b).dtype());
        CHECK(std::string(view.rows[b].ids) == want.rows(b).ids());
        CHECK(std::string(view.rows[b].data) == want.rows(b).data());
        CHECK(reinterpret_cast<uintptr_t>(view.rows[b].ids.data()) % 4 == 0);
      }
    }
  }
}

TEST_CASE("PullRows: request and reply framing agree with protobuf", "[wire]") {
  const std::vector<uint64_t> ids = {3, 9, 1000000007};
  const std::string id_bytes(reinterpret_cast<const char*>(ids.data()), 24);
  proto::PullRowsRequest want;
  want.set_job_id("job-7");
  want.set_rank(1);
  want.set_clock(77);
  want.set_table(2);
  want.set_dtype(proto::DTYPE_FLOAT16);
  want.set_ids(id_bytes);
  const std::string bytes =
      EncodePullRowsRequestHeader("job-7", 1, 77, 2, proto::DTYPE_FLOAT16, 24) +
      id_bytes;
  proto::PullRowsRequest parsed;
  REQUIRE(parsed.ParseFromString(bytes));
  CHECK(parsed.DebugString() == want.DebugString());
  for (const std::string& message : {want.SerializeAsString(), bytes}) {
    for (int trial = 0; trial < 30; ++trial) {
      Segmented seg(message, CutsFor(message, trial), trial % 4);
      PullRowsView view;
      std::string storage;
      REQUIRE(DecodePullRows(seg.views, &view, &storage).ok());
      CHECK(view.job_id == "job-7");
      CHECK(view.rank == 1);
      CHECK(view.clock == 77);
      CHECK(view.table == 2);
      CHECK(view.dtype == proto::DTYPE_FLOAT16);
      CHECK(std::string(view.ids) == id_bytes);
    }
  }
  // The reply: header then data, as protobuf writes it.
  proto::PullRowsResponse reply;
  reply.set_version(12);
  reply.set_dtype(proto::DTYPE_FLOAT32);
  reply.set_data(std::string(48, 'r'));
  const std::string reply_bytes =
      EncodePullRowsHeader(12, proto::DTYPE_FLOAT32, 48) + reply.data();
  CHECK(reply_bytes == reply.SerializeAsString());
  Segmented seg(reply_bytes, {5, 20}, 1);
  PullRowsReplyView view;
  std::string data;
  REQUIRE(DecodePullRowsReply(seg.views, &view, &data).ok());
  CHECK(view.version == 12);
  CHECK(view.dtype == proto::DTYPE_FLOAT32);
  CHECK(data == reply.data());
  // Damaged: a truncated ids field is refused, not misread.
  Segmented cut(bytes.substr(0, bytes.size() - 3), {}, 0);
  PullRowsView bad;
  std::string storage;
  const absl::Status s = DecodePullRows(cut.views, &bad, &storage);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(s.message(), "PullRows"));
}

}  // namespace
}  // namespace paramd

namespace paramd {
namespace {

TEST_CASE("chunks in a shared-memory segment: encoder, decoder, protobuf",
          "[wire][shm]") {
  // A push: its header names the segment, its chunks say where they lie.
  const std::string push =
      EncodePushHeader("job-7", 3, 300, 0.25f, 0, 1 << 20,
                       "paramd-12-0123456789abcdef") +
      EncodeSegmentChunk(kPushChunksField, 0, 1, proto::DTYPE_FLOAT32, 64,
                         400) +
      EncodeSegmentChunk(kPushChunksField, 1, 0, proto::DTYPE_FLOAT16, 464, 6);
  proto::PushRequest parsed;
  REQUIRE(parsed.ParseFromString(push));
  CHECK(parsed.segment() == "paramd-12-0123456789abcdef");
  REQUIRE(parsed.chunks_size() == 2);
  CHECK(parsed.chunks(0).segment_offset() == 64);
  CHECK(parsed.chunks(0).segment_bytes() == 400);
  CHECK(parsed.chunks(0).data().empty());
  CHECK(parsed.chunks(1).dtype() == proto::DTYPE_FLOAT16);
  // And what protobuf writes decodes here.
  const std::string serialized = parsed.SerializeAsString();
  const absl::string_view one[] = {serialized};
  PushView view;
  std::unique_ptr<float[]> storage;
  REQUIRE(DecodePush(one, &view, &storage).ok());
  CHECK(view.segment == "paramd-12-0123456789abcdef");
  REQUIRE(view.chunks.size() == 2);
  CHECK(view.chunks[0].segment_offset == 64);
  CHECK(view.chunks[0].segment_bytes == 400);
  CHECK(view.chunks[0].data.empty());
  CHECK(view.chunks[1].segment_offset == 464);

  // Both in the segment and in the message: protobuf reads it, so the
  // decoder does (the server refuses it, PushAssembler).
  proto::PushRequest both = parsed;
  both.mutable_chunks(0)->set_data(std::string(400, 'x'));
  const std::string both_bytes = both.SerializeAsString();
  const absl::string_view both_one[] = {both_bytes};
  REQUIRE(DecodePush(both_one, &view, &storage).ok());
  CHECK(view.chunks[0].data.size() == 400);
  CHECK(view.chunks[0].segment_bytes == 400);
}

TEST_CASE("a pull's chunks are read from the stream's pull area",
          "[wire][shm]") {
  std::vector<float> area_floats(32);
  for (size_t i = 0; i < area_floats.size(); ++i) area_floats[i] = 0.5f * i;
  const absl::string_view area(
      reinterpret_cast<const char*>(area_floats.data()),
      area_floats.size() * sizeof(float));
  const std::string reply =
      EncodePullHeader(9) +
      EncodeSegmentChunk(kPullChunksField, 0, 0, proto::DTYPE_FLOAT32, 16, 32) +
      EncodeSegmentChunk(kPullChunksField, 0, 1, proto::DTYPE_FLOAT32, 0, 8);
  proto::PullResponse parsed;
  REQUIRE(parsed.ParseFromString(reply));
  CHECK(parsed.chunks(0).segment_offset() == 16);
  const absl::string_view one[] = {reply};
  std::vector<float> out(10, -1.0f);
  auto place = [&](uint32_t, uint32_t index, int, uint64_t bytes) {
    PullChunkTarget t;
    t.dest = reinterpret_cast<char*>(out.data() + (index == 0 ? 0 : 8));
    CHECK(bytes == (index == 0 ? 32u : 8u));
    return t;
  };
  absl::StatusOr<uint64_t> version = DecodePull(one, place, area);
  REQUIRE(version.ok());
  CHECK(*version == 9);
  CHECK(out == std::vector<float>{2, 2.5f, 3, 3.5f, 4, 4.5f, 5, 5.5f, 0, 0.5f});
  // Without the area the segment fields are not read (protobuf's view:
  // the chunks have no data); beyond it: refused, nothing misread.
  auto empty_place = [&](uint32_t, uint32_t, int, uint64_t bytes) {
    CHECK(bytes == 0);
    PullChunkTarget t;
    t.dest = reinterpret_cast<char*>(out.data());
    return t;
  };
  CHECK(DecodePull(one, empty_place).ok());
  const std::string beyond =
      EncodePullHeader(9) +
      EncodeSegmentChunk(kPullChunksField, 0, 0, proto::DTYPE_FLOAT32, 120, 16);
  const absl::string_view far[] = {beyond};
  CHECK_THAT(std::string(DecodePull(far, place, area).status().message()),
             Catch::Contains("beyond the segment's pull area"));
}

}  // namespace
}  // namespace paramd
