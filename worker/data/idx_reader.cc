#include "worker/data/idx_reader.h"

#include <zlib.h>

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

}  // namespace

absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  }
  unsigned char magic[4];
  if (!ReadFully(file.get(), magic, 4)) {
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
  IdxArray out;
  int64_t total = 1;
  for (int d = 0; d < ndims; ++d) {
    unsigned char b[4];
    if (!ReadFully(file.get(), b, 4)) {
      return absl::DataLossError(absl::StrCat(path, ": truncated header"));
    }
    const int64_t size = (int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) |
                         (int64_t{b[2]} << 8) | int64_t{b[3]};
    out.dims.push_back(size);
    total *= size;
    if (total > (int64_t{1} << 34)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": implausibly large (", total, " elements)"));
    }
  }
  out.data.resize(static_cast<size_t>(total));
  if (total > 0 && !ReadFully(file.get(), out.data.data(), out.data.size())) {
    return absl::DataLossError(absl::StrCat(
        path, ": truncated: the header promises ", total, " bytes of data"));
  }
  return out;
}

}  // namespace paramd
