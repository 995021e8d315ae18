// One pushed chunk's payload, checked and read as a float32 gradient.
//
// A chunk arrives dense (float32 or float16 data, one value per element)
// or sparse (`indices`: ascending uint32 positions within the chunk, and
// one float32 or float16 value per position; compression topk). Checks
// refuse wrong sizes, misalignment, unsorted, repeated or out-of-range
// indices and non-finite values, naming the chunk; a checked chunk then
// reads as the dense float32 gradient it stands for (a sparse one with
// zeros where nothing was sent), so every optimizer and policy applies it
// exactly as it would the same dense gradient.
//
// Plain C++, no gRPC; stateless.
#ifndef PARAMD_SERVER_SHARD_PUSH_CHUNKS_H_
#define PARAMD_SERVER_SHARD_PUSH_CHUNKS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/wire/wire_format.h"

namespace paramd {

// Checks `chunk`'s payload for a chunk of `length` elements whose first
// element is element `offset` of its tensor. `where` names the chunk in
// errors (e.g. "Push: chunk 3 of tensor 1 (fc1.weight)").
absl::Status CheckChunkPayload(const ChunkView& chunk, int64_t length,
                               int64_t offset, absl::string_view where);

// The float32 gradient of a checked chunk of `length` elements: its own
// bytes when they are dense float32, else widened or scattered into
// `*storage`, which must outlive the result.
absl::Span<const float> ChunkGradient(const ChunkView& chunk, int64_t length,
                                      std::vector<float>* storage);

// The float32 bytes the chunk stands for (length * 4) against those that
// travelled (data and indices).
inline uint64_t WireBytes(const ChunkView& chunk) {
  return chunk.data.size() + chunk.indices.size();
}

}  // namespace paramd

#endif  // PARAMD_SERVER_SHARD_PUSH_CHUNKS_H_
