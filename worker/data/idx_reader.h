// Reading IDX files (the MNIST family's format), gzip-compressed or plain.
//
// An IDX file is a big-endian header — two zero bytes, a type byte (0x08:
// unsigned byte), the number of dimensions — then each dimension's size as
// a 32-bit integer, then the elements. Fashion-MNIST's images are
// [N, 28, 28] and its labels [N].
#ifndef PARAMD_WORKER_DATA_IDX_READER_H_
#define PARAMD_WORKER_DATA_IDX_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace paramd {

struct IdxArray {
  std::vector<int64_t> dims;  // As the header gives them.
  // Rows (elements of the first dimension) read: dims[0], or the limit.
  int64_t rows = 0;
  // Row-major bytes of the rows kept (all of them, or a share's).
  std::vector<uint8_t> data;
};

// Reads an unsigned-byte IDX file (gzip or not) whole. Errors name the file
// and what is wrong (missing, bad magic, unsupported type, truncated).
absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path);

// Reads the first `limit` rows (0: all) and keeps rows i with i % world ==
// rank, row i at position i / world of `data`; the file is never held
// whole. world 1 keeps every row.
absl::StatusOr<IdxArray> ReadIdxShare(const std::string& path, int64_t limit,
                                      int rank, int world);

}  // namespace paramd

#endif  // PARAMD_WORKER_DATA_IDX_READER_H_
