// The hand-written Push/Pull decoders against protobuf's parser on many
// damaged and unusual encodings (a fixed seed: the same cases every run):
// they accept exactly what protobuf accepts, and read the same.
#include "tests/wire_differential.h"

#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "proto/paramd.pb.h"

namespace paramd::testing {
namespace {

std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

std::string Tag(uint64_t field, int type) { return Varint(field << 3 | type); }

// Up to 3 valid chunks of random ids and sizes, into a PushRequest or a
// PullResponse.
template <typename Message>
void AddRandomChunks(std::mt19937_64& rng, Message* r) {
  const int chunks = static_cast<int>(rng() % 4);
  for (int c = 0; c < chunks; ++c) {
    proto::TensorChunk* chunk = r->add_chunks();
    chunk->set_tensor_id(static_cast<uint32_t>(rng() % 3));
    chunk->set_chunk_index(static_cast<uint32_t>(rng() % 3));
    chunk->set_dtype(proto::DTYPE_FLOAT32);
    chunk->set_data(std::string(4 * (rng() % 9), static_cast<char>(c + 1)));
  }
}

// A valid message of random shape.
std::string RandomPush(std::mt19937_64& rng) {
  proto::PushRequest r;
  if (rng() % 4) r.set_job_id(std::string(rng() % 12, 'j'));
  if (rng() % 2) r.set_rank(static_cast<uint32_t>(rng() % 300));
  if (rng() % 2) r.set_clock(rng() % 100000);
  if (rng() % 2) r.set_loss(0.5f);
  AddRandomChunks(rng, &r);
  return r.SerializeAsString();
}

std::string RandomPull(std::mt19937_64& rng) {
  proto::PullResponse r;
  if (rng() % 2) r.set_version(rng() % 100000);
  AddRandomChunks(rng, &r);
  return r.SerializeAsString();
}

// A random field: known or unknown numbers (0 included), every wire type
// (groups, and the invalid 6 and 7 too), valid or not.
std::string RandomField(std::mt19937_64& rng) {
  static const uint64_t kFields[] = {
      0, 1, 2, 3, 4, 5, 6, 15, 16, 2047, (1u << 29) - 1, 1u << 29};
  const uint64_t field = kFields[rng() % (sizeof(kFields) / 8)];
  const int type = static_cast<int>(rng() % 8);
  std::string out = Tag(field, type);
  switch (type) {
    case 0:
      out += Varint(rng() % 3 == 0 ? rng() : rng() % 300);
      break;
    case 1:
      out += std::string(8, 'q');
      break;
    case 2: {
      std::string inner;
      const int n = static_cast<int>(rng() % 3);
      for (int i = 0; i < n; ++i) {
        inner += Tag(1 + rng() % 5, rng() % 2 ? 0 : 2);
        inner += Varint(rng() % 5);
      }
      if (rng() % 3 == 0) inner = std::string(rng() % 9, 'd');
      out += Varint(inner.size()) + inner;
      break;
    }
    case 3:
      out += Tag(1, 0) + Varint(7) + Tag(field, rng() % 4 ? 4 : 0);
      break;
    case 5:
      out += std::string(4, 'f');
      break;
    default:
      break;
  }
  return out;
}

// A TensorChunk's fields in any order, with repeats and unknown fields.
std::string RandomChunkBody(std::mt19937_64& rng) {
  std::string body;
  const int n = static_cast<int>(rng() % 6);
  for (int i = 0; i < n; ++i) {
    switch (rng() % 6) {
      case 0:
        body += Tag(1, 0) + Varint(rng() % 2 ? rng() : rng() % 5);
        break;
      case 1:
        body += Tag(2, 0) + Varint(rng() % 5);
        break;
      case 2:
        body += Tag(3, 0) + Varint(rng() % 3);
        break;
      case 3: {
        const std::string data(4 * (rng() % 5), 'z');
        body += Tag(4, 2) + Varint(data.size()) + data;
        break;
      }
      case 4:
        body += RandomField(rng);
        break;
      default:
        body += Tag(4, 0) + Varint(3);  // data with the wrong wire type
        break;
    }
  }
  return body;
}

std::string Mutate(std::string bytes, std::mt19937_64& rng, int chunk_field) {
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits; ++e) {
    const size_t at = bytes.empty() ? 0 : rng() % (bytes.size() + 1);
    switch (rng() % 7) {
      case 0:  // flip a byte
        if (!bytes.empty()) bytes[rng() % bytes.size()] ^= 1 << (rng() % 8);
        break;
      case 1:  // insert a byte
        bytes.insert(bytes.begin() + at, static_cast<char>(rng()));
        break;
      case 2:  // delete a byte
        if (!bytes.empty()) bytes.erase(rng() % bytes.size(), 1);
        break;
      case 3:  // truncate
        bytes.resize(at);
        break;
      case 4:  // append a field
        bytes += RandomField(rng);
        break;
      case 5: {  // append a chunk of any shape
        const std::string body = RandomChunkBody(rng);
        bytes += Tag(chunk_field, 2) + Varint(body.size()) + body;
        break;
      }
      default:  // prepend a field
        bytes = RandomField(rng) + bytes;
        break;
    }
  }
  return bytes;
}

std::vector<size_t> RandomCuts(const std::string& bytes, std::mt19937_64& rng) {
  std::vector<size_t> cuts;
  if (bytes.empty()) return cuts;
  const int n = static_cast<int>(rng() % 4);
  for (int i = 0; i < n; ++i) cuts.push_back(rng() % bytes.size());
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

TEST_CASE("Push: the decoder accepts and reads what protobuf does",
          "[wire][differential]") {
  std::mt19937_64 rng(20261130);
  int accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    const std::string bytes = Mutate(RandomPush(rng), rng, 4);
    const std::string diff = ComparePush(bytes, RandomCuts(bytes, rng));
    if (!diff.empty()) {
      std::cerr << "the whole input, in hex: " << absl::BytesToHexString(bytes)
                << "\n";
      FAIL("case " << i << ": " << diff);
    }
    google::protobuf::LogSilencer quiet;
    proto::PushRequest m;
    accepted += m.ParseFromString(bytes) ? 1 : 0;
  }
  // Both outcomes were exercised, many times each.
  CHECK(accepted > 20000);
  CHECK(accepted < 180000);
}

TEST_CASE("Pull: the decoder accepts and reads what protobuf does",
          "[wire][differential]") {
  std::mt19937_64 rng(11302026);
  for (int i = 0; i < 200000; ++i) {
    const std::string bytes = Mutate(RandomPull(rng), rng, 2);
    const std::string diff = ComparePull(bytes, RandomCuts(bytes, rng));
    if (!diff.empty()) {
      std::cerr << "the whole input, in hex: " << absl::BytesToHexString(bytes)
                << "\n";
      FAIL("case " << i << ": " << diff);
    }
  }
}

TEST_CASE("the cases a client found, one by one", "[wire][differential]") {
  const std::string data(8, 'a');
  const std::string good_chunk_fields =
      Tag(1, 0) + Varint(1) + Tag(2, 0) + Varint(0) + Tag(3, 0) + Varint(1);
  const std::vector<std::string> cases = {
      // Field number 0: protobuf refuses.
      Tag(0, 0) + Varint(5),
      // A chunk whose data is not its last field.
      Tag(4, 2) + Varint(2 + data.size() + good_chunk_fields.size()) +
          Tag(4, 2) + Varint(data.size()) + data + good_chunk_fields,
      // An unknown field after the data.
      Tag(4, 2) + Varint(good_chunk_fields.size() + 2 + data.size() + 2) +
          good_chunk_fields + Tag(4, 2) + Varint(data.size()) + data +
          Tag(9, 0) + Varint(1),
      // Data twice: the last one counts.
      Tag(4, 2) + Varint(2 * (2 + data.size())) + Tag(4, 2) +
          Varint(data.size()) + data + Tag(4, 2) + Varint(data.size()) +
          std::string(8, 'b'),
      // An unknown group, skipped whole.
      Tag(7, 3) + Tag(1, 0) + Varint(1) + Tag(7, 4) + Tag(2, 0) + Varint(3),
      // An end-group tag with no group open.
      Tag(7, 4),
      // Job id that is not UTF-8.
      Tag(1, 2) + Varint(2) + "\xC3\x28",
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i);
    CHECK(ComparePush(cases[i], {}) == "");
    CHECK(ComparePush(cases[i], {1, 3}) == "");
  }
}

}  // namespace
}  // namespace paramd::testing
