#include "server/shard/push_chunks.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/half.h"
#include "common/base/status_macros.h"
#include "proto/paramd.pb.h"

namespace paramd {
namespace {

// Checks every element is finite; returns the first bad index or -1.
int64_t FirstNonFinite(absl::Span<const float> values) {
  // A float is NaN or infinite exactly when its exponent bits are all
  // ones. The integer test vectorises (a float compare would not, under
  // strict floating point); only when it fires is the index looked up.
  constexpr uint32_t kExponent = 0x7F800000u;
  uint32_t any = 0;
  for (float v : values) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    any |= static_cast<uint32_t>((bits & kExponent) == kExponent);
  }
  if (any == 0) return -1;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) return static_cast<int64_t>(i);
  }
  return -1;
}

int64_t FirstNonFiniteHalf(absl::Span<const uint16_t> halves) {
  for (size_t i = 0; i < halves.size(); ++i) {
    if (!HalfIsFinite(halves[i])) return static_cast<int64_t>(i);
  }
  return -1;
}

bool Aligned(absl::string_view bytes, size_t alignment) {
  return reinterpret_cast<uintptr_t>(bytes.data()) % alignment == 0;
}

absl::Span<const uint32_t> Indices(const ChunkView& chunk) {
  return absl::MakeConstSpan(
      reinterpret_cast<const uint32_t*>(chunk.indices.data()),
      chunk.indices.size() / sizeof(uint32_t));
}

// A sparse chunk's indices: whole uint32s, at most `length`, each inside
// the chunk and strictly ascending.
absl::Status CheckIndices(const ChunkView& chunk, int64_t length,
                          absl::string_view where) {
  if (chunk.indices.size() % sizeof(uint32_t) != 0 ||
      chunk.indices.size() / sizeof(uint32_t) > static_cast<uint64_t>(length)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " has ", chunk.indices.size(),
                     " bytes of indices; expected 4 per index, at most ",
                     length, " indices"));
  }
  if (!Aligned(chunk.indices, alignof(uint32_t))) {
    return absl::InternalError(
        absl::StrCat(where, "'s indices are misaligned"));
  }
  const absl::Span<const uint32_t> indices = Indices(chunk);
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] >= static_cast<uint64_t>(length)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " index ", indices[i], " is outside the chunk's ",
                       length, " elements"));
    }
    if (i > 0 && indices[i] <= indices[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " indices are not strictly ascending (",
                       indices[i - 1], " then ", indices[i], ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckChunkPayload(const ChunkView& chunk, int64_t length,
                               int64_t offset, absl::string_view where) {
  const bool half = chunk.dtype == proto::DTYPE_FLOAT16;
  if (!half && chunk.dtype != proto::DTYPE_FLOAT32) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " has dtype ", chunk.dtype,
                     "; expected DTYPE_FLOAT32 or (pushes) DTYPE_FLOAT16"));
  }
  const char* type = half ? " of float16" : "";
  const size_t element_bytes = half ? 2 : 4;
  const bool sparse = !chunk.indices.empty();
  // Sparse: positions first, then as many values.
  int64_t values = length;
  if (sparse) {
    RETURN_IF_ERROR(CheckIndices(chunk, length, where));
    values = static_cast<int64_t>(Indices(chunk).size());
  }
  const absl::string_view data = chunk.data;
  if (data.size() != static_cast<uint64_t>(values) * element_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " has ", data.size(), " bytes", type, "; expected ",
                     values * static_cast<int64_t>(element_bytes),
                     sparse ? " (one value per index)" : ""));
  }
  // Decoders hand over aligned data (protobuf's heap strings are).
  if (!Aligned(data, element_bytes)) {
    return absl::InternalError(absl::StrCat(where, " is misaligned"));
  }
  int64_t bad;
  float bad_value;
  if (half) {
    const auto* h = reinterpret_cast<const uint16_t*>(data.data());
    bad = FirstNonFiniteHalf(absl::MakeConstSpan(h, values));
    bad_value = bad < 0 ? 0 : HalfToFloat(h[bad]);
  } else {
    const auto* f = reinterpret_cast<const float*>(data.data());
    bad = FirstNonFinite(absl::MakeConstSpan(f, values));
    bad_value = bad < 0 ? 0 : f[bad];
  }
  if (bad >= 0) {
    const int64_t element = sparse ? Indices(chunk)[bad] : bad;
    return absl::InvalidArgumentError(
        absl::StrCat(where, " element ", offset + element, " is not finite (",
                     bad_value, half ? ", float16" : "", ")"));
  }
  return absl::OkStatus();
}

absl::Span<const float> ChunkGradient(const ChunkView& chunk, int64_t length,
                                      std::vector<float>* storage) {
  const bool half = chunk.dtype == proto::DTYPE_FLOAT16;
  if (chunk.indices.empty() && !half) {
    return absl::MakeConstSpan(
        reinterpret_cast<const float*>(chunk.data.data()), length);
  }
  if (chunk.indices.empty()) {
    storage->resize(static_cast<size_t>(length));
    HalvesToFloats(
        absl::MakeConstSpan(
            reinterpret_cast<const uint16_t*>(chunk.data.data()), length),
        absl::MakeSpan(*storage));
    return *storage;
  }
  storage->assign(static_cast<size_t>(length), 0.0f);
  const absl::Span<const uint32_t> indices = Indices(chunk);
  float* out = storage->data();
  if (half) {
    const auto* h = reinterpret_cast<const uint16_t*>(chunk.data.data());
    for (size_t i = 0; i < indices.size(); ++i) {
      out[indices[i]] = HalfToFloat(h[i]);
    }
  } else {
    const auto* f = reinterpret_cast<const float*>(chunk.data.data());
    for (size_t i = 0; i < indices.size(); ++i) out[indices[i]] = f[i];
  }
  return *storage;
}

}  // namespace paramd
