#include "worker/data/idx_reader.h"

#include <zlib.h>

#include <algorithm>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace paramd {
namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

// Reads exactly n bytes; false on a short read.
bool ReadFully(gzFile file, void* out, size_t n) {
  auto* p = static_cast<unsigned char*>(out);
  while (n > 0) {
    const unsigned int want =
        n > (1u << 30) ? (1u << 30) : static_cast<unsigned int>(n);
    const int got = gzread(file, p, want);
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

// The header: magic (unsigned bytes, 1 to 4 dimensions) and the
// dimensions, into `dims`. Returns the number of elements.
absl::StatusOr<int64_t> ReadHeader(gzFile file, const std::string& path,
                                   std::vector<int64_t>* dims) {
  unsigned char magic[4];
  if (!ReadFully(file, magic, 4)) {
    return absl::DataLossError(
        absl::StrCat(path, ": shorter than an IDX header"));
  }
  if (magic[0] != 0 || magic[1] != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not an IDX file (bad magic)"));
  }
  if (magic[2] != 0x08) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": element type 0x", absl::Hex(magic[2]),
                     " is not supported (only 0x08, unsigned byte)"));
  }
  const int ndims = magic[3];
  if (ndims < 1 || ndims > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", ndims, " dimensions (expected 1 to 4)"));
  }
  int64_t total = 1;
  for (int d = 0; d < ndims; ++d) {
    unsigned char b[4];
    if (!ReadFully(file, b, 4)) {
      return absl::DataLossError(absl::StrCat(path, ": truncated header"));
    }
    const int64_t size = (int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) |
                         (int64_t{b[2]} << 8) | int64_t{b[3]};
    dims->push_back(size);
    total *= size;
    if (total > (int64_t{1} << 34)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": implausibly large (", total, " elements)"));
    }
  }
  return total;
}

}  // namespace

absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  return ReadIdxShare(path, 0, 0, 1);
}

absl::StatusOr<IdxArray> ReadIdxShare(const std::string& path, int64_t limit,
                                      int rank, int world) {
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  }
  IdxArray out;
  absl::StatusOr<int64_t> total = ReadHeader(file.get(), path, &out.dims);
  if (!total.ok()) return total.status();
  const int64_t rows = out.dims[0];
  const int64_t row_bytes = rows > 0 ? *total / rows : 0;
  out.rows = limit > 0 && limit < rows ? limit : rows;
  if (world == 1) {
    out.data.resize(static_cast<size_t>(out.rows * row_bytes));
    if (!out.data.empty() &&
        !ReadFully(file.get(), out.data.data(), out.data.size())) {
      return absl::DataLossError(absl::StrCat(
          path, ": truncated: the header promises ", *total, " bytes of data"));
    }
    return out;
  }
  // Only the share: rows i with i % world == rank, read in blocks of whole
  // rows so that the file is never held whole.
  const int64_t kept =
      out.rows > rank ? (out.rows - rank + world - 1) / world : 0;
  out.data.resize(static_cast<size_t>(kept * row_bytes));
  const int64_t block_rows = std::max<int64_t>(
      1, (int64_t{1} << 20) / std::max<int64_t>(row_bytes, 1));
  std::vector<uint8_t> block;
  for (int64_t first = 0; first < out.rows; first += block_rows) {
    const int64_t n = std::min(block_rows, out.rows - first);
    block.resize(static_cast<size_t>(n * row_bytes));
    if (!block.empty() && !ReadFully(file.get(), block.data(), block.size())) {
      return absl::DataLossError(absl::StrCat(
          path, ": truncated: the header promises ", *total, " bytes of data"));
    }
    for (int64_t i = first; i < first + n; ++i) {
      if (i % world != rank) continue;
      std::copy_n(block.data() + (i - first) * row_bytes, row_bytes,
                  out.data.data() + (i / world) * row_bytes);
    }
  }
  return out;
}

}  // namespace paramd
